"""Reading and writing Search-R1 jsonl corpora; every error names file, line and field."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from treegrpo.retrieval.base import Passage
from treegrpo.retrieval.corpus import (
    CorpusError,
    file_digest,
    make_contents,
    passages_digest,
    read_corpus,
    write_corpus,
)


def test_round_trip_keeps_order_unicode_and_newlines(tmp_path: Path) -> None:
    passages = [
        Passage("a", make_contents("Zürich", "Stadt am See.\nZweite Zeile")),
        Passage("b", make_contents("東京", "日本の首都")),
        Passage("c", '"Quote \\" inside"\ntext with "quotes"'),
    ]
    path = tmp_path / "c.jsonl"
    assert write_corpus(path, passages) == 3
    back = read_corpus(path)
    assert back == passages
    assert back[0].title == '"Zürich"' and back[0].text == "Stadt am See.\nZweite Zeile"
    assert "東京" in path.read_text(encoding="utf-8")  # written as UTF-8, not \\u escapes


def test_reads_search_r1_lines_and_skips_blank_lines(tmp_path: Path) -> None:
    path = tmp_path / "c.jsonl"
    rows = [{"id": "0", "contents": '"A"\nx'}, {"id": "1", "contents": '"B"\ny', "extra": 1}]
    path.write_text("\n".join(json.dumps(r) for r in rows[:1]) + "\n\n" + json.dumps(rows[1]))
    assert [p.id for p in read_corpus(path)] == ["0", "1"]


def test_write_drops_scores(tmp_path: Path) -> None:
    path = tmp_path / "c.jsonl"
    write_corpus(path, [Passage("0", '"T"\nx', score=3.5)])
    assert json.loads(path.read_text()) == {"id": "0", "contents": '"T"\nx'}


@pytest.mark.parametrize(
    ("line", "field", "problem"),
    [
        ('{"id": "3", "contents": "x"', None, "invalid JSON"),
        ('["3", "x"]', None, "expected a JSON object, got list"),
        ('{"contents": "x"}', "id", "missing"),
        ('{"id": "3"}', "contents", "missing"),
        ('{"id": 3, "contents": "x"}', "id", "expected a string, got int"),
        ('{"id": "3", "contents": null}', "contents", "expected a string, got NoneType"),
    ],
)
def test_malformed_line_names_file_line_and_field(
    tmp_path: Path, line: str, field: str | None, problem: str
) -> None:
    path = tmp_path / "bad.jsonl"
    good = json.dumps({"id": "0", "contents": '"T"\nx'})
    path.write_text(f"{good}\n\n{line}\n{good}\n")  # the bad line is line 3
    with pytest.raises(CorpusError) as info:
        read_corpus(path)
    message = str(info.value)
    assert message.startswith(f"{path}:3: ")
    assert problem in message
    assert info.value.line == 3 and info.value.field == field
    if field is not None:
        assert f"field {field!r}" in message


def test_missing_file_is_file_not_found(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        read_corpus(tmp_path / "nope.jsonl")


def test_digests_follow_contents_not_names(tmp_path: Path) -> None:
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    ps = [Passage("0", '"T"\nx')]
    write_corpus(a, ps)
    write_corpus(b, ps)
    assert file_digest(a) == file_digest(b)
    write_corpus(b, [Passage("0", '"T"\ny')])
    assert file_digest(a) != file_digest(b)
    # passages_digest separates fields, so moving text between id and contents changes it
    assert passages_digest([Passage("ab", "c")]) != passages_digest([Passage("a", "bc")])
