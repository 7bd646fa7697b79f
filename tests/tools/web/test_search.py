"""Search clients against the loopback site's SearXNG-shaped and generic JSON endpoints, the
``search`` tool's observation, and outages as ``ToolFailed`` (outcome "failed")."""

from __future__ import annotations

import pytest

from tests.live import free_port
from tests.tools.web.pages import Stats
from treegrpo.retrieval.base import ToolFailed
from treegrpo.tools.registry import Toolbox
from treegrpo.tools.web.search import JsonSearch, SearchHit, SearxngSearch, WebSearchTool


def test_searxng_sends_its_parameters_and_reads_results(site: str, stats: Stats) -> None:
    with SearxngSearch(site + "/searxng/", categories="general", language="en") as searx:
        [hits, none] = searx.search(["marie curie", "nothing"], topk=2)
    nobel = "Nobel Prize in Physics"
    assert hits == [
        SearchHit("Marie Curie", f"{site}/curie", "Marie Curie: about marie curie."),
        SearchHit(nobel, f"{site}/nobel", f"{nobel}: about marie curie."),
    ]
    assert none == []
    sent = [s for s in stats.searches if s.get("q") == "marie curie"][-1]
    assert sent == {"q": "marie curie", "format": "json", "categories": "general", "language": "en"}


def test_searxng_skips_results_without_a_url(site: str) -> None:
    with SearxngSearch(f"{site}/searxng/search") as searx:
        [hits] = searx.search(["q"], topk=10)
    assert [h.title for h in hits] == ["Marie Curie", "Nobel Prize in Physics", "Warsaw"]


def test_searxng_without_json_says_how_to_enable_it(site: str) -> None:
    with SearxngSearch(f"{site}/searxng-off", retries=0) as searx, pytest.raises(ToolFailed) as e:
        searx.search(["q"], topk=3)
    assert "HTTP 403: the JSON format is not enabled" in str(e.value)
    assert e.value.results is None


def test_json_search_get_with_nested_results_and_field_names(site: str, stats: Stats) -> None:
    client = JsonSearch(
        f"{site}/api/search",
        fields=("data.items", "name", "link", "description"),
        topk_param="n",
        params={"lang": "en"},
    )
    with client:
        [hits] = client.search(["curie"], topk=2)
    assert hits == [
        SearchHit("Marie Curie", f"{site}/curie", "Marie Curie & co"),  # tags and entities gone
        SearchHit("Nobel Prize in Physics", f"{site}/nobel", "Nobel Prize in Physics & co"),
    ]
    assert stats.searches[-1] == {"lang": "en", "q": "curie", "n": "2"}


def test_json_search_post_sends_a_json_body_and_headers(site: str, stats: Stats) -> None:
    client = JsonSearch(
        f"{site}/api/search",
        method="POST",
        query_param="query",
        fields=("responses.0.hits", "title", "url", "content"),
        topk_param="k",
        headers={"X-Key": "secret"},
    )
    with client:
        [hits] = client.search(["radium"], topk=1)
    assert hits == [SearchHit("Marie Curie", f"{site}/curie", "Marie Curie: about radium.")]
    assert stats.searches[-1] == {"query": "radium", "k": 1, "x-key": "secret"}


@pytest.mark.parametrize(
    ("path", "method", "message"),
    [
        ("/api/search", "POST", "answered HTTP 401"),  # no key
        ("/api/broken", "GET", "unexpected answer"),
        ("/api/wrong-shape", "GET", "unexpected answer (no 'data.items' in the answer)"),
        ("/api/flaky", "GET", "failed after 2 attempts; last: HTTP 503: overloaded"),
        ("/no-such-api", "GET", "answered HTTP 404"),
    ],
)
def test_a_refusing_backend_raises_tool_failed(
    site: str, path: str, method: str, message: str
) -> None:
    fields = ("data.items", "title", "url", "snippet")
    client = JsonSearch(site + path, method=method, fields=fields, backoff=0.01, retries=1)
    with client, pytest.raises(ToolFailed, match="1 of 1 searches failed") as e:
        client.search(["q"], topk=3)
    assert message in str(e.value)


def test_a_down_backend_raises_tool_failed_after_retries() -> None:
    url = f"http://127.0.0.1:{free_port()}"
    with SearxngSearch(url, retries=2, backoff=0.01) as searx, pytest.raises(ToolFailed) as e:
        searx.search(["a", "b"], topk=3)
    assert "2 of 2 searches failed" in str(e.value) and "failed after 3 attempts" in str(e.value)
    assert e.value.results is None


def test_the_search_tool_numbers_its_hits() -> None:
    tool = WebSearchTool(client=None, snippet_chars=20)  # type: ignore[arg-type]
    hits = [
        SearchHit("Marie Curie", "https://w.test/curie", "A physicist and chemist of Poland."),
        SearchHit("", "https://w.test/x"),
    ]
    assert tool.format(hits) == (
        "[1] Marie Curie\nhttps://w.test/curie\nA physicist and…\n[2] (no title)\nhttps://w.test/x"
    )
    assert tool.format([]) == "No results."


def test_the_search_tool_through_the_toolbox(site: str) -> None:
    with SearxngSearch(f"{site}/searxng", retries=0) as searx:
        box = Toolbox([WebSearchTool(searx, topk=2)])
        ok, long = box.run("search", [("  marie   curie ", ()), ("x " * 300, ())])
    assert ok.status == "ok" and ok.argument == "marie curie"
    assert ok.text.startswith(f"[1] Marie Curie\n{site}/curie\nMarie Curie: about marie curie.")
    assert ok.text.count("\n[") == 1 and isinstance(ok.result[0], SearchHit)
    assert long.status == "error" and long.text.startswith("search: the query is 599 characters")


def test_a_down_search_backend_is_a_failed_outcome() -> None:
    with SearxngSearch(f"http://127.0.0.1:{free_port()}", retries=0) as searx:
        [out] = Toolbox([WebSearchTool(searx)]).run("search", [("q", ())])
    assert (out.status, out.text) == ("failed", "The search tool did not answer.")


def test_a_backend_that_fails_for_some_queries_keeps_the_others(site: str) -> None:
    class Half(JsonSearch):
        def _request(self, query: str, topk: int):  # type: ignore[no-untyped-def]
            url = f"{site}/api/flaky" if query == "bad" else f"{site}/api/search"
            return self._client.build_request("GET", url, params={"q": query})

    fields = ("data.items", "title", "link", "snippet")
    with Half(f"{site}/api/search", fields=fields, retries=0) as c:
        box = Toolbox([WebSearchTool(c)])
        good, bad = box.run("search", [("curie", ()), ("bad", ())])
    assert good.status == "ok" and bad.status == "failed"
