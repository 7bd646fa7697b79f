"""The sampler–trainer gap on the embedded warm start: how far the engine's log-probs of the
tokens it sampled lie from the trainer's recomputation of the same tokens, for each engine
setting side by side in one run: the prefix KV cache on and off, the linear layers on MKL
(``F.linear``) or on oneDNN's packed weights, and the sampling temperature.

    python bench/sampler_gap.py [--prompts 16] [--out bench/results/sampler_gap.json]

For each setting, one tree rollout (2,6,1) of the same prompts from the same warm start; then
over every action token of every kept leaf: mean and max |Δ log p| and the k3 estimate of
KL(π_sampler ‖ π_trainer) (``train.offpolicy.gap_sums``), and the share of tokens whose ratio
lies outside [1/2, 2]. The trainer side is plain PyTorch (``train.logprobs.token_logprobs``),
what the PPO ratio is taken against. Last, what the broken-turn scoring (``format_gate`` and the
``agent/broken_turn_leaves`` metric) adds to scoring that rollout's leaves, against the
rollout's own time.
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from pathlib import Path
from typing import Any

import torch

from treegrpo.agent.stops import StepStopper
from treegrpo.core.budget import TreeShape
from treegrpo.embedded.synthetic import train_eval_worlds
from treegrpo.engine.cpu.speedups import start_process
from treegrpo.engine.hf import HFEngine
from treegrpo.engine.sampling import SamplingParams
from treegrpo.models.load import load_model
from treegrpo.retrieval.bm25 import BM25Retriever
from treegrpo.rollout import scoring
from treegrpo.rollout.sampler import AgentLimits, agent_protocol, sample_forest
from treegrpo.train.logprobs import token_logprobs
from treegrpo.train.offpolicy import gap_sums
from treegrpo.warmstart.tiny import WarmStartConfig, warm_start

SETTINGS = [  # (name, reuse_cache, packed linear layers in the engine, temperature)
    ("cache on, MKL, T=1", True, False, 1.0),
    ("cache off, MKL, T=1", False, False, 1.0),
    ("cache on, oneDNN packed, T=1", True, True, 1.0),
    ("cache off, oneDNN packed, T=1", False, True, 1.0),
    ("cache on, MKL, T=0.7", True, False, 0.7),
]


def measure(n_prompts: int, seed: int) -> list[dict[str, Any]]:
    model, tok = load_model(warm_start(WarmStartConfig(), progress=False))
    model.eval()
    world, _ = train_eval_worlds(0, n_people=100, n_questions=400)
    tool = BM25Retriever(world.passages)
    protocol = agent_protocol(tok, tool, 160)
    prompts = [protocol.prompt_ids(q.question) for q in world.questions[::25][:n_prompts]]
    out: list[dict[str, Any]] = []
    for name, cache, packed, temp in SETTINGS:
        engine = HFEngine(model, tok, StepStopper(tok, protocol.stop_tags), reuse_cache=cache,
                          packed_linear=packed)  # fmt: skip
        sampling = SamplingParams(temperature=temp, max_new_tokens=32)
        t0 = time.perf_counter()
        ro = sample_forest(engine, protocol, tool, prompts, TreeShape(2, 6, 1), sampling,
                           AgentLimits(4, 1, 1024), seed=seed)  # fmt: skip
        rollout_s = time.perf_counter() - t0
        totals = dict.fromkeys(("abs_sum", "k3_sum", "over_cap", "tokens"), 0.0)
        top = 0.0
        for leaf in ro.kept:
            seq = ro.leaf_sequence(int(leaf))
            ids = torch.tensor([seq.ids])
            with torch.no_grad():
                lp, _ = token_logprobs(model, ids, None, temperature=temp)
            mask = torch.tensor([seq.action_mask[1:]], dtype=torch.float32)
            sampled = torch.tensor([seq.logprobs[1:]])
            sums, mx = gap_sums(lp, sampled, mask, cap=2.0)
            top = max(top, mx)
            for k, v in sums.items():
                totals[k] += v
        n = totals["tokens"]
        row = {"setting": name, "tokens": n, "mean_abs": totals["abs_sum"] / n, "max_abs": top}
        row |= {"k3": totals["k3_sum"] / n, "over_cap": totals["over_cap"] / n}
        out.append(row)
        print(f"{name:32s} tokens {int(n):6d}  mean |Δ| {row['mean_abs']:.2e}  "
              f"max |Δ| {top:.2e}  k3 {row['k3']:.2e}  over cap {row['over_cap']:.4f}")  # fmt: skip
    out.append(scoring_cost(ro, [list(q.golds) for q in world.questions[::25][:n_prompts]],
                            protocol.decode, rollout_s))  # fmt: skip
    return out


def scoring_cost(ro: Any, golds: list[list[str]], decode: Any, rollout_s: float) -> dict[str, Any]:
    """Seconds to score the rollout's leaves with the broken-turn check and without it."""
    leaves = [int(v) for v in ro.kept]
    t0 = time.perf_counter()
    scoring.score_leaves(ro, leaves, golds, decode, format_score=0.0, format_gate=True)
    with_check = time.perf_counter() - t0
    real = scoring._broken
    scoring._broken = lambda *a: False
    t0 = time.perf_counter()
    scoring.score_leaves(ro, leaves, golds, decode, format_score=0.0)
    without = time.perf_counter() - t0
    scoring._broken = real
    print(f"scoring {len(leaves)} leaves: {1000 * with_check:.1f} ms with the broken-turn check, "
          f"{1000 * without:.1f} ms without; the rollout took {rollout_s:.2f} s")  # fmt: skip
    return {"setting": "scoring cost", "with_s": with_check, "without_s": without,
            "rollout_s": rollout_s}  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--prompts", type=int, default=16)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=Path, default=Path("bench/results/sampler_gap.json"))
    args = ap.parse_args()
    start_process("cpu", None)
    rows = measure(args.prompts, args.seed)
    machine = {"platform": platform.platform(), "processor": platform.processor(),
               "torch": torch.__version__, "threads": torch.get_num_threads()}  # fmt: skip
    args.out.write_text(json.dumps({"machine": machine, "rows": rows}, indent=2) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
