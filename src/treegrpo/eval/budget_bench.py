"""The budget-matched benchmark: at the same rollout budget, does Tree-GRPO beat chain
GRPO, on the embedded synthetic world or on your own questions, corpus and model?

Every run starts from the same model, with the same prompts per step (the data order depends on
the seed only), the same number of steps, the same seeds and the same held-out questions; only
the sampling shape (and, in the ablation, the advantage mode) changes. The ladder is the
paper's (ALGORITHM.md §2): tree (M,N,L) = (1,2,1), (2,2,1), (2,6,1), (4,5,1) against 2, 4, 8,
16 chains, plus the advantage ablation at ≈ 4 (tree (2,2,1) with "intra" and with "inter";
"intra+inter" is the main tree run). Because the budget formula is only an estimate, each run
also reports what it really spent: generated tokens and tool calls per prompt, leaves per
prompt, trajectories per 1,000 generated tokens and the engine's token efficiency.

Two modes, one protocol:

- Embedded (the default): every run is the embedded default job
  (``train.embedded.run_embedded``) from the same cached warm start.
- Data (``--config FILE``, a ``treegrpo train --config`` file with a ``data`` section, e.g.
  configs/real-smollm2-wiki.yaml on a CPU or configs/searchr1-qa.yaml on a GPU): every run is
  the data-driven job (``train.datarun.run_data``) with the file's algo section (the ladder sets
  the shape and the advantage mode), its optim, model and data sections, and its run section
  (the benchmark sets directory, seed, steps, prompts and checkpoints). Steps, prompts per step
  and held-out questions are the file's unless flags give them. The held-out set must exist
  (``data.eval_files``); it is broken down by data source where the questions have no hops.

    treegrpo bench-budget --quick        # 1 seed, budgets 2 and 4, 3 steps, 30 questions
    treegrpo bench-budget                # 3 seeds x 4 budgets x 2 methods + 6 ablation runs
    treegrpo bench-budget --config configs/real-smollm2-wiki.yaml --quick   # data mode

Each run has its own directory (``runs/bench-budget/<mode>/<method>-b<budget>-s<seed>``, mode
full, quick, data or data-quick); one whose ``summary.json`` exists is reused if it was made
with the same settings, so a killed benchmark resumes by re-running the same command (a run
killed halfway starts over). The starting model (the warm start, or the data mode's model) is
built or loaded and evaluated once, in this process; every run gets that report as its
evaluation before training. Embedded runs go to a pool of ``--workers`` processes (default 2),
each pinned to its own core with one torch thread. Data mode defaults to one worker: the runs
go one after another in this process, which shares the questions, model directory and search
index it prepared, and leaves ``model.device`` (a GPU) and torch's threads alone; more workers
are pinned CPU processes as above, each preparing its own inputs (CPU runs only).

Sizing of the embedded full mode (``FULL_STEPS`` = 20, 16 prompts per step), measured on 2
cores of an AMD EPYC: budgets 2, 4 and 8 with the ablation, five seeds (40 runs), took 50 min on
2 workers; a tree (4,5,1) step takes 27-40 s, so budget 16 adds about an hour.
"""

from __future__ import annotations

import json
import os
import platform
import shlex
import shutil
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from treegrpo.core.advantage import Mode
from treegrpo.core.budget import CHAIN_LADDER, TREE_LADDER
from treegrpo.eval.budget_report import (
    ABLATION_BUDGET,
    aggregate,
    format_duration,
    markdown_table,
    paired_differences,
    percent,
    run_record,
)
from treegrpo.models.warmstart import WarmStartConfig
from treegrpo.train.config import AlgorithmConfig, ModelConfig, OptimConfig, RunConfig
from treegrpo.train.presets import (
    DEFAULT_ALGO,
    DEFAULT_EMBEDDED,
    DEFAULT_OPTIM,
    DEFAULT_RUN,
    TRAIN_SECTIONS,
    DataConfig,
    EmbeddedConfig,
)

FULL_STEPS = 20
"""RL steps per run in full mode (the module docstring has the sizing)."""
QUICK_STEPS = 3
"""RL steps per run in quick mode: checks that the pipeline runs, not the result."""
QUICK_EVAL_QUESTIONS = 30
"""Held-out questions in quick mode (data mode: at most this many of the config's)."""
ABLATION_MODES: tuple[Mode, ...] = ("intra", "inter")
"""Advantage modes of the ablation runs ("intra+inter" is the main tree run)."""

# The embedded protocol: the default job's settings (only the shape, the advantage mode, the
# steps and the seed change from run to run).
BENCH_ALGO = DEFAULT_ALGO
BENCH_OPTIM = DEFAULT_OPTIM
BENCH_PROMPTS = DEFAULT_RUN.prompts_per_step


@dataclass(frozen=True)
class RunSpec:
    """One run of the benchmark: a method at a budget with a seed."""

    method: str
    """"chain", "tree" (intra+inter) or "tree-intra" / "tree-inter" (the ablation)."""
    budget: int
    """Budget rung of the ladder (≈ trajectories per prompt)."""
    seed: int
    """RunConfig.seed: data order, sampling and expansion choice."""
    algo: AlgorithmConfig
    """The embedded preset's (data mode: the config's) algorithm settings with this run's shape
    and advantage mode."""

    @property
    def name(self) -> str:
        return f"{self.method}-b{self.budget}-s{self.seed}"

    def identity(self) -> dict[str, Any]:
        """What names the run in the benchmark's records."""
        a = self.algo
        tree = a.algo == "tree"
        return {
            "name": self.name,
            "method": self.method,
            "budget": self.budget,
            "seed": self.seed,
            "shape": {"m": a.m, "n": a.n if tree else 0, "l": a.l if tree else 0},
            "advantage_mode": a.mode(),
        }

    @property
    def cost(self) -> float:
        """Relative cost for scheduling and the ETA: a step costs about one leaf's worth of
        fixed work plus one per leaf (trajectory) per prompt (measured, module docstring)."""
        return 1.0 + self.algo.shape().leaves_per_prompt


@dataclass(frozen=True)
class DataJob:
    """Data mode: the sections of a run config file (``treegrpo train --config``), as read. The
    benchmark applies its ladder, run settings and held-out count on top of them."""

    config: str
    """The YAML file they were read from."""
    algo: AlgorithmConfig
    """Every run's algorithm settings but the shape and the advantage mode (the ladder's)."""
    optim: OptimConfig
    """Every run's optimizer settings."""
    run: RunConfig
    """Every run's run settings but directory, seed, steps, prompts, checkpoints, eval_every."""
    model: ModelConfig
    """LoRA or full fine-tuning, device and precision of every run."""
    data: DataConfig
    """The starting model, questions, search tool and agent limits (eval_questions: the
    benchmark's)."""


def load_data_job(path: str | Path) -> DataJob:
    """Read a run config for data mode (strictly, as ``treegrpo train --config`` does); a
    ``world`` section is refused: it configures the embedded job. Raises ValueError."""
    from treegrpo.train.yaml_config import load_config

    sections = load_config(path, TRAIN_SECTIONS)
    if sections["world"] != DEFAULT_EMBEDDED:
        raise ValueError(
            f"{path}: the world section configures the embedded job, which data mode does not "
            "run; drop it"
        )
    return DataJob(
        str(path),
        sections["algo"],
        sections["optim"],
        sections["run"],
        sections["model"],
        sections["data"],
    )


@dataclass(frozen=True)
class BenchSettings:
    """What the benchmark runs and where it writes."""

    mode: str = "full"
    """"full" or "quick" (names the default output files and run directories, with "data"
    in data mode)."""
    budgets: tuple[int, ...] = (2, 4, 8, 16)
    """Budget rungs, each of 2, 4, 8, 16."""
    seeds: tuple[int, ...] = (0, 1, 2, 3, 4)
    """RunConfig.seed values; every method runs with each."""
    steps: int = FULL_STEPS
    """RL steps per run."""
    prompts_per_step: int = BENCH_PROMPTS
    """Prompts per RL step (the same prompts for every method with the same seed)."""
    eval_questions: int | None = DEFAULT_EMBEDDED.eval_questions
    """Held-out questions evaluated after training (and once on the starting model); None (data
    mode only): every question of the eval files."""
    ablation: bool = True
    """Also run the advantage ablation at budget ≈ 4 (intra only, inter only)."""
    workers: int = 2
    """Parallel runs, each in its own process pinned to one core (1: sequential, in-process;
    the default in data mode)."""
    out: Path = Path("bench/results/budget.json")
    """The JSON result; the table (.md) and the plots (<stem>_*.png) go beside it."""
    runs_dir: Path = Path("runs/bench-budget/full")
    """Root of the run directories."""
    job: DataJob | None = None
    """Data mode: the run config every run starts from (None: the embedded world)."""


def bench_settings(
    quick: bool = False, config: str | Path | None = None, **overrides: Any
) -> BenchSettings:
    """The full or quick defaults with the given fields replaced (None values are ignored).

    ``config``: data mode with this run config (``load_data_job``): steps, prompts per step and
    held-out questions default to the file's (quick: 3 steps, at most 30 questions), workers to
    1, the outputs to bench/results/budget-data[-quick].json and runs/bench-budget/data[-quick].
    Raises ValueError on bad settings, a config file that does not fit, or a data section that
    ``datarun.check_data`` rejects or that has no held-out questions."""
    base = BenchSettings()
    tag = ""
    if config is not None:
        job = load_data_job(config)
        tag = "data"
        base = replace(
            base,
            job=job,
            steps=job.run.steps,
            prompts_per_step=job.run.prompts_per_step,
            eval_questions=job.data.eval_questions,
            workers=1,
            out=Path("bench/results/budget-data.json"),
            runs_dir=Path("runs/bench-budget/data"),
        )
    if quick:
        n = base.eval_questions
        base = replace(
            base,
            mode="quick",
            budgets=(2, 4),
            seeds=(0,),
            steps=QUICK_STEPS,
            eval_questions=QUICK_EVAL_QUESTIONS if n is None else min(n, QUICK_EVAL_QUESTIONS),
            ablation=False,
            out=Path(f"bench/results/budget{'-' + tag if tag else ''}-quick.json"),
            runs_dir=Path(f"runs/bench-budget/{tag + '-' if tag else ''}quick"),
        )
    s = replace(base, **{k: v for k, v in overrides.items() if v is not None})
    bad = [b for b in s.budgets if b not in TREE_LADDER]
    if bad or not s.budgets:
        raise ValueError(f"budgets must be among {sorted(TREE_LADDER)}, got {list(s.budgets)}")
    if not s.seeds or s.steps < 1 or s.prompts_per_step < 1:
        raise ValueError("need at least one seed, step and prompt per step")
    n = s.eval_questions
    if (n is None and s.job is None) or (n is not None and n < 1):
        raise ValueError("need at least one held-out question")
    if s.workers < 1:
        raise ValueError(f"workers must be >= 1, got {s.workers}")
    if s.job is not None:
        from treegrpo.train.datarun import check_data

        data = data_config(s)
        problems = check_data(data)
        if not data.eval_files:
            problems.append("data.eval_files: the benchmark compares held-out EM; give some")
        if problems:
            raise ValueError(f"{s.job.config}: " + "; ".join(problems))
    return s


# ---------------------------------------------------------------------------------------------
# plan


def plan_runs(
    budgets: Iterable[int],
    seeds: Iterable[int],
    ablation: bool,
    base: AlgorithmConfig = BENCH_ALGO,
) -> list[RunSpec]:
    """Chain and tree at each budget for each seed, plus the ablation's two modes at ≈ 4.

    ``base``: the algorithm settings every run starts from (the embedded preset, or the data
    mode's config). Chain runs change only ``algo`` and ``m`` of it, exactly as
    ``treegrpo train --algo chain --m B`` does; tree runs set (M, N, L) from the ladder (every
    leaf kept: k None); both use their algorithm's default advantage mode."""
    specs = []
    for seed in seeds:
        for b in budgets:
            chain = replace(base, algo="chain", m=CHAIN_LADDER[b].m, advantage_mode=None)
            specs.append(RunSpec("chain", b, seed, chain))
            specs.append(RunSpec("tree", b, seed, _tree_algo(b, base)))
        if ablation:
            for mode in ABLATION_MODES:
                algo = replace(_tree_algo(ABLATION_BUDGET, base), advantage_mode=mode)
                specs.append(RunSpec(f"tree-{mode}", ABLATION_BUDGET, seed, algo))
    return specs


def _tree_algo(budget: int, base: AlgorithmConfig) -> AlgorithmConfig:
    shape = TREE_LADDER[budget]
    return replace(base, algo="tree", m=shape.m, n=shape.n, l=shape.l, k=None, advantage_mode=None)


def run_config(spec: RunSpec, s: BenchSettings) -> RunConfig:
    """The run's RunConfig (from the embedded preset's, or the data mode config's): its
    directory and seed, the benchmark's steps and prompts; one checkpoint at the end, no
    periodic evaluation."""
    return replace(
        DEFAULT_RUN if s.job is None else s.job.run,
        out_dir=str(s.runs_dir / spec.name),
        seed=spec.seed,
        steps=s.steps,
        prompts_per_step=s.prompts_per_step,
        save_every=s.steps,
        keep_checkpoints=1,
        eval_every=0,
        resume=False,
        overwrite=False,  # execute_run removes a killed run's directory itself
    )


def world_config(s: BenchSettings) -> EmbeddedConfig:
    """Embedded mode: the preset's world with the benchmark's held-out questions."""
    assert s.eval_questions is not None  # None (all questions) is for data mode only
    return replace(DEFAULT_EMBEDDED, eval_questions=s.eval_questions)


def data_config(s: BenchSettings) -> DataConfig:
    """Data mode: the config's data section with the benchmark's held-out questions."""
    if s.job is None:
        raise ValueError("data_config: the benchmark is not in data mode (no config)")
    return replace(s.job.data, eval_questions=s.eval_questions)


# ---------------------------------------------------------------------------------------------
# running


def warm_start_report(cfg: EmbeddedConfig, warm: WarmStartConfig) -> dict[str, Any]:
    """Build (or load) the warm start and evaluate it on the held-out questions exactly as
    ``run_embedded`` does before training; every run gets this report instead of repeating it."""
    from treegrpo.models.warmstart import warm_start
    from treegrpo.train.embedded import held_out_evaluator, load_model, rl_and_eval_worlds

    model, tokenizer = load_model(warm_start(warm, progress=False))
    return held_out_evaluator(cfg, rl_and_eval_worlds(cfg)[1])(model, tokenizer)


def data_start(s: BenchSettings) -> tuple[Any, dict[str, Any]]:
    """Data mode: read the questions, prepare the model directory and the search tool
    (``datarun.prepare_inputs``), and evaluate the starting model on the held-out questions
    exactly as ``run_data`` does before training; returns the inputs and that report, which
    every run gets instead of repeating it. Bad rows or missing files stop the benchmark."""
    from treegrpo.train.datarun import evaluate_model_dir, prepare_inputs

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
    spec: RunSpec,
    s: BenchSettings,
    warm: WarmStartConfig,
    before: dict[str, Any],
    inputs: Any = None,
) -> None:
    """Run one benchmark run from scratch. A leftover directory of a killed run is removed
    first: the trainer would append to its metrics.jsonl. Data mode: ``inputs`` are the
    prepared ``datarun.DataInputs`` (None: prepared here, as in a worker process)."""
    run = run_config(spec, s)
    shutil.rmtree(run.out_dir, ignore_errors=True)
    if s.job is None:
        from treegrpo.train.embedded import run_embedded

        run_embedded(
            spec.algo, BENCH_OPTIM, run, world_config(s), warm=warm, progress=False, before=before
        )
        return
    from treegrpo.train.datarun import prepare_inputs, run_data

    data = data_config(s)
    if inputs is None:
        inputs = prepare_inputs(data)
    run_data(spec.algo, s.job.optim, run, data, inputs, s.job.model, progress=False, before=before)


def check_reusable(
    spec: RunSpec, s: BenchSettings, warm: WarmStartConfig, summary: dict[str, Any]
) -> None:
    """Refuse to reuse a finished run made with other settings (the starting model, algorithm,
    optimizer, world or data and model sections, steps, prompts, seed): its numbers would
    silently mix into this one."""
    cfg = summary["config"]
    run = run_config(spec, s)
    want: dict[str, Any] = {"algo": asdict(spec.algo)}
    have: dict[str, Any] = {"algo": cfg["algo"]}
    if s.job is None:
        from treegrpo.models.warmstart import warm_start_dir

        want["warm start"] = warm_start_dir(warm).name  # the cache key: every setting + format
        have["warm start"] = Path(summary["warm_start_dir"]).name
        want |= {"optim": asdict(BENCH_OPTIM), "embedded": asdict(world_config(s))}
        have |= {"optim": cfg["optim"], "embedded": cfg["embedded"]}
    else:
        from treegrpo.train.datarun import resolve_model

        data = data_config(s)
        assert data.model is not None  # bench_settings checked the data section
        want["model dir"] = str(resolve_model(data.model))  # built-in models: their cache entry
        have["model dir"] = summary["model_dir"]
        want |= {"optim": asdict(s.job.optim), "data": asdict(data), "model": asdict(s.job.model)}
        have |= {"optim": cfg["optim"], "data": cfg["data"], "model": cfg["model"]}
    want |= {"steps": run.steps, "prompts_per_step": run.prompts_per_step, "seed": run.seed}
    have |= {
        "steps": cfg["run"]["steps"],
        "prompts_per_step": cfg["run"]["prompts_per_step"],
        "seed": cfg["run"]["seed"],
    }
    want = json.loads(json.dumps(want))  # tuples → lists, as in summary.json
    diff = sorted(k for k in want if want[k] != have[k])
    if diff:
        raise SystemExit(
            f"bench budget: {s.runs_dir / spec.name} was run with other settings "
            f"({', '.join(diff)}); use another --runs-dir or remove it"
        )


def _summary_path(s: BenchSettings, spec: RunSpec) -> Path:
    return s.runs_dir / spec.name / "summary.json"


def read_run(spec: RunSpec, s: BenchSettings) -> dict[str, Any]:
    """The record of a finished run, from its directory."""
    summary = json.loads(_summary_path(s, spec).read_text())
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
    warm: WarmStartConfig,
    before: dict[str, Any],
    clock: _Clock,
    inputs: Any = None,
) -> list[str]:
    """Run ``pending`` (costliest first) in ``s.workers`` pinned processes, or in this process
    when workers is 1 (data mode: with the ``inputs`` prepared here; worker processes prepare
    their own); returns the names of runs that failed (their error is printed)."""
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
                execute_run(spec, s, warm, before, inputs)
                ended(spec, time.perf_counter() - t0, None)
            except Exception as exc:
                ended(spec, time.perf_counter() - t0, exc)
    else:
        _run_in_pool(order, s, warm, before, started, ended)
    return failed


def _run_in_pool(
    order: Sequence[RunSpec],
    s: BenchSettings,
    warm: WarmStartConfig,
    before: dict[str, Any],
    started: Callable[[RunSpec], None],
    ended: Callable[[RunSpec, float, BaseException | None], None],
) -> None:
    """At most ``s.workers`` runs in flight; the next starts as soon as one ends, so the
    progress lines show real start times. Workers are spawned (never forked from a process
    that already ran torch) and each takes its own core."""
    import multiprocessing as mp
    from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait

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
                fut = pool.submit(execute_run, spec, s, warm, before)
                running[fut] = (spec, time.perf_counter())
            done, _ = wait(running, return_when=FIRST_COMPLETED)
            for fut in done:
                spec, t0 = running.pop(fut)
                ended(spec, time.perf_counter() - t0, fut.exception())


def _init_worker(cores: Any) -> None:
    """Pin this worker to one core and one torch thread (set before torch is imported here), and
    have it end with the benchmark: on Linux a worker whose parent dies gets SIGTERM, so a
    killed benchmark leaves no worker training into a run directory on its own."""
    _die_with_parent()
    os.environ["OMP_NUM_THREADS"] = "1"
    os.environ["MKL_NUM_THREADS"] = "1"
    core = cores.get()
    if core is not None and hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {core})
    import torch

    from treegrpo.models.denormal import flush_denormals

    flush_denormals()  # before torch's first parallel op (models.denormal)
    torch.set_num_threads(1)
    _quiet()


def _die_with_parent() -> None:
    if not sys.platform.startswith("linux"):
        return
    import ctypes
    import signal

    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, int(signal.SIGTERM))  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):  # no prctl: workers outlive a killed parent, as before
        pass


def _quiet() -> None:
    """No per-load progress bars from transformers: one line per run is the progress."""
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()


def _shape_text(spec: RunSpec) -> str:
    a = spec.algo
    if a.algo == "chain":
        return f"{a.m} chains"
    return f"(M,N,L)=({a.m},{a.n},{a.l}), {a.mode()}"


# ---------------------------------------------------------------------------------------------
# the benchmark


def run_benchmark(
    s: BenchSettings, warm: WarmStartConfig | None = None, command: str | None = None
) -> dict[str, Any]:
    """Run (or reuse) every run of ``s``, then write the JSON, the markdown table and the plots;
    returns the result (the table is printed too). ``warm``: the warm start every run starts
    from in embedded mode (default: the embedded job's; tests pass a tiny one); ``command``: for
    the header (default: this process's command line). In data mode (``s.job``) every run starts
    from the config's model; the result's "warm_start" is that model's report."""
    warm = warm or WarmStartConfig()
    t0 = time.perf_counter()
    _quiet()
    specs = plan_runs(s.budgets, s.seeds, s.ablation, BENCH_ALGO if s.job is None else s.job.algo)
    done = [sp for sp in specs if _summary_path(s, sp).is_file()]
    for sp in done:
        check_reusable(sp, s, warm, json.loads(_summary_path(s, sp).read_text()))
    pending = [sp for sp in specs if sp not in done]
    workers = 1 if s.workers == 1 else min(s.workers, max(len(pending), 1))
    clock = _Clock(len(specs), sum(sp.cost for sp in pending), workers)
    for sp in done:
        clock.done += 1
        clock.line(f"reuse {sp.name} (summary.json exists)")
    start = "warm start" if s.job is None else "starting model"
    inputs = None
    if pending and s.job is None:
        print(f"warm start: build or load, evaluate on {s.eval_questions} questions", flush=True)
        before = warm_start_report(world_config(s), warm)
    elif pending:
        inputs, before = data_start(s)
    else:  # every run is reused: their summaries hold the same report
        before = json.loads(_summary_path(s, done[0]).read_text())["before"]
    clock.line(f"{start} held-out EM {percent(before['overall']['em'])}")
    failed = run_pending(pending, s, warm, before, clock, inputs) if pending else []
    records = [read_run(sp, s) for sp in specs if sp.name not in failed]
    result = {
        "command": command or invocation(),
        "machine": machine(1 if s.workers > 1 else None),
        "settings": json.loads(json.dumps(asdict(s), default=str)),
        "warm_start": {k: v for k, v in before.items() if k != "rows"},  # the starting model's
        "warm_start_config": asdict(warm) if s.job is None else None,
        "wall_s": time.perf_counter() - t0,
        "counts": {"runs": len(specs), "ran": len(pending), "reused": len(done)},
        "failed": failed,
        "runs": records,
        "aggregates": aggregate(records),
        "paired": paired_differences(records),
    }
    write_outputs(result, s.out)
    return result


def write_outputs(result: dict[str, Any], out: Path) -> list[Path]:
    """``out`` (JSON), ``out`` with .md (the table) and ``<stem>_*.png`` beside it."""
    from treegrpo.viz.budget import plot_all

    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2))
    table = markdown_table(result)
    out.with_suffix(".md").write_text(table + "\n")
    print(table, flush=True)
    plots = plot_all(result, out.parent, out.stem)
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
    import torch

    return {
        "platform": platform.platform(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "cpus": os.cpu_count(),
        "usable_cpus": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
        "gpu": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
        "torch_threads": torch_threads or torch.get_num_threads(),
    }
