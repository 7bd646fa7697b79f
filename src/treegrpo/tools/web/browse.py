"""Browsing tools for the registry: ``visit`` opens a page, ``find`` searches the page last
opened. Bad arguments and unreadable pages are the call's ``Failure``, never an exception.
Arguments, observations, link ranking and budgets: docs/tools.md, "Reading a page".
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from urllib.parse import unquote, urlsplit

from treegrpo.tools.registry import BadArgument, Call, Failure
from treegrpo.tools.web.fetch import Page, PageFetcher
from treegrpo.tools.web.search import SearchHit
from treegrpo.tools.web.text import bm25_scores, cut, find_sentences, select_passages

_DOMAIN = re.compile(r"(?:www\.)?[\w-]+(?:\.[\w-]+)*\.[a-z]{2,}(?:[/?#]\S*)?", re.I)
_NUMBER = re.compile(r"\[?#?\s*(\d{1,4})\s*\]?\.?")
"""A result number as written, or as the search observation shows it: ``2``, ``[2]``, ``#2``."""
_URL_WORDS = re.compile(r"[/._\-?=&+%#:]+")

MIN_PASSAGE_CHARS = 200
"""Passage room kept in a visit's observation: links are left out before the text is."""


@dataclass(frozen=True)
class VisitArgument:
    """What to visit: a URL or the number of a result of the last search; and the goal."""

    target: str | int
    goal: str | None = None


@dataclass(frozen=True)
class Visit:
    """A visited page and the goal it was read for: the result ``find`` reads later."""

    page: Page
    goal: str | None = None


@dataclass(frozen=True)
class VisitTool:
    """The registry's ``visit`` (module docstring): pages from ``fetcher``, observations of at
    most ``max_chars`` characters listing at most ``max_links`` links."""

    fetcher: PageFetcher
    max_chars: int = 3000
    max_links: int = 5
    search_tool: str = "search"  # whose results the numbers name
    name: str = "visit"
    usage: str = "URL or result number [| goal]"
    description: str = (
        "opens a web page; its title, URL, the passages that match the goal (by default the "
        "last search's query) and related links come back"
    )

    def __post_init__(self) -> None:
        if self.max_chars < 2 * MIN_PASSAGE_CHARS or self.max_links < 0:
            raise ValueError(f"need max_chars >= {2 * MIN_PASSAGE_CHARS} and max_links >= 0")

    def parse(self, text: str) -> VisitArgument:
        target, bar, goal = text.partition("|")
        target, goal = target.strip(), " ".join(goal.split())
        if bar and not goal:
            raise BadArgument(
                f"nothing after '|': write <{self.name}> 2 | what to look for </{self.name}>"
            )
        number = _NUMBER.fullmatch(target)
        if number:
            if int(number.group(1)) < 1:
                raise BadArgument("search results are numbered from 1")
            return VisitArgument(int(number.group(1)), goal or None)
        if re.match(r"https?://\S+$", target, re.I):
            return VisitArgument(target, goal or None)
        if _DOMAIN.fullmatch(target):
            return VisitArgument(f"https://{target}", goal or None)
        raise BadArgument(
            f"{cut(target, 80)!r} is neither a URL nor a search result number: write "
            f"<{self.name}> https://… </{self.name}> or <{self.name}> 2 </{self.name}>"
        )

    def call(self, calls: Sequence[Call]) -> list[Visit | Failure]:
        targets = [self._resolve(c) for c in calls]
        urls = [t[0] for t in targets if not isinstance(t, Failure)]
        pages = iter(self.fetcher.fetch_many(urls))
        out: list[Visit | Failure] = []
        for t in targets:
            if isinstance(t, Failure):
                out.append(t)
                continue
            page = next(pages)
            out.append(page if isinstance(page, Failure) else Visit(page, t[1]))
        return out

    def _resolve(self, call: Call) -> tuple[str, str | None] | Failure:
        """The URL to fetch and the goal, or the ``Failure`` of a result that is not there."""
        argument: VisitArgument = call.argument
        search = call.last(self.search_tool)
        query = search.argument if search is not None and isinstance(search.argument, str) else None
        goal = argument.goal or query
        if isinstance(argument.target, str):
            return argument.target, goal
        n = argument.target
        if search is None:
            return Failure(
                f"there is no search result {n} yet: search first, or give a URL "
                f"(<{self.name}> https://… </{self.name}>)"
            )
        hits = list(search.result)
        if not all(isinstance(h, SearchHit) for h in hits):
            return Failure("the last search's results are not web pages: give a URL")
        if not hits:
            return Failure("the last search found nothing: search again, or give a URL")
        if n > len(hits):
            return Failure(
                f"there are {len(hits)} results: write a number from 1 to {len(hits)}, or a URL"
            )
        return hits[n - 1].url, goal

    def format(self, result: Visit) -> str:
        page = result.page
        short = self.max_chars // 5  # a title or URL never takes most of the room
        head = [f"Title: {cut(page.title, short)}"] if page.title else []
        head.append(f"URL: {cut(page.url, short)}")
        if page.truncated:
            head.append("(only the start of this long page was read)")
        header = "\n".join(head)
        room = self.max_chars - len(header) - 1
        body = select_passages(page.text, result.goal, room)
        links = self._links(page, result.goal, body)
        if links and len(body) + len(links) + 1 > room:  # select again in the room links leave
            rest = room - len(links) - 1
            fewer = select_passages(page.text, result.goal, max(rest, MIN_PASSAGE_CHARS))
            fewer_links = self._links(page, result.goal, fewer)
            if len(fewer) + len(fewer_links) + 1 <= room:
                body, links = fewer, fewer_links
            else:  # the text comes first
                links = ""
        body = body or "(the page has no text)"
        return cut("\n".join(part for part in (header, body, links) if part), self.max_chars)

    def _links(self, page: Page, goal: str | None, shown: str) -> str:
        """Up to ``max_links`` links: those that share words with the goal, best first, then
        those whose anchor text is in the ``shown`` passages, in their order there."""
        if not self.max_links or not page.links:
            return ""
        docs = [f"{link.text} {_slug(link.url)}" for link in page.links]
        scores = bm25_scores(goal or "", docs)
        by_goal = sorted((i for i, s in enumerate(scores) if s > 0), key=lambda i: -scores[i])
        # anchor texts of three characters or more that the shown passages hold
        links = enumerate(page.links)
        named = [i for i, a in links if scores[i] <= 0 and len(a.text) >= 3 and a.text in shown]
        named.sort(key=lambda i: shown.index(page.links[i].text))
        lines = [
            f"- {cut(page.links[i].text, 80) or '(no text)'}: {cut(page.links[i].url, 200)}"
            for i in (by_goal + named)[: self.max_links]
        ]
        return "\n".join(["Links:", *lines]) if lines else ""


def _slug(url: str) -> str:
    """The words of a URL's last path segment (``/wiki/Marie_Curie`` → "Marie Curie"): the part
    that names the page, where host and directories are common to most links of a page."""
    segments = [p for p in urlsplit(url).path.split("/") if p]
    return _URL_WORDS.sub(" ", unquote(segments[-1])) if segments else ""


@dataclass(frozen=True)
class FindResult:
    """What ``find`` found: the page, the words looked for, the matching text spans."""

    url: str
    query: str
    matches: tuple[str, ...]


@dataclass(frozen=True)
class FindTool:
    """The registry's ``find`` (module docstring): at most ``max_matches`` matches, each with
    ``context`` sentences either side, the observation within ``max_chars``."""

    max_chars: int = 1500
    max_matches: int = 10
    context: int = 1
    visit_tool: str = "visit"
    name: str = "find"
    usage: str = "words to look for"
    description: str = "looks for words in the last visited page; the sentences with them come back"

    def parse(self, text: str) -> str:
        query = " ".join(text.strip().strip("\"'“”").split())
        if not query:
            raise BadArgument(f"write the words to look for: <{self.name}> Nobel </{self.name}>")
        return query

    def call(self, calls: Sequence[Call]) -> list[FindResult | Failure]:
        tag = self.visit_tool
        first = Failure(
            f"no page visited yet: visit a page first (<{tag}> URL or result number </{tag}>)"
        )
        out: list[FindResult | Failure] = []
        for c in calls:
            visit = c.last(self.visit_tool)
            if visit is None or not isinstance(visit.result, Visit):
                out.append(first)
                continue
            page = visit.result.page
            matches = find_sentences(page.text, c.argument, self.context)
            out.append(FindResult(page.url, c.argument, tuple(matches)))
        return out

    def format(self, result: FindResult) -> str:
        if not result.matches:
            return f'No match for "{cut(result.query, 100)}" on {cut(result.url, 300)}.'
        n = len(result.matches)
        shown = result.matches[: self.max_matches]
        first = f" (the first {len(shown)} shown)" if len(shown) < n else ""
        head = f'{n} match{"es" if n > 1 else ""}{first} for "{cut(result.query, 100)}" on '
        lines = [head + f"{cut(result.url, 300)}:"]
        for i, match in enumerate(shown, start=1):
            line = f"[{i}] {match}"
            room = self.max_chars - len("\n".join(lines)) - 1
            if room < 40:
                break
            lines.append(cut(line, room))
        return cut("\n".join(lines), self.max_chars)
