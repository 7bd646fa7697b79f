"""Templates about places: capital, capital-of, country, region and founded-year."""

from __future__ import annotations

import re

from treegrpo.data.lead_questions.facts import Context, Fact, _own
from treegrpo.data.lead_questions.patterns import (
    _CAPITAL_OF,
    _FOUNDED,
    _FOUNDED_FIRST,
    _IN_COUNTRY,
    _ITS_CAPITAL,
    _NAME_RE,
    _PLACE_PREFIX,
)
from treegrpo.data.lead_questions.text import after_title, sentences, subject_name, year_golds
from treegrpo.data.title_questions import base_title
from treegrpo.data.wiki import Article


def place_facts(article: Article, ctx: Context) -> list[Fact]:
    """capital, capital-of, country, founded-year."""
    title = base_title(article.title)
    out = []
    lead = sentences(article.extract)
    first, two = (lead[0] if lead else ""), " ".join(lead[:2])
    m = _CAPITAL_OF.search(two)
    if m and (m["who"] == "It" or after_title(m["who"], title)):
        place = m["y"].removeprefix("the ")
        core = _PLACE_PREFIX.sub("", place)
        core = re.sub(r" (?:[Pp]rovince|[Ss]tate|[Rr]egion|Prefecture|Governorate)$", "", core)
        if _NAME_RE.fullmatch(core):
            entity = core if core in ctx.titles else ""
            ask, bridge = "What is the capital of {s}?", f"the capital of {m['y']}"
            out.append(Fact("capital", article.index, ask, m["y"], (title,), entity, bridge))
            noun = "country" if entity in ctx.countries else ctx.regions.get(entity, "")
            ask, bridge = "What is {s} the capital of?", f"the {noun} whose capital is {title}"
            out.append(_own(article, "capital-of", ask, [core, place], bridge if noun else ""))
    m = _ITS_CAPITAL.search(article.extract)
    if m:
        ask, bridge = "What is the capital of {s}?", f"the capital of {subject_name(article)}"
        out.append(_own(article, "capital", ask, [m[1]], bridge))
    rest = after_title(first, title)
    m = _IN_COUNTRY.match(rest[1]) if rest else None
    if (
        m
        and (m["c"] in ctx.countries or m["c"] in ctx.regions)
        and not re.search(r"\bcapital\b|\w(?:ed|ing) ", m["what"])
        and article.topic not in ("People", "Biology and health sciences")
        and article.title not in ctx.countries
        and sum(bool(re.search(rf"\b{re.escape(c)}\b", first)) for c in ctx.countries) <= 1
    ):
        kind, noun = (
            ("country", "country") if m["c"] in ctx.countries else ("region", ctx.regions[m["c"]])
        )
        bridge = f"the {noun} where {subject_name(article)} is located"
        out.append(_own(article, kind, f"In which {noun} is {{s}}?", [m["c"]], bridge))
    founded = _FOUNDED.findall(article.extract)
    founded += _FOUNDED_FIRST.findall(rest[1]) if rest else []
    if len(set(founded)) == 1:
        verb, year = founded[0]
        ask = f"In which year was {{s}} {verb}?"
        out.append(_own(article, "founded-year", ask, year_golds(year)))
    return out
