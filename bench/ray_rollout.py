"""Rollout workers on Ray: the same step's forests sampled by 1 and by 2 workers, side by side.

The job is the embedded default's rollout at budget ≈ 4: the warm-started tiny agent (built once
and cached, as `make run` does), 16 prompts of the RL world, Tree-GRPO (M=2, N=2, L=1), the job's
sampling and agent limits, BM25 over the world's passages held by one retriever actor. Each
worker is one Ray actor with one core (one torch thread); the driver only waits. Rounds
alternate 1 worker and 2 workers (--repeats rounds, medians), after one untimed round that
starts the actors' engines. Also measured: the weight push (the policy's state put into Ray's
object store once and loaded into every worker), and that 1 and 2 workers give the same forests.

    .venv/bin/python bench/ray_rollout.py            # writes bench/results/ray_rollout.json

Goal: 2 workers ≥ 1.7× the prompts per second of 1 worker on 2 free cores.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import time
from pathlib import Path

import ray
import torch

from treegrpo.agent.prompt import render_prompt
from treegrpo.core.budget import TreeShape
from treegrpo.distributed.rollout import RayRollout, WorkerSpec
from treegrpo.engine.sampling import SamplingParams
from treegrpo.jobs.embedded import rl_and_eval_worlds
from treegrpo.jobs.presets import DEFAULT_EMBEDDED
from treegrpo.models.load import load_model
from treegrpo.retrieval.bm25 import BM25Retriever
from treegrpo.rollout.records import Rollout
from treegrpo.rollout.sampler import AgentLimits
from treegrpo.rollout.source import Draw
from treegrpo.warmstart.tiny import WarmStartConfig, warm_start

ROOT = Path(__file__).resolve().parents[1]


def digest(ro: Rollout) -> list[list[tuple[int, list[int]]]]:
    """Each tree as (depth, action ids) of its nodes in order: the forest without node ids."""
    f = ro.forest
    trees: list[list[tuple[int, list[int]]]] = [[] for _ in range(f.n_trees)]
    for v in range(f.n_nodes):
        if f.parent[v] >= 0:
            trees[int(f.tree_id[v])].append((int(f.depth[v]), ro.step(v).action_ids))
    return trees


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--prompts", type=int, default=16)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "ray_rollout.json")
    args = ap.parse_args()

    cfg = DEFAULT_EMBEDDED
    model_dir = warm_start(WarmStartConfig(), progress=False)
    world, _ = rl_and_eval_worlds(cfg)
    _, tok = load_model(model_dir)
    prompts = [render_prompt(tok, q.question) for q in world.questions[: args.prompts]]
    sampling = SamplingParams(temperature=cfg.temperature, max_new_tokens=cfg.max_new_tokens)
    limits = AgentLimits(cfg.max_turns, cfg.topk, cfg.max_context)
    shape = TreeShape(2, 2, 1)
    tool = BM25Retriever(world.passages)
    spec = WorkerSpec(str(model_dir), max_obs_tokens=cfg.max_obs_tokens)

    # 3 logical CPUs for both pools (1 + 2 workers); only one pool computes at a time
    ray.init(num_cpus=3, include_dashboard=False, configure_logging=False, log_to_driver=False)
    pools = {n: RayRollout(spec, tool, workers=n) for n in (1, 2)}
    times: dict[int, list[float]] = {1: [], 2: []}
    forests = {}
    for rnd in range(args.repeats + 1):  # round 0: untimed
        for n, pool in pools.items():
            t0 = time.perf_counter()
            forests[n] = pool.sample(prompts, Draw(shape, sampling, limits, seed=rnd))
            if rnd > 0:
                times[n].append(time.perf_counter() - t0)
            print(f"round {rnd}: {n} worker(s) {time.perf_counter() - t0:.2f} s", flush=True)
    same = digest(forests[1]) == digest(forests[2])
    model, _ = load_model(model_dir)
    sync = []
    for _ in range(args.repeats):
        pools[2].update_weights(model)
        sync.append(pools[2].sync_seconds)
    for pool in pools.values():
        pool.close()
    ray.shutdown()

    med = {n: statistics.median(t) for n, t in times.items()}
    params = sum(p.numel() for p in model.parameters())
    result = {
        "command": f"python bench/ray_rollout.py --prompts {args.prompts} --repeats {args.repeats}",
        "machine": platform.processor() or platform.machine(),
        "torch": torch.__version__,
        "ray": ray.__version__,
        "prompts": len(prompts),
        "shape": str(shape),
        "generated_tokens": forests[2].spend.total().generated,
        "seconds": {str(n): t for n, t in times.items()},
        "median_s": {str(n): m for n, m in med.items()},
        "speedup_2_over_1": med[1] / med[2],
        "same_forests": same,
        "weight_sync_s": sync,
        "model_parameters": params,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2))
    print(
        f"1 worker {med[1]:.2f} s, 2 workers {med[2]:.2f} s: {med[1] / med[2]:.2f}x; "
        f"same forests: {same}; weight sync {statistics.median(sync) * 1000:.0f} ms "
        f"({params / 1e6:.1f} M parameters); wrote {args.out}"
    )


if __name__ == "__main__":
    main()
