"""The default job, measured: `treegrpo train` with its defaults, once per seed, side by side.

For each seed this runs the README's main command in a fresh process (``treegrpo train --run.seed
S --run.out-dir …``; the warm start is shared and cached, so only the first seed pays for it unless
``--cold``), then reads the run's ``summary.json`` and ``metrics.jsonl`` and reports:

- held-out EM and tool calls per question before (the warm start) and after RL, overall and by
  hop count, mean ± std over seeds;
- the learning curve's rise: mean training reward of the last five steps minus the first five;
- the first step's share of prompts whose leaves all scored alike;
- wall time (warm start, RL, total) and peak resident memory of the run's process tree;
- in the web variant (``-- --config configs/embedded-web.yaml``): visits per question before and
  after, and the training curve of visits per leaf;
- the update's padding waste (``train/pad_fraction``: padded ÷ computed positions, mean over
  steps) and the rollout's token efficiency (processed ÷ distinct tokens).

    .venv/bin/python bench/embedded.py --seeds 0 1 2 --cold   # ~30 min on 2 CPU cores

writes ``bench/results/embedded.json`` and prints a markdown table for BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def run_seed(seed: int, out_dir: Path, cache_dir: Path, extra: list[str]) -> dict[str, Any]:
    """One default run in its own process; returns its summary plus measurements."""
    cmd = [
        sys.executable,
        "-m",
        "treegrpo.cli",
        "train",
        "--run.seed",
        str(seed),
        "--run.out-dir",
        str(out_dir),
        *extra,
    ]
    env = {**os.environ, "TREEGRPO_CACHE_DIR": str(cache_dir)}
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True, env=env, stdout=subprocess.DEVNULL)
    wall = time.perf_counter() - t0
    # ru_maxrss of children is the largest of any child so far (KiB on Linux); runs are
    # sequential, so a new maximum belongs to this run (else it is at most the old one).
    peak_kib = max(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, before)
    summary = json.loads((out_dir / "summary.json").read_text())
    steps = [json.loads(x) for x in (out_dir / "metrics.jsonl").read_text().splitlines()]
    train_steps = [m for m in steps if "train/pad_fraction" in m]
    return {
        "seed": seed,
        "wall_s": wall,
        "peak_rss_gb": peak_kib / 2**20,
        "seconds": summary["seconds"],
        "before": summary["before"],
        "after": summary["after"],
        "pad_fraction": statistics.mean(m["train/pad_fraction"] for m in train_steps),
        "token_efficiency": statistics.mean(m["spend/token_efficiency"] for m in train_steps),
        "steps": len(train_steps),
        "reward_curve": [m["reward/mean"] for m in train_steps],
        "visit_curve": [m.get("agent/calls_per_leaf/visit") for m in train_steps],
        "uniform_first_step": train_steps[0]["adv/uniform_prompts"],
    }


def mean_std(xs: list[float]) -> tuple[float, float]:
    return statistics.mean(xs), (statistics.stdev(xs) if len(xs) > 1 else 0.0)


def table(runs: list[dict[str, Any]]) -> str:
    """Markdown: EM before/after by hop count, mean ± std over seeds."""
    hops = sorted(runs[0]["before"]["by_hops"], key=str)
    rows = [
        "| held-out | EM before (warm start) | EM after RL | gain | tool calls before | after "
        "| seeds |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    web = "calls/visit" in runs[0]["before"]["overall"]  # the web variant: visits counted
    if web:
        rows[0] += " visits before | after |"
        rows[1] += "---:|---:|"
    for name, key in [*((f"{h}-hop", h) for h in hops), ("overall", None)]:

        def em(r: dict[str, Any], when: str, key: Any = key) -> float:
            part = r[when]["overall"] if key is None else r[when]["by_hops"][key]
            return 100 * float(part["em"])

        def calls(r: dict[str, Any], when: str, key: Any = key, what: str = "tool_calls") -> float:
            part = r[when]["overall"] if key is None else r[when]["by_hops"][key]
            return float(part[what])

        b = mean_std([em(r, "before") for r in runs])
        a = mean_std([em(r, "after") for r in runs])
        g = mean_std([em(r, "after") - em(r, "before") for r in runs])
        cb = mean_std([calls(r, "before") for r in runs])
        ca = mean_std([calls(r, "after") for r in runs])
        rows.append(
            f"| {name} | {b[0]:.1f} ± {b[1]:.1f} | {a[0]:.1f} ± {a[1]:.1f} | "
            f"{g[0]:+.1f} ± {g[1]:.1f} | {cb[0]:.2f} | {ca[0]:.2f} ± {ca[1]:.2f} | {len(runs)} |"
        )
        if web:
            vb = mean_std([calls(r, "before", what="calls/visit") for r in runs])
            va = mean_std([calls(r, "after", what="calls/visit") for r in runs])
            rows[-1] += f" {vb[0]:.2f} | {va[0]:.2f} ± {va[1]:.2f} |"
    return "\n".join(rows)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--cold", action="store_true", help="build the warm start in the first run")
    ap.add_argument("--out", default=str(ROOT / "bench" / "results" / "embedded.json"))
    ap.add_argument("extra", nargs="*", help="more `treegrpo train` flags, after --")
    args = ap.parse_args()
    # stopped (kill, pkill): raise here, so subprocess.run kills the running seed's process too
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(128 + signal.SIGTERM))
    work = Path(tempfile.mkdtemp(prefix="treegrpo-bench-embedded-"))
    cache = (
        work / "cache"
        if args.cold
        else Path(os.environ.get("TREEGRPO_CACHE_DIR", Path.home() / ".cache" / "treegrpo"))
    )
    runs = []
    for seed in args.seeds:
        r = run_seed(seed, work / f"seed{seed}", cache, args.extra)
        runs.append(r)
        print(
            f"seed {seed}: EM {100 * r['before']['overall']['em']:.1f} → "
            f"{100 * r['after']['overall']['em']:.1f}, {r['wall_s']:.0f} s "
            f"(warm start {r['seconds']['warm_start']:.0f} s, RL {r['seconds']['train']:.0f} s), "
            f"peak {r['peak_rss_gb']:.2f} GB",
            flush=True,
        )
    result = {
        "command": "treegrpo train --run.seed S (defaults)",
        "extra_flags": args.extra,
        "cold_first_run": args.cold,
        "machine": {
            "platform": platform.platform(),
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
        },
        "runs": runs,
    }
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=2))
    print(table(runs))
    walls = [r["wall_s"] for r in runs]
    print(
        f"\nwall: first run {walls[0]:.0f} s, later runs median "
        f"{statistics.median(walls[1:] or walls):.0f} s; peak RSS max "
        f"{max(r['peak_rss_gb'] for r in runs):.2f} GB; pad fraction mean "
        f"{statistics.mean(r['pad_fraction'] for r in runs):.3f}; token efficiency "
        f"{statistics.mean(r['token_efficiency'] for r in runs):.3f}"
    )
    rises = [
        statistics.mean(r["reward_curve"][-5:]) - statistics.mean(r["reward_curve"][:5])
        for r in runs
    ]
    print(
        "learning curve rise (last 5 − first 5 steps' mean reward): "
        + ", ".join(f"{x:.2f}" for x in rises)
        + "; first step's uniform prompts: "
        + ", ".join(f"{r['uniform_first_step']:.2f}" for r in runs)
    )
    shutil.rmtree(work / "cache", ignore_errors=True)


if __name__ == "__main__":
    main()
