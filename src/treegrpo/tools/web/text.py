"""A web page's readable text, title and links, and the parts of it worth showing an agent: main
text from trafilatura (else the body's plain text), title and links from lxml. Why trafilatura,
and the selection rules: docs/tools.md, "Fetching pages" and "Reading a page".
"""

from __future__ import annotations

import copy
import logging
import math
import re
import threading
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from urllib.parse import urldefrag, urljoin, urlsplit

import lxml.html
import trafilatura
from lxml import etree

from treegrpo.retrieval.tokenizer import Tokenizer

log = logging.getLogger(__name__)
_local = threading.local()

GAP = "…"
"""The line shown between two passages that are not next to each other on the page."""

PASSAGE_CHARS = 600
"""A paragraph longer than this is cut into windows of whole sentences of about this size."""

_STOPWORDS = (
    "a an and are as at be but by for from has have he her his in is it its of on or she that "
    "the their they this to was were which who will with what when where why how it"
)
STOPWORDS = frozenset(_STOPWORDS.split())
"""Words too common to say whether a passage answers a goal."""

_WORD = re.compile(r"\w+", re.UNICODE)
_SENTENCE_END = re.compile(r"(?<=[.!?])[\"')\]]*\s+(?=[\"'(\[]?[A-Z0-9])")
_SPACE = re.compile(r"[ \t\r\f\v]+")
_BLOCKS = (
    "address article aside blockquote br dd div dl dt figcaption footer form h1 h2 h3 h4 h5 h6 "
    "header hr li main nav ol p pre section table td th tr ul"
)
_BLOCK_TAGS = frozenset(_BLOCKS.split())


@dataclass(frozen=True)
class Link:
    """A link of a page: its absolute target and its anchor text."""

    url: str
    text: str


@dataclass(frozen=True)
class Extracted:
    """What ``extract`` reads from a page's HTML."""

    title: str
    text: str  # the main text: paragraphs separated by newlines
    links: tuple[Link, ...]


def extract(html: str, url: str) -> Extracted:
    """Title, main text and links (absolute, against ``url``) of an HTML page; never raises."""
    root = _parse(html)
    if root is None or not "".join(root.xpath("//body//text()")).strip():  # nothing to read
        return Extracted(_title(root) if root is not None else "", "", ())
    title, links = _title(root), _links(root, url)
    # trafilatura gets a copy of the tree: it prunes the tree it reads, and parsing the text
    # again would log errors of its own for what lxml reads fine (fragments, stray bytes).
    text = _main_text(copy.deepcopy(root), url) or _body_text(root)
    return Extracted(title, text, links)


def _parse(html: str) -> lxml.html.HtmlElement | None:
    """The lxml tree (bytes in, so an XML encoding declaration does not stop the parser)."""
    parser = lxml.html.HTMLParser(encoding="utf-8")
    try:
        return lxml.html.document_fromstring(html.encode("utf-8", "replace"), parser=parser)
    except (etree.LxmlError, ValueError):  # an empty document
        return None


def _main_text(root: lxml.html.HtmlElement, url: str) -> str:
    # favor_precision: on a short page (a wiki lead) the default falls back to the whole body,
    # menus included and broken at every inline link; the precise mode keeps paragraphs whole.
    try:
        text = trafilatura.extract(
            root, url=url, include_comments=False, include_tables=True, favor_precision=True
        )
    except Exception:  # a bug on odd input must not lose the page: the fallback reads it
        log.debug("trafilatura failed on %s", url, exc_info=True)
        return ""
    return clean_lines(text or "")


def _title(root: lxml.html.HtmlElement) -> str:
    for path in ("//title", "//h1"):
        for node in root.xpath(path):
            title = " ".join(node.text_content().split())
            if title:
                return title
    return ""


def _links(root: lxml.html.HtmlElement, base: str) -> tuple[Link, ...]:
    """Each http(s) target once, with its first non-empty anchor text; links to the page itself
    (``#section``) and ``javascript:`` or ``mailto:`` targets are left out."""
    base_href = root.xpath("//base/@href")
    if base_href:
        base = urljoin(base, str(base_href[0]).strip())
    page = urldefrag(base)[0]
    seen: dict[str, str] = {}
    for a in root.xpath("//a[@href]"):
        target = urldefrag(urljoin(base, str(a.get("href")).strip()))[0]
        if urlsplit(target).scheme not in ("http", "https") or target == page:
            continue
        text = " ".join(a.text_content().split()) or str(a.get("title") or "").strip()
        if not seen.get(target):
            seen[target] = text
    return tuple(Link(u, t) for u, t in seen.items())


def _body_text(root: lxml.html.HtmlElement) -> str:
    """The body's text with a newline at each block element, scripts and styles dropped."""
    for node in root.xpath("//script|//style|//noscript|//template"):
        node.drop_tree()
    for node in root.iter():
        if isinstance(node.tag, str) and node.tag in _BLOCK_TAGS:
            node.tail = "\n" + (node.tail or "")
    bodies = root.xpath("//body")
    return clean_lines((bodies[0] if bodies else root).text_content())


def clean_lines(text: str) -> str:
    """Spaces collapsed within each line, empty lines dropped."""
    lines = (_SPACE.sub(" ", line).strip() for line in text.splitlines())
    return "\n".join(line for line in lines if line)


def sentences(paragraph: str) -> list[str]:
    """A paragraph cut after ``.``, ``!`` or ``?`` followed by a capital or a digit (a simple
    rule: an abbreviation such as "Dr. Smith" is cut too, which costs only a short window)."""
    return [s for s in _SENTENCE_END.split(paragraph.strip()) if s]


def passages(text: str, size: int = PASSAGE_CHARS) -> list[str]:
    """The text's paragraphs, in order; one longer than ``size`` becomes consecutive windows of
    whole sentences of at most ``size`` characters (a longer sentence is a window alone)."""
    out: list[str] = []
    for paragraph in text.splitlines():
        paragraph = paragraph.strip()
        if len(paragraph) <= size:
            out.extend([paragraph] if paragraph else [])
            continue
        window = ""
        for sentence in sentences(paragraph):
            if window and len(window) + 1 + len(sentence) > size:
                out.append(window)
                window = sentence
            else:
                window = f"{window} {sentence}" if window else sentence
        if window:
            out.append(window)
    return out


def terms(text: str) -> list[str]:
    """The retrievers' terms (``retrieval.tokenizer``: "prizes" meets "prize") less ``STOPWORDS``.
    One tokenizer per thread: a stemmer is not thread-safe."""
    tokenizer = getattr(_local, "tokenizer", None)
    if tokenizer is None:
        tokenizer = _local.tokenizer = Tokenizer(stemmer="auto", stopwords=True)
    return [w for w in tokenizer(text) if w not in STOPWORDS]


def bm25_scores(query: str, docs: Sequence[str], k1: float = 1.2, b: float = 0.75) -> list[float]:
    """Okapi BM25 of each doc for ``query``, the docs being the whole collection:

    score(d) = Σ_{t ∈ q} idf(t) · f(t,d)·(k1+1) / (f(t,d) + k1·(1 − b + b·|d|/avgdl)),
    idf(t) = ln(1 + (N − n(t) + 0.5) / (n(t) + 0.5)),

    with f the term's count in the doc, n(t) the number of docs holding it, N the number of
    docs (Robertson and Zaragoza 2009; the +1 inside the log keeps idf positive, as Lucene does).
    A query word counts once however often it is repeated."""
    query_terms = set(terms(query))
    counts = [Counter(terms(d)) for d in docs]
    if not query_terms or not counts:
        return [0.0] * len(docs)
    n_docs = len(counts)
    avgdl = max(sum(sum(c.values()) for c in counts) / n_docs, 1.0)
    n = {t: sum(1 for c in counts if t in c) for t in query_terms}
    idf = {t: math.log(1 + (n_docs - n[t] + 0.5) / (n[t] + 0.5)) for t in query_terms}
    scores = []
    for c in counts:
        norm = k1 * (1 - b + b * sum(c.values()) / avgdl)
        scores.append(sum(idf[t] * c[t] * (k1 + 1) / (c[t] + norm) for t in query_terms if c[t]))
    return scores


def cut(text: str, limit: int) -> str:
    """``text`` in at most ``limit`` characters: cut at a word boundary with ``…`` when longer."""
    if len(text) <= limit:
        return text
    if limit <= 1:
        return text[:limit] if limit > 0 else ""
    head = text[: limit - 1]
    space = head.rfind(" ")
    if space > limit // 2:
        head = head[:space]
    return head.rstrip() + "…"


def select_passages(text: str, goal: str | None, max_chars: int) -> str:
    """The passages of ``text`` best matching ``goal`` (BM25, ties to the earlier), taken best first
    while they fit in ``max_chars`` (a best one too long for what is left is cut), shown in page
    order, a line each, ``…`` where text was skipped; no goal or no match: the beginning."""
    if max_chars <= 0:
        return ""
    parts = passages(text)
    scores = bm25_scores(goal or "", parts)
    if not any(s > 0 for s in scores):
        return cut("\n".join(parts), max_chars)
    ranked = sorted((i for i in range(len(parts)) if scores[i] > 0), key=lambda i: -scores[i])
    chosen: dict[int, str] = {}
    for i in ranked:
        trial = {**chosen, i: parts[i]}
        room = max_chars - len(_join(trial))
        if room >= 0:
            chosen = trial
        elif not chosen:  # the best passage alone is too long: show its start
            chosen = {i: cut(parts[i], len(parts[i]) + room)}
            break
    return _join(chosen)


def _join(chosen: dict[int, str]) -> str:
    """Passages in page order, ``GAP`` lines between those that are not adjacent."""
    lines: list[str] = []
    for i in sorted(chosen):
        if lines and i - 1 not in chosen:
            lines.append(GAP)
        lines.append(chosen[i])
    return "\n".join(lines)


def find_sentences(text: str, query: str, context: int = 1) -> list[str]:
    """The sentences of ``text`` that contain ``query`` (case and spacing ignored), each with
    ``context`` sentences either side from the same paragraph, overlapping spans merged, in page
    order. When the phrase is nowhere, the sentences that contain all of its words instead."""
    phrase = " ".join(query.lower().split())
    if not phrase:
        return []
    words = set(_WORD.findall(phrase))
    found = _matching(text, context, lambda s: phrase in " ".join(s.lower().split()))
    if not found and words:
        found = _matching(text, context, lambda s: words <= set(_WORD.findall(s.lower())))
    return found


def _matching(text: str, context: int, matches: Callable[[str], bool]) -> list[str]:
    """Per paragraph, the spans of sentences around those that ``matches``, joined."""
    found: list[str] = []
    for paragraph in text.splitlines():
        sents = sentences(paragraph)
        spans: list[list[int]] = []
        for i, sentence in enumerate(sents):
            if not matches(sentence):
                continue
            lo, hi = max(0, i - context), min(len(sents), i + context + 1)
            if spans and lo <= spans[-1][1]:
                spans[-1][1] = hi
            else:
                spans.append([lo, hi])
        found.extend(" ".join(sents[lo:hi]) for lo, hi in spans)
    return found
