"""Broken dataset files stop with DataError naming the file, the row (0-based; for jsonl also
the 1-based line) and the field, before anything trains or evaluates on them."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.data.qa_files import flashrag_row, searchr1_row, write_jsonl, write_parquet
from treegrpo.data.errors import DataError
from treegrpo.data.load import load_questions

GOOD_ROW = flashrag_row(0, "who wrote hamlet", ["Shakespeare"])


@pytest.mark.parametrize(
    ("row", "field", "problem"),
    [
        ({"id": 1, "golden_answers": ["a"]}, "question", "missing"),
        ({"id": 1, "question": "  ", "golden_answers": ["a"]}, "question", "empty"),
        ({"id": 1, "question": 3, "golden_answers": ["a"]}, "question", "expected a string"),
        ({"id": 1, "question": "q"}, "golden_answers", "missing"),
        ({"id": 1, "question": "q", "golden_answers": "Rome"}, "golden_answers", "list of strings"),
        ({"id": 1, "question": "q", "golden_answers": [1]}, "golden_answers", "list of strings"),
        ({"id": 1, "question": "q", "golden_answers": []}, "golden_answers", "empty list"),
        ({"question": "q", "golden_answers": ["a"]}, "id", "missing"),
        ({"id": [], "question": "q", "golden_answers": ["a"]}, "id", "got list"),
        ({**GOOD_ROW, "data_source": 3}, "data_source", "non-empty string"),
        ({**GOOD_ROW, "metadata": []}, "metadata", "expected an object"),
        ({**GOOD_ROW, "metadata": {"hops": "2"}}, "metadata.hops", "integer"),
        ({**GOOD_ROW, "metadata": {"kind": 3}}, "metadata.kind", "expected a string"),
        ('{"id": 1, "question": "q",', None, "unreadable JSON (Expecting"),
        (["not", "an", "object"], None, "expected a JSON object, got list"),
        (GOOD_ROW, "id", "duplicate uid 'bad-test_0' (same data source and id as row 0)"),
    ],
)
def test_flashrag_row(tmp_path: Path, row: Any, field: str | None, problem: str) -> None:
    # rows: GOOD_ROW, (blank line), GOOD_ROW with another id, the bad row → row 2, line 4
    good = {**GOOD_ROW, "id": "other"}
    path = write_jsonl(tmp_path / "bad.jsonl", [GOOD_ROW, good, row], blank_after=0)
    with pytest.raises(DataError) as err:
        load_questions(path)
    what = f"field {field!r}: " if field else ""
    assert str(err.value).startswith(f"{path}:4: row 2: {what}")
    assert problem in str(err.value)
    assert (err.value.path, err.value.row, err.value.line, err.value.field) == (
        str(path),
        2,
        4,
        field,
    )


def test_flashrag_file_level(tmp_path: Path) -> None:
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n\n")
    with pytest.raises(DataError, match=rf"^{empty}: no questions"):
        load_questions(empty)
    latin = tmp_path / "latin.jsonl"
    latin.write_bytes(b'{"id": 1, "question": "caf\xe9", "golden_answers": ["a"]}\n')
    with pytest.raises(DataError, match=rf"^{latin}:1: row 0: unreadable JSON: not UTF-8"):
        load_questions(latin)
    other = tmp_path / "data.csv"
    other.write_text("id,question\n")
    with pytest.raises(DataError, match=r"unknown format '\.csv'"):
        load_questions(other)
    with pytest.raises(FileNotFoundError):
        load_questions(tmp_path / "none.jsonl")


def _rows() -> list[dict[str, Any]]:
    return [searchr1_row("nq", i, f"question {i}?", [f"answer {i}"]) for i in range(3)]


def _bad(path_of: str, value: Any) -> list[dict[str, Any]]:
    """Three good rows with row 1's ``path_of`` (dotted) set to ``value``."""
    rows = _rows()
    keys = path_of.split(".")
    node: Any = rows[1]
    for key in keys[:-1]:
        node = node[key]
    node[keys[-1]] = value
    return rows


def _all(path_of: str, value: Any) -> list[dict[str, Any]]:
    """Every row's ``path_of`` set to ``value`` (a change of column type reaches every row, so
    row 0 is the first bad one)."""
    return [copy.deepcopy(_bad(path_of, value)[1]) for _ in range(3)]


def _without(column: str) -> list[dict[str, Any]]:
    return [{k: v for k, v in row.items() if k != column} for row in _rows()]


PROMPT_2 = [{"role": "user", "content": "Question: a?"}, {"role": "user", "content": "b"}]


@pytest.mark.parametrize(
    ("rows", "row", "field", "problem"),
    [
        (_without("data_source"), 0, "data_source", "missing (columns: prompt, ability"),
        (_bad("data_source", None), 1, "data_source", "missing"),
        (_bad("data_source", ""), 1, "data_source", "non-empty string"),
        (_without("prompt"), 0, "prompt", "missing"),
        (_bad("prompt", PROMPT_2), 1, "prompt", "expected a list of one"),
        (_bad("prompt", []), 1, "prompt", "got 0 items"),
        (_bad("prompt", None), 1, "prompt", "missing"),
        (_all("prompt", "Question: a?"), 0, "prompt", "got str"),
        (_bad("prompt", [{"role": "system", "content": "Question: a?"}]), 1, "prompt", "role"),
        (_bad("prompt", [{"role": "user", "content": "x. Question:  \n"}]), 1, "prompt", "empty"),
        (_bad("prompt", [{"role": "user", "content": " "}]), 1, "prompt", "empty question"),
        (_without("reward_model"), 0, "reward_model", "missing"),
        (_bad("reward_model", None), 1, "reward_model", "ground_truth"),
        (_bad("reward_model.ground_truth", None), 1, "reward_model.ground_truth", "target"),
        (_bad("reward_model.ground_truth.target", []), 1, "reward_model.ground_truth.target", ""),
        (_bad("reward_model.ground_truth.target", None), 1, "reward_model.ground_truth.target", ""),
        (_all("reward_model.ground_truth.target", [1]), 0, "reward_model.ground_truth.target", ""),
        (_all("extra_info.index", 1.5), 0, "extra_info.index", "integer or string"),
        (_all("extra_info.kind", 3), 0, "extra_info.kind", "expected a string"),
    ],
)
def test_searchr1_row(
    tmp_path: Path, rows: list[dict[str, Any]], row: int, field: str, problem: str
) -> None:
    path = write_parquet(tmp_path / "bad.parquet", rows)
    with pytest.raises(DataError) as err:
        load_questions(path)
    message = str(err.value)
    assert message.startswith(f"{path}: row {row}: field {field!r}: "), message
    assert problem in message
    assert (err.value.row, err.value.line, err.value.field) == (row, None, field)


def test_searchr1_target_problems_are_named(tmp_path: Path) -> None:
    path = write_parquet(tmp_path / "e.parquet", _bad("reward_model.ground_truth.target", []))
    with pytest.raises(DataError, match="empty list: a question needs a gold answer"):
        load_questions(path)
    path = write_parquet(tmp_path / "i.parquet", _all("reward_model.ground_truth.target", [7]))
    with pytest.raises(DataError, match=r"expected a list of strings, got \[7\]"):
        load_questions(path)


def test_searchr1_file_level(tmp_path: Path) -> None:
    garbage = tmp_path / "garbage.parquet"
    garbage.write_bytes(b"not a parquet file at all")
    with pytest.raises(DataError, match=rf"^{garbage}: unreadable parquet"):
        load_questions(garbage)
    empty = tmp_path / "empty.parquet"
    pq.write_table(pa.Table.from_pylist(_rows()).slice(0, 0), empty)  # the columns, no rows
    with pytest.raises(DataError, match=rf"^{empty}: no questions \(the file has no rows\)"):
        load_questions(empty)
    with pytest.raises(FileNotFoundError, match="No such file"):
        load_questions(tmp_path / "none.parquet")
