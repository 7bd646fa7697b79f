"""Corrections against the collapse, side by side: the embedded job's chain (or tree) GRPO ≈8,
20 steps, from several warm starts and run seeds, once per variant of the settings, each run in
a process pinned to one core with one torch thread (as `treegrpo bench-budget` runs them).

    python bench/collapse.py --warm-starts 0:mkl 0:onednn 1:mkl 1:onednn 2:mkl --seeds 0 1 \\
        --variant base= --variant gate=algo.format_gate=true \\
        --variant gate+kl=algo.format_gate=true,algo.kl_coef=0.05

A variant is NAME=SECTION.FIELD=VALUE,... over the benchmark's settings, in the sections algo,
optim, health, run and world (``jobs.presets.EmbeddedConfig``; e.g.
health.action=rollback,run.save_every=2), or over the warm start's
recipe in the section warm (``warmstart.tiny.WarmStartConfig``, e.g. warm.steps=3200: each
warm start is then built with it, once, and cached); ``--tree`` runs Tree-GRPO
(2,6,1) instead of 8 chains. Writes one JSON line per run (variant, warm start, seed, held-out
EM before and after, valid format after, the first step the health alarm rose at) to ``--out``
(runs already there are skipped) and a markdown table beside it. docs/algorithm.md, section 9,
reads these numbers.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import statistics
from collections import defaultdict
from concurrent.futures import ProcessPoolExecutor
from dataclasses import replace
from pathlib import Path
from typing import Any

from treegrpo.jobs.budget.plan import BENCH_ALGO, BENCH_OPTIM, _chain_algo, _tree_algo
from treegrpo.jobs.budget.run import _init_worker
from treegrpo.jobs.presets import EmbeddedConfig
from treegrpo.train.config import HealthConfig, RunConfig
from treegrpo.train.health import TrainingUnhealthy
from treegrpo.train.task import TrainSettings
from treegrpo.warmstart.tiny import WarmStartConfig


def _value(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return text


def run_one(job: tuple[str, str, str, int, bool, str]) -> dict[str, Any]:
    """One run: (variant name, its overrides, warm start "SEED:PATH", run seed, tree, runs dir)."""
    from treegrpo.jobs.embedded import run_embedded

    name, overrides, warm, seed, tree, root = job
    algo = _tree_algo(8, BENCH_ALGO) if tree else _chain_algo(8, BENCH_ALGO)
    run = RunConfig(out_dir=root, steps=20, prompts_per_step=16, seed=seed, save_every=20,
                    eval_every=5, overwrite=True)  # fmt: skip
    warm_seed, _, path = warm.partition(":")
    recipe = WarmStartConfig(seed=int(warm_seed), linear=path or "auto")  # type: ignore[arg-type]
    sections: dict[str, Any] = {"algo": algo, "optim": BENCH_OPTIM, "health": HealthConfig()}
    world = EmbeddedConfig(warm_start_seed=int(warm_seed), warm_start_linear=path or "auto")  # type: ignore[arg-type]
    sections |= {"run": run, "warm": recipe, "world": world}
    for item in filter(None, overrides.split(",")):
        key, _, value = item.partition("=")
        section, _, field = key.partition(".")
        sections[section] = replace(sections[section], **{field: _value(value)})
    out = Path(root) / f"{name}-w{warm_seed}{path}-s{seed}"
    run = replace(sections["run"], out_dir=str(out))
    settings = TrainSettings(sections["algo"], sections["optim"], run, health=sections["health"])
    stopped = False
    try:
        summary = run_embedded(settings, sections["world"], sections["warm"], progress=False)
    except TrainingUnhealthy:  # health.action stop, or rollback out of tries: a collapse
        stopped = True
    steps = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines()]
    alarms = [m["step"] for m in steps if m.get("health/alarm")]
    if stopped:  # the last held-out evaluation it made stands for the run
        evals = [m for m in steps if "eval/em" in m]
        last = {"em": evals[-1]["eval/em"] if evals else 0.0, "valid_format": None}
        before = json.loads((out / "eval-before.json").read_text())
        summary = {"before": before, "after": {"overall": last}}
    return {
        "variant": name,
        "overrides": overrides,
        "warm_start": warm,
        "seed": seed,
        "method": "tree" if tree else "chain",
        "em_before": summary["before"]["overall"]["em"],
        "em": summary["after"]["overall"]["em"],
        "valid_format": summary["after"]["overall"]["valid_format"],
        "alarm_step": alarms[0] if alarms else None,
        "stopped": stopped,
    }


def table(rows: list[dict[str, Any]]) -> str:
    """Held-out EM % per variant (rows) and warm start (columns, each seed's run), with the
    variant's mean ± std and the alarms raised."""
    warms = list(dict.fromkeys(r["warm_start"] for r in rows))
    by: dict[str, dict[str, list[str]]] = defaultdict(lambda: defaultdict(list))
    ems: dict[str, list[float]] = defaultdict(list)
    for r in sorted(rows, key=lambda r: r["seed"]):
        by[r["variant"]][r["warm_start"]].append(f"{100 * r['em']:.1f}")
        ems[r["variant"]].append(100 * r["em"])
    head = ["variant", *warms, "mean ± std", "alarms"]
    lines = ["| " + " | ".join(head) + " |", "|---" + "|---:" * (len(head) - 1) + "|"]
    for v, cells in by.items():
        std = statistics.stdev(ems[v]) if len(ems[v]) > 1 else 0.0
        alarms = sum(r["alarm_step"] is not None for r in rows if r["variant"] == v)
        row = [v, *(" / ".join(cells.get(w, [])) for w in warms)]
        row += [f"{statistics.fmean(ems[v]):.1f} ± {std:.1f}", f"{alarms}/{len(ems[v])}"]
        lines.append("| " + " | ".join(row) + " |")
    lines += ["", "| variant | settings over the embedded job's |", "|---|---|"]
    for v, o in dict.fromkeys((r["variant"], r["overrides"] or "(none)") for r in rows):
        lines.append(f"| {v} | {o} |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--warm-starts", nargs="+", default=["0:mkl", "0:onednn"])
    ap.add_argument("--seeds", nargs="+", type=int, default=[0, 1])
    ap.add_argument("--variant", action="append", default=[], help="NAME=OVERRIDES")
    ap.add_argument("--tree", action="store_true")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--out", type=Path, default=Path("bench/results/collapse.jsonl"))
    ap.add_argument("--runs-dir", default="runs/bench-collapse")
    args = ap.parse_args()
    have = [json.loads(x) for x in args.out.read_text().splitlines()] if args.out.exists() else []
    done = {(r["variant"], r["warm_start"], r["seed"], r["method"]) for r in have}
    method = "tree" if args.tree else "chain"
    jobs = [
        (name, overrides, warm, seed, args.tree, args.runs_dir)
        for name, _, overrides in (v.partition("=") for v in args.variant or ["base="])
        for seed in args.seeds  # seed-major: parallel workers build different warm starts
        for warm in args.warm_starts
        if (name, warm, seed, method) not in done
    ]
    ctx = mp.get_context("spawn")
    cores: Any = ctx.Queue()
    available = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else [None]
    for i in range(args.workers):
        cores.put(available[i % len(available)])
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with ProcessPoolExecutor(args.workers, mp_context=ctx, initializer=_init_worker,
                             initargs=(cores,)) as pool:  # fmt: skip
        for row in pool.map(run_one, jobs):
            print(f"{row['variant']} {row['warm_start']} s{row['seed']}: EM {100 * row['em']:.1f}")
            with args.out.open("a") as f:
                f.write(json.dumps(row) + "\n")
            have.append(row)
    text = "\n\n".join(
        f"{m}, held-out EM % after 20 steps (per warm start: each seed's run):\n\n"
        + table([r for r in have if r["method"] == m])
        for m in ("chain", "tree")
        if any(r["method"] == m for r in have)
    )
    args.out.with_suffix(".md").write_text(text + "\n")
    print(text)


if __name__ == "__main__":
    main()
