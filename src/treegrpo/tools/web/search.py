"""Web search for agents: search-engine clients (``SearxngSearch``, ``JsonSearch``) and the
``search`` tool that shows their hits as numbered entries, so an agent can name one
(``<visit> 2 </visit>``). Parameters, retries, failures and the observation's layout:
docs/tools.md, "Searching".
"""

from __future__ import annotations

import html
import re
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Protocol

import httpx

from treegrpo.retrieval.base import ToolFailed
from treegrpo.retrieval.http_client import send_retrying
from treegrpo.tools.registry import BadArgument, Call
from treegrpo.tools.web.reopen import Reopens
from treegrpo.tools.web.text import cut

_TAG = re.compile(r"<[^>]{0,200}>")


@dataclass(frozen=True)
class SearchHit:
    """One search result: the page's title, its URL and the engine's snippet of it."""

    title: str
    url: str
    snippet: str = ""


class WebSearch(Protocol):
    """Anything that answers a batch of queries with ranked hits."""

    def search(self, queries: Sequence[str], topk: int) -> list[list[SearchHit]]:
        """For each query in order, at most ``topk`` hits, best first; raise ``ToolFailed``
        when the backend cannot answer (``results``: each query's hits, None where it failed)."""
        ...


class SearchBackendError(ToolFailed):
    """The search backend could not be reached or answered with an error."""


class HttpSearch(Reopens):
    """What both clients share: the HTTP client, retries, the thread pool, the batch's errors;
    pickles as its settings (``reopen``). A subclass turns a query into a request (``_request``) and
    the answer into hits (``_hits``)."""

    def __init__(
        self,
        url: str,
        timeout: float = 10.0,
        retries: int = 2,
        backoff: float = 0.5,
        headers: Mapping[str, str] | None = None,
        workers: int = 8,
    ) -> None:
        if httpx.URL(url).scheme not in ("http", "https"):
            raise ValueError(f"search URL must be http(s)://…, got {url!r}")
        if retries < 0 or backoff < 0 or timeout <= 0 or workers < 1:
            raise ValueError("need retries >= 0, backoff >= 0, timeout > 0, workers >= 1")
        self.url, self.retries, self.backoff = url, retries, backoff
        self._client = httpx.Client(timeout=timeout, headers=dict(headers or {}))
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="search")

    def search(self, queries: Sequence[str], topk: int) -> list[list[SearchHit]]:
        """Each query's hits (at most ``topk``), the queries sent concurrently."""
        if topk < 1:
            raise ValueError(f"topk must be >= 1, got {topk}")
        answers = list(self._pool.map(lambda q: self._one(q, topk), queries))
        failed = [i for i, a in enumerate(answers) if isinstance(a, str)]
        if not failed:
            return [a for a in answers if not isinstance(a, str)]
        message = f"{len(failed)} of {len(answers)} searches failed; {answers[failed[0]]}"
        if len(failed) == len(answers):
            raise SearchBackendError(message)
        raise SearchBackendError(message, [None if isinstance(a, str) else a for a in answers])

    def _one(self, query: str, topk: int) -> list[SearchHit] | str:
        """The query's hits, or what went wrong."""
        try:
            request = self._request(query, topk)
            response = send_retrying(
                lambda: self._client.send(request),
                f"search {self.url}",
                self.retries,
                self.backoff,
                SearchBackendError,
            )
        except SearchBackendError as exc:
            return str(exc)
        if response.status_code != 200:
            return f"search {self.url} answered HTTP {response.status_code}{self._hint(response)}"
        try:
            return self._hits(response.json())[:topk]
        except (ValueError, TypeError, KeyError, IndexError, AttributeError) as exc:
            why = exc.args[0] if isinstance(exc, KeyError) and exc.args else exc  # unquoted
            return f"search {self.url}: unexpected answer ({why}): {_excerpt(response.text)}"

    def _hint(self, response: httpx.Response) -> str:
        return f": {_excerpt(response.text)}"

    def _request(self, query: str, topk: int) -> httpx.Request:
        raise NotImplementedError

    def _hits(self, answer: Any) -> list[SearchHit]:
        raise NotImplementedError


class SearxngSearch(HttpSearch):
    """A SearXNG instance's JSON search API (docs/tools.md, "Searching"). base_url: the instance
    (``/search`` appended unless there); categories, engines: comma-separated (engines override the
    categories'); language: a code (``en``, ``de-CH``, ``all``); time_range: ``day``, ``month`` or
    ``year``; safesearch: 0, 1 or 2 (off to strict); the others as ``HttpSearch``."""

    def __init__(
        self,
        base_url: str,
        categories: str | None = None,
        engines: str | None = None,
        language: str | None = None,
        time_range: str | None = None,
        safesearch: int | None = None,
        **http: Any,
    ) -> None:
        base = base_url.rstrip("/")
        super().__init__(base if base.endswith("/search") else f"{base}/search", **http)
        options = {
            "categories": categories,
            "engines": engines,
            "language": language,
            "time_range": time_range,
            "safesearch": safesearch,
        }
        self.params = {k: str(v) for k, v in options.items() if v is not None}

    def _request(self, query: str, topk: int) -> httpx.Request:
        # SearXNG has no result-count parameter: a page (about 20 results) is cut to topk.
        params = {"q": query, "format": "json", **self.params}
        return self._client.build_request("GET", self.url, params=params)

    def _hits(self, answer: Any) -> list[SearchHit]:
        return [
            hit
            for r in answer["results"]
            if (hit := _hit(r.get("title"), r.get("url"), r.get("content")))
        ]

    def _hint(self, response: httpx.Response) -> str:
        if response.status_code == 403:
            return (
                ": the JSON format is not enabled on this instance "
                "(settings.yml: search: formats: [html, json])"
            )
        return super()._hint(response)


class JsonSearch(HttpSearch):
    """A JSON search API described by its fields. method: "GET" (URL parameters) or "POST" (a JSON
    body); query_param: the query's parameter or field; fields: the dotted path to the result list
    (a number picks an element: ``responses.0.hits``), then each result's title, URL and snippet
    fields, dotted too (HTML tags dropped), as ``--data.json-fields`` gives them; topk_param: the
    parameter asking for a number of results, if any (hits are cut to ``topk`` anyway); params:
    fixed parameters sent every time (an API key); the others as ``HttpSearch``."""

    def __init__(
        self,
        url: str,
        method: str = "GET",
        query_param: str = "q",
        fields: Sequence[str] = ("results", "title", "url", "snippet"),
        topk_param: str | None = None,
        params: Mapping[str, Any] | None = None,
        **http: Any,
    ) -> None:
        super().__init__(url, **http)
        self.method = method.upper()
        if self.method not in ("GET", "POST"):
            raise ValueError(f'method must be "GET" or "POST", got {method!r}')
        self.query_param, self.topk_param = query_param, topk_param
        self.results_path, title, link, snippet = fields  # ValueError unless four
        self.fields = (title, link, snippet)
        self.params = dict(params or {})

    def _request(self, query: str, topk: int) -> httpx.Request:
        values: dict[str, Any] = {**self.params, self.query_param: query}
        if self.topk_param:
            values[self.topk_param] = topk
        if self.method == "POST":
            return self._client.build_request("POST", self.url, json=values)
        return self._client.build_request("GET", self.url, params=values)

    def _hits(self, answer: Any) -> list[SearchHit]:
        results = _at(answer, self.results_path)
        if not isinstance(results, list):
            raise TypeError(f"{self.results_path!r} is not a list")
        title, url, snippet = self.fields
        return [
            hit
            for r in results
            if (hit := _hit(_at(r, title, None), _at(r, url, None), _at(r, snippet, None)))
        ]


_MISSING = object()


def _at(value: Any, path: str, default: Any = _MISSING) -> Any:
    """``value`` followed along a dotted path (numbers index lists); ``default`` when a step is
    missing, or ``KeyError`` when there is no default."""
    for step in path.split(".") if path else ():
        try:
            value = value[int(step)] if isinstance(value, list) else value[step]
        except (KeyError, IndexError, TypeError, ValueError):
            if default is _MISSING:
                raise KeyError(f"no {path!r} in the answer") from None
            return default
    return value


def _hit(title: Any, url: Any, snippet: Any) -> SearchHit | None:
    """A hit from raw fields; None without a URL (nothing to visit)."""
    if not isinstance(url, str) or not url.strip():
        return None
    return SearchHit(_plain(title), url.strip(), _plain(snippet))


def _plain(value: Any) -> str:
    """Text without HTML tags or entities, on one line."""
    return "" if value is None else " ".join(html.unescape(_TAG.sub("", str(value))).split())


def _excerpt(text: str, n: int = 200) -> str:
    return cut(" ".join(text.split()), n)


@dataclass(frozen=True)
class WebSearchTool:
    """The registry's ``search`` over the web: the top ``topk`` hits of a ``WebSearch`` as
    numbered entries (module docstring), snippets cut to ``snippet_chars``."""

    client: WebSearch
    topk: int = 5
    snippet_chars: int = 300
    max_query_chars: int = 500
    name: str = "search"
    usage: str = "query"
    description: str = (
        "searches the web; numbered results come back, each with a title, URL and snippet"
    )

    def parse(self, text: str) -> str:
        query = " ".join(text.split())
        if len(query) > self.max_query_chars:
            raise BadArgument(
                f"the query is {len(query)} characters long; write at most "
                f"{self.max_query_chars}, a few key words"
            )
        return query

    def call(self, calls: Sequence[Call]) -> list[list[SearchHit]]:
        return self.client.search([c.argument for c in calls], self.topk)

    def format(self, result: list[SearchHit]) -> str:
        if not result:
            return "No results."
        lines = []
        for i, hit in enumerate(result, start=1):
            lines += [f"[{i}] {cut(hit.title, 200) or '(no title)'}", hit.url]
            if hit.snippet:
                lines.append(cut(hit.snippet, self.snippet_chars))
        return "\n".join(lines)
