"""Link questions (WebWalkerQA's style): find page A, follow its link to B, the first of a
category (``CATEGORIES``) among A's links, and read the answer there; ``web_questions`` checks
the search. Rules and examples: docs/data.md, "Web questions".
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cache, partial

from treegrpo.core.rewards import is_span
from treegrpo.data.lead_questions import (
    Built,
    Context,
    article_facts,
    is_person,
    is_valid,
    passage,
    subject_name,
)
from treegrpo.data.web_view import SiteView
from treegrpo.data.wiki import Article

_PERSON_KINDS = """nationality occupation birth-year death-year birthplace full-name birth-name
courtesy-name alias"""
_PLACE_KINDS = "capital official-name alias"
_NOUN = re.compile(
    r"^(?:\w+ )*?(?P<n>city|town|river|lake|island|volcano|desert|species|genus|chemical element|"
    r"film|novel|opera|album|painting|poem|symphony)\b",
    re.I,
)
"""The noun a short description names its article with ("Species of flowering plant")."""
_MAYBE_PERSON = re.compile(
    r"\b(?:born|died)\b|\d\)$|^(?:\w+ )*?(?:king|queen|emperor|empress|pharaoh|pope|sultan|"
    r"prince|princess|saint|president|philosopher|writer|poet|painter|composer|singer|actor|"
    r"actress|scientist|mathematician|physicist|chemist|politician|explorer|general|monarch|"
    r"ruler|leader|figure|dictator|activist|inventor|engineer|artist|sculptor|architect|author|"
    r"novelist|playwright|musician|rapper|dancer|director|filmmaker|statesman|soldier|"
    r"theologian|prophet|apostle)\b",
    re.I,
)
_MAYBE_COUNTRY = re.compile(r"\b(?:country|nation|state|kingdom|republic|empire)\b", re.I)
_MAYBE_REGION = re.compile(
    r"\b(?:state|province|region|prefecture|county|territory|autonomous community)\b", re.I
)

Noun = Callable[[Article, Context], str | None]
Maybe = Callable[[Article], bool]


@dataclass(frozen=True)
class Category:
    """A kind of page B: how a question names it, what may be asked of it, and which pages
    might be one unnamed (linked before B, one leaves "the first <noun>" in doubt)."""

    noun: Noun  # the noun for B ("person", "state", "river"), None when B is not one
    maybe: Maybe  # whether a page could be one (a superset of those with a noun)
    kinds: frozenset[str]  # lead-question kinds that may be asked of B


def _described(noun: str, kinds: str) -> Category:
    """Pages described as ``noun`` ("City in Italy"); maybe: the word in description or title."""
    word = re.compile(rf"\b{noun}\b", re.I)

    def named(a: Article, ctx: Context) -> str | None:
        m = _NOUN.match(a.description)
        return noun if m and m["n"].lower() == noun else None

    def maybe(a: Article) -> bool:
        return bool(word.search(a.description) or word.search(a.title))

    return Category(named, maybe, frozenset(kinds.split()))


CATEGORIES: dict[str, Category] = {
    "person": Category(
        lambda a, ctx: "person" if is_person(a) else None,
        lambda a: a.topic == "People" or bool(_MAYBE_PERSON.search(a.description)),
        frozenset(_PERSON_KINDS.split()),
    ),
    "country": Category(
        lambda a, ctx: "country" if a.title in ctx.countries else None,
        lambda a: bool(_MAYBE_COUNTRY.search(a.description)),
        frozenset(_PLACE_KINDS.split()),
    ),
    "region": Category(
        lambda a, ctx: ctx.regions.get(a.title),  # "state", "province", …
        lambda a: bool(_MAYBE_REGION.search(a.description)),
        frozenset(_PLACE_KINDS.split()),
    ),
    **{
        n: _described(n, "country region alias")
        for n in ("city", "town", "river", "lake", "island", "volcano", "desert")
    },
    **{n: _described(n, "family order alias") for n in ("species", "genus")},
    "element": _described("chemical element", "symbol atomic-number"),
    **{
        n: _described(n, "creator release-year")
        for n in ("film", "novel", "opera", "album", "painting", "poem", "symphony")
    },
}
"""Categories of linked page → how to name one, which pages might be one, what to ask."""


@dataclass(frozen=True)
class LinkRow:
    """A link question before the search checks: page ``first`` links to page ``second``."""

    template: str  # "person:birth-year", "country:capital", "hop:creator+nationality"
    question: str
    golds: tuple[str, ...]
    first: int  # article A, named by the question
    second: int  # article B, holding the answer


def link_rows(view: SiteView, ctx: Context, hops: Sequence[Built] = ()) -> list[LinkRow]:
    """Every link question over ``view``'s articles in order (unchecked by search, uncapped),
    then the two-hop reading questions of ``hops`` that qualify."""
    facts = cache(partial(article_facts, ctx=ctx))  # each page B's, read once
    out = []
    for a in view.articles.values():
        taken: set[str] = set()
        for target in view.links[a.index]:
            b = view.articles[target]
            for name, category in CATEGORIES.items():
                if name in taken:
                    continue
                noun = category.noun(b, ctx)
                if noun is None:
                    if category.maybe(b):
                        taken.add(name)  # B might be one: "the first" is in doubt after it
                    continue
                taken.add(name)  # the first of its category among A's links, only
                subject = f"the first {noun} linked from the page on {subject_name(a)}"
                for fact in facts(b):
                    if fact.kind not in category.kinds:
                        continue
                    question = fact.ask.replace("{s}", subject)
                    row = LinkRow(f"{name}:{fact.kind}", question, fact.golds, a.index, b.index)
                    if is_link_question(view, row):
                        out.append(row)
    for built in hops:
        q = built.question
        row = LinkRow(f"hop:{q.kind}", q.question, q.golds, built.articles[0], built.articles[-1])
        if len(built.articles) == 2 and is_link_question(view, row):  # B linked from A
            out.append(row)
    return out


def is_link_question(view: SiteView, row: LinkRow) -> bool:
    """The checks of the module docstring, and the lead questions' own (``is_valid``)."""
    a, b = view.articles[row.first], view.articles[row.second]
    kind = row.template.split(":", 1)[1]
    return (
        a.index != b.index
        and b.index in view.links[a.index]
        and row.golds[0] in b.extract
        and is_valid(kind.split("+")[-1], row.question, row.golds, passage(b))
        and not any(is_span(g, view.page_text(a.index)) for g in row.golds)
    )
