"""How an evaluated episode ended (``eval.evaluate.outcome``) and the misses per group."""

from __future__ import annotations

from typing import Any

import pytest

from treegrpo.agent.protocol import Action
from treegrpo.eval.evaluate import (
    before_after_rows,
    collapse_warning,
    misses_cell,
    outcome,
    summarize,
)
from treegrpo.rollout.records import StepRecord


def _last(final: bool = False, finish: str = "stop") -> StepRecord:
    return StepRecord([1], [0.0], [], Action("invalid", ""), finish, final=final)


@pytest.mark.parametrize(
    ("last", "answer", "em", "expected"),
    [
        (_last(), "Paris", 1.0, "right"),
        (_last(final=True), "Paris", 1.0, "right"),  # answered at the forced final step
        (_last(), "Lyon", 0.0, "wrong answer"),
        (_last(final=True), "Lyon", 0.0, "wrong answer"),
        (_last(final=True), None, 0.0, "turn limit"),  # wanted a search after the last one
        (_last(final=True, finish="length"), None, 0.0, "turn limit"),
        (_last(finish="length"), None, 0.0, "length limit"),
        (_last(finish="eos"), None, 0.0, "no answer"),
    ],
)
def test_outcome(last: StepRecord, answer: str | None, em: float, expected: str) -> None:
    assert outcome(last, answer, em) == expected


def _row(hops: int, em: float, ended: str) -> dict[str, Any]:
    return {
        "source": "toy",
        "hops": hops,
        "em": em,
        "f1": em,
        "valid_format": 1.0,
        "tool_calls": float(hops),
        "outcome": ended,
    }


def test_misses_are_counted_per_group_commonest_first() -> None:
    rows = [_row(4, 1.0, "right"), _row(4, 0.0, "turn limit"), _row(4, 0.0, "turn limit")]
    rows += [_row(4, 0.0, "wrong answer"), _row(1, 1.0, "right")]
    report = summarize(rows)
    assert report["by_hops"]["4"]["misses"] == {"turn limit": 2, "wrong answer": 1}
    assert list(report["by_hops"]["4"]["misses"]) == ["turn limit", "wrong answer"]
    assert report["by_hops"]["1"]["misses"] == {}
    assert report["overall"]["misses"] == {"turn limit": 2, "wrong answer": 1}
    assert misses_cell(report["overall"]) == "turn limit 2, wrong answer 1"
    table = before_after_rows([("4-hop", report["by_hops"]["4"], report["by_hops"]["4"])])
    assert table.splitlines()[-1].endswith("| turn limit 2, wrong answer 1 |")


def test_reports_written_before_outcomes_existed_still_summarize() -> None:
    row = _row(2, 0.0, "wrong answer")
    del row["outcome"]
    assert summarize([row])["overall"]["misses"] == {}


def _report(em: float, valid_format: float) -> dict[str, Any]:
    return {"overall": {"em": em, "valid_format": valid_format}}


def test_a_collapse_is_told_with_its_reasons() -> None:
    assert collapse_warning(_report(0.25, 1.0), _report(0.94, 0.97)) is None  # learned
    assert collapse_warning(_report(0.25, 1.0), _report(0.25, 0.80)) is None  # at both bounds
    off_format = collapse_warning(_report(0.25, 1.0), _report(0.41, 0.44))
    assert off_format is not None and "held-out valid format 44% < 80%" in off_format
    assert "EM fell" not in off_format
    unlearned = collapse_warning(_report(0.25, 1.0), _report(0.20, 0.95))
    assert unlearned is not None and "held-out EM fell from 25.0 to 20.0" in unlearned
    assert "valid format" not in unlearned.split(":")[0]
