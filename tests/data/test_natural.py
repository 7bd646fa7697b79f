"""The hand-written natural questions (bench/data/natural, docs/data.md): each row holds what it
claims over the offline corpus, and no test question, nor its articles, is in the data the warm
starts learn from or the validation questions settings are chosen on."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from treegrpo.data.flashrag import read_flashrag
from treegrpo.data.lead_questions import all_built, all_wh, lead_questions, wh, wh_questions
from treegrpo.data.wiki import Article, load_articles, split_of, wiki_questions

NATURAL = Path(__file__).resolve().parents[2] / "bench" / "data" / "natural"
KINDS = {"who", "when", "where", "which", "what", "how-many"}


def rows(part: str) -> list[dict]:
    with open(NATURAL / f"{part}.jsonl", encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


@pytest.fixture(scope="module")
def articles() -> dict[str, Article]:
    return {str(a.index): a for a in load_articles()}


def copies(question: str, passage: str) -> bool:
    """Whether the question repeats 4 consecutive words of the passage."""
    return wh.copies(question, passage, 4)


def test_the_parts_read_as_flashrag_and_have_their_sizes() -> None:
    val, test = read_flashrag(NATURAL / "val.jsonl"), read_flashrag(NATURAL / "test.jsonl")
    assert {q.source for q in val + test} == {"natural"}
    assert len({q.uid for q in val + test}) == len(val) + len(test)
    written = [r for r in rows("val") + rows("test") if "articles" in r["metadata"]]
    assert len(written) >= 150  # written from test-split articles
    hops = Counter(r["metadata"]["hops"] for r in written)
    assert hops[2] * 3 >= len(written) - 1  # a third two-hop
    test_hops = Counter(r["metadata"]["hops"] for r in rows("test"))
    assert test_hops[2] * 3 >= sum(test_hops.values()) - 1
    assert all(r["metadata"]["kind"] in KINDS for r in rows("val") + rows("test"))


@pytest.mark.parametrize("part", ["val", "test"])
def test_golds_are_verbatim_where_the_question_says(part: str, articles) -> None:
    for r in rows(part):
        meta, golds, question = r["metadata"], r["golden_answers"], r["question"]
        if "articles" not in meta:  # the 40 general-knowledge questions of val
            continue
        ids = meta["articles"]
        assert len(ids) == meta["hops"], r["id"]
        passages = [articles[i] for i in ids]
        last = passages[-1]
        for gold in golds:
            assert gold in last.extract, (r["id"], gold)
        assert meta["evidence"] in last.extract and golds[0] in meta["evidence"], r["id"]
        assert golds[0].lower() not in last.title.lower(), r["id"]
        assert not copies(question, passages[0].extract), r["id"]
        if meta["hops"] == 2:
            first = passages[0]
            assert meta["bridge"] == last.title and last.title in first.extract, r["id"]
            assert last.title.lower() not in question.lower(), r["id"]
            assert golds[0] not in first.extract, r["id"]
            assert not copies(question, last.extract), r["id"]


def test_test_questions_stand_on_test_articles_only(articles) -> None:
    for r in rows("test"):
        for i in r["metadata"]["articles"]:
            assert split_of(articles[i].title) == "test", (r["id"], articles[i].title)


def test_no_test_question_or_article_is_in_training_or_selection_data(articles) -> None:
    test = rows("test")
    test_ids = {int(i) for r in test for i in r["metadata"]["articles"]}
    asked = {r["question"].strip().lower() for r in test}
    # the reading questions the warm starts learn from and the validation ones settings are
    # chosen on touch train articles only (a question that touches a test article is test)
    train_side = {q.uid for split in ("train", "val") for q in lead_questions(split)}
    train_side |= {q.uid for split in ("train", "val") for q in wh_questions(split)}
    for built in all_built() + all_wh():
        if built.question.uid in train_side:
            assert not test_ids & set(built.touches), built.question.uid
    seen = lead_questions("train") + lead_questions("val") + wiki_questions("train")
    seen += wh_questions("train") + wh_questions("val")
    seen += read_flashrag(NATURAL / "val.jsonl")
    assert not asked & {q.question.strip().lower() for q in seen}
