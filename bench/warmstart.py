"""The embedded job's warm start, measured: what it does before any RL, and how much that
depends on the build.

For each build (a ``WarmStartConfig`` variant and a torch thread count; threads change the
rounding of every SFT update, as another CPU kind does), this builds the warm start into a
fresh cache (or loads it with ``--cached``) and reports:

- held-out EM, greedy, on the default job's held-out questions, overall and per hop count,
  with tool calls per question: the "before" of the default run;
- the first RL step's view, sampled: a Tree-GRPO (2, 2, 1) forest at the default temperature
  over ``--prompts`` questions of the RL train world, with the share of prompts whose six leaves
  all score alike (no advantage), sampled EM per hop count and tool calls per leaf.

    .venv/bin/python bench/warmstart.py --builds default threads=1 seed=1 seed=2

writes ``bench/results/warmstart.json`` and prints a markdown table for BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import json
import platform
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import torch

from treegrpo.agent.prompt import render_prompt
from treegrpo.agent.protocol import SearchProtocol
from treegrpo.agent.stops import StepStopper
from treegrpo.core.budget import TreeShape
from treegrpo.core.groups import uniform_share
from treegrpo.engine.hf import HFEngine
from treegrpo.engine.sampling import SamplingParams
from treegrpo.jobs.embedded import held_out_evaluator, rl_and_eval_worlds
from treegrpo.jobs.presets import DEFAULT_EMBEDDED
from treegrpo.models.load import load_model
from treegrpo.retrieval.bm25 import BM25Retriever
from treegrpo.rollout.sampler import AgentLimits, sample_forest
from treegrpo.rollout.scoring import score_leaves
from treegrpo.warmstart.tiny import WarmStartConfig, warm_start

ROOT = Path(__file__).resolve().parents[1]


def parse_build(spec: str) -> tuple[WarmStartConfig, int]:
    """ "default", or comma-separated "threads=N", "FIELD=VALUE" (an int field of
    WarmStartConfig) and "flaws.FIELD=P" (a probability of ``demos.Flaws``)."""
    cfg, threads = WarmStartConfig(), 2
    for item in spec.split(",") if spec != "default" else []:
        key, _, value = item.partition("=")
        if key == "threads":
            threads = int(value)
        elif key.startswith("flaws."):
            cfg = replace(cfg, flaws=replace(cfg.flaws, **{key[6:]: float(value)}))
        else:
            cfg = replace(cfg, **{key: int(value)})
    return cfg, threads


def first_step_view(model: Any, tok: Any, n_prompts: int, seed: int = 0) -> dict[str, Any]:
    """A (2, 2, 1) forest over ``n_prompts`` RL-train-world questions evenly spread over hop
    counts, as the first RL step samples it."""
    job = DEFAULT_EMBEDDED
    world, _ = rl_and_eval_worlds(job)
    pick = np.linspace(0, len(world.questions) - 1, n_prompts).round().astype(int)
    questions = [world.questions[i] for i in pick]
    protocol = SearchProtocol(tok, job.max_obs_tokens)
    engine = HFEngine(model, tok, StepStopper(tok))
    rollout = sample_forest(
        engine,
        protocol,
        BM25Retriever(world.passages, use_cache=False),
        [render_prompt(tok, q.question) for q in questions],
        TreeShape(2, 2, 1),
        SamplingParams(temperature=job.temperature, max_new_tokens=job.max_new_tokens),
        AgentLimits(job.max_turns, job.topk, job.max_context),
        seed=seed,
    )
    leaves = [int(x) for x in rollout.kept]
    scores = score_leaves(rollout, leaves, [list(q.golds) for q in questions], protocol.decode)
    prompt_of = rollout.forest.prompt_id[np.array(leaves)]
    hops = np.array([questions[p].hops for p in prompt_of])
    return {
        "prompts": len(questions),
        "uniform_share": uniform_share(scores.em, prompt_of),
        "em_by_hops": {int(h): float(scores.em[hops == h].mean()) for h in np.unique(hops)},
        "tool_calls_per_leaf": float(scores.tool_calls.mean()),
    }


def measure(spec: str, cache: Path | None, prompts: int) -> dict[str, Any]:
    cfg, threads = parse_build(spec)
    torch.set_num_threads(threads)
    t0 = time.perf_counter()
    path = warm_start(cfg, cache_dir=cache, progress=False)
    built = time.perf_counter() - t0
    model, tok = load_model(path)
    report = held_out_evaluator(DEFAULT_EMBEDDED, rl_and_eval_worlds(DEFAULT_EMBEDDED)[1])(
        model, tok
    )
    return {
        "build": spec,
        "threads": threads,
        "build_seconds": built,
        "held_out_em": report["overall"]["em"],
        "held_out_em_by_hops": {h: v["em"] for h, v in report["by_hops"].items()},
        "held_out_tool_calls": report["overall"]["tool_calls"],
        "first_step": first_step_view(model, tok, prompts),
    }


def table(rows: list[dict[str, Any]]) -> str:
    lines = [
        "| build | threads | build s | held-out EM | 1 / 2 / 3 / 4 hops | tool calls "
        "| uniform prompts, step 1 | sampled EM 1 / 2 / 3 / 4 hops |",
        "|---|---:|---:|---:|---|---:|---:|---|",
    ]
    for r in rows:
        hops = " / ".join(f"{100 * v:.0f}" for v in r["held_out_em_by_hops"].values())
        sampled = " / ".join(f"{100 * v:.0f}" for v in r["first_step"]["em_by_hops"].values())
        lines.append(
            f"| {r['build']} | {r['threads']} | {r['build_seconds']:.0f} | "
            f"{100 * r['held_out_em']:.1f} | {hops} | {r['held_out_tool_calls']:.2f} | "
            f"{100 * r['first_step']['uniform_share']:.0f}% | {sampled} |"
        )
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--builds", nargs="+", default=["default"])
    ap.add_argument("--prompts", type=int, default=96)
    ap.add_argument("--cached", action="store_true", help="use the default cache, not a fresh one")
    ap.add_argument("--out", type=Path, default=ROOT / "bench/results/warmstart.json")
    args = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for spec in args.builds:
            cache = Path(tmp) / spec if not args.cached else None
            rows.append(measure(spec, cache, args.prompts))
            print(table(rows[-1:]), flush=True)
    result = {
        "machine": platform.processor() or platform.machine(),
        "torch_cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "builds": rows,
    }
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(table(rows))


if __name__ == "__main__":
    main()
