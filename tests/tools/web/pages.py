"""A small website for the web tools' tests, served on loopback by ``conftest.site``.

Articles with menus and footers, pages that link to each other, a redirect and a redirect loop,
errors (404, 500), a page over the fetcher's byte limit (streamed, and with its length
announced), binary content, a slow answer and a slow drip, plain text, a Latin-1 page; and search
APIs shaped like SearXNG's and like a generic JSON service. ``Stats`` counts the requests.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from fastapi import FastAPI, Request, Response
from fastapi.responses import (
    HTMLResponse,
    JSONResponse,
    PlainTextResponse,
    RedirectResponse,
    StreamingResponse,
)

NAV = """<header><nav><a href="/">Home</a> | <a href="/about">About this wiki</a> |
<a href="/donate">Donate</a> | <a href="mailto:editor@example.org">Contact</a></nav></header>"""
FOOTER = """<footer><p>Copyright 2026 Example Wiki Foundation. All rights reserved.</p>
<p><a href="/privacy">Privacy policy</a> | <a href="/terms">Terms of use</a></p></footer>"""

CURIE = [
    "Marie Curie was a Polish and naturalised-French physicist and chemist who conducted "
    "pioneering research on radioactivity.",
    'She was born in <a href="/warsaw">Warsaw</a>, then part of the Russian Empire, on 7 November '
    "1867, the youngest of five children of well-known teachers.",
    "In 1891 she moved to Paris to study physics and mathematics at the Sorbonne, where she met "
    "Pierre Curie, a professor of physics, whom she married in 1895.",
    'She shared the 1903 <a href="/nobel">Nobel Prize in Physics</a> with Pierre Curie and Henri '
    "Becquerel. In 1911 she won the Nobel Prize in Chemistry for the discovery of polonium and "
    "radium. She is the only person to win Nobel Prizes in two scientific fields.",
    "During the First World War she developed mobile radiography units to provide X-ray services "
    'to field hospitals. <a href="https://en.wikipedia.org/wiki/Radiography">Radiography</a> '
    "saved many lives.",
    "She died in 1934 at the sanatorium of Passy, in Haute-Savoie, from aplastic anaemia likely "
    "caused by her long exposure to radiation.",
]


def article(title: str, paragraphs: list[str]) -> str:
    body = "\n".join(f"<p>{p}</p>" for p in paragraphs)
    return (
        f"<!DOCTYPE html><html><head><title>{title} - Example Wiki</title></head><body>{NAV}"
        f'<main><article><h1>{title}</h1><a href="#life">Jump to life</a>{body}</article></main>'
        f"{FOOTER}</body></html>"
    )


@dataclass
class Stats:
    """What the site saw: requests per path, the most requests in flight at once, and the
    search requests' parameters, bodies and headers."""

    hits: Counter[str] = field(default_factory=Counter)
    in_flight: int = 0
    most_in_flight: int = 0
    searches: list[dict[str, Any]] = field(default_factory=list)


def results(base: str, query: str) -> list[dict[str, str]]:
    """Three hits pointing at the site's own pages (none for "nothing")."""
    if query == "nothing":
        return []
    pages = [("Marie Curie", "curie"), ("Nobel Prize in Physics", "nobel"), ("Warsaw", "warsaw")]
    return [{"title": t, "url": f"{base}{p}", "content": f"{t}: about {query}."} for t, p in pages]


def create_site(stats: Stats) -> FastAPI:
    app = FastAPI()

    @app.middleware("http")
    async def count(request: Request, call_next: Callable[[Request], Awaitable[Any]]) -> Any:
        stats.hits[request.url.path] += 1
        return await call_next(request)

    @app.get("/curie")
    def curie() -> HTMLResponse:
        return HTMLResponse(article("Marie Curie", CURIE))

    @app.get("/nobel")
    def nobel() -> HTMLResponse:
        text = [
            "The Nobel Prize in Physics is awarded yearly by the Royal Swedish Academy of "
            "Sciences. It was first awarded in 1901 to Wilhelm Röntgen.",
            'Laureates include <a href="/curie">Marie Curie</a>, who won it in 1903.',
        ]
        return HTMLResponse(article("Nobel Prize in Physics", text))

    @app.get("/warsaw")
    def warsaw() -> HTMLResponse:
        return HTMLResponse("<html><body>Warsaw is the capital of Poland.</body></html>")

    @app.get("/redirect")
    def redirect() -> RedirectResponse:
        return RedirectResponse("/curie", status_code=302)

    @app.get("/loop")
    def loop() -> RedirectResponse:
        return RedirectResponse("/loop", status_code=302)

    @app.get("/missing")
    def missing() -> HTMLResponse:
        return HTMLResponse("<h1>Not here</h1>", status_code=404)

    @app.get("/error")
    def error() -> PlainTextResponse:
        return PlainTextResponse("boom", status_code=500)

    @app.get("/huge")
    def huge() -> StreamingResponse:  # 3 MB, streamed without a length
        def chunks() -> Any:
            yield b"<html><head><title>Huge</title></head><body>"
            for start in range(0, 30_000, 1000):
                yield "".join(
                    f"<p>Paragraph {i} of a very long page about nothing much.</p>\n"
                    for i in range(start, start + 1000)
                ).encode()
            yield b"</body></html>"

        return StreamingResponse(chunks(), media_type="text/html")

    @app.get("/huge-sized")
    def huge_sized() -> HTMLResponse:
        return HTMLResponse("<html><body>" + "<p>x</p>" * 400_000 + "</body></html>")

    @app.get("/pdf")
    def pdf() -> Response:
        body = b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n" + b"0" * 5000
        return Response(body, media_type="application/pdf")

    @app.get("/png")
    def png() -> Response:
        return Response(b"\x89PNG\r\n\x1a\n" + b"\x00" * 100, media_type="image/png")

    @app.get("/octet")
    def octet() -> Response:
        return Response(b"\x00\x01\x02" * 100, media_type="application/octet-stream")

    @app.get("/untyped")
    def untyped() -> Response:
        return Response(b"\x00\x01\x02binary" * 100)

    @app.get("/slow")
    async def slow() -> HTMLResponse:
        await asyncio.sleep(2.0)
        return HTMLResponse("<p>late</p>")

    @app.get("/drip")
    def drip() -> StreamingResponse:
        async def chunks() -> AsyncIterator[bytes]:
            yield b"<html><body>"
            for _ in range(40):
                await asyncio.sleep(0.1)
                yield b"<p>drop</p>"

        return StreamingResponse(chunks(), media_type="text/html")

    @app.get("/plain")
    def plain() -> PlainTextResponse:
        return PlainTextResponse("Line one of the notes.\n\n  Line   two, with spaces.\n")

    @app.get("/latin1")
    def latin1() -> Response:
        page = "<html><head><title>Café</title></head><body><p>Un café crème à Paris.</p></body>"
        return Response(page.encode("latin-1"), media_type="text/html; charset=iso-8859-1")

    @app.get("/wait/{i}")
    async def wait(i: int) -> HTMLResponse:
        stats.in_flight += 1
        stats.most_in_flight = max(stats.most_in_flight, stats.in_flight)
        await asyncio.sleep(0.3)
        stats.in_flight -= 1
        return HTMLResponse(f"<html><head><title>Page {i}</title></head><body>{i}</body></html>")

    @app.get("/searxng/search")
    def searxng(request: Request) -> JSONResponse:
        params = dict(request.query_params)
        stats.searches.append(params)
        if params.get("format") != "json":
            return JSONResponse({"error": "format"}, status_code=403)
        query = params.get("q", "")
        hits = results(str(request.base_url), query)
        hits.append({"title": "No URL", "content": "skipped"})  # a result without a URL
        return JSONResponse({"query": query, "results": hits, "unresponsive_engines": []})

    @app.get("/searxng-off/search")
    def searxng_off() -> PlainTextResponse:
        return PlainTextResponse("Forbidden", status_code=403)

    @app.get("/api/search")
    def api_get(request: Request) -> JSONResponse:
        params = dict(request.query_params)
        stats.searches.append(params)
        hits = results(str(request.base_url), params.get("q", ""))[: int(params.get("n", 10))]
        items = [
            {"name": h["title"], "link": h["url"], "description": f"<b>{h['title']}</b> &amp; co"}
            for h in hits
        ]
        return JSONResponse({"data": {"items": items, "total": len(items)}})

    @app.post("/api/search")
    async def api_post(request: Request) -> JSONResponse:
        body = await request.json()
        stats.searches.append({**body, "x-key": request.headers.get("x-key")})
        if request.headers.get("x-key") != "secret":
            return JSONResponse({"error": "unauthorized"}, status_code=401)
        hits = results(str(request.base_url), body["query"])[: body.get("k", 10)]
        return JSONResponse({"responses": [{"hits": hits}]})

    @app.get("/api/broken")
    def broken() -> PlainTextResponse:
        return PlainTextResponse("<html>not json</html>")

    @app.get("/api/wrong-shape")
    def wrong_shape() -> JSONResponse:
        return JSONResponse({"data": "nothing"})

    @app.get("/api/flaky")
    def flaky() -> PlainTextResponse:
        return PlainTextResponse("overloaded", status_code=503)

    return app
