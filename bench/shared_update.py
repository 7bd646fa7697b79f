"""The prefix-shared update against the duplicated one, side by side on the same rollouts.

For each tree shape, one RL step (``train.step.rl_step``) of the embedded job from its warm
start runs twice from identical copies of the policy, optimizer and seed: once training each
kept path whole, once with ``--algo.shared-prefix`` (``train.shared``: each prompt's paths packed
once). The rollouts are the same (same weights, same seeds), so the difference is the update:
its time (old and reference log-probs, then the policy's forward and backward passes and the
optimizer steps; medians over --repeats rounds, the two modes alternating so drift hits both),
the positions it computed and the weights it left (their difference relative to the update's
change). The goals: at least 1.5× faster at ≈4 (2,2,1) and 3× at ≈16 (4,5,1).

    .venv/bin/python bench/shared_update.py                 # ≈4 and ≈16, ~5 min on 2 cores
    .venv/bin/python bench/shared_update.py --shapes 2,6,1 --repeats 5

writes ``bench/results/shared_update.json`` and prints a markdown table.
"""

from __future__ import annotations

import argparse
import copy
import json
import platform
import statistics
from dataclasses import replace
from pathlib import Path
from typing import Any

import torch

from treegrpo.agent.prompt import render_prompt
from treegrpo.agent.protocol import SearchProtocol
from treegrpo.agent.stops import StepStopper
from treegrpo.engine.hf import HFEngine
from treegrpo.engine.sampling import SamplingParams
from treegrpo.jobs.embedded import rl_and_eval_worlds
from treegrpo.jobs.presets import DEFAULT_ALGO, DEFAULT_EMBEDDED, DEFAULT_OPTIM
from treegrpo.models.load import load_model
from treegrpo.rollout.sampler import AgentLimits
from treegrpo.rollout.source import LocalRollout
from treegrpo.tools.bm25 import BM25Retriever
from treegrpo.train.step import Batch, rl_step
from treegrpo.warmstart.tiny import WarmStartConfig, warm_start

ROOT = Path(__file__).resolve().parents[1]
PARTS = ("old_logprobs", "ref_logprobs", "policy")


def one_step(
    start: Any, tokenizer: Any, tool: Any, batch: Batch, shape: tuple[int, int, int], shared: bool
) -> tuple[dict[str, float], dict[str, torch.Tensor], dict[str, torch.Tensor]]:
    """One RL step from a copy of ``start``: its metrics, its starting and final weights."""
    cfg = DEFAULT_EMBEDDED
    policy, reference = copy.deepcopy(start), copy.deepcopy(start).requires_grad_(False)
    before = {k: v.clone() for k, v in policy.state_dict().items()}
    optim = DEFAULT_OPTIM
    opt = torch.optim.AdamW(policy.parameters(), lr=optim.lr, weight_decay=optim.weight_decay)
    m, n, l = shape  # noqa: E741
    algo = replace(DEFAULT_ALGO, m=m, n=n, l=l, shared_prefix=shared)
    engine = HFEngine(policy, tokenizer, StepStopper(tokenizer))
    protocol = SearchProtocol(tokenizer, cfg.max_obs_tokens)
    metrics = rl_step(
        policy,
        reference,
        opt,
        None,
        LocalRollout(engine, protocol, tool),
        protocol,
        batch,
        algo,
        optim,
        SamplingParams(temperature=cfg.temperature, max_new_tokens=cfg.max_new_tokens),
        AgentLimits(cfg.max_turns, cfg.topk, cfg.max_context),
        seed=7,
    )
    return metrics, before, policy.state_dict()


def measure(shape: tuple[int, int, int], repeats: int, prompts: int) -> dict[str, Any]:
    model, tokenizer = load_model(warm_start(WarmStartConfig(), progress=False))
    world = rl_and_eval_worlds(DEFAULT_EMBEDDED)[0]
    questions = world.questions[:: max(1, len(world.questions) // prompts)][:prompts]
    batch = Batch(
        [render_prompt(tokenizer, q.question) for q in questions],
        [list(q.golds) for q in questions],
        [q.uid for q in questions],
    )
    tool = BM25Retriever(world.passages)
    runs: dict[bool, list[dict[str, float]]] = {False: [], True: []}
    weights: dict[bool, dict[str, torch.Tensor]] = {}
    start_weights: dict[str, torch.Tensor] = {}
    for _ in range(repeats):
        for shared in (False, True):
            metrics, start_weights, after = one_step(model, tokenizer, tool, batch, shape, shared)
            runs[shared].append(metrics)
            weights[shared] = after
    change = torch.cat([(weights[False][k] - start_weights[k]).flatten() for k in start_weights])
    diff = torch.cat([(weights[True][k] - weights[False][k]).flatten() for k in start_weights])

    def med(shared: bool, key: str) -> float:
        return statistics.median(r[key] for r in runs[shared])

    out: dict[str, Any] = {"shape": list(shape), "prompts": prompts, "repeats": repeats}
    for shared in (False, True):
        name = "shared" if shared else "duplicated"
        out[name] = {
            "update_s": med(shared, "time/update_s"),
            **{p: med(shared, f"time/update/{p}_s") for p in PARTS},
            "pad_fraction": med(shared, "train/pad_fraction"),
            "leaves": med(shared, "agent/leaves"),
        }
    out["speedup"] = out["duplicated"]["update_s"] / out["shared"]["update_s"]
    out["weights_rel_diff"] = float(diff.norm() / change.norm().clamp(min=1e-30))
    return out


def table(results: list[dict[str, Any]]) -> str:
    lines = [
        "| tree (M,N,L) | leaves | update s, paths whole | update s, shared | speed-up "
        "| old / ref / policy s, whole | old / ref / policy s, shared | weights Δ (rel.) |",
        "|---|---:|---:|---:|---:|---|---|---:|",
    ]
    for r in results:
        d, s = r["duplicated"], r["shared"]
        lines.append(
            f"| ({','.join(map(str, r['shape']))}) | {d['leaves']:.0f} | {d['update_s']:.2f} | "
            f"{s['update_s']:.2f} | {r['speedup']:.2f}× | "
            + " / ".join(f"{d[p]:.2f}" for p in PARTS)
            + " | "
            + " / ".join(f"{s[p]:.2f}" for p in PARTS)
            + f" | {r['weights_rel_diff']:.1e} |"
        )
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--shapes", nargs="+", default=["2,2,1", "4,5,1"], help="M,N,L each")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--prompts", type=int, default=16, help="prompts per step")
    ap.add_argument("--threads", type=int, default=2, help="torch threads")
    ap.add_argument("--out", default=str(ROOT / "bench" / "results" / "shared_update.json"))
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    results = []
    for text in args.shapes:
        m, n, l = (int(x) for x in text.split(","))  # noqa: E741
        results.append(measure((m, n, l), args.repeats, args.prompts))
        print(table(results[-1:]).splitlines()[-1], flush=True)
    out = {
        "command": "python bench/shared_update.py --shapes "
        + " ".join(args.shapes)
        + f" --repeats {args.repeats} --prompts {args.prompts} --threads {args.threads}",
        "machine": {"platform": platform.platform(), "processor": platform.processor()},
        "results": results,
    }
    Path(args.out).write_text(json.dumps(out, indent=2))
    print(table(results))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
