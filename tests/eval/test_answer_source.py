"""Where an evaluation's answers come from: a retrieved title, a span of a retrieved passage,
or the model's own words (``eval.evaluate.answer_source``), on responses written by hand."""

from __future__ import annotations

import pytest

from treegrpo.agent.protocol import CLOSE_INFO, OPEN_INFO, format_passages
from treegrpo.eval.evaluate import answer_seen, answer_source, summarize

OBSERVATION = (
    f"\n\n{OPEN_INFO}"
    + format_passages(
        [
            '"Heart of Darkness"\nHeart of Darkness is a novella by Polish-English novelist '
            "Joseph Conrad.",
            '"Joseph Conrad"\nJoseph Conrad was a Polish-British novelist.',
        ]
    )
    + f"{CLOSE_INFO}\n\n"
)
RESPONSE = f"<think> x </think><search> Who wrote Heart of Darkness? </search>{OBSERVATION}"


@pytest.mark.parametrize(
    ("answer", "source"),
    [
        ("Heart of Darkness", "title"),  # the retrieved title: the habit
        ("joseph conrad", "title"),  # another Doc's title counts too (normalized)
        ("Polish-English novelist", "span"),  # words of a passage's text
        ("Conrad", "span"),
        ("Conr", "other"),  # not whole tokens of a passage
        ("Charles Dickens", "other"),  # the model's own words
        (None, "none"),
        ("  ", "none"),
    ],
)
def test_answer_source(answer: str | None, source: str) -> None:
    assert answer_source(answer, RESPONSE + f"<answer> {answer} </answer>") == source


WEB = (  # a web agent's episode: search results, then a visited page
    "<search> Who wrote A Doll's House? </search>\n\n<information>[1] A Doll's House\n"
    "http://wiki.test/wiki/A_Doll's_House\nA Doll's House is a three-act play.\n[2] Henrik Ibsen\n"
    "http://wiki.test/wiki/Henrik_Ibsen\nHenrik Ibsen was a playwright.</information>\n\n"
    "<visit> 2 </visit>\n\n<information>Title: Henrik Ibsen\nURL: http://wiki.test/wiki/Henrik_Ibsen\n"
    "Henrik Johan Ibsen was a Norwegian playwright.</information>\n\n"
)


@pytest.mark.parametrize(
    ("answer", "source"),
    [
        ("Henrik Ibsen", "title"),  # a result's title
        ("three-act play", "span"),  # a snippet's words
        ("Henrik Johan Ibsen", "span"),  # the visited page's words
        ("Norway", "other"),
    ],
)
def test_answer_source_of_a_web_agent(answer: str, source: str) -> None:
    assert answer_source(answer, WEB + f"<answer> {answer} </answer>") == source


def test_nothing_retrieved_means_own_words() -> None:
    assert answer_source("Joseph Conrad", "<think> x </think><answer> Joseph Conrad </answer>") == (
        "other"
    )


def test_summary_shares() -> None:
    rows = [
        {"source": "s", "hops": None, "em": 1.0, "f1": 1.0, "valid_format": 1.0, "tool_calls": 1.0}
        | {"answer_from": a}
        for a in ("title", "span", "span", "none")
    ]
    assert summarize(rows)["answer_from"] == {
        "title": 0.25,
        "span": 0.5,
        "other": 0.0,
        "none": 0.25,
    }
    assert summarize([])["answer_from"] == {}


def test_answer_seen_in_any_observation_as_whole_tokens() -> None:
    assert answer_seen(["Henrik Johan Ibsen"], WEB)  # the visited page
    assert answer_seen(["three-act"], WEB) and answer_seen(["x", "Polish-British"], RESPONSE)
    assert not answer_seen(["Ibse"], WEB)  # not whole tokens
    assert not answer_seen(["Norway"], WEB)
    assert not answer_seen(["Ibsen"], "<answer> Ibsen </answer>")  # the model's words only
