"""Search-R1 corpora (wiki-18's format, docs/algorithm.md §6): jsonl, one ``{"id": "...",
"contents": "\\"Title\\"\\ntext"}`` a line. Reading is strict on purpose: a broken line would
otherwise index silently wrong and show only as bad rewards hours later; every error names the
file, the 1-based line number and the field.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Sequence
from pathlib import Path

from treegrpo.retrieval.base import Passage


class CorpusError(ValueError):
    """A corpus line that is not a valid Search-R1 passage."""

    def __init__(self, path: str | Path, line: int, field: str | None, problem: str) -> None:
        what = f"field {field!r}: " if field else ""
        super().__init__(f"{path}:{line}: {what}{problem}")
        self.path = str(path)
        self.line = line
        self.field = field


def make_contents(title: str, text: str) -> str:
    """Join a title and a text the way Search-R1 corpora do: ``"Title"\\ntext``."""
    return f'"{title}"\n{text}'


def _parse_line(path: str | Path, lineno: int, line: str) -> Passage:
    try:
        row = json.loads(line)
    except json.JSONDecodeError as exc:
        msg = f"invalid JSON ({exc.msg} at column {exc.colno})"
        raise CorpusError(path, lineno, None, msg) from None
    if not isinstance(row, dict):
        raise CorpusError(path, lineno, None, f"expected a JSON object, got {type(row).__name__}")
    for field in ("id", "contents"):
        if field not in row:
            raise CorpusError(path, lineno, field, "missing")
        if not isinstance(row[field], str):
            got = type(row[field]).__name__
            raise CorpusError(path, lineno, field, f"expected a string, got {got}")
    return Passage(id=row["id"], contents=row["contents"])


def read_corpus(path: str | Path) -> list[Passage]:
    """The passages of a jsonl corpus in file order, skipping blank lines; ``CorpusError`` (a
    ``ValueError``) naming file, line and field on the first bad line; ``FileNotFoundError``."""
    with open(path, encoding="utf-8") as f:
        return [_parse_line(path, i, line) for i, line in enumerate(f, start=1) if line.strip()]


def write_corpus(path: str | Path, passages: Iterable[Passage]) -> int:
    """Write passages as a Search-R1 jsonl corpus (UTF-8, an object a line, no scores); a count."""
    n = 0
    with open(path, "w", encoding="utf-8") as f:
        for p in passages:
            f.write(json.dumps({"id": p.id, "contents": p.contents}, ensure_ascii=False) + "\n")
            n += 1
    return n


def file_digest(path: str | Path, chunk_bytes: int = 1 << 20) -> str:
    """SHA-256 of a file's bytes (hex), the cache key of an index built from it: keyed on contents,
    not name or modification time (docs/retrieval.md, "Index cache")."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(chunk_bytes):
            h.update(chunk)
    return h.hexdigest()


def passages_digest(passages: Iterable[Passage]) -> str:
    """SHA-256 over ids and contents of in-memory passages (the cache key when there is no file)."""
    h = hashlib.sha256()
    for p in passages:
        for part in (p.id, p.contents):
            data = part.encode("utf-8")
            h.update(len(data).to_bytes(8, "little"))
            h.update(data)
    return h.hexdigest()


def corpus_passages(
    corpus: str | Path | Sequence[Passage], index: str
) -> tuple[list[Passage], str]:
    """The passages of ``corpus`` (a jsonl file or passages) and their digest, an index's cache key
    (``file_digest`` or ``passages_digest``); ValueError naming ``index`` when it is empty."""
    if isinstance(corpus, str | Path):
        digest = file_digest(corpus)
        passages = read_corpus(corpus)
    else:
        passages = list(corpus)
        digest = passages_digest(passages)
    if not passages:
        raise ValueError(f"cannot build a {index} index over an empty corpus ({corpus!r:.80})")
    return passages, digest
