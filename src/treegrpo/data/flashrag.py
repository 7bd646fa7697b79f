"""FlashRAG jsonl questions, one ``{"id", "question", "golden_answers"}`` object a line
(docs/data.md, "Question files"), read line by line, not with ``datasets``: its JSON loader
unifies a schema over all rows, so a bad row would be an Arrow type error without a line number.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

from treegrpo.data.errors import DataError, type_name
from treegrpo.data.types import Question
from treegrpo.data.webqa_rows import Row, RowFields, jsonl_rows
from treegrpo.files import atomic_path

# FlashRAG ships `nq/test.jsonl`: there the directory, not the file, names the source.
SPLIT_NAMES = frozenset({"train", "dev", "val", "valid", "validation", "test"})


def default_source(path: str | Path) -> str:
    """The source of rows without ``data_source``: the stem, or the folder of ``nq/test.jsonl``."""
    path = Path(path)
    if path.stem in SPLIT_NAMES and path.parent.name not in ("", ".", ".."):
        return path.parent.name
    return path.stem


def read_flashrag(path: str | Path, source: str | None = None) -> list[Question]:
    """A FlashRAG file's questions in order, uid ``f"{source}-{id}"``; source: ``source``, else
    the row's ``data_source``, else the file's."""
    path = Path(path)
    fallback = default_source(path)
    out = [_parse(path, row, source, fallback) for row in jsonl_rows(path)]
    if not out:
        raise DataError(path, "no questions (the file is empty)")
    return out


def write_flashrag(path: str | Path, questions: Iterable[Question]) -> int:
    """Write questions as FlashRAG jsonl, atomically, ``read_flashrag`` giving back their uids,
    sources, hops and kinds; return the count."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    n = 0
    with atomic_path(path) as tmp, open(tmp, "w", encoding="utf-8") as f:
        for q in questions:
            row = {
                "id": row_id(q, n),
                "question": q.question,
                "golden_answers": list(q.golds),
                "data_source": q.source,
                "metadata": {"hops": q.hops} | ({"kind": q.kind} if q.kind else {}),
            }
            f.write(json.dumps(row, ensure_ascii=False) + "\n")
            n += 1
    return n


def row_id(q: Question, n: int) -> int | str:
    """The ``id`` that reads back as ``q``'s uid: its index where the uid is made of it, else the
    uid after the source (``wiki-qa-12-0``), else its index or ``n`` (the row)."""
    prefix = f"{q.source}-"
    if q.index is not None and q.uid == f"{prefix}{q.index}":
        return q.index
    if q.uid.startswith(prefix) and len(q.uid) > len(prefix):
        return q.uid[len(prefix) :]
    return q.index if q.index is not None else n


def _parse(path: Path, at: Row, source: str | None, fallback: str) -> Question:
    r, row = RowFields(path, at), at.fields
    uid = r.need("id")
    if not isinstance(uid, str | int) or isinstance(uid, bool):
        raise r.fail("id", f"expected a string or integer, got {type_name(uid)}")
    question = r.string("question", r.need("question"))
    if not question.strip():
        raise r.fail("question", "empty")
    golds = r.need("golden_answers")
    if not isinstance(golds, list) or not all(isinstance(g, str) for g in golds):
        raise r.fail("golden_answers", f"expected a list of strings, got {golds!r:.60}")
    if not golds:
        raise r.fail("golden_answers", "empty list: a question needs a gold answer")
    if source is None:
        source = row.get("data_source", fallback)
        if not isinstance(source, str) or not source:
            raise r.fail("data_source", f"expected a non-empty string, got {source!r:.60}")
    meta = row.get("metadata")
    meta = {} if meta is None else meta
    if not isinstance(meta, dict):
        raise r.fail("metadata", f"expected an object, got {type_name(meta)}")
    hops = meta.get("hops", 0)
    if not isinstance(hops, int) or isinstance(hops, bool) or hops < 0:
        raise r.fail("metadata.hops", f"expected an integer >= 0, got {hops!r:.60}")
    kind = meta.get("kind", "")
    if not isinstance(kind, str):
        raise r.fail("metadata.kind", f"expected a string, got {kind!r:.60}")
    return Question(f"{source}-{uid}", question, tuple(golds), source, hops, index=uid, kind=kind)
