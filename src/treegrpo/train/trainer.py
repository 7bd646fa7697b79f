"""The training run: data order, RL steps, logging, checkpoints, evaluation, exact resume
(docs/configuration.md, "The run directory"). Each step's randomness is derived from the run seed
and the step number, so the step after a resume equals the step without interruption. A LoRA run
resumes from the starting model plus the checkpoint's adapter (``adapter/``), not ``model/``.
"""

from __future__ import annotations

import functools
import json
import logging
import shutil
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

import torch

from treegrpo.agent.protocol import ToolProtocol
from treegrpo.agent.stops import StepStopper
from treegrpo.engine.base import Engine, EngineKind
from treegrpo.engine.build import build_engine
from treegrpo.engine.cpu import speedups
from treegrpo.engine.cpu.speedups import CpuSpeedups
from treegrpo.files import write_atomic
from treegrpo.models.load import resolve_device
from treegrpo.retrieval.base import SearchTool
from treegrpo.rollout.sampler import agent_protocol
from treegrpo.rollout.scoring import ScoredRollout
from treegrpo.rollout.snapshot import forest_snapshot
from treegrpo.rollout.source import LocalRollout, RolloutSource
from treegrpo.tools.registry import Toolbox
from treegrpo.train.checkpoint import (
    discard_newer,
    healthy_checkpoint,
    latest_checkpoint,
    load_trainer_state,
    save_checkpoint,
    set_rng_state,
)
from treegrpo.train.config import AlgorithmConfig, ModelConfig, OptimConfig, RunConfig
from treegrpo.train.health import HealthMonitor, Rollback, TrainingUnhealthy
from treegrpo.train.ledger import LEDGER_FILE, ledger_row
from treegrpo.train.order import data_order, mixed_order
from treegrpo.train.policy import load_adapter, prepare_policy
from treegrpo.train.precision import autocast_dtype
from treegrpo.train.step import Batch, Learning, Rollouts, StepSettings, rl_step
from treegrpo.train.task import TrainHooks, TrainItem, TrainSettings, TrainTask

logger = logging.getLogger(__name__)

HEALTH_FILE = "health.json"
"""The run's rollbacks and the learning-rate scale they left (``train.health``)."""


def make_optimizer(policy: Any, optim: OptimConfig) -> tuple[torch.optim.Optimizer, Any]:
    """AdamW over the trainable parameters (in ``policy.parameters()`` order) and its learning
    rate schedule: linear warm-up over ``optim.warmup_steps`` optimizer steps, then constant."""
    optimizer = torch.optim.AdamW(
        [p for p in policy.parameters() if p.requires_grad],
        lr=optim.lr,
        betas=optim.betas,
        weight_decay=optim.weight_decay,
    )
    warmup = max(optim.warmup_steps, 0)
    scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda s: min(1.0, (s + 1) / warmup) if warmup else 1.0
    )
    return optimizer, scheduler


def train(task: TrainTask, settings: TrainSettings, hooks: TrainHooks | None = None) -> Path:
    """Train ``task`` with ``settings`` (or resume it) and return the run directory; ``hooks``:
    evaluation, progress, and where rollouts and updates run (``train.task``)."""
    hooks = hooks or TrainHooks()
    algo, optim, run, model_cfg = settings.algo, settings.optim, settings.run, settings.model
    out = Path(run.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    device = resolve_device(model_cfg.device)
    fast = speedups.enabled(device, model_cfg.cpu_speedups)  # engine.cpu.speedups
    ckpt = _checkpoint_to_resume(out, run, lora=model_cfg.lora_rank > 0)
    own_reference = hooks.learner is None
    policy, reference, tokenizer = _load_models(task, settings, ckpt, device, own_reference, fast)
    optimizer, scheduler = make_optimizer(policy, optim)
    if ckpt is not None:
        start_step, position, logged = _restore(ckpt, out, optimizer, scheduler)
    else:
        start_step, position, logged = 0, 0, []
        _write_config(out, task, settings)
    protocol = agent_protocol(tokenizer, task.tool, task.max_obs_tokens)
    rollouts, engine = _rollouts(
        hooks.rollout_source, policy, tokenizer, protocol, task.tool, model_cfg
    )
    update = hooks.learner(policy, optimizer, scheduler) if hooks.learner is not None else None
    take = _batches(task.items, protocol, task.mix, run)
    amp = autocast_dtype(model_cfg.dtype, device)
    learning = Learning(policy, reference, optimizer, scheduler, amp, update, task.demos)
    side = Rollouts(rollouts, protocol, task.sampling, task.limits)
    per_step = StepSettings(algo, optim, settings.health.max_failed_searches)
    monitor = HealthMonitor.replay(settings.health, logged)
    writer = _tensorboard(out / "tb", start_step)
    with open(out / "metrics.jsonl", "a") as log, open(out / LEDGER_FILE, "a") as ledger:
        for step in range(start_step, run.steps):
            items, batch = take(position)
            position += len(items)
            done = step + 1
            kept = run.forests_every > 0 and (step == 0 or done % run.forests_every == 0)
            forests = run.forests_prompts if kept else 0
            observe = _observer(out, ledger, done, batch, items, protocol, algo, forests)
            seed = run.seed * 1_000_003 + step
            metrics = rl_step(learning, side, batch, per_step, seed=seed, observe=observe)
            speedups.release_memory(fast)  # else the heap fragments and memory grows every step
            metrics["train/lr"] = float(scheduler.get_last_lr()[0])
            if hooks.evaluate is not None and run.eval_every and done % run.eval_every == 0:
                t_eval = time.perf_counter()
                evaluated = hooks.evaluate(policy, tokenizer, done, engine)  # {}: skipped
                if evaluated:
                    metrics |= evaluated | {"time/eval_s": time.perf_counter() - t_eval}
            _log_step(out, done, metrics, monitor, log, writer)
            if hooks.on_step is not None:
                hooks.on_step(done, metrics)
            if done % run.save_every == 0 or done == run.steps:
                if update is not None:
                    update.load_optimizer_into(optimizer)  # the ranks' AdamW state, gathered
                save_checkpoint(
                    out, done, policy, tokenizer, optimizer, scheduler, position,
                    extra={"lr_scale": lr_scale(out)}, keep=run.keep_checkpoints,
                    healthy=monitor.healthy,
                )  # fmt: skip
    if writer is not None:
        writer.close()
    return out


def _log_step(
    out: Path, step: int, metrics: dict[str, float], monitor: HealthMonitor, log: Any, writer: Any
) -> None:
    """The health alarms' verdict on the step (``train.health``), then its line in metrics.jsonl,
    TensorBoard and the log; after that, an alarm warns, stops or rolls back (``_on_alarm``)."""
    problems = monitor.check(step, metrics)
    metrics["health/alarm"] = float(monitor.alarm)
    log.write(json.dumps({"step": step, "time": time.time(), **metrics}) + "\n")
    log.flush()
    line = (
        f"step {step}: reward {metrics['reward/mean']:.3f}, EM {metrics['reward/em']:.3f}, "
        f"tool calls/leaf {metrics['agent/tool_calls_per_leaf']:.2f}, "
        f"uniform prompts {metrics['adv/uniform_prompts']:.2f}, {metrics['time/step_s']:.1f} s"
    )
    if "eval/em" in metrics:
        line += f", held-out EM {metrics['eval/em']:.3f}"
    logger.info(line)
    if writer is not None:
        for k, v in metrics.items():
            writer.add_scalar(k, v, step)
    if problems:
        logger.warning("step %d: %s", step, "; ".join(problems))
    if monitor.alarm:
        _on_alarm(out, monitor)


def _checkpoint_to_resume(out: Path, run: RunConfig, lora: bool) -> Path | None:
    """The newest complete checkpoint when ``run.resume`` (damaged newer ones set aside; none: step
    0, said so), else None after clearing what a previous run left in ``out``, so its steps and
    checkpoints never mix into this run's; a checkpointed run is refused unless ``run.overwrite``
    (with ``run.resume`` and no checkpoint, its logged steps are redone)."""
    ckpt = latest_checkpoint(out) if run.resume else None
    if ckpt is not None:
        _check_resumable(ckpt, lora)
        for damaged in discard_newer(out, ckpt):
            logger.warning("set aside %s; resuming from %s", damaged, ckpt)
        return ckpt
    if run.resume:
        logger.warning(
            "--run.resume: %s holds no checkpoint (checkpoints/step-*); training from step 0. "
            "Check --run.out-dir if a run was expected there",
            out,
        )
    refuse_previous_run(out, run.resume, run.overwrite)
    for p in _previous_files(out):
        if p.is_dir():
            shutil.rmtree(p)
        else:
            p.unlink()
    return None


def _load_models(
    task: TrainTask,
    settings: TrainSettings,
    ckpt: Path | None,
    device: torch.device,
    own_reference: bool,
    fast: bool,
) -> tuple[Any, Any | None, Any]:
    """The policy (LoRA or not, from the checkpoint when resuming), the frozen reference when the
    KL term needs one here (``own_reference`` False: the training ranks hold it; a LoRA policy is
    its own, adapters off) and the tokenizer, on ``device``, with the CPU speed-ups if ``fast``."""
    model_cfg = settings.model
    lora = model_cfg.lora_rank > 0
    start = Path(task.model_path)
    policy, tokenizer = task.load_model(ckpt / "model" if ckpt and not lora else start)
    policy = prepare_policy(policy, model_cfg, seed=settings.run.seed)
    if ckpt is not None and lora:
        load_adapter(policy, ckpt / "adapter")
    policy.to(device)
    reference = None
    if settings.algo.kl_coef > 0 and not lora and own_reference:
        reference, _ = task.load_model(start)  # the frozen starting policy
        reference.eval().requires_grad_(False).to(device)
    # the CPU speed-ups stay on the models all run: the RL step calls them as plain PyTorch
    if fast:
        for m in (policy, reference):
            if m is not None:
                CpuSpeedups.attach(m)
    return policy, reference, tokenizer


def _restore(
    ckpt: Path, out: Path, optimizer: torch.optim.Optimizer, scheduler: Any
) -> tuple[int, int, list[dict[str, Any]]]:
    """Load the checkpoint's optimizer, scheduler and RNG states; return its step, its data
    position and the metrics.jsonl rows up to it (later ones, a killed attempt's, are cut)."""
    state = load_trainer_state(ckpt)
    optimizer.load_state_dict(state.optimizer)
    if state.scheduler is not None:
        scheduler.load_state_dict(state.scheduler)
    set_rng_state(state.rng)
    logged = _truncate_metrics(out / "metrics.jsonl", state.step)
    _truncate_metrics(out / LEDGER_FILE, state.step)
    # a rollback since this checkpoint was saved scaled the learning rate: apply it
    _scale_lr(optimizer, scheduler, lr_scale(out) / state.extra.get("lr_scale", 1.0))
    return state.step, state.data_position, logged


def _write_config(out: Path, task: TrainTask, settings: TrainSettings) -> None:
    """config.json: the run's settings."""
    parts: dict[str, Any] = {"algo": settings.algo, "optim": settings.optim}
    parts |= {"sampling": task.sampling, "limits": task.limits, "run": settings.run}
    parts["model"] = settings.model
    config: dict[str, Any] = {"model_path": str(task.model_path)}
    config |= {k: asdict(v) for k, v in parts.items()}
    config |= {"max_obs_tokens": task.max_obs_tokens, "mix": list(task.mix)}
    (out / "config.json").write_text(json.dumps(config, indent=2, default=str))


def _rollouts(
    rollout_source: Callable[[], RolloutSource] | None,
    policy: Any,
    tokenizer: Any,
    protocol: ToolProtocol,
    tool: SearchTool | Toolbox,
    model_cfg: ModelConfig,
) -> tuple[RolloutSource, Engine | EngineKind]:
    """Where the forests come from (this process's engine on the policy, or the rollout
    workers, which get the policy's weights now) and what periodic evaluations generate with
    (that engine, or the kind of engine to build)."""
    if rollout_source is not None:
        rollouts = rollout_source()
        rollouts.update_weights(policy)  # the workers start from the policy as it is now
        return rollouts, model_cfg.engine
    stopper = StepStopper(tokenizer, protocol.stop_tags)
    engine = build_engine(model_cfg.engine, policy, tokenizer, stopper, model_cfg.cpu_speedups)
    return LocalRollout(engine, protocol, tool), engine


def _batches(
    items: Sequence[TrainItem], protocol: ToolProtocol, mix: Sequence[float], run: RunConfig
) -> Callable[[int], tuple[list[TrainItem], Batch]]:
    """The items and the batch of the step that starts at a position in the data order
    (``data_order``, or ``mixed_order`` with ``mix``), a pure function of the seed and that
    position, so a resumed run draws what it would have; prompts rendered once per question."""
    sources = [it.source for it in items]  # [n_items]
    prompt = functools.cache(lambda i: protocol.prompt_ids(items[i].question))

    def take(position: int) -> tuple[list[TrainItem], Batch]:
        n, seed = run.prompts_per_step, run.seed
        if mix:
            idx = mixed_order(sources, mix, seed, position, n)
        else:
            idx = data_order(len(items), seed, position, n)
        chosen = [items[i] for i in idx]
        golds = [list(it.golds) for it in chosen]
        return chosen, Batch([prompt(i) for i in idx], golds, [it.uid for it in chosen])

    return take


def _observer(
    out: Path,
    ledger: Any,
    step: int,
    batch: Batch,
    items: Sequence[TrainItem],
    protocol: ToolProtocol,
    algo: AlgorithmConfig,
    forests: int,
) -> Callable[[ScoredRollout], None]:
    """Writes the step's ``ledger.jsonl`` line (``train.ledger``) and, ``forests`` > 0, its first
    ``forests`` prompts' trees to ``forests/step-NNNNNN.json`` atomically (``rollout.snapshot``).
    It runs before the update: a step killed later leaves a ledger line, which resume cuts with
    the metrics lines of steps after the checkpoint."""

    def observe(outcome: ScoredRollout) -> None:
        ledger.write(json.dumps(ledger_row(step, outcome, batch.uids)) + "\n")
        ledger.flush()
        if not forests:
            return
        shown = list(range(min(forests, len(batch.prompts))))
        trees = forest_snapshot(
            outcome,
            shown,
            protocol.decode,
            batch.golds,
            [it.question for it in items],
            hops=[it.hops for it in items],
            scale=algo.scale_std,
            batch=algo.batch_baseline,
        )
        path = out / "forests" / f"step-{step:06d}.json"
        path.parent.mkdir(exist_ok=True)
        write_atomic(path, json.dumps({"step": step, "algo": asdict(algo), "prompts": trees}))

    return observe


def _on_alarm(out: Path, monitor: HealthMonitor) -> None:
    """What ``health.action`` says after ``patience`` unhealthy steps in a row: warn (once per
    streak), stop, or roll back to the last checkpoint saved before the streak began."""
    health, since = monitor.cfg, monitor.streak_start
    what = f"{monitor.streak} unhealthy steps in a row since step {since}"
    if health.action == "warn":
        if monitor.streak == health.patience:
            logger.warning("health alarm: %s (health.action warn: the run goes on)", what)
        return
    good = healthy_checkpoint(out, since)
    record = _health_record(out)
    rollbacks = record.get("rollbacks", [])
    if health.action == "rollback" and good is not None and len(rollbacks) < health.max_rollbacks:
        scale = float(record.get("lr_scale", 1.0)) * health.rollback_lr_scale
        rollbacks = [*rollbacks, {"at_step": since + monitor.streak - 1, "to": good.name}]
        write_atomic(
            out / HEALTH_FILE, json.dumps({**record, "lr_scale": scale, "rollbacks": rollbacks})
        )
        raise Rollback(str(good), f"{what}; learning rate × {scale:g} from now on")
    where = f"the last healthy checkpoint is {good}" if good else "no healthy checkpoint is left"
    raise TrainingUnhealthy(
        f"{what} (see the warnings above); {where}. health.action {health.action}"
        + (f", {len(rollbacks)} rollbacks done" if health.action == "rollback" else "")
    )


def lr_scale(out: Path) -> float:
    """The learning-rate factor that rollbacks of the run in ``out`` have applied so far."""
    return float(_health_record(out).get("lr_scale", 1.0))


def _health_record(out: Path) -> dict[str, Any]:
    path = out / HEALTH_FILE
    return dict(json.loads(path.read_text())) if path.exists() else {}


def _scale_lr(optimizer: torch.optim.Optimizer, scheduler: Any, factor: float) -> None:
    if factor == 1.0:
        return
    for group in optimizer.param_groups:
        group["lr"] *= factor
        if "initial_lr" in group:
            group["initial_lr"] *= factor
    if scheduler is not None:
        scheduler.base_lrs = [lr * factor for lr in scheduler.base_lrs]
        scheduler._last_lr = [g["lr"] for g in optimizer.param_groups]


def _check_resumable(ckpt: Path, lora: bool) -> None:
    """A LoRA run resumes from an adapter, a full fine-tune from model/: refuse to mix them
    (the optimizer state would not fit the parameters). The weights must be safetensors."""
    if not any((ckpt / "model").glob("*.safetensors")):
        raise ValueError(
            f"{ckpt / 'model'} holds no safetensors weights; checkpoints are only read from "
            "safetensors (a pickled weights file could run code when loaded)"
        )
    has_adapter = (ckpt / "adapter").is_dir()
    if lora != has_adapter:
        wrote, asks = ("LoRA", "full fine-tuning") if has_adapter else ("full fine-tuning", "LoRA")
        raise ValueError(
            f"{ckpt} was written by a {wrote} run, this run asks for {asks}; "
            "resume with the model settings it was trained with (lora_rank)"
        )


def refuse_previous_run(out: Path, resume: bool, overwrite: bool) -> None:
    """Raise ValueError when ``out`` holds a checkpointed run that this one would neither
    continue (``resume``) nor replace (``overwrite``). Callers that write into ``out`` before
    training (the CLI, the jobs) call it first, so a refused run touches nothing."""
    if not (resume or overwrite) and latest_checkpoint(out) is not None:
        previous = [p.name for p in _previous_files(out)]
        raise ValueError(
            f"{out} holds a previous run ({', '.join(previous)}); pass --run.resume to continue "
            "it, --run.overwrite to start afresh in it, or choose another --run.out-dir"
        )


def _previous_files(out: Path) -> list[Path]:
    names = ("checkpoints", "metrics.jsonl", LEDGER_FILE, "tb", "forests", HEALTH_FILE)
    return [out / n for n in names if (out / n).exists()]


def _truncate_metrics(path: Path, last_step: int) -> list[dict[str, Any]]:
    """Keep the lines of steps up to ``last_step`` and return them parsed (not one a kill cut)."""
    if not path.exists():
        return []
    keep = []
    for line in path.read_text().splitlines():
        try:
            row = json.loads(line)
            step = row["step"]
        except (ValueError, KeyError, TypeError):
            continue  # the last line of a run killed while writing it
        if step <= last_step:
            keep.append(row)
    write_atomic(path, "".join(json.dumps(row) + "\n" for row in keep))
    return keep


def _tensorboard(path: Path, start_step: int) -> Any:
    """The TensorBoard writer; a resumed run hides the events of steps after ``start_step`` (the
    checkpoint's) that a killed attempt wrote, as ``_truncate_metrics`` drops their lines."""
    try:
        from torch.utils.tensorboard import SummaryWriter
    except ImportError:  # tensorboard not installed: metrics.jsonl still has everything
        return None
    return SummaryWriter(str(path), purge_step=start_step + 1 if start_step else None)
