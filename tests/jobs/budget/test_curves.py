"""Held-out curves, comparisons at equal spend and the verdict's tables, with hand-computed
numbers."""

from __future__ import annotations

from typing import Any

import pytest

from treegrpo.jobs.budget.curves import area, em_at, held_out_curve, matched, mean_curve
from treegrpo.jobs.budget.records import aggregate, run_record
from treegrpo.jobs.budget.verdict import (
    diagnostics_table,
    final_difference,
    matched_comparisons,
    matched_table,
)


def _steps(tokens: list[float], evals: dict[int, float], seconds: float = 2.0) -> list[dict]:
    """metrics.jsonl lines: step i+1 generates tokens[i] per prompt; ``evals``: step → EM."""
    rows = []
    for i, t in enumerate(tokens):
        row: dict[str, Any] = {"step": i + 1, "spend/generated_per_prompt": t}
        row |= {"time/step_s": seconds, "adv/uniform_prompts": 0.5 if i < 2 else 0.0}
        if i + 1 in evals:
            row["eval/em"] = evals[i + 1]
        rows.append(row)
    return rows


def test_curve_has_the_start_each_evaluation_and_the_end() -> None:
    c = held_out_curve(0.2, 0.9, _steps([10, 10, 20, 20], {2: 0.5}))
    assert c == {
        "step": [0, 2, 4],
        "tokens": [0.0, 20.0, 60.0],
        "seconds": [0.0, 4.0, 8.0],
        "em": [0.2, 0.5, 0.9],
    }
    # the last step's periodic evaluation is not run (its policy is "after"): "after" wins
    c = held_out_curve(0.2, 0.9, _steps([10, 10], {2: 0.4}))
    assert c["em"] == [0.2, 0.9]


def test_em_at_interpolates_and_never_extrapolates() -> None:
    xs, ems = [0.0, 20.0, 60.0], [0.2, 0.5, 0.9]
    assert em_at(xs, ems, 10.0) == pytest.approx(0.35)
    assert em_at(xs, ems, 40.0) == pytest.approx(0.7)
    assert em_at(xs, ems, 60.0) == pytest.approx(0.9)
    with pytest.raises(ValueError, match="outside"):
        em_at(xs, ems, 61.0)


def test_area_is_the_mean_em_over_the_spend() -> None:
    assert area([0.0, 10.0], [0.4, 0.4], 10.0) == pytest.approx(0.4)
    assert area([0.0, 10.0], [0.0, 1.0], 10.0) == pytest.approx(0.5)
    # up to 5 of a 0→1 ramp over 10: the mean of 0..0.5 is 0.25
    assert area([0.0, 10.0], [0.0, 1.0], 5.0) == pytest.approx(0.25)
    # two pieces: 0→0.5 over [0, 20] (mean .25) then 0.5→0.9 over [20, 60] (mean .7)
    assert area([0.0, 20.0, 60.0], [0.0, 0.5, 0.9], 60.0) == pytest.approx(
        (20 * 0.25 + 40 * 0.7) / 60
    )


def _record(method: str, budget: int, seed: int, xs: list[float], ems: list[float]) -> dict:
    curve = {"step": list(range(len(xs))), "tokens": xs, "seconds": xs, "em": ems}
    return {"method": method, "budget": budget, "seed": seed, "em": ems[-1], "steps": 20,
            "held_out_curve": curve}  # fmt: skip


def test_matched_reads_both_runs_at_the_smaller_final_spend() -> None:
    records = [
        _record("tree", 4, 0, [0.0, 120.0], [0.2, 0.8]),  # spent more than the chain
        _record("chain", 4, 0, [0.0, 100.0], [0.2, 0.6]),
        _record("tree", 4, 1, [0.0, 100.0], [0.2, 0.6]),
        _record("chain", 4, 1, [0.0, 100.0], [0.2, 0.7]),
    ]
    m = matched(records, "tree", "chain", 4)
    assert m is not None and m["seeds"] == ["s0", "s1"] and m["at"] == [100.0, 100.0]
    # seed 0: the tree at 100 of its 120 tokens is 0.2 + 0.6·100/120 = 0.7; the chain 0.6
    assert m["em_diffs"] == pytest.approx([0.1, -0.1])
    # areas: tree (0.2 + 0.7)/2 = .45 vs chain (0.2 + 0.6)/2 = .40; seed 1: .40 vs .45
    assert m["auc_diffs"] == pytest.approx([0.05, -0.05])
    assert m["em_mean"] == pytest.approx(0.0)
    lo, hi = m["em_ci95"]
    assert lo < 0 < hi and hi == pytest.approx(-lo)
    assert matched(records, "tree-informed", "chain", 4) is None  # no such runs
    one = matched(records[:2], "tree", "chain", 4)
    assert one is not None and one["em_ci95"] is None  # one seed: no interval


def test_verdict_holds_chain_tree_rules_and_the_quarter_comparison() -> None:
    records = []
    for s in (0, 1):
        records += [
            _record("chain", 4, s, [0.0, 100.0], [0.2, 0.5]),
            _record("tree", 4, s, [0.0, 110.0], [0.2, 0.6]),
            _record("tree-informed", 4, s, [0.0, 90.0], [0.2, 0.7 + 0.01 * s]),
            _record("chain", 16, s, [0.0, 400.0], [0.2, 0.9]),
            _record("tree-intra", 4, s, [0.0, 100.0], [0.2, 0.1]),  # the ablation: left out
        ]
    entries = matched_comparisons(records)
    keys = [(e["method"], e["against"], e["against_budget"], e["axis"]) for e in entries]
    assert keys == [
        ("tree", "chain", 4, "tokens"),
        ("tree", "chain", 4, "seconds"),
        ("tree-informed", "chain", 4, "tokens"),
        ("tree-informed", "chain", 4, "seconds"),
        ("tree-informed", "tree", 4, "tokens"),
        ("tree", "chain", 16, "tokens"),
        ("tree", "chain", 16, "steps"),
        ("tree-informed", "chain", 16, "tokens"),
        ("tree-informed", "chain", 16, "steps"),
        ("chain", "chain", 16, "tokens"),  # the control: 4 chains against 16, no tree
        ("chain", "chain", 16, "steps"),
    ]
    quarter = final_difference(records, "tree", 4, "chain", 16)
    assert quarter is not None and quarter["em_diffs"] == pytest.approx([-0.3, -0.3])
    # at the tree's 110 tokens the 16 chains had 0.2 + 0.7·110/400 = 0.3925
    at_tokens = entries[5]
    assert at_tokens["at"] == [110.0, 110.0]
    assert at_tokens["em_diffs"] == pytest.approx([0.6 - 0.3925] * 2)
    # the control at the 4 chains' 100 tokens: 0.5 against 0.2 + 0.7·100/400 = 0.375
    assert entries[9]["em_diffs"] == pytest.approx([0.5 - 0.375] * 2)
    assert entries[10]["em_diffs"] == pytest.approx([0.5 - 0.9] * 2)
    table = matched_table(entries)
    assert "| ≈4 | tree | chain ≈16 | equal steps | 20 steps | -30.0 |" in table
    assert "| ≈4 | chain | chain ≈16 | equal generated tokens | 100 tok/prompt | +12.5 |" in table
    assert "| ≈4 | tree | chain | equal generated tokens | 100 tok/prompt |" in table


def test_mean_curve_and_the_diagnostics_table() -> None:
    a = {"tokens": [0.0, 10.0, 30.0], "em": [0.2, 0.4, 0.6]}
    b = {"tokens": [0.0, 20.0], "em": [0.2, 0.8]}
    mean = mean_curve([a, b], "tokens")
    assert mean["tokens"] == [0.0, 15.0] and mean["em"] == pytest.approx([0.2, 0.6])
    steps = _steps([10, 10, 20, 20], {2: 0.5})
    for m in steps:
        m |= {"agent/leaves": 8.0, "spend/tool_calls_per_prompt": 1.0, "reward/em": 0.5}
        m |= {"spend/token_efficiency": 1.0, "spend/processed_per_prompt": 30.0}
        m |= {"tree/mixed_reward_share": 0.5, "time/expansion_choice_s": 0.1}
        m |= {f"tree/expansions_at_depth/{d}": 0.25 for d in ("0", "1", "2", "3+")}
    summary = {
        "after": {"overall": {"em": 0.9, "f1": 0.9, "valid_format": 1.0, "tool_calls": 2.0}},
        "before": {"overall": {"em": 0.2}},
        "config": {"run": {"prompts_per_step": 4}},
        "seconds": {"total": 10.0},
    }
    identity = {"name": "tree-b4-s0", "method": "tree", "budget": 4, "seed": 0,
                "shape": {"m": 2, "n": 2, "l": 1}}  # fmt: skip
    r = run_record(identity, summary, steps)
    assert r["no_signal"] == pytest.approx(0.25) and r["no_signal_first10"] == pytest.approx(0.25)
    assert r["selector_share"] == pytest.approx(0.4 / 8.0)
    assert r["expansion_depths"] == {"0": 0.25, "1": 0.25, "2": 0.25, "3+": 0.25}
    (agg,) = aggregate([r])
    table = diagnostics_table([agg])
    assert "| ≈4 | tree | 90.0 | 15 | 30 | 50% | 25% | 25% | 25/25/25/25 | 5.0% | 8 s |" in table
