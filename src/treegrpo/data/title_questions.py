"""Questions whose answer is an article's title, written from the article's own lead: the first
sentence with the title hidden ("It is …"), then the short description as the question; one that
gives its answer away (``leaks``) is not made. Rules: docs/data.md, "The wiki title questions".
"""

from __future__ import annotations

import re
import unicodedata
from collections import Counter
from collections.abc import Iterable

from treegrpo.core.rewards import normalize_answer
from treegrpo.website.corpus import first_sentence

__all__ = ["first_sentence"]  # re-exported: the lead questions read clues with it

_FUNCTION_WORDS = """and for with from into onto upon over under its his her their our who what
which that this these those are was were not but nor yet all any out off per via than about after
before against between during"""
FUNCTION_WORDS = frozenset(_FUNCTION_WORDS.split())
"""Title words that may appear in a question: sharing "and" or "for" reveals no answer."""

MIN_DESCRIPTION_WORDS = 2  # "Number" or "Painting" alone says too little to ask with
MIN_CLUE_WORDS = 6  # what is left of the first sentence once the title is out
MAX_CLUE_WORDS = 45  # keep questions short (a first sentence of 80 words is a paragraph)
MIN_STEM = 4  # shorter title tokens must match exactly, longer ones also as a prefix

_PARENS = re.compile(r"\s*\([^()]*\)")
_QUOTES = "\"”’'"


def base_title(title: str) -> str:
    """The title without a trailing disambiguator: "Casablanca (film)" → "Casablanca"."""
    return re.sub(r"\s*\([^()]*\)$", "", title).strip() or title


def fold(text: str) -> str:
    """Only the letters, digits and spaces of ``text``, unaccented: "ʿAbd Allāh" → "Abd Allah"."""
    chars = unicodedata.normalize("NFKD", text)
    return "".join(
        c for c in chars if c.isspace() or (c.isalnum() and unicodedata.category(c) != "Lm")
    )


def tokens(text: str) -> frozenset[str]:
    """Tokens of ``text`` after SQuAD normalization, as written and accent-folded."""
    return frozenset(normalize_answer(text).split() + normalize_answer(fold(text)).split())


def answer_tokens(title: str) -> frozenset[str]:
    """The base title's tokens a question must not contain: those of three letters or more but
    function words; all for a title of short words only ("Io", "Pi", "1")."""
    every = tokens(base_title(title))
    kept = frozenset(t for t in every if len(t) >= 3 and t not in FUNCTION_WORDS)
    return kept or every


def clashes(token: str, answer: frozenset[str]) -> bool:
    """Whether a token gives away an answer token: equal, plural or singular ("ants" for "Ant"),
    or a prefix of it or it of the token, the shorter of ``MIN_STEM`` letters ("musical")."""
    for a in answer:
        if token == a or token in (a + "s", a + "es") or a in (token + "s", token + "es"):
            return True
        short, long_ = sorted((token, a), key=len)
        if len(short) >= MIN_STEM and long_.startswith(short):
            return True
    return False


def is_acronym(title: str) -> bool:
    """Titles such as "BBC", "NATO": a lead spells these out, giving the answer away, so they
    make no questions."""
    letters = "".join(c for c in base_title(title) if c.isalnum())
    return letters == letters.upper() and sum(c.isalpha() for c in letters) >= 2


def leaks(question: str, title: str) -> bool:
    """Whether a token of ``question`` ``clashes`` with one of ``title``'s ``answer_tokens``."""
    answer = answer_tokens(title)
    return any(clashes(t, answer) for t in tokens(question))


def hide_title(sentence: str, title: str) -> str:
    """``sentence`` without parentheses, the title replaced by "it" ("its" for a possessive), as
    is each run of words still clashing with it (a plural, another spelling) with its article."""
    text = sentence
    while (stripped := _PARENS.sub("", text)) != text:
        text = stripped
    for name in dict.fromkeys((title, base_title(title))):  # longest first, no duplicates
        phrase = rf"(?<!\w)(?:(?:the|a|an)\s+)?{re.escape(name)}(?P<s>['’]s)?(?!\w)"
        text = re.sub(phrase, lambda m: "its" if m.group("s") else "it", text, flags=re.I)
    answer = answer_tokens(title)
    kept: list[str] = []
    in_run = False
    for chunk in text.split():
        core = chunk.rstrip(".,;:!?" + _QUOTES)
        punct = chunk[len(core) :].strip(_QUOTES)  # the comma or stop the word carried
        if not any(clashes(t, answer) for t in tokens(core)):
            kept.append(chunk)
            in_run = False
            continue
        if in_run:
            kept[-1] = kept[-1].rstrip(",;:.") + punct
            continue
        if kept and kept[-1].lower() in ("the", "a", "an"):
            kept.pop()
        kept.append("it" + punct)
        in_run = True
    text = re.sub(r"\s+([.,;:!?])", r"\1", " ".join(kept)).strip(" ,;:")
    return text[:1].upper() + text[1:]


def name_words(texts: Iterable[str]) -> frozenset[str]:
    """Words (lower-cased) ``texts`` capitalize mid-sentence over three times as often as not:
    names and their adjectives, whose capital a description keeps ("English theologian")."""
    lower: Counter[str] = Counter()
    upper: Counter[str] = Counter()
    for text in texts:
        lower.update(re.findall(r"\b[a-z]+\b", text))
        upper.update(w.lower() for w in re.findall(r"(?<=[a-z,;] )[A-Z][a-z]+\b", text))
    return frozenset(w for w, n in upper.items() if n > 3 * lower[w])


def describe(description: str, names: frozenset[str]) -> str:
    """The description as the middle of "Which … is it?": its first letter lower-cased unless
    the first word is a name or an acronym."""
    first = re.match(r"[^\W\d_]+", description)
    if first is None or first[0][1:] != first[0][1:].lower() or first[0].lower() in names:
        return description
    return description[:1].lower() + description[1:]


def article_question(
    title: str, description: str, extract: str | None, names: frozenset[str]
) -> tuple[str, tuple[str, ...]] | None:
    """(question, gold answers) for one article, or None when it would leak its title or say
    too little (a description under two words, a clue too short or long, an acronym title).
    ``names``: ``name_words`` of the corpus. ``extract`` None: the description is the only clue
    ("Which 1968 film by Stanley Kubrick is it?") and needs a word more."""
    description = description.strip().rstrip(".")
    least = MIN_DESCRIPTION_WORDS + (extract is None)
    if len(description.split()) < least or is_acronym(title):
        return None
    question = f"Which {describe(description, names)} is it?"
    if extract is not None:
        clue = hide_title(first_sentence(extract), title).rstrip(".!?")
        if not MIN_CLUE_WORDS <= len(clue.split()) <= MAX_CLUE_WORDS:
            return None
        question = f"{clue}. {question}"
    if leaks(question, title):
        return None
    return question, tuple(dict.fromkeys((title, base_title(title))))
