"""The synthetic world: reproducible, disjoint train/eval names, answerable, searchable."""

from __future__ import annotations

from collections import Counter

import pytest

from treegrpo.data.relations import RELATIONS
from treegrpo.data.synthetic import World, disjoint_worlds, make_world, train_eval_worlds
from treegrpo.tools.bm25 import BM25Retriever
from treegrpo.tools.corpus import read_corpus


@pytest.fixture(scope="module")
def worlds() -> tuple[World, World]:
    return train_eval_worlds(0)


def test_reproducible_by_seed() -> None:
    a, b, c = make_world(5), make_world(5), make_world(6)
    assert a.passages == b.passages and a.questions == b.questions
    assert a.passages != c.passages


def test_train_and_eval_worlds_share_no_name(worlds: tuple[World, World]) -> None:
    train, evaluation = worlds
    assert not train.name_words() & evaluation.name_words()
    titles = {p.title for p in train.passages}
    assert not titles & {p.title for p in evaluation.passages}
    assert not {q.uid for q in train.questions} & {q.uid for q in evaluation.questions}


def test_disjoint_worlds_share_no_name_with_each_other_or_avoid(
    worlds: tuple[World, World],
) -> None:
    avoid = worlds[1].name_words()
    more = disjoint_worlds([11, 12, 13], avoid)
    assert [w.seed for w in more] == [11, 12, 13]
    for i, w in enumerate(more):
        assert not w.name_words() & avoid
        for other in more[i + 1 :]:
            assert not w.name_words() & other.name_words()
    # one corpus for all: no passage id or question uid repeats
    assert len({p.id for w in more for p in w.passages}) == sum(len(w.passages) for w in more)
    assert len({q.uid for w in more for q in w.questions}) == sum(len(w.questions) for w in more)


def test_questions_are_answerable_and_balanced(worlds: tuple[World, World]) -> None:
    for world in worlds:
        assert Counter(q.hops for q in world.questions) == {1: 100, 2: 100, 3: 100}
        for q in world.questions:
            plan = world.plans[q.uid]
            assert len(plan.relations) == q.hops
            assert world.follow(plan) in q.golds
            assert q.source == "synthetic" and q.question.endswith("?")


def test_bm25_finds_the_needed_passage_for_a_good_query_only(worlds: tuple[World, World]) -> None:
    world = worlds[1]
    bm25 = BM25Retriever(world.passages, use_cache=False)
    good = poor = 0
    questions = world.questions
    for q in questions:
        plan = world.plans[q.uid]
        rel = RELATIONS[plan.relations[0]]
        want = f'"{plan.start}"'
        hits = bm25.search([rel.query(plan.start)], topk=3)[0]
        good += any(h.title == want for h in hits)
        vague = bm25.search([rel.keyword], topk=3)[0]
        poor += any(h.title == want for h in vague)
    assert good / len(questions) >= 0.95
    assert poor / len(questions) <= 0.2


def test_corpus_round_trip(worlds: tuple[World, World], tmp_path) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "corpus.jsonl"
    assert worlds[0].write_corpus(path) == len(worlds[0].passages)
    assert read_corpus(path) == worlds[0].passages
