"""One record per budget benchmark run (its ``summary.json`` and ``metrics.jsonl``), their mean
± sample std over seeds per (method, budget) and the differences paired by seed; ``report``
renders them. Pure. Held-out EM is broken down by hop count where questions have one (the
synthetic world), else by data source where there are several, else not at all."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from typing import Any

from treegrpo.core.expansion import RULES
from treegrpo.eval.evaluate import collapsed
from treegrpo.jobs.budget.curves import AXES, held_out_curve, mean_curve
from treegrpo.jobs.budget.stats import mean_std, t_interval, unit

ABLATION_BUDGET = 4
"""The paper's advantage ablation is at budget ≈ 4, tree (2,2,1)."""
EXPANSION_RULES = tuple(r for r in RULES if r != "uniform")
"""Expansion rules a benchmark may add ("tree-<rule>" runs); uniform is the main tree run's."""


def expansion_method(rule: str) -> str:
    """The method name of a tree run with expansion ``rule``: "tree-entropy"."""
    return f"tree-{rule}"


def difficulty_method(rule: str) -> str:
    """Method of a tree run with ``rule`` and difficulty budgets: "tree-informed+difficulty"."""
    return f"tree-{rule}+difficulty"


EXPANSION_METHODS = {
    **{expansion_method(r): r for r in EXPANSION_RULES},
    **{difficulty_method(r): f"{r} + difficulty budgets" for r in RULES},
}
"""Method name → what its tree runs differently (an expansion rule, with difficulty budgets or
not), for the runs beside the uniform tree."""
TREE_DIAGNOSTICS = ("mixed_reward_share", "distinct_leaves", "expansion_depth", "root_expansions")
"""What the trees held, per RL step (``train.step``): the share of trees whose leaves' rewards
differ, distinct trajectories per tree, the depth expansions branched at (0: the root) and the
share of expansions from the root."""
NUMERIC = (
    "em",
    "f1",
    "valid_format",
    "tool_calls",
    "leaves_per_prompt",
    "generated_per_prompt",
    "tool_calls_per_prompt",
    "generated_total_per_prompt",
    "tool_calls_total_per_prompt",
    "trajectories_per_1k_tokens",
    "token_efficiency",
    "step_s",
    "wall_s",
    *TREE_DIAGNOSTICS,
    "processed_per_prompt",
    "train_s",
    "no_signal",
    "no_signal_first10",
    "selector_share",
    "collapsed",
)
"""Per-run numbers aggregated over seeds (mean and sample std)."""


def per_1k_tokens(trajectories: float, tokens: float) -> float:
    """Trajectories per 1,000 generated tokens (NaN when nothing was generated)."""
    return 1000.0 * trajectories / tokens if tokens > 0 else float("nan")


def run_record(
    identity: dict[str, Any], summary: dict[str, Any], steps: Sequence[dict[str, Any]]
) -> dict[str, Any]:
    """One run's numbers from its ``summary.json`` and the RL-step lines of ``metrics.jsonl``, after
    ``identity``: held-out EM, F1, EM by hop and by source (either may be empty) and tool calls per
    question; spent per prompt (mean over steps) and in total: leaves, generated tokens, tool calls;
    trajectories per 1,000 generated tokens; the engine's processed ÷ distinct tokens."""
    if not steps:
        raise ValueError(f"{identity.get('name')}: metrics.jsonl has no RL step")
    after, end = summary["after"], summary["after"]["overall"]
    before_em = summary["before"]["overall"]["em"]
    prompts = summary["config"]["run"]["prompts_per_step"]
    leaves = statistics.fmean(m["agent/leaves"] for m in steps) / prompts
    generated = [m["spend/generated_per_prompt"] for m in steps]
    tools = [m["spend/tool_calls_per_prompt"] for m in steps]
    cumulative = [sum(generated[: i + 1]) for i in range(len(generated))]
    return {
        **identity,
        "steps": len(steps),
        "em": end["em"],
        "f1": end["f1"],
        "valid_format": end["valid_format"],
        "before_em": before_em,
        "collapsed": float(collapsed(before_em, end["em"], end["valid_format"])),
        "tool_calls": end["tool_calls"],
        "em_by_hops": {h: v["em"] for h, v in after.get("by_hops", {}).items()},
        "em_by_source": {s: v["em"] for s, v in after.get("by_source", {}).items()},
        "leaves_per_prompt": leaves,
        "generated_per_prompt": statistics.fmean(generated),
        "tool_calls_per_prompt": statistics.fmean(tools),
        "generated_total_per_prompt": sum(generated),
        "tool_calls_total_per_prompt": sum(tools),
        "trajectories_per_1k_tokens": per_1k_tokens(leaves, statistics.fmean(generated)),
        "token_efficiency": statistics.fmean(m["spend/token_efficiency"] for m in steps),
        "step_s": statistics.fmean(m["time/step_s"] for m in steps),
        "wall_s": summary["seconds"]["total"],
        "curve": {"generated_per_prompt": cumulative, "reward_em": [m["reward/em"] for m in steps]},
        "held_out_curve": held_out_curve(before_em, end["em"], steps),
        "processed_per_prompt": _step_mean(steps, "spend/processed_per_prompt"),
        "train_s": sum(m["time/step_s"] for m in steps),
        "no_signal": _step_mean(steps, "adv/uniform_prompts"),
        "no_signal_first10": _step_mean(steps[:10], "adv/uniform_prompts"),
        "selector_share": _share(steps, "time/expansion_choice_s", "time/step_s"),
        "expansion_depths": _depth_shares(steps),
        **{key: _step_mean(steps, f"tree/{key}") for key in TREE_DIAGNOSTICS},
    }


def _step_mean(steps: Sequence[dict[str, Any]], key: str) -> float:
    values = [m[key] for m in steps if key in m]
    return statistics.fmean(values) if values else float("nan")


def _share(steps: Sequence[dict[str, Any]], part: str, whole: str) -> float:
    """Σ part / Σ whole over the steps that logged ``part`` (NaN: none did)."""
    rows = [m for m in steps if part in m]
    total = sum(m[whole] for m in rows)
    return sum(m[part] for m in rows) / total if rows and total > 0 else float("nan")


DEPTH_PREFIX = "tree/expansions_at_depth/"
"""Metric keys of the share of a step's expansions that branched at each depth (0: the root;
the last key, "3+", counts deeper ones too)."""


def _depth_shares(steps: Sequence[dict[str, Any]]) -> dict[str, float]:
    """Mean over steps of the share of expansions at each depth ({} before they were logged)."""
    keys = sorted({k for m in steps for k in m if k.startswith(DEPTH_PREFIX)})
    return {k.removeprefix(DEPTH_PREFIX): _step_mean(steps, k) for k in keys}


def paired_differences(records: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per budget: tree − chain held-out EM paired by seed, with the mean and its 95% Student-t
    interval (None under two seeds); then each "tree-<rule>" − the uniform tree and − the chain.
    Each entry names its ``method`` and what it is compared ``against``."""
    by: dict[tuple[str, int, str], float] = {
        (r["method"], r["budget"], unit(r)): r["em"] for r in records
    }
    budgets = sorted({b for _, b, _ in by})
    out = [p for b in budgets if (p := _paired(by, "tree", "chain", b))]
    rules = [m for m in EXPANSION_METHODS if any(k[0] == m for k in by)]
    for b in budgets:
        for method in rules:
            out += [p for against in ("tree", "chain") if (p := _paired(by, method, against, b))]
    return out


def _paired(
    by: dict[tuple[str, int, str], float], method: str, against: str, budget: int
) -> dict[str, Any] | None:
    """``method`` − ``against`` at ``budget`` over the units (seeds, with their warm starts
    where several) both ran (None: no such unit)."""
    seeds = sorted(s for m, b, s in by if m == method and b == budget and (against, b, s) in by)
    if not seeds:
        return None
    diffs = [by[(method, budget, s)] - by[(against, budget, s)] for s in seeds]
    return {
        "method": method,
        "against": against,
        "budget": budget,
        "seeds": seeds,
        "diffs": diffs,
        "mean": statistics.fmean(diffs),
        "ci95": t_interval(diffs),
    }


def aggregate(records: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per (method, budget): every NUMERIC field and each hop's and each source's EM as mean
    and sample std over seeds, and the learning curve averaged over seeds step by step."""
    groups: dict[tuple[str, int], list[dict[str, Any]]] = {}
    for r in records:
        groups.setdefault((r["method"], r["budget"]), []).append(r)
    out = []
    for (method, budget), rs in sorted(groups.items(), key=lambda kv: (kv[0][1], kv[0][0])):
        agg: dict[str, Any] = {
            "method": method,
            "budget": budget,
            "shape": rs[0]["shape"],
            "expansion": rs[0].get("expansion"),
            "seeds": sorted(r["seed"] for r in rs),
            "units": sorted(unit(r) for r in rs),
            "collapses": int(sum(r.get("collapsed", 0.0) for r in rs)),
        }
        for key in NUMERIC:
            agg[key] = _ms([r[key] for r in rs])
        for by in ("em_by_hops", "em_by_source"):
            names = list(dict.fromkeys(g for r in rs for g in r.get(by, {})))  # first seen first
            if by == "em_by_hops":
                names.sort()
            agg[by] = {g: _ms([r[by][g] for r in rs if g in r.get(by, {})]) for g in names}
        depths = list(dict.fromkeys(d for r in rs for d in r.get("expansion_depths", {})))
        agg["expansion_depths"] = {
            d: _ms([r["expansion_depths"].get(d, float("nan")) for r in rs]) for d in depths
        }
        curves = [r["held_out_curve"] for r in rs if r.get("held_out_curve")]
        if curves:
            agg["held_out_curve"] = {axis: mean_curve(curves, axis) for axis in AXES}
        n = min(len(r["curve"]["reward_em"]) for r in rs)
        agg["curve"] = {
            k: [statistics.fmean(r["curve"][k][i] for r in rs) for i in range(n)]
            for k in ("generated_per_prompt", "reward_em")
        }
        out.append(agg)
    return out


def _ms(xs: Sequence[float]) -> dict[str, float | None]:
    if any(x != x for x in xs):  # NaN: a number some run did not log
        return {"mean": float("nan"), "std": None}
    mean, std = mean_std(xs)
    return {"mean": mean, "std": std}
