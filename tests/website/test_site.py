"""The offline website (``website.site``) on a small corpus: pages, links, search as HTML and
as SearXNG JSON, snippets, limits, and many concurrent clients on a live loopback server."""

from __future__ import annotations

import asyncio
import functools
import importlib
import re
from collections.abc import Iterator
from html import unescape
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import httpx
import pytest
from fastapi.testclient import TestClient

from tests.live import LiveServer
from treegrpo import cli
from treegrpo.cli.options import ServeWebOptions
from treegrpo.retrieval.base import Passage
from treegrpo.retrieval.corpus import make_contents, write_corpus
from treegrpo.website.corpus import (
    LinkIndex,
    WebArticle,
    first_sentence,
    read_site_corpus,
    slug,
)
from treegrpo.website.site import (
    MAX_QUERY_CHARS,
    MAX_RESULTS,
    RESULTS_PER_PAGE,
    Site,
    create_site_app,
)

ARTICLES = [
    WebArticle(
        "New York City",
        "New York City is the most populous city in the United States. It lies in New York, "
        "at the mouth of the Hudson River.\nNew York City was called New Amsterdam until 1664.",
        "City in New York, United States",
    ),
    WebArticle(
        "New York",
        "New York is a state in the United States. Its largest city is New York City, and its "
        "capital is Albany. New Yorkers call it the Empire State.",
        "State of the United States",
    ),
    WebArticle("United States", "The United States is a country in North America.", "Country"),
    WebArticle("Hudson River", "The Hudson River flows through New York into the Atlantic."),
    WebArticle("Albany", "Albany is the capital of New York. It lies on the Hudson River."),
    WebArticle("HIV/AIDS", "HIV/AIDS is a spectrum of conditions caused by HIV. Dr. Smith wrote."),
    WebArticle("C", "C is a programming language. It is used for United States systems."),
    WebArticle(
        "Paris",
        "Paris is the capital of France. parisian food and Parisian art are famous; "
        "Paris-Saclay is nearby. Albany has a Paris too.",
    ),
]


@pytest.fixture(scope="module")
def site() -> Site:
    return Site(ARTICLES, use_cache=False)


@pytest.fixture(scope="module")
def client(site: Site) -> Iterator[TestClient]:
    with TestClient(create_site_app(site, max_query_chars=100)) as c:
        yield c


def hrefs(html: str) -> list[tuple[str, str]]:
    """(target title, anchor text) of every /wiki/ link inside <main>."""
    main = html.split("<main>", 1)[1].split("</main>", 1)[0]
    found = re.findall(r'<a href="/wiki/([^"]+)">([^<]*)</a>', main)
    return [(unquote(unescape(h)).replace("_", " "), unescape(t)) for h, t in found]


def test_slug_and_first_sentence() -> None:
    assert slug("Ada Lovelace") == "Ada_Lovelace"
    assert slug("HIV/AIDS") == "HIV%2FAIDS"
    assert first_sentence("Dr. Smith wrote. Then more.") == "Dr. Smith wrote."
    assert first_sentence("Arthur C. Clarke wrote it. Then more.") == "Arthur C. Clarke wrote it."
    assert first_sentence("No full stop") == "No full stop"


def test_links_longest_first_whole_word_case_sensitive_no_self() -> None:
    index = LinkIndex(a.title for a in ARTICLES)
    text = ARTICLES[1].text  # the page "New York"
    titles = [link.title for link in index.links(text, "New York")]
    assert titles == ["United States", "New York City", "Albany"]  # "New Yorkers": not a word
    for link in index.links(text, "New York"):
        assert text[link.start : link.end] == link.title
    paris = [link.title for link in index.links(ARTICLES[7].text, "Paris")]
    assert paris == ["Albany"]  # own title never, "parisian"/"Parisian"/"Paris-Saclay" no
    # a one-letter title is never linked; the own title blocks the shorter titles inside it
    assert "C" not in [link.title for link in index.links("C and C++", "")]
    assert [link.title for link in index.links("New York City", "New York City")] == []


def test_article_page(client: TestClient) -> None:
    r = client.get("/wiki/New_York_City")
    assert r.status_code == 200
    assert r.headers["content-type"].startswith("text/html")
    html = r.text
    assert "<h1>New York City</h1>" in html
    assert "City in New York, United States" in html
    assert html.count("<p>") >= 3  # two paragraphs of lead, the footer
    assert "<nav>" in html and "<footer>" in html
    links = hrefs(html)
    assert ("New York City", "New York City") not in links  # no self-links
    assert ("United States", "United States") in links
    assert ("New York", "New York") in links and ("Hudson River", "Hudson River") in links
    for target, text in links:
        assert target == text  # a link's text is its target's title
        assert client.get(f"/wiki/{slug(target)}").status_code == 200


def test_every_link_resolves_and_matches_the_index(client: TestClient, site: Site) -> None:
    for i, article in enumerate(ARTICLES):
        html = client.get(f"/wiki/{slug(article.title)}").text
        assert [t for t, _ in hrefs(html)] == [link.title for link in site.links[i]]
    assert client.get("/wiki/HIV%2FAIDS").status_code == 200
    assert "<h1>HIV/AIDS</h1>" in client.get("/wiki/HIV%2FAIDS").text


def test_not_found_and_home(client: TestClient) -> None:
    for path in ("/wiki/Nowhere", "/wiki/new_york", "/nothing/here"):
        r = client.get(path)
        assert r.status_code == 404 and "Not found" in r.text
    home = client.get("/")
    assert home.status_code == 200 and 'href="/wiki/' in home.text
    health = client.get("/healthz").json()
    assert health["status"] == "ok" and health["articles"] == len(ARTICLES)


def test_search_json_is_searxng_shaped(client: TestClient) -> None:
    r = client.get("/search", params={"q": "capital of New York", "format": "json"})
    assert r.status_code == 200
    body = r.json()
    assert body["query"] == "capital of New York"
    assert body["results"] and len(body["results"]) <= RESULTS_PER_PAGE
    by_title = {a.title: a for a in ARTICLES}
    for hit in body["results"]:
        assert {"title", "url", "content"} <= set(hit)
        assert hit["url"] == f"http://testserver/wiki/{slug(hit['title'])}"
        assert hit["content"] == first_sentence(by_title[hit["title"]].text)  # snippet
    assert body["results"][0]["title"] in ("Albany", "New York")
    html = client.get("/search", params={"q": "capital of New York"}).text
    assert body["results"][0]["content"] in unescape(html)
    assert client.get("/search", params={"q": "zzzz", "format": "json"}).json()["results"] == []


def test_search_pages_and_limits(client: TestClient) -> None:
    page2 = client.get("/search", params={"q": "New York", "format": "json", "pageno": 2})
    assert page2.status_code == 200 and page2.json()["results"] == []  # 8 articles: one page
    long = client.get("/search", params={"q": "x" * 101, "format": "json"})
    assert long.status_code == 422 and "over the limit of 100" in long.json()["detail"]
    assert client.get("/search", params={"q": "x", "pageno": 0}).status_code == 422
    assert client.get("/search", params={"q": "x", "format": "xml"}).status_code == 422
    assert "Type a query" in client.get("/search").text


def test_many_concurrent_clients_on_a_live_server(site: Site) -> None:
    queries = ["capital of New York", "Hudson River", "programming language", "France"]

    async def drive(url: str, concurrent: bool) -> list[tuple[int, str]]:
        async with httpx.AsyncClient(base_url=url, timeout=30) as http:

            async def one(i: int) -> tuple[int, str]:
                if i % 2:
                    r = await http.get(f"/wiki/{slug(ARTICLES[i % len(ARTICLES)].title)}")
                    return r.status_code, r.text[:40]
                q = queries[i % len(queries)]
                r = await http.get("/search", params={"q": q, "format": "json"})
                return r.status_code, r.json()["results"][0]["title"]

            if concurrent:
                return await asyncio.gather(*(one(i) for i in range(200)))
            return [await one(i) for i in range(200)]

    with LiveServer(create_site_app(site)) as server:
        together = asyncio.run(drive(server.url, concurrent=True))
        alone = asyncio.run(drive(server.url, concurrent=False))
    assert all(status == 200 for status, _ in together)
    assert together == alone  # answers under load are the answers one at a time


def test_read_site_corpus(tmp_path: Path) -> None:
    passages = [Passage("0", make_contents(a.title, a.text)) for a in ARTICLES]
    passages.append(Passage("x9", "A passage without a quoted title line."))
    path = tmp_path / "corpus.jsonl"
    write_corpus(path, passages)
    read = read_site_corpus(path)
    assert [(a.title, a.text) for a in read[:-1]] == [(a.title, a.text) for a in ARTICLES]
    assert (read[-1].title, read[-1].text) == ("x9", "A passage without a quoted title line.")


def test_cli_defaults_match_the_site() -> None:
    defaults = ServeWebOptions()
    assert defaults.max_query_chars == MAX_QUERY_CHARS
    assert defaults.max_results == MAX_RESULTS


@pytest.mark.slow  # imports treegrpo.cli.commands, which loads torch
def test_serve_web_flags_reach_the_site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "corpus.jsonl"
    write_corpus(
        path, [Passage(str(i), make_contents(a.title, a.text)) for i, a in enumerate(ARTICLES)]
    )
    commands = importlib.import_module(cli.COMMANDS)
    seen: dict[str, Any] = {}
    record = functools.wraps(commands.create_site_app)(
        lambda site, **kw: seen.update(kw, site=site)
    )
    monkeypatch.setattr(commands, "create_site_app", record)  # the same keyword-only limits
    monkeypatch.setattr(commands, "run_server", lambda app, host, port, *a: seen.update(port=port))
    flags = ["--max-query-chars", "7", "--max-results", "20", "--port", "9"]
    cli.main(["serve-web", "--corpus", str(path), "--cache-dir", str(tmp_path), *flags])
    assert (seen["max_query_chars"], seen["max_results"], seen["port"]) == (7, 20, 9)
    assert [a.title for a in seen["site"].articles] == [a.title for a in ARTICLES]
