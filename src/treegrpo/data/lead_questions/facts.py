"""What templates make (``Fact``), know of the corpus (``Context``), and ``_own`` facts."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from treegrpo.data.lead_questions.patterns import (
    _COUNTRY_DESCRIPTION,
    _PLACE_DESCRIPTION,
    _REGION_DESCRIPTION,
)
from treegrpo.data.lead_questions.text import is_person, subject_name
from treegrpo.data.wiki import Article


@dataclass(frozen=True)
class Fact:
    """One thing a lead says, as a question template: ``ask`` holds "{s}" for the subject, ``about``
    in a single-hop question, a bridge ("the author of Heart of Darkness") in a two-hop one."""

    kind: str
    index: int  # the article whose passage holds the answer
    ask: str  # "What nationality was {s}?"
    about: str  # the subject as a single-hop question names it
    golds: tuple[str, ...]  # golds[0] is verbatim in the passage
    entity: str = ""  # title of the article the fact is about ("" if none): two-hop joins on it
    bridge: str = ""  # how a two-hop question names golds[0] through this fact ("" if it can't)


@dataclass(frozen=True)
class Context:
    """What the templates need to know of the whole corpus."""

    titles: frozenset[str]
    countries: frozenset[str]  # titles of articles whose short description says "country"
    regions: Mapping[str, str]  # title → "state", "province", … (from the short description)
    people: frozenset[str]  # titles of articles about a person
    places: frozenset[str] = frozenset()  # countries, regions and what a description calls a place

    @classmethod
    def of(cls, articles: Sequence[Article]) -> Context:
        countries = {a.title for a in articles if _COUNTRY_DESCRIPTION.match(a.description)}
        regions = {
            a.title: m[1].lower()
            for a in articles
            if (m := _REGION_DESCRIPTION.match(a.description))
        }
        people = (a.title for a in articles if is_person(a))
        titles = frozenset(a.title for a in articles)
        places = {a.title for a in articles if _PLACE_DESCRIPTION.search(a.description)}
        places |= countries | set(regions)
        return cls(titles, frozenset(countries), regions, frozenset(people), frozenset(places))


def _own(article: Article, kind: str, ask: str, golds: Sequence[str], bridge: str = "") -> Fact:
    """A fact about the article itself, read from its own passage."""
    about = subject_name(article)
    golds = tuple(dict.fromkeys(golds))
    return Fact(kind, article.index, ask, about, golds, article.title, bridge)
