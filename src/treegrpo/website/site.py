"""An offline website for web agents (``treegrpo serve-web``): a home page, a page per article
linking the articles its lead mentions (rendered once, kept), micro-batched BM25 search in HTML
or SearXNG's JSON, and ``/healthz``. Endpoints and limits: docs/data.md, "Web questions".
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

import orjson
from fastapi import FastAPI, Query, Request
from fastapi.responses import JSONResponse, Response
from starlette.exceptions import HTTPException as StarletteHTTPException

from treegrpo.retrieval.batcher import MicroBatcher
from treegrpo.retrieval.bm25 import BM25Retriever
from treegrpo.tools.web.search import SearchHit
from treegrpo.website.corpus import (
    LinkIndex,
    WebArticle,
    first_sentence,
    site_passages,
    slug,
    slug_key,
)
from treegrpo.website.html import article_page, home_page, not_found_page, results_page

log = logging.getLogger(__name__)

RESULTS_PER_PAGE = 10
"""Search results on one page (SearXNG shows about ten)."""
MAX_QUERY_CHARS = 512
"""Default longest query: a search box query, not a paragraph; it bounds one search's cost."""
MAX_RESULTS = 100
"""Default most results over all pages of one query (``pageno`` past them gives none)."""
FEATURED = 20
"""Articles linked from the home page: the most linked-to ones."""
HTML = "text/html; charset=utf-8"


class Site:
    """The site's content, built once: the articles (search ids are positions), their links, the
    search index (cache root ``cache_dir``; ``use_cache`` False: in memory, nothing written)."""

    def __init__(
        self,
        articles: Sequence[WebArticle],
        *,
        cache_dir: str | Path | None = None,
        use_cache: bool = True,
    ) -> None:
        if not articles:
            raise ValueError("a site needs at least one article")
        start = time.perf_counter()
        self.articles = list(articles)
        self.by_key: dict[str, int] = {}
        for i, a in enumerate(self.articles):
            self.by_key.setdefault(slug_key(a.title), i)
        index = LinkIndex(a.title for a in self.articles)
        self.links = [index.links(a.text, a.title) for a in self.articles]
        self.links_s = time.perf_counter() - start
        self.retriever = BM25Retriever(
            site_passages(self.articles), cache_dir=cache_dir, use_cache=use_cache
        )
        self.startup_s = time.perf_counter() - start
        self._pages: dict[int, bytes] = {}
        inbound = Counter(link.title for links in self.links for link in links)
        self.featured = sorted(inbound, key=lambda t: (-inbound[t], t))[:FEATURED]
        log.info(
            "site of %d articles, %d links (%.2f s), index ready after %.2f s",
            len(self.articles),
            self.n_links,
            self.links_s,
            self.startup_s,
        )

    @property
    def n_links(self) -> int:
        """Links on all pages together."""
        return sum(map(len, self.links))

    @property
    def pages_rendered(self) -> int:
        """Pages rendered so far (each once, then kept)."""
        return len(self._pages)

    def find(self, path: str) -> int | None:
        """The article whose page is ``/wiki/<path>`` (``path`` decoded), or None."""
        return self.by_key.get(slug_key(path))

    def page(self, i: int) -> bytes:
        """Article ``i``'s page, rendered on first use and kept."""
        if i not in self._pages:
            self._pages[i] = article_page(self.articles[i], self.links[i]).encode("utf-8")
        return self._pages[i]

    def hit(self, i: int, base_url: str) -> SearchHit:
        """Article ``i`` as a search result with an absolute URL on ``base_url``."""
        a = self.articles[i]
        url = f"{base_url.rstrip('/')}/wiki/{slug(a.title)}"
        return SearchHit(a.title, url, first_sentence(a.text))


def create_site_app(
    site: Site,
    *,
    max_query_chars: int = MAX_QUERY_CHARS,
    max_results: int = MAX_RESULTS,
    max_batch: int = 64,
    batch_wait_ms: float = 1.0,
) -> FastAPI:
    """The app serving ``site``: a query over ``max_query_chars`` is a 422; ``max_results``: most
    results of one query, all pages; ``max_batch``, ``batch_wait_ms``: the search batcher's."""
    if max_query_chars < 1 or max_results < 1:
        raise ValueError(f"limits must be >= 1, got {max_query_chars=}, {max_results=}")
    wait_s = batch_wait_ms / 1e3
    batcher = MicroBatcher(site.retriever.search, max_batch=max_batch, max_wait_s=wait_s)
    home = home_page(len(site.articles), site.featured).encode("utf-8")
    max_pages = -(-max_results // RESULTS_PER_PAGE)
    app = FastAPI(
        title="treegrpo offline web", lifespan=batcher.lifespan, docs_url=None, redoc_url=None
    )
    app.add_exception_handler(StarletteHTTPException, _not_found)

    @app.get("/")
    async def index() -> Response:
        """The home page."""
        return Response(home, media_type=HTML)

    @app.get("/wiki/{path:path}")
    async def wiki(path: str) -> Response:
        """One article's page, or a 404 page."""
        i = site.find(path)
        if i is None:
            return Response(not_found_page(f"/wiki/{path}"), 404, media_type=HTML)
        return Response(site.page(i), media_type=HTML)

    @app.get("/search")
    async def search(
        request: Request,
        q: str = "",
        format: Literal["html", "json"] = "html",
        pageno: int = Query(1, ge=1),
    ) -> Response:
        """Search results as HTML, or with ``format=json`` as SearXNG's JSON."""
        query = " ".join(q.split())
        if len(q) > max_query_chars:
            detail = f"query is {len(q)} characters long, over the limit of {max_query_chars}"
            log.warning("refused a search: %s", detail)
            return JSONResponse({"detail": detail}, 422)
        hits: list[SearchHit] = []
        if query and pageno <= max_pages:
            k = min(pageno * RESULTS_PER_PAGE, max_results)
            try:
                (found,) = await batcher.search([query], k)
            except Exception as exc:  # the index failed: say so, do not hang the client
                log.exception("search failed")
                return JSONResponse({"detail": f"search failed: {type(exc).__name__}"}, 500)
            base = str(request.base_url)
            hits = [site.hit(int(p.id), base) for p in found[(pageno - 1) * RESULTS_PER_PAGE :]]
        if format == "json":
            return Response(orjson.dumps(searxng_json(query, hits)), media_type="application/json")
        return Response(results_page(query, hits, pageno).encode("utf-8"), media_type=HTML)

    @app.get("/healthz")
    async def healthz() -> dict[str, Any]:
        """Liveness, the site's size and start-up time, searches served."""
        return {
            "status": "ok",
            "articles": len(site.articles),
            "links": site.n_links,
            "startup_s": round(site.startup_s, 3),
            "pages_rendered": site.pages_rendered,
            "searches": batcher.queries,
            "search_batches": batcher.batches,
        }

    return app


async def _not_found(request: Request, exc: Exception) -> Response:
    """A 404 as the site's HTML page; other HTTP errors as FastAPI answers them."""
    assert isinstance(exc, StarletteHTTPException)
    if exc.status_code == 404:
        return Response(not_found_page(request.url.path), 404, media_type=HTML)
    return JSONResponse({"detail": exc.detail}, exc.status_code, headers=exc.headers)


def searxng_json(query: str, hits: Sequence[SearchHit]) -> dict[str, Any]:
    """A SearXNG ``format=json`` answer: the fields its clients read, results in rank order."""
    return {
        "query": query,
        "number_of_results": len(hits),
        "results": [
            {
                "title": h.title,
                "url": h.url,
                "content": h.snippet,
                "engine": "offline-wiki",
                "engines": ["offline-wiki"],
                "positions": [rank],
                "score": 1.0 / rank,
                "category": "general",
            }
            for rank, h in enumerate(hits, start=1)
        ],
        "answers": [],
        "corrections": [],
        "infoboxes": [],
        "suggestions": [],
        "unresponsive_engines": [],
    }
