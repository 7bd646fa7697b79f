"""FlashRAG jsonl written by ``write_flashrag`` reads back as the questions written: uid, data
source, hop count and kind (``metadata.kind``), so an evaluation from the file reports the same
rows by source, hop count and kind as one from the built-in set."""

from __future__ import annotations

import json
from pathlib import Path

from tests.data.test_lead_questions import ARTICLES
from treegrpo.data import lead_questions as lq
from treegrpo.data.flashrag import write_flashrag
from treegrpo.data.load import load_questions
from treegrpo.data.types import Question
from treegrpo.eval.evaluate import EvalItem


def _fields(q: Question) -> tuple[object, ...]:
    return q.uid, q.question, q.golds, q.source, q.hops, q.kind


def test_reading_questions_come_back_with_their_uid_and_kind(tmp_path: Path) -> None:
    reading = [b.question for b in lq.build_questions(ARTICLES, max_answer_share=1.0)]
    assert all(q.kind for q in reading) and {q.hops for q in reading} == {1, 2}
    assert len({q.index for q in reading}) < len(reading)  # several questions per article
    path = tmp_path / "wiki-qa.jsonl"
    assert write_flashrag(path, reading) == len(reading)
    back = load_questions(path)  # one uid per row: no duplicate-uid error
    assert [_fields(q) for q in back] == [_fields(q) for q in reading]
    assert [EvalItem.of(q) for q in back] == [EvalItem.of(q) for q in reading]
    first = json.loads(path.read_text().splitlines()[0])
    assert first["metadata"] == {"hops": reading[0].hops, "kind": reading[0].kind}


def test_a_question_without_a_kind_comes_back_whole(tmp_path: Path) -> None:
    title = Question(
        "wiki-3", "Which city is the capital of Mauritania?", ("Nouakchott",), "wiki", 1, index=3
    )
    path = tmp_path / "wiki.jsonl"
    write_flashrag(path, [title])
    assert load_questions(path) == [title]  # the index too
    assert json.loads(path.read_text())["metadata"] == {"hops": 1}
