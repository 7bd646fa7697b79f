"""The prefix-shared update against the duplicated one, side by side on the same rollouts.

For each tree shape, one RL step (``train.step.rl_step``) of the embedded job from its warm
start runs twice from identical copies of the policy, optimizer and seed: once training each
kept path whole, once with ``--algo.shared-prefix`` (``train.shared``: each prompt's paths packed
once). The rollouts are the same (same weights, same seeds), so the difference is the update:
its time (old and reference log-probs, then the policy's forward and backward passes and the
optimizer steps; medians over --repeats rounds, the two modes alternating so drift hits both),
the positions it computed and the weights it left (their difference relative to the update's
change), and each step's peak memory (a child process per step). The goals: at least 1.5×
faster at ≈4 (2,2,1) and 3× at ≈16 (4,5,1), and 1.5× on the SmolLM2 preset's shapes.

    .venv/bin/python bench/shared_update.py                 # ≈4 and ≈16, ~8 min on 2 cores
    .venv/bin/python bench/shared_update.py --model smollm2 --shapes 2,2,1 --repeats 1

writes ``bench/results/shared_update.json`` and prints a markdown table.
"""

from __future__ import annotations

import argparse
import copy
import io
import json
import multiprocessing as mp
import platform
import resource
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import torch

from treegrpo.agent.prompt import render_prompt
from treegrpo.agent.protocol import SearchProtocol
from treegrpo.agent.stops import StepStopper
from treegrpo.embedded.search_tokenizer import train_search_tokenizer
from treegrpo.engine.hf import HFEngine
from treegrpo.engine.sampling import SamplingParams
from treegrpo.jobs.data import make_tool, resolve_model, resolve_questions
from treegrpo.jobs.embedded import rl_and_eval_worlds
from treegrpo.jobs.presets import DEFAULT_ALGO, DEFAULT_EMBEDDED, DEFAULT_OPTIM, DataConfig
from treegrpo.models.load import load_model
from treegrpo.models.tiny import tiny_qwen2
from treegrpo.retrieval.bm25 import BM25Retriever
from treegrpo.rollout.sampler import AgentLimits
from treegrpo.rollout.source import LocalRollout
from treegrpo.train.config import ModelConfig, OptimConfig
from treegrpo.train.policy import prepare_policy
from treegrpo.train.shared import row_span
from treegrpo.train.step import Batch, Learning, Rollouts, StepSettings, rl_step
from treegrpo.warmstart.tiny import WarmStartConfig, warm_start

ROOT = Path(__file__).resolve().parents[1]
PARTS = ("old_logprobs", "ref_logprobs", "policy")


@dataclass
class Setup:
    """One job's model and settings: the embedded default, or the SmolLM2 preset."""

    name: str
    model: Any
    tokenizer: Any
    tool: Any
    batch: Batch
    optim: OptimConfig
    lora: ModelConfig | None  # None: full fine-tuning beside a frozen reference copy
    sampling: SamplingParams
    limits: AgentLimits
    max_obs_tokens: int
    skip_uniform: bool = True  # the job's filter (a random model's leaves all score 0: off)


def spaced_batch(tokenizer: Any, questions: Sequence[Any], prompts: int) -> Batch:
    """``prompts`` questions evenly spaced over ``questions``, as a step's batch."""
    chosen = questions[:: max(1, len(questions) // prompts)][:prompts]
    return Batch(
        [render_prompt(tokenizer, q.question) for q in chosen],
        [list(q.golds) for q in chosen],
        [q.uid for q in chosen],
    )


def embedded_setup(prompts: int) -> Setup:
    """The embedded job from its warm start: the tiny model, full fine-tuning."""
    model, tokenizer = load_model(warm_start(WarmStartConfig(), progress=False))
    cfg = DEFAULT_EMBEDDED
    world = rl_and_eval_worlds(cfg)[0]
    batch = spaced_batch(tokenizer, world.questions, prompts)
    sampling = SamplingParams(temperature=cfg.temperature, max_new_tokens=cfg.max_new_tokens)
    limits = AgentLimits(cfg.max_turns, cfg.topk, cfg.max_context)
    return Setup("embedded (tiny)", model, tokenizer, BM25Retriever(world.passages), batch,
                 DEFAULT_OPTIM, None, sampling, limits, cfg.max_obs_tokens)  # fmt: skip


def random_setup(prompts: int, hidden: int, layers: int, device: str) -> Setup:
    """The embedded job's questions, tokenizer (``train_search_tokenizer``: seconds, no warm
    start needed) and search on a random-weight Qwen2 of a real model's width (for a GPU, where
    the tiny model says nothing about speed): its text is noise, so its steps run to the token
    limit (128) and get the invalid-action feedback; 4 turns, contexts up to 2,048 tokens; full
    fine-tuning."""
    cfg = WarmStartConfig()
    tokenizer = train_search_tokenizer(cfg.vocab_size)
    world = rl_and_eval_worlds(DEFAULT_EMBEDDED)[0]
    batch = spaced_batch(tokenizer, world.questions, prompts)
    model = tiny_qwen2(len(tokenizer), hidden=hidden, layers=layers, heads=hidden // 128,
                       kv_heads=max(1, hidden // 512), eos_token_id=tokenizer.eos_token_id,
                       pad_token_id=tokenizer.pad_token_id, seed=0).to(device)  # fmt: skip
    return Setup(f"random Qwen2 {hidden}×{layers} on {device}", model, tokenizer,
                 BM25Retriever(world.passages), batch, DEFAULT_OPTIM, None,
                 SamplingParams(temperature=1.0, max_new_tokens=128), AgentLimits(4, 1, 2048),
                 DEFAULT_EMBEDDED.max_obs_tokens, skip_uniform=False)  # fmt: skip


def smollm2_setup(prompts: int) -> Setup:
    """configs/real-smollm2-wiki.yaml's shapes: SmolLM2-135M-Instruct with LoRA r16 and
    activation checkpointing, after the protocol warm start (built once and cached), the wiki
    questions and BM25 over the article leads, its limits and optimizer settings."""
    model, tokenizer = load_model(resolve_model("smollm2-protocol"))
    batch = spaced_batch(tokenizer, resolve_questions(["wiki:train"]), prompts)
    tool = make_tool(DataConfig(corpus="wiki:corpus", retriever="bm25"))
    optim = OptimConfig(lr=1e-4, weight_decay=0.0, mini_batch_prompts=4, micro_batch_tokens=4096)
    lora = ModelConfig(lora_rank=16, lora_alpha=32, grad_checkpointing=True)
    sampling = SamplingParams(temperature=1.0, top_p=0.95, max_new_tokens=96)
    return Setup("SmolLM2 preset", model, tokenizer, tool, batch, optim, lora, sampling,
                 AgentLimits(max_turns=3, topk=3, max_context=2048), 256)  # fmt: skip


def one_step(
    setup: Setup, shape: tuple[int, int, int], shared: bool, span: int | None
) -> tuple[dict[str, float], dict[str, torch.Tensor], dict[str, torch.Tensor]]:
    """One RL step from a copy of the setup's model: its metrics, the trained parameters before
    and after."""
    policy = copy.deepcopy(setup.model)
    reference = None
    if setup.lora is not None:
        policy = prepare_policy(policy, setup.lora, seed=0)  # the base is the reference
    else:
        reference = copy.deepcopy(setup.model).requires_grad_(False)
    trained = [(k, p) for k, p in policy.named_parameters() if p.requires_grad]
    before = {k: p.detach().to("cpu", copy=True) for k, p in trained}
    optim = replace(setup.optim, packed_row_span=span)
    opt = torch.optim.AdamW([p for _, p in trained], lr=optim.lr, weight_decay=optim.weight_decay)
    m, n, l = shape  # noqa: E741
    algo = replace(DEFAULT_ALGO, m=m, n=n, l=l, shared_prefix=shared,
                   skip_uniform_prompts=setup.skip_uniform)  # fmt: skip
    engine = HFEngine(policy, setup.tokenizer, StepStopper(setup.tokenizer))
    protocol = SearchProtocol(setup.tokenizer, setup.max_obs_tokens)
    rollouts = Rollouts(LocalRollout(engine, protocol, setup.tool), protocol, setup.sampling,
                        setup.limits)  # fmt: skip
    learning = Learning(policy, reference, opt)
    metrics = rl_step(learning, rollouts, setup.batch, StepSettings(algo, optim), seed=7)
    return metrics, before, {k: p.detach().to("cpu", copy=True) for k, p in trained}


def _in_process(fn: Any, *args: Any) -> Any:
    """``fn(*args)`` here, and the peak CUDA memory it allocated above what was allocated
    before (MiB)."""
    torch.cuda.synchronize()
    base = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    out = fn(*args)
    torch.cuda.synchronize()
    return out, (torch.cuda.max_memory_allocated() - base) / 2**20


def _in_child(fn: Any, *args: Any) -> Any:
    """``fn(*args)`` in a forked child, and the child's peak resident memory above what it
    started with (MiB): what one step added, the same way for every mode."""
    ctx = mp.get_context("fork")
    parent, child = ctx.Pipe(duplex=False)

    def run() -> None:
        base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        out = fn(*args)
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        buf = io.BytesIO()  # as bytes: tensors sent as shared storage die with the child
        torch.save((out, (peak - base) / 1024), buf)
        child.send_bytes(buf.getvalue())

    proc = ctx.Process(target=run)
    proc.start()
    while not parent.poll(1.0):
        if not proc.is_alive():
            raise RuntimeError(f"the step's child process died (exit code {proc.exitcode})")
    out, peak = torch.load(io.BytesIO(parent.recv_bytes()), weights_only=False)
    proc.join()
    return out, peak


ONE_ROW = 10**12
"""A row span no row reaches: one packed row per prompt."""


def _span_name(span: int | None, model: Any) -> str:
    if span == ONE_ROW:
        return "a row per prompt"
    return f"row span {span or row_span(model.config)}" + (" (the model's)" if span is None else "")


def measure(
    setup: Setup, shape: tuple[int, int, int], repeats: int, widths: list[int | None]
) -> dict[str, Any]:
    """The duplicated update and the shared one at each row span in ``widths`` (None: the
    model's, ``train.shared.row_span``; ONE_ROW: a row per prompt), each step in a child process
    of its own."""
    modes: list[tuple[str, bool, int | None]] = [("duplicated", False, None)]
    modes += [(f"shared, {_span_name(w, setup.model)}", True, w) for w in widths]
    runs: dict[str, list[dict[str, float]]] = {name: [] for name, _, _ in modes}
    peaks: dict[str, list[float]] = {name: [] for name, _, _ in modes}
    weights: dict[str, dict[str, torch.Tensor]] = {}
    start_weights: dict[str, torch.Tensor] = {}
    for _ in range(repeats):
        for name, shared, width in modes:
            on_cuda = next(setup.model.parameters()).device.type == "cuda"
            run = _in_process if on_cuda else _in_child  # CUDA does not survive a fork
            (metrics, start_weights, after), peak = run(one_step, setup, shape, shared, width)
            runs[name].append(metrics)
            peaks[name].append(peak)
            weights[name] = after
    # numpy, not torch, in this process: a torch op here would start OpenMP's threads, and a
    # process forked after that hangs in its first parallel region (libgomp)
    keys = list(start_weights)
    flat = {
        name: np.concatenate([w[k].numpy().ravel() for k in keys]) for name, w in weights.items()
    }
    base = flat["duplicated"]
    change = np.linalg.norm(base - np.concatenate([start_weights[k].numpy().ravel() for k in keys]))
    out: dict[str, Any] = {
        "setup": setup.name,
        "shape": list(shape),
        "prompts": len(setup.batch.prompts),
        "repeats": repeats,
    }
    out["modes"] = []
    for name, _, width in modes:
        rs = runs[name]
        out["modes"].append(
            {
                "mode": name,
                "row_span": width,
                "update_s": statistics.median(r["time/update_s"] for r in rs),
                **{p: statistics.median(r[f"time/update/{p}_s"] for r in rs) for p in PARTS},
                "pad_fraction": statistics.median(r["train/pad_fraction"] for r in rs),
                "leaves": statistics.median(r["agent/leaves"] for r in rs),
                "path_tokens": statistics.median(r["tokens/update/policy"] for r in rs),
                "computed_tokens": statistics.median(r["tokens/update/computed"] for r in rs),
                "peak_mib": statistics.median(peaks[name]),
                "weights_rel_diff": float(np.linalg.norm(flat[name] - base) / max(change, 1e-30)),
            }
        )
    whole = out["modes"][0]["update_s"]
    for m in out["modes"]:
        m["speedup"] = whole / m["update_s"]
    return out


def table(results: list[dict[str, Any]]) -> str:
    lines = [
        "| job | tree (M,N,L) | leaves | update | positions | update s | speed-up "
        "| old / ref / policy s | step peak MiB | weights Δ (rel.) |",
        "|---|---|---:|---|---:|---:|---:|---|---:|---:|",
    ]
    for r in results:
        for m in r["modes"]:
            lines.append(
                f"| {r['setup']} | ({','.join(map(str, r['shape']))}) | {m['leaves']:.0f} | "
                f"{m['mode']} | {m['computed_tokens']:,.0f} | {m['update_s']:.2f} | "
                f"{m['speedup']:.2f}× | "
                + " / ".join(f"{m[p]:.2f}" for p in PARTS)
                + f" | {m['peak_mib']:.0f} | {m['weights_rel_diff']:.1e} |"
            )
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--shapes", nargs="+", default=["2,2,1", "4,5,1"], help="M,N,L each")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--model", choices=("tiny", "smollm2", "random"), default="tiny",
                    help="embedded job, SmolLM2 preset, or a random-weight Qwen2")  # fmt: skip
    ap.add_argument("--device", default="cpu", help="for --model random: cpu or cuda")
    ap.add_argument("--hidden", type=int, default=2048, help="--model random's width")
    ap.add_argument("--layers", type=int, default=24, help="--model random's layers")
    ap.add_argument("--prompts", type=int, default=None, help="per step (16 tiny, 4 smollm2)")
    ap.add_argument("--threads", type=int, default=2, help="torch threads")
    ap.add_argument(
        "--row-spans",
        nargs="+",
        type=int,
        default=[0, -1],
        help="optim.packed_row_span values to measure (0: the model's; -1: a row per prompt)",
    )
    ap.add_argument("--out", default=str(ROOT / "bench" / "results" / "shared_update.json"))
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    if args.model == "tiny":
        setup = embedded_setup(args.prompts or 16)
    elif args.model == "random":
        setup = random_setup(args.prompts or 16, args.hidden, args.layers, args.device)
    else:
        setup = smollm2_setup(args.prompts or 4)
    results = []
    for text in args.shapes:
        m, n, l = (int(x) for x in text.split(","))  # noqa: E741
        widths = [None if w == 0 else ONE_ROW if w < 0 else w for w in args.row_spans]
        results.append(measure(setup, (m, n, l), args.repeats, widths))
        print("\n".join(table(results[-1:]).splitlines()[2:]), flush=True)
    out = {
        "command": f"python bench/shared_update.py --model {args.model} --device {args.device}"
        + f" --hidden {args.hidden} --layers {args.layers} --shapes "
        + " ".join(args.shapes)
        + f" --repeats {args.repeats} --prompts {len(setup.batch.prompts)}"
        + f" --threads {args.threads}"
        + " --row-spans "
        + " ".join(map(str, args.row_spans)),
        "machine": {
            "platform": platform.platform(),
            "processor": platform.processor(),
            "cuda": torch.cuda.get_device_name() if torch.cuda.is_available() else None,
        },
        "results": results,
    }
    Path(args.out).write_text(json.dumps(out, indent=2))
    print(table(results))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
