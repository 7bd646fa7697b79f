"""The LM head on action tokens only (``train.head``) vs on every position, side by side.

The update's forward and backward (``train.logprobs.token_logprobs`` with entropy, then the
loss over action tokens and its backward) on one micro-batch shaped like the trainer's: each row
is a prompt, then agent steps (action tokens) alternating with observations (context), so about
a quarter of the positions are actions. Two models:

- ``tiny``: a tiny Qwen2 of about the embedded agent's size (width 128, 4 layers, vocabulary
  812), full fine-tuning, 8 rows of 512 tokens;
- ``smollm2``: SmolLM2-135M's shape (Llama, width 576, 30 layers, vocabulary 49,152; random
  weights) as the real preset trains it: LoRA rank 16, gradient checkpointing, 2 rows of 2,048.

Reported per model and mode: median seconds of forward + backward over --repeats runs
(alternating the modes in one process), and the peak resident memory that one forward and
backward adds over the loaded model, each mode measured in a fresh process of its own.

    .venv/bin/python bench/head.py --threads 2      # writes bench/results/head.json
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import torch

ROOT = Path(__file__).resolve().parents[1]

SHAPES = {
    # rows, row length, prompt, action span, observation span
    "tiny": (8, 512, 110, 48, 160),
    "smollm2": (2, 2048, 230, 96, 256),
}


def build(name: str) -> Any:
    """The model of a configuration, ready for an update (train mode)."""
    if name == "tiny":
        from treegrpo.models.tiny import tiny_qwen2

        model = tiny_qwen2(812, hidden=128, layers=4, heads=2, kv_heads=2)
    else:
        from transformers import LlamaConfig, LlamaForCausalLM

        from treegrpo.train.config import ModelConfig
        from treegrpo.train.policy import prepare_policy

        config = LlamaConfig(
            vocab_size=49152,
            hidden_size=576,
            intermediate_size=1536,
            num_hidden_layers=30,
            num_attention_heads=9,
            num_key_value_heads=3,
            tie_word_embeddings=True,
        )
        torch.manual_seed(0)
        # the real preset's policy: LoRA r 16, α 32 on every linear layer, checkpointing
        cfg = ModelConfig(lora_rank=16, lora_alpha=32, grad_checkpointing=True)
        model = prepare_policy(LlamaForCausalLM(config), cfg)
    model.train()
    return model


def batch(name: str, vocab: int) -> tuple[torch.Tensor, torch.Tensor]:
    """ids (B, T) and the action mask over targets (B, T − 1)."""
    rows, length, prompt, act, obs = SHAPES[name]
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(2, vocab, (rows, length), generator=g)
    mask = torch.zeros(rows, length)
    t = prompt
    while t < length:
        mask[:, t : t + act] = 1  # an agent step; the observation after it stays context
        t += act + obs
    return ids, mask[:, 1:]  # target t + 1 is an action token


def update(model: Any, ids: torch.Tensor, mask: torch.Tensor, keep: bool) -> None:
    """One micro-batch's forward and backward, as the trainer's loss reads it."""
    from treegrpo.train.logprobs import token_logprobs

    logp, ent = token_logprobs(model, ids, None, True, None, mask if keep else None)
    assert ent is not None
    loss = -(logp * mask).sum() / mask.sum() - 0.001 * (ent * mask).sum() / mask.sum()
    loss.backward()
    model.zero_grad(set_to_none=True)


def status_mb(field: str) -> float:
    """A memory field of /proc/self/status (VmRSS: resident now, VmHWM: its peak), in MB."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024
    raise RuntimeError(f"no {field} in /proc/self/status")


def child(name: str, keep: bool) -> None:
    """Peak memory of one update in this fresh process, over the loaded model and batch."""
    model = build(name)
    ids, mask = batch(name, model.config.vocab_size)
    Path("/proc/self/clear_refs").write_text("5")  # resets VmHWM to the resident size now
    base = status_mb("VmRSS")
    update(model, ids, mask, keep)
    peak = status_mb("VmHWM")
    print(json.dumps({"base_mb": base, "peak_mb": peak, "added_mb": peak - base}))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--models", nargs="+", default=list(SHAPES), choices=list(SHAPES))
    ap.add_argument("--out", default=str(ROOT / "bench" / "results" / "head.json"))
    ap.add_argument("--child", nargs=2, metavar=("MODEL", "MODE"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    if args.child:
        child(args.child[0], args.child[1] == "actions")
        return
    res: dict[str, Any] = {
        "machine": f"{platform.processor() or platform.machine()}, {args.threads} threads, "
        f"torch {torch.__version__}"
    }
    for name in args.models:
        model = build(name)
        ids, mask = batch(name, model.config.vocab_size)
        update(model, ids, mask, True)  # warm-up
        times: dict[str, list[float]] = {"all": [], "actions": []}
        for _ in range(args.repeats):
            for mode in times:
                t0 = time.perf_counter()
                update(model, ids, mask, mode == "actions")
                times[mode].append(time.perf_counter() - t0)
        del model
        entry: dict[str, Any] = {"positions": ids.numel(), "action_share": float(mask.mean())}
        for mode, runs in times.items():
            cmd = [sys.executable, __file__, "--threads", str(args.threads), "--child", name, mode]
            mem = json.loads(subprocess.run(cmd, capture_output=True, text=True, check=True).stdout)
            entry[mode] = {"seconds": statistics.median(runs), "runs": runs, **mem}
        res[name] = entry
        print(name, json.dumps(entry), flush=True)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(res, indent=2))
    print(
        "\n| model | action share | all positions s | action tokens s | speed-up | "
        "all positions +MB | action tokens +MB |\n|---|---:|---:|---:|---:|---:|---:|"
    )
    for name in args.models:
        e = res[name]
        a, k = e["all"], e["actions"]
        print(
            f"| {name} | {e['action_share']:.2f} | {a['seconds']:.3f} | {k['seconds']:.3f} | "
            f"{a['seconds'] / k['seconds']:.2f}× | {a['added_mb']:.0f} | {k['added_mb']:.0f} |"
        )


if __name__ == "__main__":
    main()
