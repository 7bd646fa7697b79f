"""Where an evaluation's answers come from: a retrieved title, a span of a retrieved passage,
or the model's own words (``eval.evaluate.answer_source``), on responses written by hand."""

from __future__ import annotations

import pytest

from treegrpo.agent.protocol import CLOSE_INFO, OPEN_INFO, format_passages
from treegrpo.eval.evaluate import answer_source, summarize

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
