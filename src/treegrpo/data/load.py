"""Load question files of any format, several at once; a uid seen twice is an error, not a
merge, since the RL step groups rollouts by uid (docs/algorithm.md §3; docs/data.md, "Question
files").
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from treegrpo.data.errors import DataError
from treegrpo.data.flashrag import read_flashrag
from treegrpo.data.searchr1 import read_searchr1
from treegrpo.data.types import Question
from treegrpo.data.webqa import READERS, webqa_reader
from treegrpo.data.webqa_rows import SUFFIXES as WEBQA_SUFFIXES
from treegrpo.data.webqa_rows import jsonl_rows

FORMATS = {".parquet": "Search-R1 parquet", ".jsonl": "FlashRAG jsonl"}
WEBQA = "a web-QA file (.jsonl, .json or .csv with WebWalkerQA, SimpleQA, GAIA or BrowseComp rows)"
"""A ``.jsonl``, ``.json`` or ``.csv`` file whose first row has one of these datasets' fields is
read by its reader (``data.webqa.webqa_reader``); another ``.jsonl`` file is FlashRAG's."""


def load_questions(
    paths: str | Path | Sequence[str | Path],
    sources: Sequence[str | None] | None = None,
) -> list[Question]:
    """The questions of Search-R1 ``.parquet``, FlashRAG ``.jsonl`` or web-QA files (``WEBQA``),
    in order; ``sources[i]`` (None: its own) overrides file i's data source. DataError names
    the file, row and field."""
    if isinstance(paths, str | Path):
        paths = [paths]
    files = [Path(p) for p in paths]
    if not files:
        raise ValueError("no dataset files given")
    per_file = list(sources) if sources is not None else [None] * len(files)
    if len(per_file) != len(files):
        raise ValueError(f"{len(per_file)} sources for {len(files)} files: give one per file")
    if any(s is not None and not (isinstance(s, str) and s.strip()) for s in per_file):
        raise ValueError(f"a data source must be a non-empty string, got {per_file}")
    out: list[Question] = []
    seen: dict[str, tuple[int, Path, int]] = {}  # uid → (file number, file, row) of first use
    for file_no, (path, source) in enumerate(zip(files, per_file, strict=True)):
        questions = _read(path, source)
        for row, q in enumerate(questions):
            first = seen.setdefault(q.uid, (file_no, path, row))
            if first != (file_no, path, row):
                raise _duplicate(path, row, q.uid, first[1:], same_file=first[0] == file_no)
        out.extend(questions)
    return out


def _read(path: Path, source: str | None) -> list[Question]:
    if path.suffix == ".parquet":
        return read_searchr1(path, source)
    if path.suffix in WEBQA_SUFFIXES and (name := webqa_reader(path)) is not None:
        return READERS[name](path, source).questions
    if path.suffix == ".jsonl":
        return read_flashrag(path, source)
    known = ", ".join(f"{name} ({ext})" for ext, name in FORMATS.items()) + f" or {WEBQA}"
    raise DataError(path, f"unknown format {path.suffix or '(no extension)'!r}: expected {known}")


def _duplicate(
    path: Path, row: int, uid: str, first: tuple[Path, int], same_file: bool
) -> DataError:
    jsonl = path.suffix == ".jsonl"
    where = f"row {first[1]}" if same_file else f"{first[0]} row {first[1]}"
    return DataError(
        path,
        f"duplicate uid {uid!r} (same data source and id as {where}); "
        "give each file its own data source (--source) so their groups stay apart",
        row=row,
        line=next(r.line for r in jsonl_rows(path) if r.row == row) if jsonl else None,
        field="id" if jsonl else "extra_info.index",
    )
