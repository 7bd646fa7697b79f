"""Page text, passages and their selection against a goal, find: hand-made pages and
hypothesis properties (the budget is never exceeded; no HTML makes extraction raise)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.tools.web.pages import CURIE, article
from treegrpo.tools.web.text import (
    GAP,
    bm25_scores,
    cut,
    extract,
    find_sentences,
    passages,
    select_passages,
    sentences,
)

BASE = "http://wiki.test/wiki/Marie_Curie"
TEXT = extract(article("Marie Curie", CURIE), BASE).text


def test_extract_keeps_the_article_and_drops_the_boilerplate() -> None:
    page = extract(article("Marie Curie", CURIE), BASE)
    assert page.title == "Marie Curie - Example Wiki"
    assert page.text.splitlines()[0] == "Marie Curie"  # the heading
    assert "pioneering research on radioactivity" in page.text
    assert "Copyright" not in page.text and "Privacy policy" not in page.text
    assert "About this wiki" not in page.text
    urls = [link.url for link in page.links]
    assert "http://wiki.test/warsaw" in urls and "http://wiki.test/privacy" in urls
    assert len(urls) == len(set(urls))


def test_a_page_without_main_text_falls_back_to_the_body() -> None:
    html = "<html><body><div>Short</div><div>page</div><script>var x = 1;</script></body></html>"
    assert extract(html, BASE).text in ("Short\npage", "Short page")
    assert extract("<p>a</p>", BASE).text == "a"
    empty = extract("", BASE)
    assert (empty.title, empty.text, empty.links) == ("", "", ())


def test_links_resolve_against_the_base_element_and_skip_non_web_targets() -> None:
    html = """<html><head><base href="http://other.test/dir/"></head><body>
    <a href="page.html">A page</a> <a href="javascript:void(0)">js</a>
    <a href="mailto:a@b.c">mail</a> <a href="page.html#top" title="again">x</a>
    <a href="https://x.test/img"><img alt=""></a></body></html>"""
    links = extract(html, BASE).links
    assert [(link.url, link.text) for link in links] == [
        ("http://other.test/dir/page.html", "A page"),
        ("https://x.test/img", ""),
    ]


def test_passages_are_paragraphs_and_sentence_windows() -> None:
    long = " ".join(f"Sentence number {i} is here." for i in range(60))
    parts = passages(f"Short one.\n\n{long}\nLast.", size=200)
    assert parts[0] == "Short one." and parts[-1] == "Last."
    windows = parts[1:-1]
    assert all(len(w) <= 200 for w in windows) and len(windows) > 5
    assert " ".join(windows) == long  # nothing lost, nothing repeated


def test_sentences_split_after_end_marks_before_capitals_or_digits() -> None:
    assert sentences("It was 1903. She won! Did she? yes, e.g. twice.") == [
        "It was 1903.",
        "She won!",
        "Did she? yes, e.g. twice.",
    ]


def test_bm25_prefers_rare_words_and_ignores_stopwords() -> None:
    docs = ["the cat sat", "the dog sat", "the dog ran"]
    cat, dog, _ = bm25_scores("the cat", docs)
    assert cat > dog == 0.0
    assert bm25_scores("the of a", docs) == [0.0, 0.0, 0.0]


def test_the_goal_picks_its_paragraph() -> None:
    shown = select_passages(TEXT, "where was she born", max_chars=300)
    assert "born in Warsaw" in shown and len(shown) <= 300
    assert "sanatorium" not in shown
    died = select_passages(TEXT, "death sanatorium anaemia", max_chars=300)
    assert died.startswith("She died in 1934")


def test_chosen_passages_keep_page_order_with_gaps_marked() -> None:
    shown = select_passages(TEXT, "Passy 1934 Sorbonne 1891", max_chars=1000).splitlines()
    assert shown[0].startswith("In 1891") and shown[-1].startswith("She died in 1934")
    assert GAP in shown  # the paragraphs between them were skipped


def test_no_goal_or_no_match_shows_the_start() -> None:
    start = select_passages(TEXT, None, max_chars=120)
    assert start == cut(TEXT, 120) and start.startswith("Marie Curie\n")
    assert select_passages(TEXT, "zebra quantum", max_chars=120) == start


def test_a_best_passage_longer_than_the_budget_is_cut() -> None:
    shown = select_passages(TEXT, "mobile radiography units", max_chars=60)
    assert shown.startswith("During the First World War") and shown.endswith("…")
    assert len(shown) <= 60


def test_find_gives_matches_with_context_in_page_order() -> None:
    found = find_sentences(TEXT, "nobel prize", context=1)
    assert len(found) == 1  # three sentences of one paragraph match: one merged span
    assert found[0].startswith("She shared the 1903")
    assert found[0].endswith("two scientific fields.")
    assert find_sentences(TEXT, "Pierre Curie", context=0) == [
        "In 1891 she moved to Paris to study physics and mathematics at the Sorbonne, where she "
        "met Pierre Curie, a professor of physics, whom she married in 1895.",
        "She shared the 1903 Nobel Prize in Physics with Pierre Curie and Henri Becquerel.",
    ]


def test_find_falls_back_to_all_words_and_may_find_nothing() -> None:
    found = find_sentences(TEXT, "1911 chemistry", context=0)  # not as a phrase
    assert found == [
        "In 1911 she won the Nobel Prize in Chemistry for the discovery of polonium and radium."
    ]
    assert find_sentences(TEXT, "zebra", context=1) == []
    assert find_sentences(TEXT, "   ", context=1) == []


words = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=80)


@settings(max_examples=150, deadline=None)
@given(
    paragraphs=st.lists(words, max_size=12),
    goal=st.one_of(st.none(), words),
    budget=st.integers(min_value=0, max_value=400),
)
def test_the_budget_is_never_exceeded(paragraphs: list[str], goal: str | None, budget: int) -> None:
    shown = select_passages("\n".join(paragraphs), goal, budget)
    assert len(shown) <= budget


@settings(max_examples=60, deadline=None)
@given(
    html=st.one_of(
        st.text(max_size=300),
        st.lists(
            st.sampled_from(
                [
                    "<p>",
                    "</p>",
                    "<a href='x'>",
                    "</a>",
                    "<div>",
                    "<title>",
                    "text ",
                    "<script>",
                    "&amp;",
                    "<?xml version='1.0'?>",
                    "\x00",
                    "<body>",
                ]
            ),
            max_size=40,
        ).map("".join),
    )
)
def test_no_html_makes_extraction_raise(html: str) -> None:
    page = extract(html, BASE)
    assert isinstance(page.text, str) and isinstance(page.title, str)
