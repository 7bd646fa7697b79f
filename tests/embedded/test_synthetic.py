"""The synthetic world: reproducible, one shared name pool with facts redrawn per world,
answerable, searchable."""

from __future__ import annotations

from collections import Counter

import pytest

from treegrpo.embedded.names import NAME_POOL
from treegrpo.embedded.relations import RELATIONS, fact_title, find_object, path, question_text
from treegrpo.embedded.synthetic import MAX_HOPS, Plan, World, make_world, train_eval_worlds
from treegrpo.retrieval.bm25 import BM25Retriever
from treegrpo.retrieval.corpus import read_corpus, write_corpus


@pytest.fixture(scope="module")
def worlds() -> tuple[World, World]:
    return train_eval_worlds(0)


def test_reproducible_by_seed() -> None:
    a, b, c = make_world(5), make_world(5), make_world(6)
    assert a.passages == b.passages and a.questions == b.questions
    assert a.passages != c.passages


def test_name_pool_is_fixed_and_stemmer_safe() -> None:
    assert len(NAME_POOL) == len(set(NAME_POOL)) == 160
    assert all(n.isalpha() and n[0].isupper() and n[-1] not in "es" for n in NAME_POOL)
    assert NAME_POOL[:3] == ("Balo", "Bano", "Bari")  # the same pool on every machine


def test_worlds_share_names_but_not_facts(worlds: tuple[World, World]) -> None:
    """Remembering a fact is useless: the same person relates to others in another world."""
    train, evaluation = worlds
    shared = set(train.people) & set(evaluation.people)
    assert len(shared) >= 40
    same = [
        (p, r)
        for p in shared
        for r in RELATIONS
        if train.chain(Plan(p, (r,))) == evaluation.chain(Plan(p, (r,)))
    ]
    assert len(same) <= 0.05 * len(shared) * len(RELATIONS)
    assert not {q.uid for q in train.questions} & {q.uid for q in evaluation.questions}


def test_questions_are_answerable_balanced_and_never_revisit_a_person(
    worlds: tuple[World, World],
) -> None:
    for world in worlds:
        assert Counter(q.hops for q in world.questions) == {h: 100 for h in range(1, 5)}
        assert len({world.plans[q.uid] for q in world.questions}) == len(world.questions)
        for q in world.questions:
            plan = world.plans[q.uid]
            chain = world.chain(plan)
            assert len(plan.relations) == q.hops <= MAX_HOPS
            assert plan.relations == path(plan.relations[0], q.hops)  # consecutive in the cycle
            assert len(set(chain)) == q.hops + 1  # an answer given early is always wrong
            assert q.golds == (chain[-1],)
            assert q.question == question_text(plan.start, plan.relations)
            assert q.source == "synthetic" and q.question.endswith("?")


def test_question_and_fact_wording() -> None:
    assert question_text("Kalo", ["mentor", "boss"]) == "Who is Kalo's mentor's boss?"
    text = "Tevu's boss is Kalo. Kalo's mentor is Zimu. Kalo's boss is Riga."
    assert find_object(text, "boss", "Kalo") == "Riga"
    assert find_object(text, "friend", "Kalo") is None
    assert fact_title("Kalo", "boss") == "Kalo's boss"
    assert path("friend", 4) == ("friend", "rival", "boss", "mentor")


def test_bm25_finds_the_needed_passage_first_for_a_good_query_only(
    worlds: tuple[World, World],
) -> None:
    world = worlds[1]
    bm25 = BM25Retriever(world.passages, use_cache=False)
    first = poor = 0
    for f in world.facts:
        title = f'"{fact_title(f.subject, f.relation)}"'
        hits = bm25.search([fact_title(f.subject, f.relation)], topk=1)[0]
        first += hits[0].title == title and hits[0].text == f"{title[1:-1]} is {f.object}."
        vague = bm25.search([f.relation], topk=3)[0]
        poor += any(h.title == title for h in vague)
    assert first == len(world.facts)
    assert poor <= 0.1 * len(world.facts)


def test_corpus_round_trip(worlds: tuple[World, World], tmp_path) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "corpus.jsonl"
    assert write_corpus(path, worlds[0].passages) == len(worlds[0].passages)
    assert read_corpus(path) == worlds[0].passages


def test_world_size_is_checked() -> None:
    with pytest.raises(ValueError, match="n_people"):
        make_world(0, n_people=len(NAME_POOL) + 1)
