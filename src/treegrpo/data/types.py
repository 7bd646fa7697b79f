"""The question type every dataset reader produces."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Question:
    """One question with its gold answers.

    ``uid`` is unique across all sources (for example ``f"{source}-{index}"``), so group ids built
    from it never merge two datasets' rows (ALGORITHM.md §3, last point).
    """

    uid: str
    question: str
    golds: tuple[str, ...]  # any of them counts as correct (EM after SQuAD normalization)
    source: str  # data source, e.g. "nq", "hotpotqa", "synthetic"
    hops: int  # retrieval hops a perfect agent needs (0 when unknown)
