"""The budget-matched benchmark (``treegrpo bench-budget``): at the same rollout budget, does
Tree-GRPO beat chain GRPO? Embedded runs go to pinned worker processes, data mode's run in this
process by default; finished runs are reused, so the same command resumes. Modes, plan, run
directories and sizing: docs/evaluation.md, "The budget benchmark"."""

from __future__ import annotations

import contextlib
import ctypes
import json
import multiprocessing as mp
import os
import platform
import shlex
import shutil
import signal
import sys
import time
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from dataclasses import asdict
from pathlib import Path
from typing import Any

import torch
from transformers.utils import logging as hf_logging

from treegrpo.engine.cpu.speedups import start_process
from treegrpo.jobs.budget.plan import (
    BENCH_ALGO,
    BENCH_OPTIM,
    BenchSettings,
    RunSpec,
    check_reusable,
    data_config,
    plan_runs,
    run_config,
    run_world,
    summary_path,
    warm_start_choices,
    world_config,
)
from treegrpo.jobs.budget.records import aggregate, paired_differences, run_record
from treegrpo.jobs.budget.report import format_duration, markdown_table, percent
from treegrpo.jobs.budget.verdict import matched_comparisons
from treegrpo.jobs.data import evaluate_model_dir, prepare_inputs, run_data
from treegrpo.jobs.embedded import held_out_evaluator, rl_and_eval_worlds, run_embedded
from treegrpo.jobs.presets import EmbeddedConfig
from treegrpo.jobs.runner import without_rows
from treegrpo.models.load import load_model
from treegrpo.train.task import TrainSettings
from treegrpo.viz.budget import STYLE, plot_all
from treegrpo.warmstart.tiny import WarmStartConfig, warm_start


def warm_start_report(cfg: EmbeddedConfig, warm: WarmStartConfig) -> dict[str, Any]:
    """Build (or load) the warm start and evaluate it on the held-out questions exactly as
    ``run_embedded`` does before training; every run gets this report instead of repeating it."""
    model, tokenizer = load_model(warm_start(warm, progress=False))
    return held_out_evaluator(cfg, rl_and_eval_worlds(cfg)[1])(model, tokenizer, "hf")


def data_start(s: BenchSettings) -> tuple[Any, dict[str, Any]]:
    """Data mode: the inputs (``jobs.data.prepare_inputs``) and the starting model's held-out
    report, made once as ``run_data`` would (bad rows or files stop it)."""
    assert s.job is not None
    data = data_config(s)
    try:
        inputs = prepare_inputs(data)
    except (ValueError, OSError) as exc:
        raise SystemExit(f"bench budget: {exc}") from None
    n = len(inputs.held_out)
    print(f"starting model {inputs.model_dir}: evaluate on {n} questions", flush=True)
    before = evaluate_model_dir(inputs.model_dir, inputs, data, s.job.model.device)
    if before is None:
        raise SystemExit(f"bench budget: {s.job.config}: the eval files hold no questions")
    return inputs, before


def execute_run(
    spec: RunSpec, s: BenchSettings, before: dict[str, Any], inputs: Any = None
) -> None:
    """Run one benchmark run from scratch. A leftover directory of a killed run is removed
    first: the trainer would append to its metrics.jsonl. Data mode: ``inputs`` are the
    prepared ``jobs.data.DataInputs`` (None: prepared here, as in a worker process)."""
    run = run_config(spec, s)
    shutil.rmtree(run.out_dir, ignore_errors=True)
    if s.job is None:
        settings = TrainSettings(spec.algo, BENCH_OPTIM, run)
        run_embedded(settings, run_world(spec, s), spec.warm, progress=False, before=before)
        return
    data = data_config(s)
    if inputs is None:
        inputs = prepare_inputs(data)
    settings = TrainSettings(spec.algo, s.job.optim, run, s.job.model)
    run_data(settings, data, inputs, progress=False, before=before)


def read_run(spec: RunSpec, s: BenchSettings) -> dict[str, Any]:
    """The record of a finished run, from its directory."""
    summary = json.loads(summary_path(s, spec).read_text())
    lines = (s.runs_dir / spec.name / "metrics.jsonl").read_text().splitlines()
    steps = [m for m in (json.loads(x) for x in lines if x) if "agent/leaves" in m]
    return run_record(spec.identity(), summary, steps)


class _Clock:
    """Progress lines with the elapsed time and an ETA from the cost of what is left."""

    def __init__(self, total: int, cost_left: float, workers: int) -> None:
        self.t0 = time.perf_counter()
        self.total, self.done = total, 0
        self.cost_left, self.workers = cost_left, workers
        self.cost_done, self.seconds_done = 0.0, 0.0

    def line(self, what: str) -> None:
        elapsed = format_duration(time.perf_counter() - self.t0)
        eta = "?"
        if self.cost_done > 0:
            rate = self.seconds_done / self.cost_done / self.workers  # wall seconds per cost
            eta = format_duration(self.cost_left * rate)
        print(f"[{self.done:>2}/{self.total}] {what} | elapsed {elapsed} | ETA {eta}", flush=True)

    def finished(self, cost: float, seconds: float) -> None:
        self.done += 1
        self.cost_left -= cost
        self.cost_done += cost
        self.seconds_done += seconds


def run_pending(
    pending: Sequence[RunSpec],
    s: BenchSettings,
    befores: dict[str, dict[str, Any]],
    clock: _Clock,
    inputs: Any = None,
) -> list[str]:
    """Run ``pending`` (costliest first) in ``s.workers`` pinned processes, or here when workers is
    1 (data mode: with ``inputs``); ``befores``: the starting report by warm start tag. Returns
    the failed runs' names."""
    order = sorted(pending, key=lambda sp: -sp.cost)
    failed: list[str] = []

    def started(spec: RunSpec) -> None:
        clock.line(f"start {spec.name} ({_shape_text(spec)})")

    def ended(spec: RunSpec, seconds: float, error: BaseException | None) -> None:
        clock.finished(spec.cost, seconds)
        if error is not None:
            failed.append(spec.name)
            clock.line(f"FAILED {spec.name}: {error!r}")
        else:
            em = read_run(spec, s)["em"]
            clock.line(
                f"done  {spec.name} in {format_duration(seconds)}: held-out EM {percent(em)}"
            )

    if s.workers == 1:
        for spec in order:
            started(spec)
            t0 = time.perf_counter()
            try:
                execute_run(spec, s, befores[spec.warm_tag], inputs)
                ended(spec, time.perf_counter() - t0, None)
            except Exception as exc:
                ended(spec, time.perf_counter() - t0, exc)
    else:
        _run_in_pool(order, s, befores, started, ended)
    return failed


def _run_in_pool(
    order: Sequence[RunSpec],
    s: BenchSettings,
    befores: dict[str, dict[str, Any]],
    started: Callable[[RunSpec], None],
    ended: Callable[[RunSpec, float, BaseException | None], None],
) -> None:
    """At most ``s.workers`` runs in flight, the next started as one ends (progress lines show real
    start times); workers are spawned (never forked after torch ran), each on its own core."""
    ctx = mp.get_context("spawn")
    cores: Any = ctx.Queue()
    available = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else [None]
    for i in range(s.workers):
        cores.put(available[i % len(available)])
    queue = list(order)
    running: dict[Future[None], tuple[RunSpec, float]] = {}
    with ProcessPoolExecutor(
        s.workers, mp_context=ctx, initializer=_init_worker, initargs=(cores,)
    ) as pool:
        while queue or running:
            while queue and len(running) < s.workers:
                spec = queue.pop(0)
                started(spec)
                fut = pool.submit(execute_run, spec, s, befores[spec.warm_tag])
                running[fut] = (spec, time.perf_counter())
            done, _ = wait(running, return_when=FIRST_COMPLETED)
            for fut in done:
                spec, t0 = running.pop(fut)
                ended(spec, time.perf_counter() - t0, fut.exception())


def _init_worker(cores: Any) -> None:
    """Pin this worker to one core and torch thread (OpenMP, MKL too) and end it with its parent
    (SIGTERM, Linux), so a killed benchmark leaves no worker training on its own."""
    if sys.platform.startswith("linux"):  # without prctl workers outlive a killed parent
        with contextlib.suppress(OSError, AttributeError):
            ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGTERM))  # PR_SET_PDEATHSIG
    os.environ["OMP_NUM_THREADS"] = "1"
    os.environ["MKL_NUM_THREADS"] = "1"
    core = cores.get()
    if core is not None and hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {core})
    start_process("cpu", None)  # engine.cpu.speedups: before torch's first parallel op
    torch.set_num_threads(1)
    hf_logging.disable_progress_bar()  # one line per run is the progress


def _shape_text(spec: RunSpec) -> str:
    a = spec.algo
    if a.algo == "chain":
        return f"{a.m} chains"
    rule = "" if a.expansion == "uniform" else f", {a.expansion} expansion"
    if a.expansion_budget == "difficulty":
        rule = f", {a.expansion} expansion with difficulty budgets"
    return f"(M,N,L)=({a.m},{a.n},{a.l}), {a.mode()}{rule}"


def run_benchmark(
    s: BenchSettings, warm: WarmStartConfig | None = None, command: str | None = None
) -> dict[str, Any]:
    """Run (or reuse) every run of ``s``, write the JSON, the markdown table (printed too) and the
    plots; returns the result. ``warm``: embedded mode's warm start (default the embedded job's;
    data mode: the config's model); ``command``: for the header."""
    warms = warm_start_choices(s, warm or WarmStartConfig()) if s.job is None else [("", None)]
    t0 = time.perf_counter()
    hf_logging.disable_progress_bar()  # one line per run is the progress
    specs = plan_runs(s, BENCH_ALGO if s.job is None else s.job.algo, warms)
    done = [sp for sp in specs if summary_path(s, sp).is_file()]
    for sp in done:
        check_reusable(sp, s, json.loads(summary_path(s, sp).read_text()))
    pending = [sp for sp in specs if sp not in done]
    workers = 1 if s.workers == 1 else min(s.workers, max(len(pending), 1))
    clock = _Clock(len(specs), sum(sp.cost for sp in pending), workers)
    for sp in done:
        clock.done += 1
        clock.line(f"reuse {sp.name} (summary.json exists)")
    start = "warm start" if s.job is None else "starting model"
    inputs = None
    befores: dict[str, dict[str, Any]] = {}
    for tag, cfg in warms:  # each starting model's report: evaluated here, or a reused run's
        have = [sp for sp in done if sp.warm_tag == tag]
        if have and not any(sp.warm_tag == tag for sp in pending):
            befores[tag] = json.loads(summary_path(s, have[0]).read_text())["before"]
        elif cfg is not None:
            what = f"warm start {tag}" if tag else "warm start"
            print(f"{what}: build or load, evaluate on {s.eval_questions} questions", flush=True)
            befores[tag] = warm_start_report(world_config(s), cfg)
        else:
            inputs, befores[tag] = data_start(s)
        clock.line(f"{start} {tag} held-out EM {percent(befores[tag]['overall']['em'])}")
    failed = run_pending(pending, s, befores, clock, inputs) if pending else []
    records = [read_run(sp, s) for sp in specs if sp.name not in failed]
    before = befores[warms[0][0]]
    result = {
        "command": command or invocation(),
        "machine": machine(1 if s.workers > 1 else None),
        "settings": json.loads(json.dumps(asdict(s), default=str)),
        "warm_start": without_rows(before),  # the (first) starting model's
        "warm_starts": {
            tag: {"config": asdict(cfg), "em": befores[tag]["overall"]["em"]}
            for tag, cfg in warms
            if cfg is not None
        },
        "wall_s": time.perf_counter() - t0,
        "counts": {"runs": len(specs), "ran": len(pending), "reused": len(done)},
        "failed": failed,
        "runs": records,
        "aggregates": aggregate(records),
        "paired": paired_differences(records),
        "matched": matched_comparisons(records),
    }
    write_outputs(result, s.out)
    return result


def write_outputs(result: dict[str, Any], out: Path) -> list[Path]:
    """``out`` (JSON), ``out`` with .md (the table) and ``<stem>_*.png`` beside it."""
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2))
    table = markdown_table(result)
    out.with_suffix(".md").write_text(table + "\n")
    print(table, flush=True)
    # The plots draw the methods with a style (``viz.budget.STYLE``); others: JSON and table only
    shown = {
        **result,
        "runs": [r for r in result["runs"] if r["method"] in STYLE],
        "aggregates": [a for a in result["aggregates"] if a["method"] in STYLE],
    }
    plots = plot_all(shown, out.parent, out.stem)
    print(f"wrote {out}, {out.with_suffix('.md')} and {len(plots)} plots", flush=True)
    return [out, out.with_suffix(".md"), *plots]


def invocation() -> str:
    """The command line that started this process, as a user would type it."""
    prog = Path(sys.argv[0])
    head = ["treegrpo"] if prog.name == "treegrpo" else ["python", str(prog)]
    return shlex.join([*head, *sys.argv[1:]])


def machine(torch_threads: int | None) -> dict[str, Any]:
    """Platform, CPUs (all, and those this process may use), the first GPU's name (None: no
    GPU) and the torch threads each run used (None: this process's setting)."""
    return {
        "platform": platform.platform(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "cpus": os.cpu_count(),
        "usable_cpus": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
        "gpu": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
        "torch_threads": torch_threads or torch.get_num_threads(),
    }
