"""Evaluation questions from the held-out synthetic world; dataset files go through
``treegrpo.data.load.load_questions``, the one reader of Search-R1 parquet and FlashRAG jsonl."""

from __future__ import annotations

from treegrpo.data.types import Question
from treegrpo.tools.base import Passage

SYNTHETIC_EVAL = "synthetic-eval"


def synthetic_eval(world_seed: int = 0) -> tuple[list[Question], list[Passage]]:
    """The held-out synthetic world of the embedded job: its questions and its corpus."""
    from treegrpo.data.synthetic import train_eval_worlds

    world = train_eval_worlds(world_seed)[1]
    return list(world.questions), list(world.passages)
