"""The train and test questions of the offline corpus (built once, cached), and the hop plan
of a two-hop question.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import lru_cache

from treegrpo.data.lead_questions.build import Built, HopPlan, build_questions
from treegrpo.data.types import Question
from treegrpo.data.wiki import Article, Split, load_articles, split_of


def split_questions(
    built: Sequence[Built], articles: Sequence[Article], split: Split
) -> list[Question]:
    """The questions of one split: train when every article touched is train, else test."""
    title = {a.index: a.title for a in articles}
    return [b.question for b in built if question_split(b, title) == split]


def question_split(built: Built, title: Mapping[int, str]) -> Split:
    """ "test" when the question touches a test article (``title``: index → title), else "train"."""
    return "test" if any(split_of(title[i]) == "test" for i in built.touches) else "train"


def lead_questions(split: Split, hops: int | None = None) -> list[Question]:
    """The reading questions of one split of the offline corpus: single-hop then two-hop,
    each in article order; ``hops`` 1 or 2 keeps those only."""
    if split not in ("train", "test"):
        raise ValueError(f"split must be 'train' or 'test', got {split!r}")
    if hops not in (None, 1, 2):
        raise ValueError(f"hops must be 1, 2 or None, got {hops!r}")
    return [q for q in _split(split) if hops is None or q.hops == hops]


@lru_cache(maxsize=2)
def _split(split: Split) -> tuple[Question, ...]:
    return tuple(split_questions(all_built(), load_articles(), split))


def hop_plan(uid: str) -> HopPlan | None:
    """The bridge and second hop of the two-hop question ``uid`` (None for a single-hop one)."""
    return _plans().get(uid)


@lru_cache(maxsize=1)
def _plans() -> dict[str, HopPlan]:
    return {b.question.uid: HopPlan(b.bridge, b.then) for b in all_built() if b.bridge}


@lru_cache(maxsize=1)
def all_built() -> tuple[Built, ...]:
    """Every question over the offline corpus with the articles it reads and touches (both
    splits; ``lead_questions`` splits them)."""
    return build_questions(load_articles())
