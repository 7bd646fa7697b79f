"""Reading a lead: its passage, spans, sentences, numbers and years as golds, the subject's name."""

from __future__ import annotations

import re

from treegrpo.data.lead_questions.patterns import (
    _LEAD_IN,
    _NATIONALITY,
    _NOT_NATIONALITIES,
    _NUMBER_WORDS,
    _PEOPLE_DESCRIPTION,
)
from treegrpo.data.title_questions import base_title, first_sentence
from treegrpo.data.wiki import Article
from treegrpo.retrieval.corpus import make_contents


def passage(article: Article) -> str:
    """The article's corpus passage, what a retriever returns: every gold is a span of it."""
    return make_contents(article.title, article.extract)


def sentences(text: str) -> list[str]:
    """The sentences of ``text``, split as ``title_questions.first_sentence`` splits."""
    out = []
    text = text.strip()
    while text:
        first = first_sentence(text)
        out.append(first)
        text = text[len(first) :].strip()
    return out


def is_person(article: Article) -> bool:
    """Topic "People", or a short description ending in a life span ("… (1805–1865)")."""
    return article.topic == "People" or bool(_PEOPLE_DESCRIPTION.match(article.description))


def number_golds(number: str) -> tuple[str, ...]:
    """A number as written, without thousands commas, and in words up to twenty."""
    plain = number.replace(",", "")
    words = (_NUMBER_WORDS[int(plain)],) if plain.isdigit() and int(plain) <= 20 else ()
    return tuple(dict.fromkeys((number, plain, *words)))


def year_golds(year: str) -> tuple[str, ...]:
    """A year as written, with "BCE" for "BC" and back."""
    if year.endswith(" BC"):
        return (year, year + "E")
    if year.endswith(" BCE"):
        return (year, year[:-1])
    return (year,)


def _clean(span: str) -> str:
    """A span without surrounding quotes, a leading article or a sentence's full stop."""
    span = span.strip().strip("\"“”'‘’").strip()
    span = re.sub(r"^(?:the|a|an)\s+", "", span, flags=re.I)
    if span.endswith(".") and not re.search(r"\b\w\.$", span):
        span = span[:-1]
    return span.rstrip(",;:")


def after_title(sentence: str, title: str) -> tuple[str, str] | None:
    """(the subject as the lead writes it, the rest of the sentence) when ``sentence`` begins
    with the title, else None. The title may follow "In <field>, " and "The", "A" or "An", be
    quoted, and differ in case: "A low Earth orbit (LEO) is …" → ("low Earth orbit", " (LEO)
    is …"); "In geometry, an angle is …" → ("angle", " is …")."""
    m = _LEAD_IN.match(sentence)
    assert m is not None  # every group is optional
    for start, article in ((m.start("article"), None), (m.end("article"), m["a"])):
        quoted = sentence[start : start + 1] in '"“'
        begin = start + quoted
        end = begin + len(title)
        if sentence[begin:end].lower() != title.lower() or re.match(r"\w", sentence[end:][:1]):
            continue
        name = sentence[begin:end]
        if article and article.lower() == "the" and not name.lower().startswith("the "):
            name = "the " + name
        return name, sentence[end + quoted :]
    return None


def subject_name(article: Article) -> str:
    """How questions name the article: as its lead's first words do ("the poinsettia",
    "read-only memory"), else its title without a disambiguator."""
    title = base_title(article.title)
    found = after_title(first_sentence(article.extract), title)
    return found[0] if found else title


def _nationality(word: str) -> bool:
    return bool(_NATIONALITY.fullmatch(word)) and word not in _NOT_NATIONALITIES
