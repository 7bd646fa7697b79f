"""The one job every ``treegrpo train`` runs, whatever its inputs:

    refuse a previous run → held-out eval of the starting model → RL (``train.trainer.train``)
    → held-out eval of the final checkpoint → learning curve, summary.json, report.md

The embedded job (``jobs.embedded``) and the data job (``jobs.data``) differ only in the ``Job``
they hand over. Evaluation is greedy; its reports are ``eval.evaluate``'s."""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn

from treegrpo.distributed.fsdp import FSDPLearner, start_learner
from treegrpo.distributed.rollout import RayRollout, start_workers
from treegrpo.engine.base import Engine, EngineKind
from treegrpo.engine.sampling import SamplingParams
from treegrpo.eval.evaluate import EvalItem, collapse_warning, evaluate, write_report
from treegrpo.files import write_atomic
from treegrpo.jobs.presets import DataConfig, EmbeddedConfig
from treegrpo.models.load import load_model, resolve_device
from treegrpo.retrieval.base import SearchTool
from treegrpo.rollout.sampler import AgentLimits
from treegrpo.tools.registry import Toolbox
from treegrpo.train.checkpoint import discard_newer, latest_checkpoint
from treegrpo.train.config import ClusterConfig, ModelConfig, RunConfig
from treegrpo.train.health import Rollback
from treegrpo.train.sft import SFTExample
from treegrpo.train.task import TrainHooks, TrainItem, TrainSettings, TrainTask
from treegrpo.train.trainer import refuse_previous_run, train
from treegrpo.viz.curves import plot_learning_curve
from treegrpo.viz.evalview import write_eval_pages
from treegrpo.viz.report import write_run_report
from treegrpo.viz.trees import write_pages

log = logging.getLogger(__name__)

Report = dict[str, Any]  # eval.evaluate's report
# (model, tokenizer, engine or engine kind) → the held-out report (``eval.evaluate``'s engine)
Evaluator = Callable[[Any, Any, Engine | EngineKind], Report]
T = TypeVar("T")

PHASES = {"warm_start": "warm start", "eval_before": "evaluation before training", "train": "RL"}
"""The timed phases of a job, as the report's wall-time line names them."""


@dataclass
class Job:
    """What a job trains on and how it is evaluated and reported."""

    model_dir: Path
    """The starting model: a Hugging Face model directory."""
    tool: SearchTool | Toolbox
    """The search tool of the training questions, or the agent's toolbox."""
    items: list[TrainItem]
    """The training questions."""
    sampling: SamplingParams
    """Sampling during training."""
    limits: AgentLimits
    """Turns, passages per search and context length, in training and evaluation."""
    max_obs_tokens: int
    """Tokens per observation."""
    held_out: Evaluator | None
    """Greedy evaluation of a loaded model on the held-out questions (None: there are none)."""
    eval_device: str
    """Where the starting model and the final checkpoint are evaluated (``resolve_device``)."""
    report: Callable[[Report | None, Report | None], list[str]]
    """The report's lines between title and learning curve, from the reports before and after."""
    summary: dict[str, Any] = field(default_factory=dict)
    """The job's own entries of summary.json (its inputs)."""
    config: dict[str, Any] = field(default_factory=dict)
    """The job's own sections of summary.json's "config" (its world or data settings)."""
    seconds: dict[str, float] = field(default_factory=dict)
    """Time the job spent preparing its inputs before ``run_job`` (keys of ``PHASES``)."""
    mix: tuple[float, ...] = ()
    """Sampling weight per ``TrainItem.source``; empty: each question once per epoch."""
    demos: tuple[SFTExample, ...] = ()
    """Demonstrations for ``algo.demo_coef``'s term (``TrainTask.demos``)."""


def greedy_evaluator(
    tool: SearchTool | Toolbox, items: list[EvalItem], cfg: DataConfig | EmbeddedConfig
) -> Evaluator:
    """``items`` answered greedily with ``tool`` under ``cfg``'s limits (``eval.evaluate``)."""

    def run(model: Any, tokenizer: Any, engine: Engine | EngineKind = "hf") -> Report:
        return evaluate(model, tokenizer, tool, items, cfg, engine=engine)

    return run


def evenly_spaced(items: Sequence[T], n: int | None) -> list[T]:
    """``n`` of ``items`` at evenly spaced positions (all when ``n`` is None or too large), so
    every part of a concatenated list (a file, a hop count) keeps its share."""
    if n is None or n >= len(items):
        return list(items)
    pick = np.linspace(0, len(items) - 1, n).round().astype(int)
    return [items[i] for i in sorted(set(pick.tolist()))]


def start_run(run: RunConfig) -> Path:
    """Refuse a previous run in ``run.out_dir``, then make it (jobs: before preparing inputs)."""
    out = Path(run.out_dir)
    refuse_previous_run(out, run.resume, run.overwrite)
    out.mkdir(parents=True, exist_ok=True)
    return out


def run_job(
    job: Job,
    settings: TrainSettings,
    cluster: ClusterConfig = ClusterConfig(),
    before: Report | None = None,
    progress: bool = True,
) -> dict[str, Any]:
    """Evaluate, train, evaluate, report; returns the summary also in ``<run>/summary.json``.
    ``settings``: the run's configs (rollbacks: ``_train_with_rollbacks``); ``cluster``: the Ray
    actors to sample and update on; ``before``: the starting model's held-out report, written
    instead of evaluating again (a resumed run reads the one its first part wrote)."""
    algo, optim, run, model_cfg = settings.algo, settings.optim, settings.run, settings.model
    t0 = time.perf_counter()
    out = start_run(run)
    before = _evaluate_start(job, out, run, model_cfg, before)
    t1 = time.perf_counter()
    _train_with_rollbacks(job, settings, cluster, progress)
    t2 = time.perf_counter()
    final = latest_checkpoint(out)
    if final is not None and job.held_out is not None:
        log.info("evaluating the final checkpoint %s", final)
    after = _evaluate_dir(job, out, model_cfg, final / "model", "eval-after") if final else None
    warning = None
    if after is not None:
        log.info("held-out EM after RL: %.3f", after["overall"]["em"])
        if before is not None and (warning := collapse_warning(before, after)):
            log.warning(warning)
    seconds = {**job.seconds, "eval_before": t1 - t0, "train": t2 - t1}
    seconds["total"] = sum(job.seconds.values()) + time.perf_counter() - t0
    summary: dict[str, Any] = {
        "model_dir": str(job.model_dir),
        "final_checkpoint": None if final is None else str(final),
        **job.summary,
        "before": without_rows(before),
        "after": without_rows(after),
        "collapse": warning,  # ``eval.evaluate.collapse_warning``: None unless it collapsed
        "seconds": seconds,
        "config": {
            "algo": asdict(algo),
            "optim": asdict(optim),
            "run": asdict(run),
            **job.config,
            "model": asdict(model_cfg),
        },
    }
    write_atomic(out / "summary.json", json.dumps(summary, indent=2, default=str))
    _write_reports(job, out, before, after, seconds)
    return summary


def _evaluate_dir(
    job: Job, out: Path, model_cfg: ModelConfig, path: Path, name: str
) -> Report | None:
    """The held-out report of the model saved in ``path``, written as ``<out>/<name>.*``."""
    if job.held_out is None:
        return None
    model, tokenizer = load_model(path)
    report = job.held_out(model.to(resolve_device(job.eval_device)), tokenizer, model_cfg.engine)
    write_report(report, out, name)
    return report


def _evaluate_start(
    job: Job, out: Path, run: RunConfig, model_cfg: ModelConfig, before: Report | None
) -> Report | None:
    """The starting model's held-out report: given, a resumed run's first part's, or fresh."""
    saved = out / "eval-before.json"
    if before is not None:
        write_report(before, out, "eval-before")
    elif run.resume and saved.exists():  # the starting model was evaluated by the first run
        before = json.loads(saved.read_text())
    else:
        log.info("evaluating the starting model %s", job.model_dir)
        before = _evaluate_dir(job, out, model_cfg, job.model_dir, "eval-before")
    if before is not None:
        log.info("held-out EM before RL: %.3f; RL: %d steps", before["overall"]["em"], run.steps)
    return before


def _periodic(job: Job, run: RunConfig) -> Callable[..., dict[str, float]] | None:
    """The trainer's periodic held-out evaluation (every ``run.eval_every`` steps, its engine);
    not at the last step: the final checkpoint is evaluated after training as "after"."""
    held_out = job.held_out
    if held_out is None:
        return None

    def evaluate(
        model: Any, tokenizer: Any, step: int, engine: Engine | EngineKind
    ) -> dict[str, float]:
        if step == run.steps:
            return {}
        report = held_out(model, tokenizer, engine)
        generated = sum(r.get("generated_tokens", 0) for r in report["rows"])
        return {
            "eval/em": report["overall"]["em"],
            "eval/f1": report["overall"]["f1"],
            "tokens/eval_generated": float(generated),
        }

    return evaluate


class _Cluster:
    """The Ray actors of a run (``cluster``): rollout workers and FSDP2 ranks, started when the
    trainer asks for them and closed together (after a rollback, or at the end)."""

    def __init__(self, job: Job, cluster: ClusterConfig, settings: TrainSettings) -> None:
        self.job, self.cluster, self.settings = job, cluster, settings
        self.actors: list[RayRollout | FSDPLearner] = []

    def rollout_workers(self) -> RayRollout:
        job, cfg = self.job, self.settings.model
        workers = start_workers(
            self.cluster, job.model_dir, job.tool, job.max_obs_tokens, cfg.engine, cfg.cpu_speedups
        )
        self.actors.append(workers)
        return workers

    def train_ranks(self, policy: Any, optimizer: Any, scheduler: Any) -> FSDPLearner:
        learner = start_learner(
            self.cluster, self.job.model_dir, self.settings, policy, optimizer, scheduler
        )
        self.actors.append(learner)
        return learner

    def close(self) -> None:
        while self.actors:
            self.actors.pop().close()


def _train_with_rollbacks(
    job: Job, settings: TrainSettings, cluster: ClusterConfig, progress: bool
) -> None:
    """RL (``train.trainer.train``) with the job's inputs, a progress bar and the cluster's actors;
    after a health rollback, resumed from the healthy checkpoint it names with fresh actors."""
    run = settings.run
    actors = _Cluster(job, cluster, settings)
    bar = TrainProgress(run.steps) if progress else None
    part = run
    task = TrainTask(job.model_dir, load_model, job.tool, job.items, job.sampling, job.limits,
                     job.max_obs_tokens, job.mix, job.demos)  # fmt: skip
    hooks = TrainHooks(
        evaluate=_periodic(job, run),
        on_step=bar.update if bar else None,
        rollout_source=actors.rollout_workers if cluster.rollout_workers > 0 else None,
        learner=actors.train_ranks if cluster.train_ranks > 0 else None,
    )
    try:
        while True:
            try:
                train(task, replace(settings, run=part), hooks)
                return
            except Rollback as back:  # health.action rollback: resume from a healthy checkpoint
                log.warning("%s", back)
                actors.close()
                discard_newer(Path(run.out_dir), Path(back.checkpoint), why="rolled-back")
                part = replace(run, resume=True)
    finally:
        actors.close()
        if bar:
            bar.close()


def _write_reports(
    job: Job, out: Path, before: Report | None, after: Report | None, seconds: dict[str, float]
) -> None:
    """report.md (the job's lines, the learning curve, the wall time), the tree pages, the
    evaluations' pages and report.html; a run that logged no step gets no curve."""
    metrics = out / "metrics.jsonl"
    trained = metrics.is_file() and bool(metrics.read_text().strip())  # a step was logged
    curve = None
    if trained:
        em = [r["overall"]["em"] if r is not None else None for r in (before, after)]
        curve = plot_learning_curve(out, before=em[0], after=em[1])
    lines = [f"# {out.name}", "", *job.report(before, after)]
    if curve is not None:
        lines += [f"![learning curve]({curve.name})", ""]
    phases = ", ".join(f"{PHASES[k]} {v:.0f} s" for k, v in seconds.items() if k in PHASES)
    lines.append(f"Wall time: {seconds['total']:.0f} s ({phases}).")
    write_atomic(out / "report.md", "\n".join(lines) + "\n")
    if (out / "forests").is_dir():
        write_pages(out)  # the kept rollout trees, linked from report.html
    write_eval_pages(out)  # the held-out chains before and after
    if trained:
        write_run_report([out], out / "report.html")


def without_rows(report: Report | None) -> Report | None:
    """An evaluation report without its rows (the summary keeps the numbers only)."""
    return None if report is None else {k: v for k, v in report.items() if k != "rows"}


class TrainProgress:
    """A rich progress bar of the RL steps with the live reward, EM and generation speed."""

    def __init__(self, total: int) -> None:
        self._p = Progress(
            TextColumn("RL"),
            BarColumn(),
            TextColumn("{task.completed}/{task.total}"),
            TextColumn("{task.fields[info]}"),
            TimeRemainingColumn(),
        )
        self._task = self._p.add_task("rl", total=total, info="")
        self._p.start()

    def update(self, step: int, m: dict[str, float]) -> None:
        info = (
            f"reward {m['reward/mean']:.3f}  EM {m['reward/em']:.3f}  "
            f"{m['time/gen_tokens_per_s']:.0f} tok/s"
        )
        if "eval/em" in m:
            info += f"  held-out EM {m['eval/em']:.3f}"
        self._p.update(self._task, completed=step, info=info)

    def close(self) -> None:
        self._p.stop()
