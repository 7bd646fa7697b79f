"""Templates about works and ideas: who made them (creator, originator) and release-year."""

from __future__ import annotations

from treegrpo.data.lead_questions.facts import Context, Fact, _own
from treegrpo.data.lead_questions.patterns import (
    _BY,
    _CO_MAKER,
    _RELEASE,
    _RELEASE_RE,
    _ROLE_OF,
    _VERB_OF,
)
from treegrpo.data.lead_questions.text import _clean, _nationality, after_title, subject_name
from treegrpo.data.title_questions import base_title, first_sentence
from treegrpo.data.wiki import Article


def work_facts(article: Article, ctx: Context) -> list[Fact]:
    """creator / originator ("a novel by English author Jane Austen", "discovered in 1932 by James
    Chadwick"), a bridge when the maker has an article; release-year ("a 1972 … gangster film")."""
    first = first_sentence(article.extract)
    rest = after_title(first, base_title(article.title))
    if rest is None:
        return []
    out = []
    name = subject_name(article)
    found = list(_BY.finditer(rest[1]))
    m = found[0] if len(found) == 1 else None
    if (
        m
        and not _CO_MAKER.match(rest[1][m.end("who") :])
        and not _nationality(m["who"])
        and (" " in _clean(m["who"]) or _clean(m["who"]) in ctx.titles)  # not "by Berry"
    ):
        verb, who = _VERB_OF[m["word"]], _clean(m["who"])
        if m["also"] == "directed":  # "a film written and directed by …": its director
            verb = "directed"
        golds = [who]  # the name as written: a surname alone fails for "Liu Bang", "De Sica"
        what = "the film " if verb == "directed" else ""
        if verb in _ROLE_OF:
            kind, bridge = "creator", f"the {_ROLE_OF[verb]} of {what}{name}"
        else:
            kind, bridge = "originator", f"the person who {verb} {name}"
        bridge = bridge if who in ctx.people else ""
        out.append(_own(article, kind, f"Who {verb} {what}{{s}}?", golds, bridge))
    m = _RELEASE_RE.match(rest[1])
    if m:
        ask = f"In which year was the {m['n']} {{s}} {_RELEASE[m['n']]}?"
        out.append(_own(article, "release-year", ask, [m["y"]]))
    return out
