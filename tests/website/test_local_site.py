"""A site served in-process (``website.local.LocalSite``): it starts on a free loopback port
and answers there, while every URL the agent sees is on ``http://wiki.test`` (the search
client's ``Host``, the fetcher's routed host), so two sites on two ports give the same
observations, token for token."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from tests.web_fixtures import ARTICLES
from treegrpo.tools.registry import PastCall, Toolbox
from treegrpo.tools.web.hosts import RoutedTransport
from treegrpo.warmstart.web_demos import site_toolbox
from treegrpo.website.local import HOST, LocalSite
from treegrpo.website.site import Site


@pytest.fixture(scope="module")
def site() -> Iterator[LocalSite]:
    running = LocalSite.start(Site(ARTICLES, use_cache=False))
    yield running
    running.close()


def _search_then_visit(tools: Toolbox, query: str, target: str) -> tuple[str, str]:
    (found,) = tools.run("search", [(query, ())])
    history = (PastCall("search", found.argument, found.result),)
    (page,) = tools.run("visit", [(target, history)])
    assert found.status == page.status == "ok", (found.text, page.text)
    return found.text, page.text


def test_the_site_answers_on_its_port_and_names_no_port(site: LocalSite) -> None:
    assert site.public_url == f"http://{HOST}" == "http://wiki.test"
    assert httpx.get(f"{site.url}/healthz").json()["articles"] == len(ARTICLES)
    found, page = _search_then_visit(site_toolbox(site, 3, 1200), "Charles Babbage", "1")
    assert "[1] Charles Babbage\nhttp://wiki.test/wiki/Charles_Babbage\n" in found
    assert "URL: http://wiki.test/wiki/Charles_Babbage" in page
    assert "He was born in 1791 in London." in page
    assert "- London: http://wiki.test/wiki/London" in page  # links on the public name too
    port = site.address.rsplit(":", 1)[1]
    assert port not in found + page


def test_a_url_from_an_observation_opens_the_page(site: LocalSite) -> None:
    tools = site_toolbox(site, 3, 1200)
    (page,) = tools.run("visit", [("http://wiki.test/wiki/Analytical_Engine", ())])
    assert page.status == "ok" and "designed by Charles Babbage" in page.text
    (missing,) = tools.run("visit", [("http://wiki.test/wiki/Nowhere", ())])
    assert missing.status == "error" and "404" in missing.text


def test_two_sites_on_two_ports_give_the_same_observations(site: LocalSite) -> None:
    other = LocalSite.start(Site(ARTICLES, use_cache=False))
    try:
        assert other.address != site.address
        query = "In which year was the designer of the Analytical Engine born?"
        a = _search_then_visit(site_toolbox(site, 3, 1200), query, "1")
        b = _search_then_visit(site_toolbox(other, 3, 1200), query, "1")
        assert a == b
    finally:
        other.close()
    with pytest.raises(httpx.HTTPError):
        httpx.get(f"{other.url}/healthz", timeout=2)


def test_a_routed_transport_needs_host_and_port() -> None:
    for bad in ("127.0.0.1", ":80", "localhost:http"):
        with pytest.raises(ValueError, match="host:port"):
            RoutedTransport(bad)
