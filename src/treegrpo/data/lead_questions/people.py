"""Templates about people and their names: full-name, birth-name, courtesy-name, alias and
official-name (``name_facts``, for any article); nationality, occupation, birthplace,
birth-year and death-year (``person_facts``).
"""

from __future__ import annotations

import re

from treegrpo.core.rewards import is_span, normalize_answer
from treegrpo.data.lead_questions.facts import Fact, _own
from treegrpo.data.lead_questions.patterns import (
    _APPOSITION,
    _BORN,
    _BORN_NAME,
    _COURTESY,
    _DEATH,
    _HONORIFIC,
    _HONORIFICS,
    _KNOWN_AS,
    _NAME_RE,
    _NAMES_SPLIT,
    _NATIONALITY_REST,
    _NOT_IN_NAMES,
    _NOT_OCCUPATION,
    _OCCUPATION_STOPS,
    _OFFICIAL,
    _SUBJECT,
)
from treegrpo.data.lead_questions.text import _clean, _nationality, is_person, year_golds
from treegrpo.data.title_questions import base_title, first_sentence
from treegrpo.data.wiki import Article


def _names(text: str) -> list[str]:
    """The names of "A, B or C" / "A and B", quotes and "simply" dropped; [] when a piece is
    more than five words or holds other characters (the parse ran past the list)."""
    out = []
    for piece in _NAMES_SPLIT.split(text.strip()):
        piece = _clean(re.sub(r"^(?:simply|just|sometimes|also)\s+", "", piece.strip()))
        if (
            not piece
            or len(piece.split()) > 5
            or not re.fullmatch(r"[\w'’.\- ]+", piece)
            or set(piece.lower().split()) & _NOT_IN_NAMES
        ):
            return []
        out.append(piece)
    return out


def name_facts(article: Article) -> list[Fact]:
    """full-name, birth-name, courtesy-name, alias and official-name, from the subject of the
    first sentence and the appositions after it ("Cao Cao, courtesy name Mengde, was …")."""
    parts = _SUBJECT.match(first_sentence(article.extract))
    if parts is None:
        return []
    title = base_title(article.title)
    past = parts["verb"] in ("was", "were")
    segments = [s.strip() for s in _APPOSITION.split(parts["subj"])]
    heads = [h.strip() for h in re.sub(r"^(?:The|A|An)\s+", "", segments[0]).split(" or ")]
    alias = [h for h in heads[1:] if _NAME_RE.fullmatch(h)]
    out = []
    main, title_tokens = heads[0], set(normalize_answer(title).split())
    main_tokens = set(normalize_answer(main).split())
    ask = f"What {'was' if past else 'is'} the full name of {{s}}?"
    full_name = _own(article, "full-name", ask, [main, _HONORIFIC.sub("", main)])
    if (
        is_person(article)
        and _NAME_RE.fullmatch(main)
        and (main_tokens - title_tokens) - _HONORIFICS
        and not title_tokens - main_tokens
    ):
        out.append(full_name)
    for segment, after in zip(segments[1:], [*segments[2:], ""], strict=False):
        if after[:1].isupper():  # "officially the Special District of Science, Technology …"
            continue
        if (m := _BORN_NAME.fullmatch(segment)) and is_person(article) and _names(m[1]):
            out.append(_own(article, "birth-name", "What was the birth name of {s}?", _names(m[1])))
        elif m := _COURTESY.fullmatch(segment):
            out.append(_own(article, "courtesy-name", "What was the courtesy name of {s}?", [m[1]]))
        elif (m := _OFFICIAL.fullmatch(segment)) and _NAME_RE.fullmatch(m[1]):
            out.append(_own(article, "official-name", "What is the official name of {s}?", [m[1]]))
        elif m := _KNOWN_AS.fullmatch(segment):
            alias += _names(m[1])
    known_as_title = any(normalize_answer(a) == normalize_answer(title) for a in alias)
    if (
        known_as_title
        and is_person(article)
        and len(main.split()) >= 2
        and _NAME_RE.fullmatch(main)
        and not (main_tokens & title_tokens)
    ):  # "Marshall Bruce Mathers III, known professionally as Eminem, is …"
        out.append(full_name)
    alias = [a for a in alias if normalize_answer(a) != normalize_answer(title)]
    if alias and not any(is_span(a, title) for a in alias):
        out.append(_own(article, "alias", "What is another name for {s}?", alias))
    return out


def _described_nationality_differs(description: str, nationality: str) -> bool:
    """Whether the short description starts with another nationality, or a compound one
    ("Austrian–British psychoanalyst" for a lead that says "British")."""
    first = description.split(" ", 1)[0]
    return first != nationality and any(_nationality(p) for p in re.split(r"[-–]", first))


def occupations(text: str) -> list[str]:
    """The nouns after a nationality: "theatre practitioner, playwright, and poet who …" → three;
    an item followed by "of" or "to" ("co-founder of …") is half a phrase, left out."""
    items: list[str] = []
    words: list[str] = []
    for token in re.findall(r"[\w\-']+|[^\w\s]", text):
        if token in (",", "and", "or"):
            if words:
                items.append(" ".join(words))
            words = []
            continue
        if token.lower() in _OCCUPATION_STOPS or not re.fullmatch(r"[a-z][a-z\-]*", token):
            if words and token not in ("of", "to"):
                items.append(" ".join(words))
            words = []
            break
        words.append(token)
    if words:
        items.append(" ".join(words))
    return [i for i in items if len(i.split()) <= 3 and not _NOT_OCCUPATION.search(i)]


def person_facts(article: Article) -> list[Fact]:
    """nationality and occupation ("X was an English social reformer, …"), birthplace and
    birth-year ("He was born in Pisa in 1564"), death-year ("until his death in 1934", checked
    against the description's life span)."""
    if not is_person(article):
        return []
    out = []
    title = base_title(article.title)
    parts = _SUBJECT.match(first_sentence(article.extract))
    if parts and parts["verb"] in ("is", "was") and " who " not in parts["subj"]:
        verb = parts["verb"]
        m = _NATIONALITY_REST.match(parts["rest"])
        if (
            m
            and _nationality(m[1])
            and not _described_nationality_differs(article.description, m[1])
            and not re.match(r"(?:and|or)\b", m[2])
        ):
            out.append(_own(article, "nationality", f"What nationality {verb} {{s}}?", [m[1]]))
            jobs = occupations(m[2])
            if jobs:
                one = "one of the occupations" if len(jobs) > 1 else "the occupation"
                golds = jobs + [f"{m[1]} {j}" for j in jobs]
                out.append(_own(article, "occupation", f"What {verb} {one} of {{s}}?", golds))
    who = {"He", "She", title, title.split()[-1], title.split()[0]}
    born = [b for b in _BORN.finditer(article.extract) if b["who"] in who]
    if len(born) == 1 and not re.search(r"\b(?:House|Duchy|Kingdom|Empire)\b", born[0]["place"]):
        place = born[0]["place"]
        golds = [place] + ([place.split(", ")[0]] if ", " in place else [])
        out.append(_own(article, "birthplace", "Where was {s} born?", golds))
        if born[0]["year"]:
            ask = "In which year was {s} born?"
            out.append(_own(article, "birth-year", ask, year_golds(born[0]["year"])))
    deaths = set(_DEATH.findall(article.extract))
    lived = re.search(r"[–-](?:c\. ?)?(\d{1,4}(?: BC)?)\)$", article.description)
    if len(deaths) == 1 and (lived is None or lived[1] == next(iter(deaths))):
        ask = "In which year did {s} die?"
        out.append(_own(article, "death-year", ask, year_golds(deaths.pop())))
    return out
