"""PageFetcher against the loopback test site: pages, redirects, errors, limits, content types,
the cache and concurrent batches. A bad page is always a ``Failure``, never an exception."""

from __future__ import annotations

from tests.live import free_port
from tests.tools.web.pages import Stats
from treegrpo.tools.registry import Failure
from treegrpo.tools.web.fetch import Page, PageFetcher


def page(result: Page | Failure) -> Page:
    assert isinstance(result, Page), result
    return result


def failure(result: Page | Failure) -> str:
    assert isinstance(result, Failure), result
    return result.reason


def test_an_article_is_its_main_text_title_and_absolute_links(
    site: str, fetcher: PageFetcher
) -> None:
    p = page(fetcher.fetch(f"{site}/curie"))
    assert p.url == f"{site}/curie" and p.title == "Marie Curie - Example Wiki"
    assert "born in Warsaw" in p.text and "Nobel Prize in Chemistry" in p.text
    assert "Copyright" not in p.text and "Donate" not in p.text  # menus and footer dropped
    assert not p.truncated
    links = {link.url: link.text for link in p.links}
    assert links[f"{site}/nobel"] == "Nobel Prize in Physics"
    assert links[f"{site}/warsaw"] == "Warsaw"
    assert links["https://en.wikipedia.org/wiki/Radiography"] == "Radiography"
    assert f"{site}/about" in links  # every link is kept; visit chooses what to show
    assert not any(u.startswith("mailto:") or "#" in u for u in links)
    assert f"{site}/curie" not in links  # "#life" is the page itself


def test_a_redirect_ends_at_the_final_url(site: str, fetcher: PageFetcher) -> None:
    p = page(fetcher.fetch(f"{site}/redirect"))
    assert p.url == f"{site}/curie" and "Marie Curie" in p.title


def test_a_redirect_loop_is_a_failure(site: str) -> None:
    with PageFetcher(max_redirects=3) as fetcher:
        assert "too many redirects" in failure(fetcher.fetch(f"{site}/loop"))


def test_http_errors_are_failures_with_the_status(site: str, fetcher: PageFetcher) -> None:
    assert failure(fetcher.fetch(f"{site}/missing")) == f"HTTP 404 Not Found: {site}/missing"
    assert failure(fetcher.fetch(f"{site}/error")).startswith("HTTP 500 Internal Server Error")


def test_binary_content_is_refused_with_its_type(site: str, fetcher: PageFetcher) -> None:
    assert failure(fetcher.fetch(f"{site}/pdf")).startswith(
        "binary content (application/pdf), not shown"
    )
    assert "binary content (image/png)" in failure(fetcher.fetch(f"{site}/png"))
    assert "application/octet-stream" in failure(fetcher.fetch(f"{site}/octet"))
    assert "binary content (no content type)" in failure(fetcher.fetch(f"{site}/untyped"))


def test_a_huge_page_is_cut_at_the_byte_limit(site: str, fetcher: PageFetcher) -> None:
    p = page(fetcher.fetch(f"{site}/huge"))
    assert p.truncated and p.title == "Huge"
    assert "Paragraph 0 " in p.text and "Paragraph 29999 " not in p.text
    assert len(p.text) < 1_000_000


def test_a_huge_page_is_refused_when_asked(site: str) -> None:
    with PageFetcher(max_bytes=100_000, oversize="refuse") as fetcher:
        huge = failure(fetcher.fetch(f"{site}/huge"))
        assert huge == f"too large (over 100,000 bytes): {site}/huge"
        sized = failure(fetcher.fetch(f"{site}/huge-sized"))
        assert sized == f"too large (3,200,026 bytes; the limit is 100,000): {site}/huge-sized"


def test_a_slow_server_times_out(site: str, fetcher: PageFetcher) -> None:
    assert failure(fetcher.fetch(f"{site}/slow")) == f"timed out: {site}/slow"
    assert "still sending" in failure(fetcher.fetch(f"{site}/drip"))  # each read is quick


def test_plain_text_and_charsets(site: str, fetcher: PageFetcher) -> None:
    p = page(fetcher.fetch(f"{site}/plain"))
    assert p.text == "Line one of the notes.\nLine two, with spaces." and p.title == ""
    latin = page(fetcher.fetch(f"{site}/latin1"))
    assert latin.title == "Café" and "café crème à Paris" in latin.text


def test_a_short_page_keeps_its_text(site: str, fetcher: PageFetcher) -> None:
    assert page(fetcher.fetch(f"{site}/warsaw")).text == "Warsaw is the capital of Poland."


def test_unreachable_and_invalid_urls_are_failures(fetcher: PageFetcher) -> None:
    down = f"http://127.0.0.1:{free_port()}/page"
    assert failure(fetcher.fetch(down)).startswith(f"could not connect to {down}")
    assert "not a web address" in failure(fetcher.fetch("ftp://example.org/file"))
    assert "not a web address" in failure(fetcher.fetch("no url at all"))


def test_pages_are_cached_by_url_failures_are_not(
    site: str, fetcher: PageFetcher, stats: Stats
) -> None:
    before = stats.hits.copy()
    first = fetcher.fetch(f"{site}/nobel")
    assert fetcher.fetch(f"{site}/nobel#laureates") is first
    fetcher.fetch(f"{site}/missing")
    fetcher.fetch(f"{site}/missing")
    fetcher.fetch(f"{site}/redirect")
    assert fetcher.fetch(f"{site}/curie") is fetcher.fetch(f"{site}/redirect")  # final URL too
    seen = stats.hits - before
    assert seen["/nobel"] == 1 and seen["/missing"] == 2 and seen["/curie"] == 1


def test_the_cache_forgets_the_least_recently_used(site: str, stats: Stats) -> None:
    with PageFetcher(cache_size=2) as fetcher:
        before = stats.hits.copy()
        for path in ("/curie", "/nobel", "/curie", "/warsaw", "/curie", "/nobel"):
            fetcher.fetch(site + path)
    seen = stats.hits - before
    assert seen["/curie"] == 1 and seen["/nobel"] == 2 and seen["/warsaw"] == 1


def test_a_batch_is_fetched_concurrently_in_order(site: str, stats: Stats) -> None:
    urls = [f"{site}/wait/{i}" for i in range(6)] + [f"{site}/missing", f"{site}/wait/0"]
    stats.most_in_flight = 0
    with PageFetcher(workers=3) as fetcher:
        results = fetcher.fetch_many(urls)
    assert [page(r).title for r in results[:6]] == [f"Page {i}" for i in range(6)]
    assert isinstance(results[6], Failure) and results[7] is results[0]
    assert 1 < stats.most_in_flight <= 3  # at once, and never more than the pool
    assert fetcher.fetch_many([]) == []
