"""Numbers and the table of the budget-matched benchmark (``treegrpo.jobs.budget.run``):
one record per run from its ``summary.json`` and ``metrics.jsonl``, mean ± sample std over
seeds per (method, budget), and the paper-shaped markdown table. Pure: no torch, no files.

Held-out EM is broken down by hop count where the questions have one (the synthetic world),
else by data source where there are several (real question files); otherwise not at all.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from treegrpo.core.expansion import RULES
from treegrpo.jobs.budget.curves import AXES, held_out_curve, mean_curve
from treegrpo.jobs.budget.stats import ci_text, mean_std, t_interval, unit
from treegrpo.jobs.budget.verdict import diagnostics_table, matched_table

ABLATION_BUDGET = 4
"""The paper's advantage ablation is at budget ≈ 4, tree (2,2,1)."""
EXPANSION_RULES = tuple(r for r in RULES if r != "uniform")
"""Expansion rules a benchmark may add ("tree-<rule>" runs); uniform is the main tree run's."""


def expansion_method(rule: str) -> str:
    """The method name of a tree run with expansion ``rule``: "tree-entropy"."""
    return f"tree-{rule}"


def difficulty_method(rule: str) -> str:
    """The method name of a tree run with expansion ``rule`` and budgets that follow
    difficulty: "tree-informed+difficulty"."""
    return f"tree-{rule}+difficulty"


EXPANSION_METHODS = {
    **{expansion_method(r): r for r in EXPANSION_RULES},
    **{difficulty_method(r): f"{r} + difficulty budgets" for r in RULES},
}
"""Method name → what its tree runs differently (an expansion rule, with difficulty budgets or
not), for the runs beside the uniform tree."""
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
    "mixed_reward_share",
    "distinct_leaves",
    "expansion_depth",
    "root_expansions",
    "processed_per_prompt",
    "train_s",
    "no_signal",
    "no_signal_first10",
    "selector_share",
    "collapsed",
)
"""Per-run numbers aggregated over seeds (mean and sample std)."""
COLLAPSE_FORMAT = 0.8
"""A run collapsed when its held-out valid-format share after RL is below this, or its
held-out EM below its starting model's."""


def collapsed(before_em: float, after_em: float, valid_format: float) -> bool:
    """Whether a run collapsed (``COLLAPSE_FORMAT``)."""
    return valid_format < COLLAPSE_FORMAT or after_em < before_em


def per_1k_tokens(trajectories: float, tokens: float) -> float:
    """Trajectories per 1,000 generated tokens (NaN when nothing was generated)."""
    return 1000.0 * trajectories / tokens if tokens > 0 else float("nan")


def run_record(
    identity: dict[str, Any], summary: dict[str, Any], steps: Sequence[dict[str, Any]]
) -> dict[str, Any]:
    """One run's numbers from its ``summary.json`` and the RL-step lines of ``metrics.jsonl``,
    after ``identity`` (name, method, budget, seed, shape, advantage mode, expansion rule).

    Held-out (after RL): EM, F1, EM by hop count and by data source (either may be empty),
    tool calls per question. Spent in training
    (mean over steps, per prompt): leaves, generated tokens, tool calls; their totals over the
    run; trajectories per 1,000 generated tokens; the engine's processed ÷ distinct tokens.
    """
    if not steps:
        raise ValueError(f"{identity.get('name')}: metrics.jsonl has no RL step")
    after = summary["after"]
    after_em = after["overall"]["em"]
    prompts = summary["config"]["run"]["prompts_per_step"]
    leaves = statistics.fmean(m["agent/leaves"] for m in steps) / prompts
    generated = [m["spend/generated_per_prompt"] for m in steps]
    tools = [m["spend/tool_calls_per_prompt"] for m in steps]
    cumulative = [sum(generated[: i + 1]) for i in range(len(generated))]
    return {
        **identity,
        "steps": len(steps),
        "em": after["overall"]["em"],
        "f1": after["overall"]["f1"],
        "valid_format": after["overall"]["valid_format"],
        "before_em": summary["before"]["overall"]["em"],
        "collapsed": float(
            collapsed(
                summary["before"]["overall"]["em"], after_em, after["overall"]["valid_format"]
            )
        ),
        "tool_calls": after["overall"]["tool_calls"],
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
        "held_out_curve": held_out_curve(summary["before"]["overall"]["em"], after_em, steps),
        "processed_per_prompt": _step_mean(steps, "spend/processed_per_prompt"),
        "train_s": sum(m["time/step_s"] for m in steps),
        "no_signal": _step_mean(steps, "adv/uniform_prompts"),
        "no_signal_first10": _step_mean(steps[:10], "adv/uniform_prompts"),
        "selector_share": _share(steps, "time/expansion_choice_s", "time/step_s"),
        "expansion_depths": _depth_shares(steps),
        **{key: _step_mean(steps, f"tree/{key}") for key in TREE_DIAGNOSTICS},
    }


TREE_DIAGNOSTICS = ("mixed_reward_share", "distinct_leaves", "expansion_depth", "root_expansions")
"""What the trees held, per RL step (``train.step``): the share of trees whose leaves' rewards
differ, distinct trajectories per tree, the depth expansions branched at (0: the root) and the
share of expansions from the root."""


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
    """Per budget: tree − chain held-out EM paired by seed (both runs of a seed share the
    warm start, the prompts and the held-out questions), with the mean difference and its 95%
    interval (Student t over the seeds; None with fewer than two); then each expansion rule's
    tree run ("tree-<rule>") − the uniform tree and − the chain, per budget, the same way.
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


SPEND_COLUMNS = (
    ("tool calls (held-out)", "tool_calls", ".2f"),
    ("tool calls spent / prompt", "tool_calls_per_prompt", ".2f"),
    ("leaves / prompt", "leaves_per_prompt", ".1f"),
    ("gen. tokens / prompt", "generated_per_prompt", ".0f"),
    ("traj. per 1k tokens", "trajectories_per_1k_tokens", ".1f"),
    ("token efficiency", "token_efficiency", ".3f"),
)
"""Columns after EM: (header, aggregate key, format). Spent = per prompt per RL step."""
ABLATION_NAMES = {"tree": "intra+inter (Tree-GRPO)", "tree-intra": "intra", "tree-inter": "inter"}


@dataclass(frozen=True)
class Groups:
    """The held-out breakdown the table shows: by hop count or by data source."""

    label: str
    """"hop" or "source"."""
    key: str
    """The record's and aggregate's field: "em_by_hops" or "em_by_source"."""
    report_key: str
    """The evaluation report's field: "by_hops" or "by_source"."""
    names: tuple[str, ...]
    """The groups, in column order."""

    @property
    def title(self) -> str:
        return f"EM by {self.label} {'/'.join(self.names)}"


def table_groups(before: dict[str, Any]) -> Groups | None:
    """Hop counts if the starting model's report has them, else data sources if it has more
    than one (one source would repeat the overall EM), else None: no breakdown columns."""
    hops = tuple(sorted(before.get("by_hops", {})))
    if hops:
        return Groups("hop", "em_by_hops", "by_hops", hops)
    sources = tuple(before.get("by_source", {}))
    if len(sources) > 1:
        return Groups("source", "em_by_source", "by_source", sources)
    return None


def markdown_table(result: dict[str, Any]) -> str:
    """The paper-shaped budget table (rows: budget; chain vs tree) after a header with the
    command, machine, settings and the starting model's EM (the warm start, or the data mode's
    model); then the ablation table, if it ran, and the expansion rules' tables, if any ran."""
    aggs = {(a["method"], a["budget"]): a for a in result["aggregates"]}
    groups = table_groups(result["warm_start"])
    budgets = result["settings"]["budgets"]
    paired = result.get("paired", [])
    parts = [
        _header(result, groups),
        _budget_rows(aggs, budgets, groups),
        _paired_rows([p for p in paired if p.get("method", "tree") == "tree"]),
        _diagnostic_rows(aggs, budgets),
        _ablation_rows(aggs, groups),
        *(_expansion_rows(aggs, b) for b in budgets),
        _expansion_paired_rows([p for p in paired if p.get("method", "tree") != "tree"]),
        matched_table(result.get("matched", [])),
        diagnostics_table(result["aggregates"]),
    ]
    return "\n\n".join(p for p in parts if p)


def _header(result: dict[str, Any], groups: Groups | None) -> str:
    s, m, before = result["settings"], result["machine"], result["warm_start"]
    job = s.get("job")
    start = "starting model" if job else "warm start"
    breakdown = ""
    if groups is not None:
        cells = _report_cells(before[groups.report_key], groups.names)
        breakdown = f" (by {groups.label} {'/'.join(groups.names)}: {cells})"
    held_out = before["overall"].get("n", s["eval_questions"])
    gpu = f", GPU {m['gpu']}" if m.get("gpu") else ""
    lines = [
        f"### Budget-matched Tree-GRPO vs chain GRPO ({s['mode']} mode"
        + (", data mode)" if job else ")"),
        "",
        f"Command: `{result['command']}`  ",
    ]
    if job:
        d = job["data"]
        search = d["retriever_url"] or f"{d['corpus']} ({d['retriever']})"
        lines.append(
            f"Data: config {job['config']}; model {d['model']}; questions "
            f"{', '.join(d['train_files'])}; held out {', '.join(d['eval_files'])}; "
            f"search {search}.  "
        )
    lines += [
        f"Machine: {m['platform']}, {m['cpus']} CPUs ({m.get('usable_cpus')} usable){gpu}, "
        f"{s['workers']} worker(s) with "
        f"{m['torch_threads']} torch thread(s) each; total wall time "
        f"{format_duration(result['wall_s'])} ({result['counts']['ran']} runs ran, "
        f"{result['counts']['reused']} reused; the runs' own wall times add up to "
        f"{format_duration(sum(r.get('wall_s', 0.0) for r in result.get('runs', [])))}).  ",
        f"Settings: {s['steps']} RL steps x {s['prompts_per_step']} prompts, seeds "
        f"{' '.join(map(str, s['seeds']))}, {held_out} held-out questions; "
        f"{start} (before RL) EM {percent(before['overall']['em'])}{breakdown}.  ",
        *_warm_line(result),
        "EM %: held-out, greedy, after RL, mean ± sample std over seeds (each seed with its "
        "warm start where several are sampled); a collapse: held-out valid format below "
        f"{COLLAPSE_FORMAT:.0%} or EM below the starting model's after RL"
        + (f"; by {groups.label}: means" if groups else "")
        + ". Spend columns (chain / tree): per prompt per RL step, mean over steps and seeds.",
    ]
    return "\n".join(lines)


def _warm_line(result: dict[str, Any]) -> list[str]:
    """The sampled warm starts and their held-out EM, when there are several."""
    warms = result.get("warm_starts") or {}
    if len(warms) < 2:
        return []
    how = (
        "every one with every seed"
        if result["settings"].get("warm_cross")
        else "seed i with the i-th"
    )
    cells = ", ".join(f"{tag} {percent(w['em'])}" for tag, w in warms.items())
    return [f"Warm starts ({how}): {cells}.  "]


def _budget_rows(
    aggs: dict[tuple[str, int], dict[str, Any]], budgets: Sequence[int], groups: Groups | None
) -> str:
    by = [f"chain {groups.title}", f"tree {groups.title}"] if groups else []
    head = [
        "budget",
        "tree (M,N,L)",
        "chain EM %",
        "tree EM %",
        "collapses (chain / tree)",
        *by,
        *(c[0] for c in SPEND_COLUMNS),
    ]
    align = "|---:|---|---:|---:|---:|" + "---|" * len(by) + "---:|" * len(SPEND_COLUMNS)
    lines = [_row(head), align]
    for b in budgets:
        c, t = aggs.get(("chain", b)), aggs.get(("tree", b))
        shape = "({m},{n},{l})".format(**t["shape"]) if t else "—"
        cells = [f"≈{b}", shape, _em(c), _em(t), f"{_collapses(c)} / {_collapses(t)}"]
        if groups:
            cells += [_by_group(c, groups), _by_group(t, groups)]
        cells += [f"{_one(c, key, f)} / {_one(t, key, f)}" for _, key, f in SPEND_COLUMNS]
        lines.append(_row(cells))
    return "\n".join(lines)


def _paired_rows(paired: Sequence[dict[str, Any]]) -> str:
    """Tree − chain EM per budget, paired by seed, with its 95% interval."""
    if not paired:
        return ""
    lines = [
        "Tree − chain held-out EM, paired by seed (points):",
        "",
        "| budget | tree − chain | 95% interval | per seed |",
        "|---:|---:|---|---|",
    ]
    for p in paired:
        ci = ci_text(p["ci95"])
        seeds = ", ".join(f"{100 * d:+.1f}" for d in p["diffs"])
        lines.append(f"| ≈{p['budget']} | {100 * p['mean']:+.1f} | {ci} | {seeds} |")
    return "\n".join(lines)


def _diagnostic_rows(aggs: dict[tuple[str, int], dict[str, Any]], budgets: Sequence[int]) -> str:
    """What the trees held, per tree run (mean over steps and seeds)."""
    rows = [aggs[("tree", b)] for b in budgets if ("tree", b) in aggs]
    if not rows or all(a["distinct_leaves"]["mean"] != a["distinct_leaves"]["mean"] for a in rows):
        return ""  # NaN: runs from before the trainer logged them
    lines = [
        "What the trees held (per RL step, mean over steps and seeds):",
        "",
        "| budget | tree (M,N,L) | trees with mixed rewards | distinct leaves / tree "
        "| expansion depth | expansions from the root |",
        "|---:|---|---:|---:|---:|---:|",
    ]
    for a in rows:
        shape = "({m},{n},{l})".format(**a["shape"])
        lines.append(
            f"| ≈{a['budget']} | {shape} | {100 * a['mixed_reward_share']['mean']:.0f}% | "
            f"{a['distinct_leaves']['mean']:.2f} | {a['expansion_depth']['mean']:.2f} | "
            f"{100 * a['root_expansions']['mean']:.0f}% |"
        )
    return "\n".join(lines)


def _ablation_rows(aggs: dict[tuple[str, int], dict[str, Any]], groups: Groups | None) -> str:
    """Tree (2,2,1) with each advantage mode, and chain GRPO at the same budget for reference;
    empty when the ablation did not run."""
    if not any((m, ABLATION_BUDGET) in aggs for m in ("tree-intra", "tree-inter")):
        return ""
    by = [groups.title] if groups else []
    head = ["advantage", "EM %", *by, *(c[0] for c in SPEND_COLUMNS)]
    lines = [
        f"Advantage ablation at ≈{ABLATION_BUDGET}, tree (2,2,1):",
        "",
        _row(head),
        "|---|---:|" + "---|" * len(by) + "---:|" * len(SPEND_COLUMNS),
    ]
    rows = [(name, aggs.get((m, ABLATION_BUDGET))) for m, name in ABLATION_NAMES.items()]
    rows.append((f"chain GRPO, {ABLATION_BUDGET} chains", aggs.get(("chain", ABLATION_BUDGET))))
    for name, a in rows:
        if a is not None:
            cells = [name, _em(a), *([_by_group(a, groups)] if groups else [])]
            lines.append(_row(cells + [_one(a, key, f) for _, key, f in SPEND_COLUMNS]))
    return "\n".join(lines)


EXPANSION_COLUMNS = (
    ("trees with mixed rewards", "mixed_reward_share", "%"),
    ("expansions from the root", "root_expansions", "%"),
    ("expansion depth", "expansion_depth", ".2f"),
    ("gen. tokens / prompt", "generated_per_prompt", ".0f"),
)
"""Columns of the expansion rules' table after EM: (header, aggregate key, format)."""


def _expansion_rows(aggs: dict[tuple[str, int], dict[str, Any]], budget: int) -> str:
    """The uniform tree and each expansion rule's tree at ``budget`` (per RL step, mean over
    steps and seeds); empty when no rule ran there."""
    rules = [(r, aggs[(m, budget)]) for m, r in EXPANSION_METHODS.items() if (m, budget) in aggs]
    if not rules:
        return ""
    rows = [("uniform (Tree-GRPO)", aggs.get(("tree", budget))), *rules]
    shape = next(a["shape"] for _, a in rules)
    head = ["expansion", "EM %", *(c[0] for c in EXPANSION_COLUMNS)]
    lines = [
        f"Expansion rules at ≈{budget}, tree ({shape['m']},{shape['n']},{shape['l']}) (per RL "
        "step, mean over steps and seeds):",
        "",
        _row(head),
        "|---|---:|" + "---:|" * len(EXPANSION_COLUMNS),
    ]
    for name, a in rows:
        if a is not None:
            cells = [_diagnostic(a, key, f) for _, key, f in EXPANSION_COLUMNS]
            lines.append(_row([name, _em(a), *cells]))
    return "\n".join(lines)


def _diagnostic(a: dict[str, Any], key: str, fmt: str) -> str:
    x = a[key]["mean"]
    if x != x:  # NaN: runs from before the trainer logged it
        return "—"
    return f"{100 * x:.0f}%" if fmt == "%" else format(x, fmt)


def _expansion_paired_rows(paired: Sequence[dict[str, Any]]) -> str:
    """Each rule's tree − the uniform tree and − the chain per budget, paired by seed."""
    if not paired:
        return ""
    pairs: dict[tuple[int, str], dict[str, dict[str, Any]]] = {}
    for p in paired:  # one row per (budget, rule): its pair against the tree and the chain
        pairs.setdefault((p["budget"], EXPANSION_METHODS[p["method"]]), {})[p["against"]] = p
    lines = [
        "Expansion rules against the uniform tree and the chain, held-out EM paired by seed "
        "(points):",
        "",
        "| budget | expansion | − uniform tree | 95% interval | − chain | 95% interval | seeds |",
        "|---:|---|---:|---|---:|---|---:|",
    ]
    for (budget, rule), row in pairs.items():
        cells = [f"≈{budget}", rule]
        for against in ("tree", "chain"):
            d = row.get(against)
            cells += ["—", "—"] if d is None else [f"{100 * d['mean']:+.1f}", ci_text(d["ci95"])]
        seeds = max(len(d["seeds"]) for d in row.values())
        lines.append(_row([*cells, str(seeds)]))
    return "\n".join(lines)


def _row(cells: Sequence[str]) -> str:
    return "| " + " | ".join(cells) + " |"


def percent(x: float) -> str:
    """0.173 → "17.3%"."""
    return f"{100 * x:.1f}%"


def _em(a: dict[str, Any] | None) -> str:
    if a is None:
        return "—"
    std = a["em"]["std"]
    return f"{100 * a['em']['mean']:.1f}" + ("" if std is None else f" ± {100 * std:.1f}")


def _report_cells(by: dict[str, Any], names: Sequence[str]) -> str:
    """EM % per group of an evaluation report, "—" where a group is missing."""
    return "/".join(f"{100 * by[g]['em']:.0f}" if g in by else "—" for g in names)


def _by_group(a: dict[str, Any] | None, groups: Groups) -> str:
    if a is None:
        return "—"
    by = a.get(groups.key, {})
    return "/".join(f"{100 * by[g]['mean']:.0f}" if g in by else "—" for g in groups.names)


def _collapses(a: dict[str, Any] | None) -> str:
    """Collapsed runs of all ("2/20"; ``collapsed``: valid format < 80% or EM below the start
    after RL), "—" for none or an aggregate from before the count."""
    if a is None or "collapses" not in a:
        return "—"
    return f"{a['collapses']}/{len(a['seeds'])}"


def _one(a: dict[str, Any] | None, key: str, fmt: str) -> str:
    return "—" if a is None else format(a[key]["mean"], fmt)


def format_duration(seconds: float) -> str:
    """4321.4 → "1h12m01s", 75 → "1m15s"."""
    m, s = divmod(round(seconds), 60)
    h, m = divmod(m, 60)
    return f"{h}h{m:02d}m{s:02d}s" if h else f"{m}m{s:02d}s"
