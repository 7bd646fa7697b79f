"""The offline website's HTML (article, home, search results, 404), all text escaped: each page's
``<main>`` in the same frame, boilerplate a main-text extractor should drop (a nav bar with the
search form, a licence footer).
"""

from __future__ import annotations

from collections.abc import Sequence
from html import escape
from urllib.parse import quote_plus

from treegrpo.tools.web.search import SearchHit
from treegrpo.website.corpus import Link, WebArticle, slug

SITE_NAME = "Offline Wiki"
FOOTER = (
    "Text from Wikipedia's lead sections, available under the Creative Commons "
    "Attribution-ShareAlike 4.0 License. Served offline by treegrpo."
)


def frame(title: str, main: str, query: str = "") -> str:
    """A whole page: head, nav bar with the search form, ``main`` (already HTML), footer."""
    return (
        "<!DOCTYPE html>\n"
        f'<html lang="en"><head><meta charset="utf-8"><title>{escape(title)} - {SITE_NAME}'
        "</title></head><body>\n"
        f'<nav><a href="/">{SITE_NAME}</a> | <a href="/search">Search</a> | '
        '<form action="/search" method="get" style="display:inline">'
        f'<input name="q" value="{escape(query)}" aria-label="Search">'
        '<button type="submit">Search</button></form></nav>\n'
        f"<main>\n{main}\n</main>\n"
        f'<footer><p>{escape(FOOTER)}</p><p><a href="/">Home</a> · About · Privacy policy'
        "</p></footer>\n</body></html>\n"
    )


def linked(text: str, links: Sequence[Link]) -> str:
    """``text`` escaped, each link's span wrapped in ``<a href="/wiki/<slug>">``."""
    out, at = [], 0
    for link in links:
        out.append(escape(text[at : link.start], quote=False))
        href = escape(f"/wiki/{slug(link.title)}")
        out.append(f'<a href="{href}">{escape(text[link.start : link.end], quote=False)}</a>')
        at = link.end
    out.append(escape(text[at:], quote=False))
    return "".join(out)


def article_page(article: WebArticle, links: Sequence[Link]) -> str:
    """An article's page: title, description, a ``<p>`` per paragraph with ``links``."""
    parts = [f"<h1>{escape(article.title, quote=False)}</h1>"]
    if article.description:
        parts.append(f'<p class="description"><i>{escape(article.description)}</i></p>')
    # a title is one line, so no link crosses a paragraph's end
    paragraphs = (line.strip() for line in linked(article.text, links).split("\n"))
    parts.extend(f"<p>{p}</p>" for p in paragraphs if p)
    return frame(article.title, "\n".join(parts))


def home_page(n_articles: int, featured: Sequence[str]) -> str:
    """The home page: what the site is, the search form, a few articles to start from."""
    items = "".join(
        f'<li><a href="/wiki/{escape(slug(t))}">{escape(t, quote=False)}</a></li>' for t in featured
    )
    main = (
        f"<h1>{SITE_NAME}</h1>\n<p>The lead sections of {n_articles:,} Wikipedia articles. "
        "Search above, or start from one of these:</p>\n"
        f"<ul>{items}</ul>"
    )
    return frame("Home", main)


def results_page(query: str, hits: Sequence[SearchHit], page: int) -> str:
    """The search results for ``query``: title links and snippets, with a next-page link."""
    if not query:
        return frame("Search", "<h1>Search</h1>\n<p>Type a query in the search box.</p>")
    items = "".join(
        f'<li><a href="{escape(h.url)}">{escape(h.title, quote=False)}</a>'
        f"<p>{escape(h.snippet, quote=False)}</p></li>"
        for h in hits
    )
    body = f"<ol>{items}</ol>" if hits else "<p>No results.</p>"
    next_href = escape(f"/search?q={quote_plus(query)}&pageno={page + 1}")
    more = f'<p><a href="{next_href}">Next page</a></p>' if hits else ""
    main = f"<h1>Search results for “{escape(query, quote=False)}”</h1>\n{body}\n{more}"
    return frame(f"{query} - Search", main, query)


def not_found_page(what: str) -> str:
    """The 404 page, naming what was asked for."""
    main = f"<h1>Not found</h1>\n<p>There is no page {escape(what, quote=False)} here.</p>"
    return frame("Not found", main)
