"""``visit`` and ``find`` through ``Toolbox.run`` against the loopback site, with the episode's
history built from earlier outcomes as the rollout builds it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.live import free_port
from treegrpo.tools.registry import BadArgument, Call, Outcome, PastCall, Toolbox
from treegrpo.tools.web.browse import FindResult, FindTool, Visit, VisitArgument, VisitTool
from treegrpo.tools.web.fetch import Page, PageFetcher
from treegrpo.tools.web.search import SearchHit, SearxngSearch, WebSearchTool
from treegrpo.tools.web.text import Link


@pytest.fixture
def box(site: str, fetcher: PageFetcher) -> Iterator[Toolbox]:
    """search (the site's SearXNG-shaped API), visit and find."""
    with SearxngSearch(f"{site}/searxng", retries=0) as searx:
        yield Toolbox([WebSearchTool(searx, topk=3), VisitTool(fetcher, 600), FindTool(400)])


def past(name: str, outcome: Outcome) -> PastCall:
    return PastCall(name, outcome.argument, outcome.result)


def step(box: Toolbox, name: str, text: str, history: tuple[PastCall, ...] = ()) -> Outcome:
    [outcome] = box.run(name, [(text, history)])
    return outcome


def searched(box: Toolbox, query: str) -> tuple[PastCall, ...]:
    return (past("search", step(box, "search", query)),)


def test_visit_a_url_with_a_goal(box: Toolbox, site: str) -> None:
    out = step(box, "visit", f"{site}/curie | where was she born")
    assert out.status == "ok" and isinstance(out.result, Visit)
    lines = out.text.splitlines()
    assert lines[:2] == ["Title: Marie Curie - Example Wiki", f"URL: {site}/curie"]
    assert "She was born in Warsaw, then part of the Russian Empire" in out.text
    assert "sanatorium" not in out.text and "Copyright" not in out.text
    assert lines[-2:] == ["Links:", f"- Warsaw: {site}/warsaw"]  # a link of the text shown
    assert len(out.text) <= 600


def test_visit_a_result_number_reads_it_for_the_last_query(box: Toolbox, site: str) -> None:
    history = searched(box, "Nobel Prize in Physics Curie")
    out = step(box, "visit", "1", history)
    assert out.status == "ok" and out.argument == VisitArgument(1)
    assert f"URL: {site}/curie" in out.text
    assert "She shared the 1903 Nobel Prize in Physics" in out.text  # the query is the goal
    assert f"- Nobel Prize in Physics: {site}/nobel" in out.text
    second = step(box, "visit", "2 | first awarded", history)
    assert "first awarded in 1901 to Wilhelm Röntgen" in second.text


def test_visit_refuses_what_it_cannot_open_and_says_what_to_write(box: Toolbox) -> None:
    history = searched(box, "curie")
    cases = {
        "4": "visit: there are 3 results: write a number from 1 to 3, or a URL",
        "0": "visit: search results are numbered from 1",
        "the curie page": "visit: 'the curie page' is neither a URL nor a search result number",
        "2 |  ": "visit: nothing after '|'",
    }
    for text, message in cases.items():
        out = step(box, "visit", text, history)
        assert out.status == "error" and out.text.startswith(message), (text, out.text)
    nothing = searched(box, "nothing")
    assert step(box, "visit", "1", nothing).text.startswith("visit: the last search found nothing")
    assert step(box, "visit", "1").text.startswith("visit: there is no search result 1 yet")


def test_pages_that_cannot_be_read_are_errors_and_the_batch_goes_on(
    box: Toolbox, site: str
) -> None:
    texts = [f"{site}/missing", f"{site}/pdf", f"{site}/slow", f"{site}/warsaw", "3"]
    outs = box.run("visit", [(t, ()) for t in texts])
    assert [o.status for o in outs] == ["error", "error", "error", "ok", "error"]
    assert outs[0].text == f"visit: HTTP 404 Not Found: {site}/missing"
    assert outs[1].text.startswith("visit: binary content (application/pdf), not shown")
    assert outs[2].text == f"visit: timed out: {site}/slow"
    assert outs[3].text == f"URL: {site}/warsaw\nWarsaw is the capital of Poland."


def test_a_bare_domain_is_a_url_and_a_long_page_says_it_was_cut(site: str) -> None:
    tool = VisitTool(PageFetcher())
    assert tool.parse("en.wikipedia.org/wiki/Radium | discovery") == VisitArgument(
        "https://en.wikipedia.org/wiki/Radium", "discovery"
    )
    for text in ("2", "[2]", "#2", "2.", "[ 2 ]"):
        assert tool.parse(text) == VisitArgument(2), text
    with pytest.raises(BadArgument):
        tool.parse("radium discovery")
    page = Page(f"{site}/huge", "Huge", "Paragraph 0.", truncated=True)
    assert "(only the start of this long page was read)" in tool.format(Visit(page))


def test_find_reads_the_last_visited_page(box: Toolbox, site: str) -> None:
    history = searched(box, "curie")
    visit = step(box, "visit", f"{site}/curie", history)
    history += (past("visit", visit),)
    out = step(box, "find", '"Pierre Curie"', history)
    assert out.status == "ok"
    assert out.text.splitlines()[0] == f'2 matches for "Pierre Curie" on {site}/curie:'
    first, second = out.text.splitlines()[1:]
    assert first.startswith("[1] In 1891 she moved to Paris")  # a paragraph of one sentence
    assert second.startswith("[2] She shared the 1903 Nobel Prize")
    assert second.endswith("discovery of polonium and radium.")  # the sentence after
    assert len(out.text) <= 400
    missing = step(box, "find", "zebra", history)
    assert (missing.status, missing.text) == ("ok", f'No match for "zebra" on {site}/curie.')


def test_find_lists_the_first_matches_within_its_budget() -> None:
    tool = FindTool(max_chars=200, max_matches=3)
    result = FindResult("https://w.test/p", "x", tuple(f"Match {i} has x in it." for i in range(9)))
    shown = tool.format(result)
    assert shown.splitlines() == [
        '9 matches (the first 3 shown) for "x" on https://w.test/p:',
        "[1] Match 0 has x in it.",
        "[2] Match 1 has x in it.",
        "[3] Match 2 has x in it.",
    ]
    long = FindResult("https://w.test/p", "x", ("word " * 100,) * 5)
    assert len(FindTool(max_chars=200).format(long)) <= 200


def test_find_before_any_visit_says_to_visit_first(box: Toolbox, site: str) -> None:
    out = step(box, "find", "Nobel", searched(box, "curie"))
    assert out.status == "error"
    assert out.text == (
        "find: no page visited yet: visit a page first (<visit> URL or result number </visit>)"
    )
    failed = step(box, "visit", f"{site}/missing")  # a failed visit leaves no page
    assert step(box, "find", "x", (past("visit", failed),)).status == "error"


def test_find_uses_the_latest_visit(box: Toolbox, site: str) -> None:
    first = past("visit", step(box, "visit", f"{site}/curie"))
    second = past("visit", step(box, "visit", f"{site}/nobel"))
    out = step(box, "find", "1901", (first, second))
    assert f"on {site}/nobel:" in out.text


def test_without_a_goal_visit_shows_the_start_and_its_links(box: Toolbox, site: str) -> None:
    out = step(box, "visit", f"{site}/nobel")
    assert out.text == (
        f"Title: Nobel Prize in Physics - Example Wiki\nURL: {site}/nobel\n"
        "Nobel Prize in Physics\nJump to life\nThe Nobel Prize in Physics is awarded yearly by "
        "the Royal Swedish Academy of Sciences. It was first awarded in 1901 to Wilhelm Röntgen.\n"
        f"Laureates include Marie Curie, who won it in 1903.\nLinks:\n- Marie Curie: {site}/curie"
    )


def test_a_down_site_is_an_error_not_an_outage(box: Toolbox) -> None:
    out = step(box, "visit", f"http://127.0.0.1:{free_port()}/")
    assert out.status == "error" and out.text.startswith("visit: could not connect to")


links = st.lists(
    st.builds(Link, st.text(min_size=1, max_size=400), st.text(max_size=300)), max_size=20
)


@settings(
    max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    title=st.text(max_size=500),
    url=st.text(min_size=1, max_size=500),
    text=st.text(max_size=3000),
    found=links,
    goal=st.one_of(st.none(), st.text(max_size=100)),
    max_chars=st.integers(min_value=400, max_value=2000),
)
def test_a_visit_observation_never_exceeds_max_chars(
    fetcher: PageFetcher,
    title: str,
    url: str,
    text: str,
    found: list[Link],
    goal: str | None,
    max_chars: int,
) -> None:
    tool = VisitTool(fetcher, max_chars=max_chars, max_links=5)
    shown = tool.format(Visit(Page(url, title, text, tuple(found), truncated=True), goal))
    assert len(shown) <= max_chars


def test_the_tools_refuse_silly_settings(fetcher: PageFetcher) -> None:
    with pytest.raises(ValueError):
        VisitTool(fetcher, max_chars=100)
    assert SearchHit("t", "u").snippet == ""


def test_links_that_bear_on_the_goal_come_first_then_those_of_the_text(
    fetcher: PageFetcher,
) -> None:
    nav = [Link(f"https://w.test/wiki/Menu_{i}", f"Menu item {i}") for i in range(50)]
    links = (
        *nav,
        Link("https://w.test/wiki/Pierre_Curie", "her husband"),
        Link("https://w.test/wiki/Radium", "element 88"),
        Link("https://w.test/wiki/Sorbonne", "Sorbonne"),
    )
    text = "Intro.\nShe studied at the Sorbonne and found radium with Pierre."
    page = Page("https://w.test/wiki/Marie_Curie", "Marie Curie", text, links)
    shown = VisitTool(fetcher, max_chars=1000, max_links=2).format(Visit(page, "radium pierre"))
    assert shown.splitlines()[-3:] == [
        "Links:",
        "- her husband: https://w.test/wiki/Pierre_Curie",  # by its address
        "- element 88: https://w.test/wiki/Radium",
    ]
    plain = VisitTool(fetcher, max_chars=1000).format(Visit(page, "study"))
    assert plain.endswith("Links:\n- Sorbonne: https://w.test/wiki/Sorbonne")  # in the text


def test_visit_numbers_name_the_results_of_a_renamed_search_tool(fetcher: PageFetcher) -> None:
    hits = [SearchHit("A", "https://a.test/"), SearchHit("B", "https://b.test/")]
    history = (PastCall("web_search", "query b", hits),)
    tool = VisitTool(fetcher, search_tool="web_search")
    assert tool._resolve(Call(VisitArgument(2), history)) == ("https://b.test/", "query b")
