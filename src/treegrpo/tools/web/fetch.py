"""Fetching web pages for the ``visit`` tool: a ``Page``, or a ``Failure`` that says why not (never
``ToolFailed``: an unreachable site is a fact about that site). URLs come from a model, so a
fetcher reaches whatever its host can; give it a ``proxy`` that enforces an allow-list where that
matters. The rules and the reason for each: docs/tools.md, "Fetching pages".
"""

from __future__ import annotations

import codecs
import logging
import re
import threading
import time
from collections import OrderedDict
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Literal

import httpx

from treegrpo.tools.registry import Failure
from treegrpo.tools.web.hosts import host_mounts
from treegrpo.tools.web.reopen import Reopens
from treegrpo.tools.web.text import Link, clean_lines, extract

log = logging.getLogger(__name__)

HTML_TYPES = frozenset({"text/html", "application/xhtml+xml"})
TEXT_TYPES = frozenset({"application/json", "application/xml", "application/ld+json"})
"""Non-``text/*`` types shown as plain text (``text/*`` other than HTML always is)."""

USER_AGENT = "treegrpo-web/0.1 (research agent)"

_META_CHARSET = re.compile(rb"""<meta[^>]+charset\s*=\s*["']?\s*([A-Za-z0-9_.:-]+)""", re.I)


@dataclass(frozen=True)
class Page:
    """A fetched page: the final URL (after redirects), title ("" if none), readable text (a line
    per paragraph), links, and whether the body was cut at the byte limit."""

    url: str
    title: str
    text: str
    links: tuple[Link, ...] = ()
    truncated: bool = False


class _Refused(Exception):
    """A page that will not be read; the message is the ``Failure``'s reason."""


class PageFetcher(Reopens):
    """Fetches pages (docs/tools.md, "Fetching pages"); pickles as its settings (``reopen``), so a
    Ray worker's copy opens its own connections. Timeouts in seconds: connect_timeout, read_timeout
    (each piece of the response), total_timeout (a whole page, redirects and body). max_bytes: body
    bytes read at most, after decompression; oversize: "truncate" keeps them as a page marked
    truncated, "refuse" fails; max_redirects; cache_size: the LRU's pages (0: none); workers: pages
    fetched at once; user_agent: the User-Agent header (some sites refuse clients without one);
    proxy: for every request (one enforcing an allow-list); hosts: names answered by a fixed address
    (``{"wiki.test": "127.0.0.1:41234"}``, ``tools.web.hosts``), pages keeping the name.

    Many arguments: one per limit of the fetcher, each with a default the web tools run on;
    callers name only those they change (a test, a benchmark, the local site's ``hosts``)."""

    def __init__(
        self,
        connect_timeout: float = 5.0,
        read_timeout: float = 10.0,
        total_timeout: float = 20.0,
        max_bytes: int = 2_000_000,
        oversize: Literal["truncate", "refuse"] = "truncate",
        max_redirects: int = 5,
        cache_size: int = 256,
        workers: int = 8,
        user_agent: str = USER_AGENT,
        proxy: str | None = None,
        hosts: dict[str, str] | None = None,
    ) -> None:
        if min(connect_timeout, read_timeout, total_timeout) <= 0 or max_bytes < 1:
            raise ValueError("timeouts must be > 0 and max_bytes >= 1")
        if oversize not in ("truncate", "refuse"):
            raise ValueError(f'oversize must be "truncate" or "refuse", got {oversize!r}')
        if max_redirects < 0 or cache_size < 0 or workers < 1:
            raise ValueError("need max_redirects >= 0, cache_size >= 0, workers >= 1")
        self.total_timeout, self.max_bytes, self.oversize = total_timeout, max_bytes, oversize
        self.cache_size = cache_size
        self._client = httpx.Client(
            timeout=httpx.Timeout(read_timeout, connect=connect_timeout),
            follow_redirects=True,
            max_redirects=max_redirects,
            headers={"User-Agent": user_agent, "Accept": "text/html, text/plain;q=0.9, */*;q=0.5"},
            limits=httpx.Limits(max_connections=2 * workers, max_keepalive_connections=workers),
            proxy=proxy,
            mounts=host_mounts(hosts),
        )
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="fetch")
        self._cache: OrderedDict[str, Page] = OrderedDict()
        self._lock = threading.Lock()

    def fetch_many(self, urls: Sequence[str]) -> list[Page | Failure]:
        """Each URL's page or failure, in order; the distinct URLs are fetched concurrently."""
        distinct = list(dict.fromkeys(urls))
        fetched = dict(zip(distinct, self._pool.map(self.fetch, distinct), strict=True))
        return [fetched[u] for u in urls]

    def fetch(self, url: str) -> Page | Failure:
        """The page at ``url`` (from the cache when it is there), or why it cannot be read."""
        key = _key(url)
        cached = self._cached(key)
        if cached is not None:
            return cached
        try:
            page = self._fetch(key)
        except _Refused as exc:
            return Failure(str(exc))
        except httpx.TooManyRedirects:
            return Failure(f"too many redirects: {url}")
        except httpx.TimeoutException:
            return Failure(f"timed out: {url}")
        except httpx.InvalidURL as exc:
            return Failure(f"invalid URL {url!r}: {exc}")
        except httpx.HTTPError as exc:  # refused, reset, DNS, protocol errors
            return Failure(f"could not connect to {url} ({type(exc).__name__}: {exc})")
        except Exception as exc:  # a page that breaks the reader must not break the batch
            log.warning("could not read %s", url, exc_info=True)
            return Failure(f"could not read {url} ({type(exc).__name__})")
        for k in dict.fromkeys((key, page.url)):
            self._store(k, page)
        return page

    def _cached(self, key: str) -> Page | None:
        with self._lock:
            page = self._cache.get(key)
            if page is not None:
                self._cache.move_to_end(key)
            return page

    def _store(self, key: str, page: Page) -> None:
        if not self.cache_size:
            return
        with self._lock:
            self._cache[key] = page
            self._cache.move_to_end(key)
            while len(self._cache) > self.cache_size:
                self._cache.popitem(last=False)

    def _fetch(self, url: str) -> Page:
        """Raises ``_Refused`` or an ``httpx.HTTPError`` where there is no page."""
        scheme = url.split(":", 1)[0].lower() if ":" in url else ""
        if scheme not in ("http", "https"):
            raise _Refused(f"not a web address (http:// or https://): {url!r}")
        deadline = time.monotonic() + self.total_timeout
        with self._client.stream("GET", url) as response:
            final = str(response.url)
            if response.status_code >= 400:
                reason = response.reason_phrase or "error"
                raise _Refused(f"HTTP {response.status_code} {reason}: {final}")
            kind = response.headers.get("content-type", "").split(";")[0].strip().lower()
            text = kind.startswith("text/") or kind in TEXT_TYPES or kind.endswith("+json")
            if kind and kind not in HTML_TYPES and not text:
                raise _Refused(f"binary content ({kind}), not shown: {final}")
            length = response.headers.get("content-length", "")
            size = int(length) if length.isdigit() else 0
            if self.oversize == "refuse" and size > self.max_bytes:
                raise _Refused(
                    f"too large ({size:,} bytes; the limit is {self.max_bytes:,}): {final}"
                )
            body, truncated = self._read(response, deadline, final)
            charset = response.charset_encoding
        if not kind:
            kind = _sniff(body)
            if kind == "binary":
                raise _Refused(f"binary content (no content type), not shown: {final}")
        text = _decode(body, charset, html=kind in HTML_TYPES)
        if kind in HTML_TYPES:
            found = extract(text, final)
            return Page(final, found.title, found.text, found.links, truncated)
        return Page(final, "", clean_lines(text), (), truncated)

    def _read(self, response: httpx.Response, deadline: float, url: str) -> tuple[bytes, bool]:
        """The body, up to ``max_bytes``, and whether there was more."""
        chunks: list[bytes] = []
        size = 0
        for chunk in response.iter_bytes():
            chunks.append(chunk)
            size += len(chunk)
            if size > self.max_bytes:
                if self.oversize == "refuse":
                    raise _Refused(f"too large (over {self.max_bytes:,} bytes): {url}")
                return b"".join(chunks)[: self.max_bytes], True
            if time.monotonic() > deadline:
                raise _Refused(f"timed out: {url} (still sending after {self.total_timeout} s)")
        return b"".join(chunks), False


def _key(url: str) -> str:
    """The URL as fetched and cached: stripped, without its ``#fragment``."""
    return url.strip().split("#", 1)[0]


def _sniff(body: bytes) -> str:
    """A content type for a body that came without one: HTML, plain text, or binary."""
    head = body[:2048]
    if b"\x00" in head:
        return "binary"
    if re.search(rb"<(!doctype html|html|head|body|p|div)[\s>]", head.lower()):
        return "text/html"
    return "text/plain"


def _decode(body: bytes, charset: str | None, html: bool) -> str:
    """Text by the header's charset, else ``<meta charset>``, else UTF-8; bad bytes replaced."""
    if not charset and html:
        meta = _META_CHARSET.search(body[:4096])
        charset = meta.group(1).decode("ascii") if meta else None
    try:
        codecs.lookup(charset or "utf-8")
    except LookupError:
        charset = None
    return body.decode(charset or "utf-8", errors="replace")
