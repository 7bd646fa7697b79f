"""The question type every dataset reader produces."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Question:
    """One question with its gold answers. ``uid`` is unique across all sources
    (``f"{source}-{index}"``), so group ids built from it never merge two datasets' rows
    (docs/algorithm.md §3); the readers refuse a second row with the same uid."""

    uid: str
    question: str
    golds: tuple[str, ...]  # any of them counts as correct (EM after SQuAD normalization)
    source: str  # data source, e.g. "nq", "hotpotqa", "synthetic"
    hops: int  # retrieval hops a perfect agent needs (0 when unknown)
    index: int | str | None = None  # the row's id within its source (parquet extra_info.index)
    prompt: str | None = None  # the file's own user message (Search-R1 parquet), verbatim
    kind: str = ""  # the question's type within its source (e.g. a template name), "" if one
