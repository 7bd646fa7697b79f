"""Templates about things: abbreviation, an organism's family and order, an element's symbol
and atomic number."""

from __future__ import annotations

import re

from treegrpo.data.lead_questions.facts import Fact, _own
from treegrpo.data.lead_questions.patterns import _ABBREVIATION, _ELEMENT, _OTHER_ORGANISM, _TAXA
from treegrpo.data.lead_questions.text import after_title, number_golds, sentences
from treegrpo.data.title_questions import FUNCTION_WORDS, base_title
from treegrpo.data.wiki import Article


def science_facts(article: Article) -> list[Fact]:
    """abbreviation ("Low Earth orbit (LEO)"), family and order of an organism, symbol and
    atomic number of a chemical element."""
    title = base_title(article.title)
    lead = sentences(article.extract)
    rest = after_title(lead[0], title) if lead else None
    if rest is None:
        return []
    out = []
    m = _ABBREVIATION.match(rest[1])
    if m and _initials_match(rest[0], m[1]):
        out.append(_own(article, "abbreviation", "What is the abbreviation of {s}?", [m[1]]))
    if article.topic == "Biology and health sciences":
        two = " ".join(lead[:2])
        for rank, pattern in _TAXA.items():
            found = list(pattern.finditer(two))
            taxa = {m[1] for m in found}
            other = any(_OTHER_ORGANISM.search(two[: m.start()].rsplit(". ", 1)[-1]) for m in found)
            if len(taxa) == 1 and not other:
                ask = f"To which {rank} does {{s}} belong?"
                out.append(_own(article, rank, ask, [taxa.pop()], f"the {rank} of {{s}}"))
    m = _ELEMENT.match(rest[1])
    if m:
        out.append(_own(article, "symbol", "What is the chemical symbol of {s}?", [m[1]]))
        ask = "What is the atomic number of {s}?"
        out.append(_own(article, "atomic-number", ask, number_golds(m[2])))
    return out


def _initials_match(phrase: str, abbreviation: str) -> bool:
    """Whether an abbreviation is the phrase's initials, with or without its small words."""
    words = [w for w in re.split(r"[\s\-,]+", phrase) if w and w.lower() != "the"]
    every = "".join(w[0] for w in words).upper()
    big = "".join(w[0] for w in words if w.lower() not in FUNCTION_WORDS | {"of", "and"}).upper()
    return abbreviation in (every, big)
