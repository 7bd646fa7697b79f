"""What choosing where to branch costs: each expansion rule, with the paper's per-tree budget and
with difficulty budgets, on the embedded job's tree (2,6,1), side by side in one process.

Each configuration trains a few RL steps from the embedded warm start (the same seed, prompts
and settings; 20 held-out questions after, which this does not time) and reads the steps'
``time/expansion_choice_s`` (scoring leaves, allocating a difficulty budget, picking the nodes:
all inside the rollout) against ``time/rollout_s`` and ``time/step_s``. The goal: at most 5% of
a step's wall time. The first step of the first configuration pays for warm caches, so every
configuration is run once untimed first.

    .venv/bin/python bench/expansion_cost.py            # ~5 min on 2 CPU cores
    .venv/bin/python bench/expansion_cost.py --steps 3 --out /tmp/cost.json

writes ``bench/results/expansion_cost.json`` and prints a markdown table.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import tempfile
from dataclasses import replace
from pathlib import Path
from typing import Any

import torch

from treegrpo.core.expansion import RULES
from treegrpo.jobs.embedded import run_embedded
from treegrpo.jobs.presets import DEFAULT_ALGO, DEFAULT_EMBEDDED, DEFAULT_OPTIM, DEFAULT_RUN
from treegrpo.train.task import TrainSettings

ROOT = Path(__file__).resolve().parents[1]


def measure(rule: str, budget: str, steps: int, seed: int, out_dir: Path) -> dict[str, Any]:
    """Train ``steps`` steps with the rule and budget; the mean per-step times and shares."""
    algo = replace(DEFAULT_ALGO, expansion=rule, expansion_budget=budget)
    run = replace(
        DEFAULT_RUN,
        out_dir=str(out_dir),
        steps=steps,
        seed=seed,
        eval_every=0,
        save_every=steps,
        keep_checkpoints=1,
    )
    world = replace(DEFAULT_EMBEDDED, eval_questions=20)
    run_embedded(TrainSettings(algo, DEFAULT_OPTIM, run), world, progress=False)
    rows = [json.loads(x) for x in (out_dir / "metrics.jsonl").read_text().splitlines()]
    rows = [r for r in rows if "time/expansion_choice_s" in r]
    choice = sum(r["time/expansion_choice_s"] for r in rows)
    return {
        "rule": rule,
        "budget": budget,
        "steps": len(rows),
        "choice_s": choice / len(rows),
        "rollout_s": statistics.fmean(r["time/rollout_s"] for r in rows),
        "step_s": statistics.fmean(r["time/step_s"] for r in rows),
        "share_of_step": choice / sum(r["time/step_s"] for r in rows),
        "share_of_rollout": choice / sum(r["time/rollout_s"] for r in rows),
    }


def table(results: list[dict[str, Any]]) -> str:
    lines = [
        "| expansion | budget | choice s / step | rollout s / step | step s | share of step "
        "| share of rollout |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]
    for r in results:
        lines.append(
            f"| {r['rule']} | {r['budget']} | {r['choice_s']:.3f} | {r['rollout_s']:.1f} | "
            f"{r['step_s']:.1f} | {100 * r['share_of_step']:.2f}% | "
            f"{100 * r['share_of_rollout']:.2f}% |"
        )
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--steps", type=int, default=4, help="RL steps per configuration")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default=str(ROOT / "bench" / "results" / "expansion_cost.json"))
    args = ap.parse_args()
    configs = [(rule, budget) for budget in ("per-tree", "difficulty") for rule in RULES]
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        measure(*configs[0], steps=1, seed=args.seed, out_dir=Path(tmp) / "warm")  # untimed
        for i, (rule, budget) in enumerate(configs):
            results.append(measure(rule, budget, args.steps, args.seed, Path(tmp) / str(i)))
            print(table(results[-1:]).splitlines()[-1], flush=True)
    out = {
        "command": f"python bench/expansion_cost.py --steps {args.steps} --seed {args.seed}",
        "machine": {
            "platform": platform.platform(),
            "processor": platform.processor(),
            "torch_threads": torch.get_num_threads(),
        },
        "shape": {"m": DEFAULT_ALGO.m, "n": DEFAULT_ALGO.n, "l": DEFAULT_ALGO.l},
        "prompts_per_step": DEFAULT_RUN.prompts_per_step,
        "results": results,
    }
    Path(args.out).write_text(json.dumps(out, indent=2))
    print(table(results))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
