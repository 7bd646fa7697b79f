"""Presets: the embedded default job's settings (no heavy imports, so the CLI loads fast)."""

from __future__ import annotations

from dataclasses import dataclass

from treegrpo.train.config import AlgorithmConfig, OptimConfig, RunConfig


@dataclass(frozen=True)
class EmbeddedConfig:
    """The synthetic world and the agent's limits in it."""

    world_seed: int = 0
    """Seed of the training world (the evaluation world uses another seed)."""
    eval_questions: int = 150
    """Held-out questions evaluated before and after training."""
    max_turns: int = 3
    """Steps that may search before the final step."""
    max_new_tokens: int = 48
    """Tokens per agent step."""
    max_obs_tokens: int = 160
    """Tokens per observation."""
    max_context: int = 1024
    """Prompt plus all steps, in tokens."""
    temperature: float = 1.0
    """Sampling temperature during training (evaluation is greedy)."""


# The embedded default: Tree-GRPO at budget ≈ 4, (M, N, L) = (2, 2, 1), sized for 2 CPU cores.
DEFAULT_ALGO = AlgorithmConfig(algo="tree", m=2, n=2, l=1)
DEFAULT_OPTIM = OptimConfig(
    lr=1e-4, weight_decay=0.0, mini_batch_prompts=8, micro_batch_tokens=8192
)
DEFAULT_RUN = RunConfig(out_dir="runs/default", steps=30, prompts_per_step=16, save_every=10)
DEFAULT_EMBEDDED = EmbeddedConfig()
