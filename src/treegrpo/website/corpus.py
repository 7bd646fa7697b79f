"""What the offline website serves: its articles, their addresses, snippets and links. The site
and the web questions (``data.web_questions``) share these definitions, so a question's claim
("the answer is in the snippet", "A links to B") holds on the pages the server really sends.
The link rules: docs/data.md, "Web questions".
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

from treegrpo.retrieval.base import Passage
from treegrpo.retrieval.corpus import make_contents, read_corpus

MIN_TITLE_CHARS = 2
"""Shorter titles ("C", "X") are never linked: a single letter is a word too often."""

_WORD = re.compile(r"\w+")
_END = re.compile(r"[.!?][\"”’')]*\s+(?=[\"“(]?[A-Z0-9])")
_ABBREVIATIONS_TEXT = (
    "st mr mrs ms dr jr sr mt no vs ca c e.g i.e u.s u.k etc approx fl gen col lt sgt"
)
_ABBREVIATIONS = frozenset(_ABBREVIATIONS_TEXT.split())
_SAFE = "()_,'!:;*@$&+=-."
"""Characters a slug keeps as they are (Wikipedia's addresses keep these too)."""


@dataclass(frozen=True)
class WebArticle:
    """A page: ``text`` the lead (a paragraph a line), ``description`` a line under the title."""

    title: str
    text: str
    description: str = ""


@dataclass(frozen=True)
class Link:
    """A mention of another article's title in a lead: ``text[start:end] == title``."""

    start: int
    end: int
    title: str


def slug(title: str) -> str:
    """The path after ``/wiki/``: "HIV/AIDS" → "HIV%2FAIDS", "Ada Lovelace" → "Ada_Lovelace"."""
    return quote(title.replace(" ", "_"), safe=_SAFE)


def slug_key(path: str) -> str:
    """A page's key from its decoded path (the server decodes ``%2F``): underscores undone."""
    return path.replace("_", " ")


def first_sentence(text: str) -> str:
    """``text`` up to the first ".", "!" or "?" before a space and a capital or digit, initials
    and abbreviations skipped ("Arthur C. Clarke"): a search snippet, a title question's clue."""
    for m in _END.finditer(text):
        before = text[: m.start()].split()
        word = before[-1].lower().lstrip('"“(') if before else ""
        if (len(word) == 1 and word.isalpha()) or word in _ABBREVIATIONS:
            continue
        return text[: m.end()].strip()
    return text.strip()


def site_passages(articles: Sequence[WebArticle]) -> list[Passage]:
    """The index's passages (id: position), as ``treegrpo serve`` has them (``"Title"\\ntext``)."""
    return [Passage(str(i), make_contents(a.title, a.text)) for i, a in enumerate(articles)]


def read_site_corpus(path: str | Path) -> list[WebArticle]:
    """A Search-R1 jsonl corpus's articles (``"Title"\\ntext``; no quoted title: titled by id)."""
    out = []
    for p in read_corpus(path):
        head, _, rest = p.contents.partition("\n")
        if rest and len(head) >= 2 and head[0] == head[-1] == '"':
            out.append(WebArticle(head[1:-1], rest))
        else:
            out.append(WebArticle(p.id, p.contents))
    return out


class LinkIndex:
    """The titles by first word, so a lead costs a look-up per word and a ``startswith`` per
    candidate; titles under ``MIN_TITLE_CHARS`` or not opening with a word are never linked."""

    def __init__(self, titles: Iterable[str]) -> None:
        by_word: dict[str, list[str]] = defaultdict(list)
        for title in dict.fromkeys(titles):
            m = _WORD.match(title)
            if len(title) >= MIN_TITLE_CHARS and m is not None:
                by_word[m[0]].append(title)
        self._by_word = {w: sorted(ts, key=len, reverse=True) for w, ts in by_word.items()}

    def links(self, text: str, own: str = "") -> list[Link]:
        """The mentions in ``text``, in order; ``own`` (the page's title) is none, nor its parts."""
        out: list[Link] = []
        end = 0
        for m in _WORD.finditer(text):
            start = m.start()
            if start < end:
                continue
            for title in self._by_word.get(m[0], ()):
                stop = start + len(title)
                after = text[stop : stop + 1]  # a title ends where a word does
                if text.startswith(title, start) and not (after.isalnum() or after == "_"):
                    if title != own:  # the page's own name is no link, nor are its parts
                        out.append(Link(start, stop, title))
                    end = stop
                    break
        return out
