"""The sharded update (``distributed.fsdp.TrainRank``) against the one-process update on the
same micro-batches, on one device: the parameters after two mini-batches, and the times.

World size 1 on purpose: it needs no Ray (the GPU machine of ``bench/gpu_check.sh`` has none)
and runs FSDP2's real path (DTensor parameters, NCCL on CUDA or gloo on CPU, the gather of the
full state), so a CUDA-only fault shows here; the two-rank numbers are the CPU tests'
(``tests/distributed/test_fsdp.py``).

    .venv/bin/python bench/fsdp_check.py --device cpu          # ~10 s
    python3 bench/fsdp_check.py --device cuda --hidden 1024 --layers 8 --out r.json
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

from treegrpo.distributed.fsdp import RankSpec, TrainRank, free_port
from treegrpo.models.tiny import tiny_qwen2
from treegrpo.rollout.records import LeafSequence
from treegrpo.train.batch import make_micro_batches
from treegrpo.train.config import AlgorithmConfig, ModelConfig, OptimConfig
from treegrpo.train.trainer import make_optimizer
from treegrpo.train.update import Part, UpdatePlan, ppo_update, weighted


def synthetic_minis(vocab: int, leaves: int, minis: int, seed: int) -> list[list[Part]]:
    """Random leaf sequences (prompt, then alternating action and observation spans) with
    random advantages, cut into micro-batches as the RL step cuts them."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(minis):
        seqs, advs = [], []
        for _ in range(leaves):
            n = int(rng.integers(200, 400))
            ids = rng.integers(2, vocab, n).tolist()
            mask = [0] * 60 + [int(rng.random() < 0.6) for _ in range(n - 60)]
            seqs.append(LeafSequence(ids, mask, [0.0] * n, 60))
            advs.append(float(rng.normal()))
        out.append(weighted(make_micro_batches(seqs, advs, 2048), "token-mean"))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", default="cuda", choices=["cpu", "cuda"])
    ap.add_argument("--hidden", type=int, default=128)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--vocab", type=int, default=4096)
    ap.add_argument("--leaves", type=int, default=16)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    device = torch.device(args.device)
    algo = AlgorithmConfig(kl_coef=0.0, entropy_coef=0.01)
    optim = OptimConfig(lr=1e-4)
    model_cfg = ModelConfig(device=args.device, dtype="float32", cpu_speedups=False)
    minis = synthetic_minis(args.vocab, args.leaves, minis=2, seed=0)
    schedule = [0, 1]
    heads = max(2, args.hidden // 64)
    model = tiny_qwen2(args.vocab, args.hidden, args.layers, heads, kv_heads=heads, seed=0)
    with tempfile.TemporaryDirectory() as tmp:
        model.save_pretrained(tmp)
        policy = model.to(device)
        opt, sched = make_optimizer(policy, optim)
        start = {k: v.detach().cpu().clone() for k, v in policy.state_dict().items()}
        spec = RankSpec(tmp, model_cfg, optim, cuda=device.type == "cuda")
        rank = TrainRank(spec, 0, 1)
        t0 = time.perf_counter()
        rank.setup(("127.0.0.1", free_port()), start, opt.state_dict(), sched.state_dict())
        t_setup = time.perf_counter() - t0

        def timed(fn):  # type: ignore[no-untyped-def]
            if device.type == "cuda":
                torch.cuda.synchronize()
            t = time.perf_counter()
            out = fn()
            if device.type == "cuda":
                torch.cuda.synchronize()
            return out, time.perf_counter() - t

        here, t_here = timed(
            lambda: ppo_update(
                policy, None, opt, sched, UpdatePlan(minis, schedule, algo, optim, 1.0)
            )
        )
        ranked, t_rank = timed(lambda: rank.update(minis, schedule, algo, optim, 1.0))
        gathered, t_gather = timed(rank.model_state)
        rank.close()
    diffs = {
        k: float((gathered[k] - v.detach().cpu()).abs().max())
        for k, v in policy.state_dict().items()
    }
    moved = float(max((policy.state_dict()[k].cpu() - start[k]).abs().max() for k in start))
    result = {
        "device": torch.cuda.get_device_name() if device.type == "cuda" else "cpu",
        "torch": torch.__version__,
        "model": {"hidden": args.hidden, "layers": args.layers, "vocab": args.vocab},
        "micro_batches": [len(m) for m in minis],
        "grad_norms": {"one_process": here.grad_norms, "fsdp_rank": ranked.grad_norms},
        "max_abs_param_diff": max(diffs.values()),
        "max_abs_update": moved,
        # where the two differ most, and how far that parameter moved in the update
        "worst_param": (worst := max(diffs, key=lambda k: diffs[k])),
        "worst_param_update": float((gathered[worst] - start[worst]).abs().max()),
        "seconds": {
            "setup": t_setup,
            "update_one_process": t_here,
            "update_fsdp": t_rank,
            "gather": t_gather,
        },
    }
    print(json.dumps(result, indent=2))
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(result, indent=2))
    ok = result["max_abs_param_diff"] <= 1e-3 * max(moved, 1e-12) + 1e-6
    print("parameters equal within fp32 rounding" if ok else "PARAMETERS DIFFER")
    raise SystemExit(0 if ok else 1)


if __name__ == "__main__":
    main()
