"""The budget benchmark's verdict: every tree method against chain GRPO at equal spend (off the
held-out curves, ``jobs.budget.curves``), each expansion variant against the uniform tree, the
paper's quarter-budget comparison (a tree at ≈b against 4b chains) at equal steps and tokens,
and what each method's trees held. Pure: no torch, no files."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from typing import Any

from treegrpo.jobs.budget.curves import AXES, matched
from treegrpo.jobs.budget.stats import ci_text, t_interval, unit

ABLATION = ("tree-intra", "tree-inter")
"""The advantage ablation's methods: compared in their own table, not here."""


def _tree_methods(records: Sequence[dict[str, Any]], budget: int) -> list[str]:
    """The tree methods run at ``budget``: uniform first, then the others as they appear."""
    names = [r["method"] for r in records if r["budget"] == budget]
    found = list(dict.fromkeys(m for m in names if m != "chain" and m not in ABLATION))
    return sorted(found, key=lambda m: m != "tree")


def matched_comparisons(records: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per budget, the comparisons at matched spend (``matched``; missing runs left out): each tree
    method − the chain at equal tokens and time, each other tree method − the uniform tree, and
    the quarter comparison with its control (docs/evaluation.md, "Equal spend, not equal rungs")."""
    out: list[dict[str, Any]] = []
    budgets = sorted({r["budget"] for r in records})
    for b in budgets:
        methods = _tree_methods(records, b)
        for m in methods:
            out += [p for axis in AXES if (p := matched(records, m, "chain", b, axis=axis))]
        for m in methods[1:] if methods[:1] == ["tree"] else []:
            out += [p for p in [matched(records, m, "tree", b)] if p]
        if 4 * b in budgets:
            for m in [*methods, "chain"]:
                out += [p for p in [matched(records, m, "chain", b, 4 * b)] if p]
                out += [p for p in [final_difference(records, m, b, "chain", 4 * b)] if p]
    return out


def final_difference(
    records: Sequence[dict[str, Any]], method: str, budget: int, against: str, against_budget: int
) -> dict[str, Any] | None:
    """Held-out EM after RL (equal steps), ``method`` at ``budget`` − ``against`` at
    ``against_budget``, paired by seed, shaped as ``curves.matched``'s (axis "steps", no area)."""
    by = {(r["method"], r["budget"], unit(r)): r for r in records}
    seeds = sorted(
        s for m, b, s in by if (m, b) == (method, budget) and (against, against_budget, s) in by
    )
    if not seeds:
        return None
    diffs = [by[(method, budget, s)]["em"] - by[(against, against_budget, s)]["em"] for s in seeds]
    return {
        "method": method,
        "budget": budget,
        "against": against,
        "against_budget": against_budget,
        "axis": "steps",
        "seeds": seeds,
        "at": [float(by[(method, budget, s)]["steps"]) for s in seeds],
        "em_diffs": diffs,
        "em_mean": statistics.fmean(diffs),
        "em_ci95": t_interval(diffs),
        "auc_diffs": None,
        "auc_mean": None,
        "auc_ci95": None,
    }


AT = {"tokens": "equal generated tokens", "seconds": "equal training time", "steps": "equal steps"}


def matched_table(entries: Sequence[dict[str, Any]]) -> str:
    """The verdict as markdown: one row per comparison."""
    if not entries:
        return ""
    lines = [
        "At equal spend (held-out EM read off each run's curve at the smaller of the two runs' "
        "final spends, paired by seed; area: mean EM over that spend; points, 95% intervals):",
        "",
        "| budget | method | against | at | matched spend | Δ EM | 95% interval | Δ area "
        "| 95% interval | seeds |",
        "|---:|---|---|---|---:|---:|---|---:|---|---:|",
    ]
    for e in entries:
        against = e["against"] + (
            f" ≈{e['against_budget']}" if e["against_budget"] != e["budget"] else ""
        )
        spend = statistics.fmean(e["at"])
        unit = {"tokens": " tok/prompt", "seconds": " s", "steps": " steps"}[e["axis"]]
        area = "—" if e["auc_mean"] is None else f"{100 * e['auc_mean']:+.1f}"
        cells = [
            f"≈{e['budget']}",
            e["method"],
            against,
            AT[e["axis"]],
            f"{spend:.0f}{unit}",
            f"{100 * e['em_mean']:+.1f}",
            ci_text(e["em_ci95"]),
            area,
            ci_text(e["auc_ci95"]),
            str(len(e["seeds"])),
        ]
        lines.append(table_row(cells))
    return "\n".join(lines)


DEPTH_COLUMNS = ("0", "1", "2", "3+")


def diagnostics_table(aggregates: Sequence[dict[str, Any]]) -> str:
    """What each method spent and what its trees held, mean over steps and seeds (the table of
    docs/evaluation.md, "Equal spend, not equal rungs")."""
    rows = [a for a in aggregates if a["method"] not in ABLATION and "no_signal" in a]
    if not rows:
        return ""
    lines = [
        "Spend and signal per method (per RL step, mean over steps and seeds):",
        "",
        "| budget | method | EM % | gen. tokens / prompt | processed / prompt | mixed trees "
        "| no-signal prompts | no-signal, first 10 steps | expansions at depth 0/1/2/3+ "
        "| choice / step time | training time |",
        "|---:|---|---:|---:|---:|---:|---:|---:|---|---:|---:|",
    ]
    for a in rows:
        depths = a.get("expansion_depths") or {}
        hist = "/".join(f"{100 * depths[d]['mean']:.0f}" for d in DEPTH_COLUMNS if d in depths)
        cells = [
            f"≈{a['budget']}",
            a["method"],
            f"{100 * a['em']['mean']:.1f}",
            number_cell(a["generated_per_prompt"], ".0f"),
            number_cell(a["processed_per_prompt"], ".0f"),
            percent_cell(a["mixed_reward_share"]) if a["method"] != "chain" else "—",
            percent_cell(a["no_signal"]),
            percent_cell(a["no_signal_first10"]),
            hist or "—",
            percent_cell(a["selector_share"], ".1f"),
            number_cell(a["train_s"], ".0f", " s"),
        ]
        lines.append(table_row(cells))
    return "\n".join(lines)


def table_row(cells: Sequence[str]) -> str:
    """A markdown table row."""
    return "| " + " | ".join(cells) + " |"


def number_cell(x: dict[str, Any], fmt: str, unit: str = "") -> str:
    """An aggregate's mean as ``fmt`` with ``unit``; "—" for NaN (runs older than the metric)."""
    v = x["mean"]
    return "—" if v != v else format(v, fmt) + unit


def percent_cell(x: dict[str, Any], fmt: str = ".0f") -> str:
    v = x["mean"]
    return "—" if v != v else format(100 * v, fmt) + "%"
