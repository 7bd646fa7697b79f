"""Search-R1 parquet (docs/data.md, "Question files"), read as questions and written. The
question is recovered from the prompt, so our prompt renders for any tokenizer (the file's
message kept as ``Question.prompt``). Read with pyarrow, not ``datasets.Dataset.from_parquet``,
which first copies the whole file into the Hugging Face cache; written with ``datasets``, so a
file carries Search-R1's schema metadata.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from datasets import Dataset

from treegrpo.data.errors import DataError
from treegrpo.data.types import Question
from treegrpo.data.webqa_rows import Row, RowFields
from treegrpo.files import atomic_path

ABILITY = "fact-reasoning"
REQUIRED = ("data_source", "prompt", "reward_model")  # `ability` is not read; `extra_info` optional
# "Question:" starting a line or after whitespace; the last one wins, since few-shot templates
# put worked examples (with their own "Question:") before the real question.
_MARKER = re.compile(r"(?:^|(?<=\s))Question:")


def question_from_prompt(content: str) -> str:
    """The text after a user message's last ``Question:`` (Search-R1's templates and ours end
    with ``Question: {question}\\n``), else the whole message; stripped."""
    return _MARKER.split(content)[-1].strip()


def normalize_answers(value: Any) -> tuple[str, ...]:
    """``ground_truth.target`` (a string, list or numpy array, as pandas gives a list) as a tuple
    of strings; ValueError for anything else or no answer at all."""
    if isinstance(value, str):
        value = [value]
    elif hasattr(value, "tolist") and not isinstance(value, list | tuple):
        value = value.tolist()  # numpy array (pandas' parquet reader) → list of str
    if not isinstance(value, list | tuple) or not all(isinstance(v, str) for v in value):
        raise ValueError(f"expected a list of strings, got {value!r:.60}")
    if not value:
        raise ValueError("empty list: a question needs a gold answer")
    return tuple(value)


def read_searchr1(path: str | Path, source: str | None = None) -> list[Question]:
    """The questions of a Search-R1 parquet file in row order; ``source`` overrides ``data_source``.
    The uid is ``f"{data_source}-{extra_info.index}"`` (the row number without an index)."""
    path = Path(path)
    with open(path, "rb") as f:  # a missing file is the usual FileNotFoundError
        try:
            pfile = pq.ParquetFile(f)
            names = pfile.schema_arrow.names
            for column in REQUIRED:
                if column not in names and not (column == "data_source" and source):
                    known = ", ".join(names)
                    raise DataError(path, f"missing (columns: {known})", row=0, field=column)
            wanted = [c for c in (*REQUIRED, "extra_info") if c in names]
            rows = pfile.read(columns=wanted).to_pylist()
        except (pa.ArrowException, OSError) as exc:
            raise DataError(path, f"unreadable parquet ({exc})") from None
    if not rows:
        raise DataError(path, "no questions (the file has no rows)")
    return [searchr1_question(row, path, i, source) for i, row in enumerate(rows)]


def searchr1_question(
    row: Mapping[str, Any], path: str | Path, row_no: int, source: str | None = None
) -> Question:
    """One Search-R1 row (a pyarrow or pandas dict) as a Question; errors name the row and field."""
    fail = RowFields(path, Row(dict(row), row_no, None)).fail
    if source is None:
        source = row.get("data_source")
        if source is None:
            raise fail("data_source", "missing")
        if not isinstance(source, str) or not source:
            raise fail("data_source", f"expected a non-empty string, got {source!r:.60}")
    content = _user_message(row.get("prompt"), fail)
    question = question_from_prompt(content)
    if not question:
        raise fail("prompt", "empty question (the user message has no text after 'Question:')")
    model = row.get("reward_model")
    truth = model.get("ground_truth") if isinstance(model, Mapping) else None
    if not isinstance(truth, Mapping) or "target" not in truth:
        what = "reward_model" if not isinstance(model, Mapping) else "reward_model.ground_truth"
        raise fail(what, 'expected {"ground_truth": {"target": [answers]}}')
    try:
        golds = normalize_answers(truth["target"])
    except ValueError as exc:
        raise fail("reward_model.ground_truth.target", str(exc)) from None
    extra = row.get("extra_info")
    extra = extra if isinstance(extra, Mapping) else {}
    index = extra.get("index")
    if index is None:
        index = row_no
    elif hasattr(index, "item"):
        index = index.item()  # numpy scalar (pandas) → int
    if not isinstance(index, int | str) or isinstance(index, bool):
        raise fail("extra_info.index", f"expected an integer or string, got {index!r:.60}")
    hops = extra.get("hops") or 0
    if not isinstance(hops, int) or isinstance(hops, bool) or hops < 0:
        raise fail("extra_info.hops", f"expected an integer >= 0, got {hops!r:.60}")
    kind = extra.get("kind") or ""
    if not isinstance(kind, str):
        raise fail("extra_info.kind", f"expected a string, got {kind!r:.60}")
    return Question(f"{source}-{index}", question, golds, source, hops, index, content, kind)


def searchr1_rows(
    questions: Sequence[Question], split: str, user_message: Callable[[str], str]
) -> list[dict[str, Any]]:
    """Questions as Search-R1 rows (docs/data.md, "Converting FlashRAG jsonl to Search-R1 parquet"),
    prompt ``user_message(question)`` (the agent layer's, passed in). ``extra_info.index`` counts
    rows per source, as Search-R1's scripts do; ``hops`` and ``kind``: when any question has one."""
    counts: dict[str, int] = {}
    with_hops = any(q.hops for q in questions)
    with_kind = any(q.kind for q in questions)
    rows = []
    for q in questions:
        index = counts.get(q.source, 0)
        counts[q.source] = index + 1
        extra: dict[str, Any] = {"split": split, "index": index}
        if with_hops:
            extra["hops"] = q.hops or None
        if with_kind:
            extra["kind"] = q.kind or None
        rows.append(
            {
                "data_source": q.source,
                "prompt": [{"role": "user", "content": user_message(q.question)}],
                "ability": ABILITY,
                "reward_model": {"style": "rule", "ground_truth": {"target": list(q.golds)}},
                "extra_info": extra,
            }
        )
    return rows


def write_searchr1(path: str | Path, rows: Sequence[Mapping[str, Any]]) -> None:
    """Write ``rows`` as a parquet file, atomically (a crash never leaves half a dataset)."""
    if not rows:
        raise ValueError(f"{path}: no rows to write")
    table = Dataset.from_list(list(rows)).data.table  # datasets' schema and metadata
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_path(path) as tmp:
        pq.write_table(table, tmp)


def _user_message(prompt: Any, fail: Callable[[str, str], DataError]) -> str:
    """The content of a prompt that is a list of exactly one user message."""
    if hasattr(prompt, "tolist") and not isinstance(prompt, list | tuple):
        prompt = prompt.tolist()  # numpy array of dicts (pandas)
    if prompt is None:
        raise fail("prompt", "missing")
    if not isinstance(prompt, list | tuple) or len(prompt) != 1:
        n = f"{len(prompt)} items" if isinstance(prompt, list | tuple) else type(prompt).__name__
        raise fail("prompt", f'expected a list of one {{"role": "user", "content": …}}, got {n}')
    message = prompt[0]
    if not isinstance(message, Mapping) or message.get("role") != "user":
        raise fail("prompt", f"expected one message with role 'user', got {message!r:.60}")
    content = message.get("content")
    if not isinstance(content, str):
        raise fail("prompt", f"expected the message's content as a string, got {content!r:.60}")
    return content
