"""Reports in the paper's column order (docs/algorithm.md §7): NQ, TriviaQA, PopQA, HotpotQA, 2Wiki,
Musique, Bamboogle, then the single-hop and multi-hop averages (means of the per-source numbers),
then other sources; numbers made by hand."""

from __future__ import annotations

from typing import Any

import pytest

from treegrpo.eval.evaluate import (
    compare_table,
    format_table,
    paper_table,
    report_groups,
    source_averages,
    summarize,
)

# EM per source: (correct, questions). Sources listed out of the paper's order on purpose.
HAND = {
    "bamboogle": (1, 4),  # 25%
    "zz-custom": (1, 1),  # 100%
    "popqa": (1, 2),  # 50%
    "musique": (0, 2),  # 0%
    "nq": (3, 4),  # 75%
    "2wikimultihopqa": (1, 2),  # 50%
    "triviaqa": (1, 1),  # 100%
    "hotpotqa": (1, 2),  # 50%
    "aaa-custom": (0, 1),  # 0%
}


def _rows(counts: dict[str, tuple[int, int]]) -> list[dict[str, Any]]:
    rows = []
    for source, (right, n) in counts.items():
        for i in range(n):
            em = float(i < right)
            rows.append(
                {
                    "source": source,
                    "hops": None,
                    "em": em,
                    "f1": em,
                    "valid_format": 1.0,
                    "tool_calls": 2.0 if source == "nq" else 1.0,
                }
            )
    return rows


def test_rows_follow_the_paper_then_the_averages_then_other_sources() -> None:
    report = summarize(_rows(HAND))
    names = [name for name, _ in report_groups(report)]
    assert names == [
        "source nq",
        "source triviaqa",
        "source popqa",
        "source hotpotqa",
        "source 2wikimultihopqa",
        "source musique",
        "source bamboogle",
        "single-hop avg",
        "multi-hop avg",
        "source aaa-custom",
        "source zz-custom",
        "overall",
    ]
    avg = report["averages"]
    # single-hop: (75 + 100 + 50) / 3 = 75; multi-hop: (50 + 50 + 0 + 25) / 4 = 31.25 —
    # means of the per-source numbers, as the paper's "avg" columns (pooled would be 5/7, 3/10).
    assert avg["single-hop avg"]["em"] == pytest.approx(0.75)
    assert avg["multi-hop avg"]["em"] == pytest.approx(0.3125)
    assert avg["single-hop avg"]["n"] == 7 and avg["multi-hop avg"]["n"] == 10
    assert avg["single-hop avg"]["tool_calls"] == pytest.approx((2 + 1 + 1) / 3)
    assert report["overall"]["n"] == 19  # the overall row pools every question
    assert report["overall"]["em"] == pytest.approx(9 / 19)
    assert list(report["by_source"])[:3] == ["nq", "triviaqa", "popqa"]


def test_the_paper_layout_row() -> None:
    report = summarize(_rows(HAND))
    table = paper_table(report).splitlines()
    assert table[0] == (
        "| EM % | NQ | TriviaQA | PopQA | HotpotQA | 2Wiki | Musique | Bamboogle "
        "| single avg | multi avg |"
    )
    assert table[2] == "| this run | 75.0 | 100.0 | 50.0 | 50.0 | 50.0 | 0.0 | 25.0 | 75.0 | 31.2 |"
    md = format_table(report, "t")
    assert "| single-hop avg | 7 | 75.0 | 75.0 | 100.0 | 1.33 |" in md
    assert "| multi-hop avg | 10 | 31.2 |" in md and table[2] in md


def test_partial_groups_say_what_they_average_and_others_get_no_paper_row() -> None:
    report = summarize(_rows({"HotpotQA": (1, 2), "musique": (0, 1), "toy": (1, 1)}))
    names = [name for name, _ in report_groups(report)]
    assert names == [
        "source HotpotQA",  # matched without regard to case
        "source musique",
        "multi-hop avg (HotpotQA, musique)",  # not the paper's 4-source average
        "source toy",
        "overall",
    ]
    assert report["averages"]["multi-hop avg (HotpotQA, musique)"]["em"] == pytest.approx(0.25)
    assert "multi avg (HotpotQA, musique)" in paper_table(report)
    assert paper_table(summarize(_rows({"toy": (1, 1)}))) == ""
    assert source_averages({}) == {}


def test_before_after_rows_line_up() -> None:
    before = summarize(_rows({"nq": (1, 4), "hotpotqa": (0, 2)}))
    after = summarize(_rows({"nq": (3, 4), "hotpotqa": (1, 2)}))
    lines = compare_table(before, after).splitlines()
    assert lines[2] == "| source nq | 4 | 25.0 | 75.0 | 2.00 | 2.00 |  |"  # no outcomes
    assert lines[-1] == "| overall | 6 | 16.7 | 66.7 | 1.67 | 1.67 |  |"
    assert "| single-hop avg (nq) | 4 | 25.0 | 75.0 |" in lines[4]


def _kind_rows(ems: list[float]) -> list[dict[str, Any]]:
    rows = _rows({"wiki-qa": (0, len(ems))})
    kinds = ["capital", "cloze-name"] * (len(ems) // 2)
    for row, kind, em in zip(rows, kinds, ems, strict=True):
        row.update(kind=kind, hops=1, em=em, f1=em)
    return rows


def test_question_kinds_get_their_own_rows_after_the_hop_counts() -> None:
    before, after = summarize(_kind_rows([1, 0, 0, 0])), summarize(_kind_rows([1, 1, 0, 1]))
    assert before["by_kind"] == {
        "capital": {"em": 0.5, "f1": 0.5, "valid_format": 1.0, "tool_calls": 1.0, "n": 2}
        | {"misses": {}},
        "cloze-name": {"em": 0.0, "f1": 0.0, "valid_format": 1.0, "tool_calls": 1.0, "n": 2}
        | {"misses": {}},
    }
    assert after["by_kind"]["cloze-name"]["em"] == 1.0
    names = [name for name, _ in report_groups(after)]
    assert names == ["source wiki-qa", "1-hop", "kind capital", "kind cloze-name", "overall"]
    table = compare_table(before, after)
    assert "| kind cloze-name | 2 | 0.0 | 100.0 | 1.00 | 1.00 |" in table
    assert "| kind capital | 2 | 50.0 | 50.0 |" in table
    assert summarize(_rows(HAND))["by_kind"] == {}  # no kinds: no rows
