"""Generation engines side by side on the same forests: ``HFEngine`` (transformers with the
prefix KV cache of segments; with the CPU speed-ups, the CPU default, and without them, plain
PyTorch) and ``VLLMEngine`` (vLLM in this process, its automatic prefix caching).

The workload is the real preset's rollouts (configs/real-smollm2-wiki.yaml): SmolLM2-135M-Instruct
after the protocol warm start (full weights), BM25 over the 10,033 Wikipedia leads, 8 held-out
questions, 96 new tokens per step, temperature 1.0, top-p 0.95, three searches at most; two
shapes with 6 leaves per prompt each: a tree (M=2, N=2, L=1) and 6 independent chains. One round
runs every (engine, shape) once with the same seed; rounds repeat (--repeats) and each cell
reports medians, so drift in the machine's speed hits every engine alike. An untimed round on
two prompts first pays the one-time work (packing weights, the allocator's first growth).

Per cell: wall seconds; generated tokens and tokens per second; the prefix-cache hit rate, the
share of every step's context (prompt, earlier turns, the parent's path) that the engine read
from its cache instead of computing (HF: the segment it resumed from; vLLM: its
``num_cached_tokens``, whole blocks of 32 tokens on CPU); positions computed, also per distinct
token of the forest. Engines sample with their own random streams, so the forests differ in
length: compare tokens per second. The profile of each cell: engine step calls (one agent step
for every live row) and the rows they held, and on vLLM its requests and engine iterations
(generated tokens per iteration: how full its batches ran). Then one agent step for k rows at
once per engine (``--sizes``, default 8 16 32 48; ``--sizes`` alone skips it): how an
engine's speed grows with the rows it holds.

Needs the vLLM environment (``make setup-vllm``), and the warm start and corpus built once by
either environment (the first run builds them, about 10 minutes):

    .venv-vllm/bin/python bench/engines.py                 # writes bench/results/engines.json
    .venv-vllm/bin/python bench/engines.py --repeats 1 --questions 4   # a quick look
    .venv-vllm/bin/python bench/engines.py --questions 32 --engines vllm --sizes  # wider, no probe
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import torch

from treegrpo.agent.prompt import render_prompt
from treegrpo.agent.protocol import SearchProtocol
from treegrpo.agent.stops import StepStopper
from treegrpo.core.budget import TreeShape
from treegrpo.data.wiki import wiki_questions
from treegrpo.engine.base import Engine, StepRequest, StepResult
from treegrpo.engine.hf import HFEngine
from treegrpo.engine.sampling import SamplingParams
from treegrpo.engine.vllm import VLLMEngine
from treegrpo.jobs.data import evenly_spaced, make_tool, resolve_model
from treegrpo.jobs.presets import TRAIN_SECTIONS
from treegrpo.models.load import load_model
from treegrpo.rollout.sampler import AgentLimits, sample_forest
from treegrpo.train.yaml_config import load_config

ROOT = Path(__file__).resolve().parents[1]
SHAPES = {"tree_2_2_1": TreeShape(2, 2, 1), "chains_6": TreeShape(6)}


class Counting:
    """An engine that tallies, over its steps, the context positions each request needed and
    how many of them came from the cache (``StepResult.reused``), and where the time went: its
    ``step`` calls (rows each, seconds) and, on vLLM, the requests it sent (a first one per
    distinct context, n samples; another each time a row stopped at an id that ended no tag and
    went on) and vLLM's engine iterations (one decode or prefill chunk for every running
    request: generated tokens per iteration is how full its batches ran)."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.needed = 0
        self.reused = 0
        self.processed = 0
        self.steps: list[tuple[int, float]] = []  # (rows, seconds) per step call
        self.requests: list[int] = []  # samples (n) per vLLM request
        self.iterations: list[float] = []  # seconds per vLLM engine iteration
        core = getattr(getattr(engine, "llm", None), "llm_engine", None)
        self._core = core
        if core is not None:
            self._add, self._iterate = core.add_request, core.step
            core.add_request, core.step = self._counted_add, self._timed_iteration

    def close(self) -> None:
        """Give vLLM's engine back its own methods."""
        if self._core is not None:
            del self._core.add_request, self._core.step

    def __getattr__(self, name: str) -> Any:
        return getattr(self.engine, name)

    def _counted_add(self, request_id: Any, prompt: Any, params: Any, **kwargs: Any) -> Any:
        self.requests.append(getattr(params, "n", 1))
        return self._add(request_id, prompt, params, **kwargs)

    def _timed_iteration(self) -> Any:
        t0 = time.perf_counter()
        out = self._iterate()
        self.iterations.append(time.perf_counter() - t0)
        return out

    def step(
        self,
        requests: Sequence[StepRequest],
        params: SamplingParams,
        generator: torch.Generator | None = None,
    ) -> list[StepResult]:
        t0 = time.perf_counter()
        out = self.engine.step(requests, params, generator)
        self.steps.append((len(requests), time.perf_counter() - t0))
        for req, res in zip(requests, out, strict=True):
            self.needed += req.context.length + len(req.pending)
            self.reused += res.reused
            self.processed += res.processed
        return out


def run_cell(
    engine: Engine,
    proto: SearchProtocol,
    tool: Any,
    prompts: list[list[int]],
    shape: TreeShape,
    sampling: SamplingParams,
    limits: AgentLimits,
    seed: int,
) -> dict[str, float]:
    """One forest of ``shape`` per prompt; its time, spend and cache accounting."""
    counting = Counting(engine)
    t0 = time.perf_counter()
    try:
        ro = sample_forest(counting, proto, tool, prompts, shape, sampling, limits, seed)  # type: ignore[arg-type]
    finally:
        counting.close()
    seconds = time.perf_counter() - t0
    spend = ro.spend.total()
    step_s = sum(s for _, s in counting.steps)
    its = counting.iterations
    return {
        "seconds": seconds,
        "generated": spend.generated,
        "tokens_per_s": spend.generated / seconds,
        "hit_rate": counting.reused / max(counting.needed, 1),
        "processed": counting.processed,
        "processed_per_distinct": counting.processed / max(ro.distinct_tokens(), 1),
        "leaves": spend.leaves,
        "tool_calls": spend.tool_calls,
        # the profile: engine step calls (one agent step for every row going), the rows they
        # held, their share of the wall time (the rest: searches and the sampler); on vLLM the
        # requests (and samples) sent, and its engine iterations: count, share of the wall time,
        # and generated tokens per iteration (how many rows each decoded, on average)
        "step_calls": len(counting.steps),
        "rows_per_step": statistics.fmean(r for r, _ in counting.steps) if counting.steps else 0,
        "step_share": step_s / seconds,
        "requests": len(counting.requests),
        "samples": sum(counting.requests),
        "iterations": len(its),
        "iteration_share": sum(its) / seconds,
        "tokens_per_iteration": spend.generated / len(its) if its else 0.0,
    }


def scaling(
    engine: Engine, prompts: list[list[int]], sizes: Sequence[int], sampling: SamplingParams
) -> dict[str, float]:
    """Generated tokens per second of one engine step (agent step) over ``k`` rows for each k in
    ``sizes``, the rows the prompts in turn (each row its own seed): how the engine's speed
    grows with the rows it holds at once."""
    out = {}
    for k in sizes:
        if hasattr(engine, "reset_prefix_cache"):
            engine.reset_prefix_cache()
        reqs = [StepRequest(engine.root(), prompts[i % len(prompts)], seed=i) for i in range(k)]
        t0 = time.perf_counter()
        results = engine.step(reqs, sampling)
        out[str(k)] = sum(len(r.tokens) for r in results) / (time.perf_counter() - t0)
    return out


def _print_table(
    summary: dict[str, dict[str, Any]],
    columns: list[str],
    cells: Callable[[dict[str, Any]], list[str]],
) -> None:
    """One markdown row per (engine, shape) of ``summary``: ``columns`` filled by ``cells``."""
    print("\n| engine | shape | " + " | ".join(columns) + " |")
    print("|---|---|" + "---:|" * len(columns))
    for key, cell in summary.items():
        print("| " + " | ".join(key.split("/") + cells(cell)) + " |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeats", type=int, default=1, help="timed rounds (medians reported)")
    ap.add_argument("--questions", type=int, default=8, help="held-out questions (prompts)")
    ap.add_argument("--threads", type=int, default=2, help="torch threads for the HF engine")
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "engines.json")
    ap.add_argument("--engines", nargs="+", default=["hf_cpu_speedups", "hf_plain", "vllm"],
                    help="which engines to run")  # fmt: skip
    ap.add_argument("--sizes", type=int, nargs="*", default=[8, 16, 32, 48],
                    help="rows per step for the speed-vs-rows probe (none: skip it)")  # fmt: skip
    args = ap.parse_args()
    torch.set_num_threads(args.threads)

    cfg = load_config(ROOT / "configs" / "real-smollm2-wiki.yaml", TRAIN_SECTIONS)
    data = cfg["data"]
    model, tok = load_model(resolve_model(data.model))
    model.eval()
    tool = make_tool(data)
    questions = evenly_spaced(wiki_questions("test"), args.questions)
    prompts = [render_prompt(tok, q.question) for q in questions]
    proto = SearchProtocol(tok, max_obs_tokens=data.max_obs_tokens)
    sampling = SamplingParams(
        temperature=data.temperature, top_p=data.top_p, max_new_tokens=data.max_new_tokens
    )
    limits = AgentLimits(data.max_turns, data.topk, data.max_context)

    t0 = time.perf_counter()
    vllm_engine = VLLMEngine(model, tok, StepStopper(tok), max_model_len=data.max_context)
    vllm_start = time.perf_counter() - t0
    torch.set_num_threads(args.threads)  # vLLM's start may change it
    plain_model = load_model(resolve_model(data.model))[0].eval()  # never routed
    engines: dict[str, Engine] = {
        "hf_cpu_speedups": HFEngine(model, tok, StepStopper(tok), cpu_speedups=True),
        "hf_plain": HFEngine(plain_model, tok, StepStopper(tok), cpu_speedups=False),
        "vllm": vllm_engine,
    }
    engines = {name: e for name, e in engines.items() if name in args.engines}
    cells: dict[str, list[dict[str, float]]] = {}
    for rnd in range(args.repeats + 1):  # round 0: untimed warm-up on the first two prompts
        batch = prompts[:2] if rnd == 0 else prompts
        for name, engine in engines.items():
            for shape_name, shape in SHAPES.items():
                row = run_cell(engine, proto, tool, batch, shape, sampling, limits, seed=rnd)
                print(f"round {rnd} {name:16s} {shape_name:10s} " + json.dumps(row), flush=True)
                if rnd > 0:
                    cells.setdefault(f"{name}/{shape_name}", []).append(row)
    speeds = {name: scaling(e, prompts, args.sizes, sampling) for name, e in engines.items()}
    summary = {
        key: {k: statistics.median(r[k] for r in rows) for k in rows[0]} | {"runs": rows}
        for key, rows in cells.items()
    }
    result = {
        "command": "python bench/engines.py "
        + f"--repeats {args.repeats} --questions {args.questions} --threads {args.threads}"
        + f" --engines {' '.join(args.engines)}",
        "machine": f"{platform.processor() or platform.machine()}, {torch.get_num_threads()} "
        f"torch threads",
        "torch": torch.__version__,
        "vllm_start_s": vllm_start,
        "workload": {
            "model": data.model,
            "questions": len(prompts),
            "max_new_tokens": data.max_new_tokens,
            "max_turns": data.max_turns,
            "topk": data.topk,
            "temperature": data.temperature,
            "top_p": data.top_p,
        },
        "cells": summary,
        "tokens_per_s_by_rows": speeds,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2))
    print(f"\nvLLM start: {vllm_start:.1f} s\n")
    _print_table(
        summary,
        ["wall s", "generated", "tokens/s", "cache hit rate", "positions", "÷ distinct tokens"],
        lambda c: [f"{c['seconds']:.1f}", f"{c['generated']:.0f}", f"{c['tokens_per_s']:.1f}",
                   f"{c['hit_rate']:.1%}", f"{c['processed']:.0f}",
                   f"{c['processed_per_distinct']:.2f}"],
    )  # fmt: skip
    _print_table(
        summary,
        ["step calls", "rows per step", "time in steps", "requests (samples)",
         "engine iterations", "time in them", "tokens per iteration"],
        lambda c: [f"{c['step_calls']:.0f}", f"{c['rows_per_step']:.1f}",
                   f"{c['step_share']:.0%}", f"{c['requests']:.0f} ({c['samples']:.0f})",
                   f"{c['iterations']:.0f}", f"{c['iteration_share']:.0%}",
                   f"{c['tokens_per_iteration']:.1f}"],
    )  # fmt: skip
    if args.sizes:
        print("\n| engine | " + " | ".join(f"{k} rows" for k in args.sizes) + " |")
        print("|---|" + "---:|" * len(args.sizes))
        for name, by_rows in speeds.items():
            print(f"| {name} | " + " | ".join(f"{v:.0f}" for v in by_rows.values()) + " |")
    print(f"\nwrote {args.out}")


if __name__ == "__main__":
    main()
