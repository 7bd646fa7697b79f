"""The offline corpus's train, val and test questions (cached), and two-hop hop plans. Val is
the part of train touching a validation article, to choose RL settings without looking at test
(docs/data.md, "The wiki reading questions").
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import lru_cache
from typing import Literal

from treegrpo.data.lead_questions.build import Built, HopPlan, build_questions
from treegrpo.data.lead_questions.wh import build_read
from treegrpo.data.types import Question
from treegrpo.data.wiki import Article, Split, load_articles, split_of, stable_hash

VAL_SHARE = 10
"""One train article in this many (by a second hash of its title) is a validation article."""

QuestionSplit = Literal["train", "val", "test"]


def split_questions(
    built: Sequence[Built], articles: Sequence[Article], split: QuestionSplit
) -> list[Question]:
    """One split's questions: train when every article touched is, else test; val: the train
    ones touching a validation article."""
    title = {a.index: a.title for a in articles}
    kept = [b for b in built if question_split(b, title) == ("train" if split == "val" else split)]
    if split == "val":
        kept = [b for b in kept if any(is_val_article(title[i]) for i in b.touches)]
    return [b.question for b in kept]


def question_split(built: Built, title: Mapping[int, str]) -> Split:
    """ "test" when the question touches a test article (``title``: index → title), else "train"."""
    return "test" if any(split_of(title[i]) == "test" for i in built.touches) else "train"


def is_val_article(title: str) -> bool:
    """Whether a train article is a validation one: one in ``VAL_SHARE`` by a second hash."""
    return split_of(title) == "train" and stable_hash(f"val:{title}") % VAL_SHARE == 0


def lead_questions(split: QuestionSplit, hops: int | None = None) -> list[Question]:
    """One split's reading questions: single-hop then two-hop, each in article order; ``hops``
    1 or 2 keeps those only. Val questions stay in train too."""
    if hops not in (None, 1, 2):
        raise ValueError(f"hops must be 1, 2 or None, got {hops!r}")
    return [q for q in _cached_split(split, wh=False) if hops is None or q.hops == hops]


def wh_questions(split: QuestionSplit) -> list[Question]:
    """One split's wh-questions (``wh``, source "wiki-read"), split as ``lead_questions``'."""
    return list(_cached_split(split, wh=True))


@lru_cache(maxsize=6)
def _cached_split(split: QuestionSplit, wh: bool) -> tuple[Question, ...]:
    """The lead questions (or, ``wh``, the wh-questions) of one split, checked."""
    if split not in ("train", "val", "test"):
        raise ValueError(f"split must be 'train', 'val' or 'test', got {split!r}")
    return tuple(split_questions(all_wh() if wh else all_built(), load_articles(), split))


@lru_cache(maxsize=1)
def all_wh() -> tuple[Built, ...]:
    """Every wh-question over the offline corpus (both splits; ``wh_questions`` splits them)."""
    return build_read(load_articles())


def hop_plan(uid: str) -> HopPlan | None:
    """The bridge and second hop of the two-hop question ``uid`` (None for a single-hop one)."""
    return _plans().get(uid)


@lru_cache(maxsize=1)
def _plans() -> dict[str, HopPlan]:
    return {b.question.uid: HopPlan(b.bridge, b.then) for b in all_built() if b.bridge}


@lru_cache(maxsize=1)
def all_built() -> tuple[Built, ...]:
    """Every question over the offline corpus (both splits) with the articles it reads, touches."""
    return build_questions(load_articles())
