"""What a training run takes, as three values: ``TrainTask``, ``TrainSettings`` and ``TrainHooks``;
``train.trainer.train(task, settings, hooks)`` runs it."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from treegrpo.engine.base import Engine, EngineKind
from treegrpo.engine.sampling import SamplingParams
from treegrpo.retrieval.base import SearchTool
from treegrpo.rollout.sampler import AgentLimits
from treegrpo.rollout.source import RolloutSource
from treegrpo.tools.registry import Toolbox
from treegrpo.train.config import AlgorithmConfig, HealthConfig, ModelConfig, OptimConfig, RunConfig
from treegrpo.train.sft import SFTExample
from treegrpo.train.step import Learner


@dataclass(frozen=True)
class TrainItem:
    """One training question."""

    question: str
    golds: tuple[str, ...]
    uid: str
    hops: int = 0  # retrieval hops a perfect agent needs (0: unknown); shown by treegrpo view
    source: int = 0  # the training file it came from: its index in ``TrainTask.mix``


@dataclass(frozen=True)
class TrainTask:
    """What RL trains: the model at ``model_path`` (``load_model(path)`` → (model, tokenizer) on the
    CPU), the agent's tools, questions, sampling parameters and limits. ``mix``: each training
    source's sampling weight (``train.order.mixed_order``; empty: every question once per epoch);
    ``demos``: demonstrations (token ids, action mask) for ``algo.demo_coef``'s term."""

    model_path: str | Path
    load_model: Callable[[Path], tuple[Any, Any]]
    tool: SearchTool | Toolbox
    items: Sequence[TrainItem]
    sampling: SamplingParams
    limits: AgentLimits
    max_obs_tokens: int = 500
    mix: Sequence[float] = ()
    demos: Sequence[SFTExample] = ()


@dataclass(frozen=True)
class TrainSettings:
    """The run's configs: algorithm, optimizer, run, model and health (``health.action`` rollback
    raises ``train.health.Rollback`` for the caller, ``jobs.runner``, to resume from)."""

    algo: AlgorithmConfig
    optim: OptimConfig
    run: RunConfig
    model: ModelConfig = field(default_factory=ModelConfig)
    health: HealthConfig = field(default_factory=HealthConfig)


@dataclass(frozen=True)
class TrainHooks:
    """Callbacks of a run, each optional.

    - ``evaluate(model, tokenizer, step, engine)`` → metrics to log, every ``run.eval_every`` steps;
    - ``on_step(step, metrics)`` after every step;
    - ``rollout_source()`` makes where the forests come from (default: this process's engine), given
      the policy's weights at the start and after every update;
    - ``learner(policy, optimizer, scheduler)`` makes where the update runs when not in this
      process (``treegrpo.distributed.fsdp``), from these as they are; the policy then mirrors
      its weights after every update and the optimizer its state before every checkpoint."""

    evaluate: Callable[[Any, Any, int, Engine | EngineKind], dict[str, float]] | None = None
    on_step: Callable[[int, dict[str, float]], None] | None = None
    rollout_source: Callable[[], RolloutSource] | None = None
    learner: Callable[[Any, torch.optim.Optimizer, Any], Learner] | None = None
