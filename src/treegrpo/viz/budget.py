"""Plots of the budget-matched benchmark (``treegrpo.jobs.budget.run``): held-out EM against
the budget, learning curves against generated tokens, and EM against the tool calls spent. Each
takes the result dict (its JSON) and writes one PNG; styles are fixed per method so the plots
read alike (chain GRPO blue, Tree-GRPO orange, ablations grey)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

STYLE: dict[str, dict[str, Any]] = {
    "chain": {"color": "tab:blue", "marker": "o", "label": "chain GRPO"},
    "tree": {"color": "tab:orange", "marker": "s", "label": "Tree-GRPO (intra+inter)"},
    "tree-intra": {"color": "0.35", "marker": "v", "label": "tree, intra only"},
    "tree-inter": {"color": "0.65", "marker": "^", "label": "tree, inter only"},
    "tree-no-root": {"color": "tab:green", "marker": "D", "label": "tree, no-root expansion"},
    "tree-entropy": {"color": "tab:red", "marker": "P", "label": "tree, entropy expansion"},
    "tree-informed": {"color": "tab:purple", "marker": "X", "label": "tree, informed expansion"},
}
for _rule in ("uniform", "no-root", "entropy", "informed"):
    _label = f"tree, {_rule} expansion, difficulty budgets"
    _base = STYLE["tree" if _rule == "uniform" else f"tree-{_rule}"]
    STYLE[f"tree-{_rule}+difficulty"] = _base | {"markerfacecolor": "white", "label": _label}
"""Each method's marks: chain, the uniform tree, the advantage ablation (points at its budget),
the expansion rules (``bench-budget --expansions``, lines like the two main methods) and the
rules with budgets that follow difficulty (``--difficulty``: the rule's colour, open marks)."""
ABLATION = ("tree-intra", "tree-inter")


def moving_average(xs: Sequence[float], window: int) -> list[float]:
    """Trailing moving average; the first points average what exists so far."""
    if window < 1:
        raise ValueError(f"window must be >= 1, got {window}")
    return [sum(xs[max(0, i - window + 1) : i + 1]) / min(i + 1, window) for i in range(len(xs))]


def _std(x: dict[str, float | None]) -> float:
    return 0.0 if x["std"] is None else float(x["std"])


def plot_em_vs_budget(result: dict[str, Any], out: Path) -> Path:
    """Held-out EM (mean ± std over seeds) against the budget, chain vs tree; the ablation as
    points at its budget, the starting model (warm start) as a dashed line."""
    fig = Figure(figsize=(6.5, 4.2))
    ax = fig.subplots()
    for method, style in STYLE.items():
        aggs = [a for a in result["aggregates"] if a["method"] == method]
        if not aggs:
            continue
        xs = [a["budget"] * (1.04 if method.startswith("tree-") else 1.0) for a in aggs]
        ax.errorbar(
            xs,
            [100 * a["em"]["mean"] for a in aggs],
            yerr=[100 * _std(a["em"]) for a in aggs],
            capsize=4,
            linestyle="none" if method in ABLATION else "-",
            **style,
        )
    start = 100 * result["warm_start"]["overall"]["em"]  # the data mode's model, if it ran
    label = "starting model" if result["settings"].get("job") else "warm start"
    ax.axhline(start, color="0.5", ls="--", label=label)
    budgets = sorted({a["budget"] for a in result["aggregates"]})  # quarter chains' rungs too
    ax.set_xscale("log", base=2)
    ax.set_xticks(budgets, [f"≈{b}" for b in budgets])
    ax.set_title(f"Held-out EM vs budget ({len(result['settings']['seeds'])} seed(s))")
    return _save(fig, out, ax, "budget (trajectories per prompt)")


def plot_learning_curves(result: dict[str, Any], out: Path, window: int = 5) -> Path:
    """Training reward EM (trailing moving average, mean over seeds) against cumulative
    generated tokens per prompt: one panel per budget, one line per method."""
    budgets: Sequence[int] = result["settings"]["budgets"]
    fig = Figure(figsize=(3.6 * len(budgets), 3.6))
    axes = fig.subplots(1, len(budgets), squeeze=False, sharey=True)
    for ax, b in zip(axes[0], budgets, strict=True):
        for a in (a for a in result["aggregates"] if a["budget"] == b):
            curve = a["curve"]
            ax.plot(
                curve["generated_per_prompt"],
                [100 * y for y in moving_average(curve["reward_em"], window)],
                markersize=3,
                **STYLE[a["method"]],
            )
        ax.set_title(f"budget ≈{b}")
        ax.set_xlabel("generated tokens per prompt (cumulative)")
        ax.grid(alpha=0.3)
    axes[0][0].set_ylabel(f"train EM % (moving avg, {window} steps)")
    axes[0][0].legend(fontsize=7)
    return _save(fig, out)


def plot_em_vs_tool_calls(result: dict[str, Any], out: Path) -> Path:
    """Final held-out EM against the tool calls spent per prompt over the whole training run:
    every run as a faint point, each (method, budget) as mean ± std with its budget written."""
    fig = Figure(figsize=(6.5, 4.2))
    ax = fig.subplots()
    for method, style in STYLE.items():
        runs = [r for r in result["runs"] if r["method"] == method]
        aggs = [a for a in result["aggregates"] if a["method"] == method]
        if not aggs:
            continue
        ax.scatter(
            [r["tool_calls_total_per_prompt"] for r in runs],
            [100 * r["em"] for r in runs],
            color=style["color"],
            marker=style["marker"],
            alpha=0.25,
            s=18,
        )
        ax.errorbar(
            [a["tool_calls_total_per_prompt"]["mean"] for a in aggs],
            [100 * a["em"]["mean"] for a in aggs],
            xerr=[_std(a["tool_calls_total_per_prompt"]) for a in aggs],
            yerr=[100 * _std(a["em"]) for a in aggs],
            capsize=3,
            linestyle="none",
            **style,
        )
        for a in aggs:
            ax.annotate(
                f"≈{a['budget']}",
                (a["tool_calls_total_per_prompt"]["mean"], 100 * a["em"]["mean"]),
                textcoords="offset points",
                xytext=(4, 4),
                fontsize=7,
                color=style["color"],
            )
    ax.set_title("Held-out EM vs search spend")
    return _save(fig, out, ax, "tool calls spent per prompt, whole training run")


def plot_held_out_curves(result: dict[str, Any], out: Path, axis: str) -> Path:
    """Held-out EM (mean over seeds) against cumulative spend on ``axis`` ("tokens" per prompt or
    training "seconds"): a panel per budget, a line per method, quarter-budget chains in the panel
    of the tree budget they face."""
    budgets: Sequence[int] = result["settings"]["budgets"]
    fig = Figure(figsize=(3.8 * len(budgets), 3.8))
    axes = fig.subplots(1, len(budgets), squeeze=False, sharey=True)
    xlabel = {"tokens": "generated tokens per prompt (cumulative)", "seconds": "training s"}
    for ax, b in zip(axes[0], budgets, strict=True):
        shown = [a for a in result["aggregates"] if a["budget"] == b]
        shown += [
            a
            for a in result["aggregates"]
            if a["budget"] == 4 * b and a["method"] == "chain" and 4 * b not in budgets
        ]
        for a in shown:
            curve = a.get("held_out_curve", {}).get(axis)
            if not curve or a["method"] not in STYLE:
                continue
            style = dict(STYLE[a["method"]])
            if a["budget"] != b:
                style |= {"label": f"{style['label']} ≈{a['budget']}", "linestyle": ":"}
            ax.plot(curve[axis], [100 * y for y in curve["em"]], markersize=4, **style)
        ax.set_title(f"budget ≈{b}")
        ax.xaxis.set_major_locator(MaxNLocator(5))  # wide spends: labels that do not overlap
        ax.set_xlabel(xlabel[axis])
        ax.grid(alpha=0.3)
    axes[0][0].set_ylabel("held-out EM % (mean over seeds)")
    axes[0][0].legend(fontsize=6)
    return _save(fig, out)


def plot_all(result: dict[str, Any], folder: Path, prefix: str) -> list[Path]:
    """The plots as ``<folder>/<prefix>_{em_vs_budget,learning_curves,em_vs_tool_calls}`` and,
    when the runs evaluated during training, ``_em_vs_tokens`` and ``_em_vs_time``."""
    paths = [
        plot_em_vs_budget(result, folder / f"{prefix}_em_vs_budget.png"),
        plot_learning_curves(result, folder / f"{prefix}_learning_curves.png"),
        plot_em_vs_tool_calls(result, folder / f"{prefix}_em_vs_tool_calls.png"),
    ]
    if any("held_out_curve" in a for a in result["aggregates"]):
        paths.append(plot_held_out_curves(result, folder / f"{prefix}_em_vs_tokens.png", "tokens"))
        paths.append(plot_held_out_curves(result, folder / f"{prefix}_em_vs_time.png", "seconds"))
    return paths


def _save(fig: Figure, out: Path, ax: Any = None, xlabel: str = "") -> Path:
    """Write ``fig`` to ``out``; ``ax``: the one panel of a held-out EM plot, labelled here."""
    if ax is not None:
        ax.set_xlabel(xlabel)
        ax.set_ylabel("held-out EM % (after RL)")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    return out
