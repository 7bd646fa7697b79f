"""Questions for web agents on the offline website (source "wiki-web"), by where the answer sits
(``Question.kind``: ``in-snippet``, ``in-page``, or ``link`` from ``web_links``). Kinds, caps,
split and counts: docs/data.md, "Web questions".
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

from treegrpo.core.rewards import is_span
from treegrpo.data.lead_questions import MAX_PER_BRIDGE, Built, Context, all_built, all_wh
from treegrpo.data.lead_questions.build import answer_capped, build_questions
from treegrpo.data.types import Question
from treegrpo.data.web_links import link_rows
from treegrpo.data.web_view import SiteView
from treegrpo.data.wiki import Article, load_articles, stable_hash

SOURCE = "wiki-web"
KINDS = ("in-snippet", "in-page", "link")
TOPK = 10
"""Search results whose snippets a question's checks read: one page of results."""
MAX_PER_TARGET = MAX_PER_BRIDGE
"""At most this many link questions of one template lead to one page B (every film would
otherwise ask for the birth year of its director's most famous colleague)."""
HELD_OUT_SHARE = 0.1
READ = "read-"
"""Prefix of the uids' rest and the templates of ``read_web_questions``."""


@dataclass(frozen=True)
class WebQuestion:
    """A web question, its template and the articles it touches (named first, answer last)."""

    question: Question
    template: str
    touches: tuple[int, ...]


def build_web_questions(
    articles: Sequence[Article],
    built: Sequence[Built] | None = None,
    *,
    topk: int = TOPK,
    view: SiteView | None = None,
) -> list[WebQuestion]:
    """Every web question over ``articles``, single-page ones in article order, then link ones;
    ``built``, ``view``: the reading questions and site over them (default: built here)."""
    if built is None:
        built = build_questions(articles)
    view = view or SiteView(articles)
    out = _single_page(view, built, topk)
    rows = link_rows(view, Context.of(articles), [b for b in built if len(b.articles) == 2])
    results = view.search([r.question for r in rows], topk)
    rows = [
        r
        for r, found in zip(rows, results, strict=True)
        if r.first in found and not view.in_snippets(r.golds, found)
    ]
    # one wording, one answer; MAX_PER_TARGET per (page B, template); the answer caps
    rows = answer_capped(rows, caps=[(lambda r: (r.second, r.template), MAX_PER_TARGET)])
    counter: Counter[str] = Counter()
    for r in rows:
        prefix = f"link-{r.first}-{r.second}"
        rest = f"{prefix}-{counter[prefix]}"
        counter[prefix] += 1
        q = Question(f"{SOURCE}-{rest}", r.question, r.golds, SOURCE, 2, rest, kind="link")
        out.append(WebQuestion(q, r.template, (r.first, r.second)))
    return out


def _single_page(
    view: SiteView, built: Sequence[Built], topk: int, prefix: str = ""
) -> list[WebQuestion]:
    """The single-article ``built`` by ``page_kind``, ``prefix`` before their uids' rest."""
    single = [b for b in built if len(b.articles) == 1]
    results = view.search([b.question.question for b in single], topk)
    out = []
    for b, found in zip(single, results, strict=True):
        q, kind = b.question, page_kind(view, b.question.golds, b.articles[0], found)
        if kind is not None:
            rest = f"{prefix}{kind}-{q.uid.removeprefix(f'{q.source}-')}"
            web = Question(f"{SOURCE}-{rest}", q.question, q.golds, SOURCE, 1, rest, kind=kind)
            out.append(WebQuestion(web, f"{prefix}{q.kind}", b.articles))
    return out


def page_kind(
    view: SiteView, golds: Sequence[str], index: int, results: Sequence[int]
) -> str | None:
    """ "in-snippet" when the first gold is a span of article ``index``'s snippet; "in-page" when
    in its lead and no gold is in its snippet nor those of ``results``; else None."""
    snippet = view.snippets[index]
    if golds[0] in snippet and is_span(golds[0], snippet):
        return "in-snippet"
    lead = view.articles[index].extract
    if golds[0] in lead and not view.in_snippets(golds, [index, *results]):
        return "in-page"
    return None


def is_held_out(title: str, seed: int = 0, share: float = HELD_OUT_SHARE) -> bool:
    """Whether an article is held out: a hash of the seed and its title, below ``share``."""
    return stable_hash(f"{seed}:{title}") < share * 2**64


def split_web_questions(
    web: Sequence[WebQuestion],
    articles: Sequence[Article],
    seed: int = 0,
    held_out_share: float = HELD_OUT_SHARE,
) -> tuple[list[Question], list[Question]]:
    """(train, held-out) by the articles each question touches (module docstring); seeded."""
    if not 0 < held_out_share < 1:
        raise ValueError(f"held_out_share must be in (0, 1), got {held_out_share}")
    title = {a.index: a.title for a in articles}
    train, held_out = [], []
    for w in web:
        sides = {is_held_out(title[i], seed, held_out_share) for i in w.touches}
        if sides == {False}:
            train.append(w.question)
        elif sides == {True}:
            held_out.append(w.question)
    return train, held_out


def web_questions(
    seed: int = 0, held_out_share: float = HELD_OUT_SHARE
) -> tuple[list[Question], list[Question]]:
    """(train, held-out) web questions over the offline wiki corpus, built once (about 10 s)."""
    return split_web_questions(all_web_questions(), load_articles(), seed, held_out_share)


@lru_cache(maxsize=1)
def read_web_questions() -> tuple[WebQuestion, ...]:
    """The in-page questions of the reworded wh-questions ("wiki-read"), both sides of any
    split; uids ``wiki-web-read-in-page-…``, templates ``read-<kind>``."""
    found = _single_page(_wiki_view(), all_wh(), TOPK, prefix=READ)
    return tuple(w for w in found if w.question.kind == "in-page")


@lru_cache(maxsize=1)
def all_web_questions() -> tuple[WebQuestion, ...]:
    """Every web question over the offline wiki corpus, both sides of any split."""
    return tuple(build_web_questions(load_articles(), all_built(), view=_wiki_view()))


@lru_cache(maxsize=1)
def _wiki_view() -> SiteView:
    """The site over the offline wiki corpus, one per process, its BM25 index cached on disk."""
    return SiteView(load_articles(), use_cache=True)
