"""Evaluation questions: FlashRAG jsonl files and the held-out synthetic world.

FlashRAG jsonl has one ``{"id", "question", "golden_answers": [...]}`` object a line, with
optional ``data_source`` (the group in reports; default: the file name without extension) and
``metadata`` (``metadata.hops``, when present, gives the per-hop rows). Reading is strict like
the corpus reader: a broken row would otherwise evaluate silently wrong, so every error names
the file, the 1-based line and the field.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from treegrpo.data.types import Question
from treegrpo.tools.base import Passage

SYNTHETIC_EVAL = "synthetic-eval"


class DatasetError(ValueError):
    """A dataset line that is not a valid question."""

    def __init__(self, path: str | Path, line: int, field: str | None, problem: str) -> None:
        what = f"field {field!r}: " if field else ""
        super().__init__(f"{path}:{line}: {what}{problem}")
        self.path = str(path)
        self.line = line
        self.field = field


def read_questions(path: str | Path) -> list[Question]:
    """The questions of a FlashRAG jsonl file, in file order; blank lines are skipped."""
    path = Path(path)
    if path.suffix == ".parquet":
        raise ValueError(
            f"{path}: Search-R1 parquet is not supported yet; use a FlashRAG jsonl file "
            '({"id", "question", "golden_answers": [...]} a line)'
        )
    default_source = path.name.removesuffix(".jsonl")
    out = []
    with open(path, encoding="utf-8") as f:
        for lineno, line in enumerate(f, start=1):
            if line.strip():
                out.append(_parse_line(path, lineno, line, default_source))
    if not out:
        raise ValueError(f"{path}: no questions")
    return out


def synthetic_eval(world_seed: int = 0) -> tuple[list[Question], list[Passage]]:
    """The held-out synthetic world of the embedded job: its questions and its corpus."""
    from treegrpo.data.synthetic import train_eval_worlds

    world = train_eval_worlds(world_seed)[1]
    return list(world.questions), list(world.passages)


def _parse_line(path: Path, lineno: int, line: str, default_source: str) -> Question:
    try:
        row = json.loads(line)
    except json.JSONDecodeError as exc:
        msg = f"invalid JSON ({exc.msg} at column {exc.colno})"
        raise DatasetError(path, lineno, None, msg) from None
    if not isinstance(row, dict):
        raise DatasetError(path, lineno, None, f"expected a JSON object, got {_kind(row)}")

    def need(field: str) -> Any:
        if field not in row:
            raise DatasetError(path, lineno, field, "missing")
        return row[field]

    uid = need("id")
    if not isinstance(uid, str | int) or isinstance(uid, bool):
        raise DatasetError(path, lineno, "id", f"expected a string or integer, got {_kind(uid)}")
    question = need("question")
    if not isinstance(question, str) or not question.strip():
        raise DatasetError(
            path, lineno, "question", f"expected a non-empty string, got {question!r:.60}"
        )
    golds = need("golden_answers")
    if not isinstance(golds, list) or not golds or not all(isinstance(g, str) for g in golds):
        raise DatasetError(
            path,
            lineno,
            "golden_answers",
            f"expected a non-empty list of strings, got {golds!r:.60}",
        )
    source = row.get("data_source", default_source)
    if not isinstance(source, str) or not source:
        raise DatasetError(path, lineno, "data_source", f"expected a string, got {_kind(source)}")
    meta = row.get("metadata") or {}
    if not isinstance(meta, dict):
        raise DatasetError(path, lineno, "metadata", f"expected an object, got {_kind(meta)}")
    hops = meta.get("hops", 0)
    if not isinstance(hops, int) or isinstance(hops, bool) or hops < 0:
        raise DatasetError(path, lineno, "metadata.hops", f"expected an integer >= 0, got {hops!r}")
    return Question(f"{source}-{uid}", question, tuple(golds), source, hops)


def _kind(value: Any) -> str:
    return "null" if value is None else type(value).__name__
