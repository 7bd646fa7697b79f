"""The budget benchmark's markdown: the paper-shaped table of ``records.aggregate``'s rows with
the run's header, paired differences, tree diagnostics, ablation and expansion rules. Pure."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from treegrpo.eval.evaluate import COLLAPSE_FORMAT
from treegrpo.jobs.budget.records import ABLATION_BUDGET, EXPANSION_METHODS
from treegrpo.jobs.budget.stats import ci_text
from treegrpo.jobs.budget.verdict import (
    diagnostics_table,
    matched_table,
    number_cell,
    percent_cell,
    table_row,
)

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
    report_key: str
    """The evaluation report's field: "by_hops" or "by_source" (the aggregate's: "em_" before)."""
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
        return Groups("hop", "by_hops", hops)
    sources = tuple(before.get("by_source", {}))
    if len(sources) > 1:
        return Groups("source", "by_source", sources)
    return None


def markdown_table(result: dict[str, Any]) -> str:
    """The paper-shaped budget table (rows: budget; chain vs tree) after a header (command,
    machine, settings, the starting model's EM), then the ablation's and rules' tables if run."""
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
        cells = _group_cells(before[groups.report_key], groups.names, "em")
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
    crossed = result["settings"].get("warm_cross")
    how = "every one with every seed" if crossed else "seed i with the i-th"
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
    lines = [table_row(head), align]
    for b in budgets:
        c, t = aggs.get(("chain", b)), aggs.get(("tree", b))
        shape = "({m},{n},{l})".format(**t["shape"]) if t else "—"
        cells = [f"≈{b}", shape, _em(c), _em(t), f"{_collapses(c)} / {_collapses(t)}"]
        if groups:
            cells += [_by_group(c, groups), _by_group(t, groups)]
        cells += [f"{_one(c, key, f)} / {_one(t, key, f)}" for _, key, f in SPEND_COLUMNS]
        lines.append(table_row(cells))
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
    """Tree (2,2,1) per advantage mode, and chain GRPO at that budget; empty without ablation."""
    if not any((m, ABLATION_BUDGET) in aggs for m in ("tree-intra", "tree-inter")):
        return ""
    by = [groups.title] if groups else []
    head = ["advantage", "EM %", *by, *(c[0] for c in SPEND_COLUMNS)]
    lines = [
        f"Advantage ablation at ≈{ABLATION_BUDGET}, tree (2,2,1):",
        "",
        table_row(head),
        "|---|---:|" + "---|" * len(by) + "---:|" * len(SPEND_COLUMNS),
    ]
    rows = [(name, aggs.get((m, ABLATION_BUDGET))) for m, name in ABLATION_NAMES.items()]
    rows.append((f"chain GRPO, {ABLATION_BUDGET} chains", aggs.get(("chain", ABLATION_BUDGET))))
    for name, a in rows:
        if a is not None:
            cells = [name, _em(a), *([_by_group(a, groups)] if groups else [])]
            lines.append(table_row(cells + [_one(a, key, f) for _, key, f in SPEND_COLUMNS]))
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
        table_row(head),
        "|---|---:|" + "---:|" * len(EXPANSION_COLUMNS),
    ]
    for name, a in rows:
        if a is not None:
            cells = [
                percent_cell(a[key]) if f == "%" else number_cell(a[key], f)
                for _, key, f in EXPANSION_COLUMNS
            ]
            lines.append(table_row([name, _em(a), *cells]))
    return "\n".join(lines)


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
        lines.append(table_row([*cells, str(seeds)]))
    return "\n".join(lines)


def percent(x: float) -> str:
    """0.173 → "17.3%"."""
    return f"{100 * x:.1f}%"


def _em(a: dict[str, Any] | None) -> str:
    if a is None:
        return "—"
    std = a["em"]["std"]
    return f"{100 * a['em']['mean']:.1f}" + ("" if std is None else f" ± {100 * std:.1f}")


def _group_cells(by: dict[str, Any], names: Sequence[str], key: str) -> str:
    """EM % per group (``key``: "em" of a report, "mean" of an aggregate), "—" where missing."""
    return "/".join(f"{100 * by[g][key]:.0f}" if g in by else "—" for g in names)


def _by_group(a: dict[str, Any] | None, groups: Groups) -> str:
    if a is None:
        return "—"
    return _group_cells(a.get(f"em_{groups.report_key}", {}), groups.names, "mean")


def _collapses(a: dict[str, Any] | None) -> str:
    """Collapsed runs of all ("2/20"), "—" for none or an aggregate from before the count."""
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
