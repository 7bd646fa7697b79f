"""Presets and job settings: the embedded default job's world, and the data-driven job's model,
datasets and retriever (no heavy imports, so the CLI loads fast)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from treegrpo.train.config import AlgorithmConfig, ModelConfig, OptimConfig, RunConfig


@dataclass(frozen=True)
class EmbeddedConfig:
    """The synthetic world and the agent's limits in it."""

    world_seed: int = 0
    """Seed of the training world (the evaluation world uses another seed)."""
    train_worlds: int = 8
    """Worlds the RL questions come from: the train world and ``train_worlds - 1`` more (no
    name shared with each other or the eval world), searched as one corpus. With one world of
    300 questions each is asked 2-3 times in a run and RL learns that world's answers: greedy EM
    on it rose 14 → 24% while the held-out world's moved 12 → 13% (BENCHMARKS.md)."""
    eval_questions: int = 300
    """Held-out questions evaluated before and after training (the eval world has 300; one
    standard error of an EM near 8% is then 1.6 points)."""
    max_turns: int = 3
    """Steps that may search before the final step."""
    max_new_tokens: int = 48
    """Tokens per agent step."""
    max_obs_tokens: int = 160
    """Tokens per observation."""
    max_context: int = 1024
    """Prompt plus all steps, in tokens."""
    temperature: float = 0.6
    """Sampling temperature during training (evaluation is greedy). The paper samples at 1.0;
    the tiny agent's samples at 1.0 are far worse than its greedy answers (BENCHMARKS.md)."""


# The embedded default: Tree-GRPO at budget ≈ 4, (M, N, L) = (2, 2, 1), sized for 2 CPU cores.
# No format bonus: with the tiny agent's few correct samples, Search-R1's 0.2 for a valid format
# taught it to answer sooner instead of correctly (held-out EM 17.3% → 9.3%; without the bonus
# 17.3% → 18.0%, BENCHMARKS.md).
# 70-80% of prompts get one reward on all six leaves at this start (zero advantage), so the
# update trains only the others (skip_uniform_prompts), in mini-batches of 4 of them.
DEFAULT_ALGO = AlgorithmConfig(
    algo="tree", m=2, n=2, l=1, format_score=0.0, skip_uniform_prompts=True
)
DEFAULT_OPTIM = OptimConfig(
    lr=1e-4, weight_decay=0.0, mini_batch_prompts=4, micro_batch_tokens=8192
)
# 40 steps: held-out EM rises until about step 40 and then stays (four seeds evaluated every 10
# steps up to 60: means 14.2 / 14.9 / 14.8 / 14.5 at steps 30 / 40 / 50 / 60, BENCHMARKS.md).
DEFAULT_RUN = RunConfig(out_dir="runs/default", steps=40, prompts_per_step=24, save_every=10)
DEFAULT_EMBEDDED = EmbeddedConfig()


@dataclass(frozen=True)
class DataConfig:
    """The data-driven job (`treegrpo train --data.train-files …`): the starting model, the
    question files, the search tool and the agent's limits (defaults: the paper's QA runs).
    Built-in, offline sets: questions "wiki:train" and "wiki:test", corpus "wiki:corpus", model
    "smollm2" (treegrpo.train.datarun resolves them)."""

    model: str | None = None
    """Hugging Face model directory to start from, or "smollm2" (SmolLM2-135M-Instruct, built
    offline by `treegrpo prepare-model smollm2`)."""
    train_files: tuple[str, ...] = ()
    """Training questions: Search-R1 parquet or FlashRAG jsonl files, or "wiki:train" (given:
    the data-driven job runs instead of the embedded one)."""
    eval_files: tuple[str, ...] = ()
    """Held-out questions evaluated greedily before and after training (none: no evaluation)."""
    eval_questions: int | None = 1000
    """Evaluate this many of them, evenly spaced so every file keeps its share (None: all)."""
    corpus: str | None = None
    """Search-R1 jsonl corpus searched in-process, or "wiki:corpus" (else give retriever_url)."""
    retriever_url: str | None = None
    """A running Search-R1 /retrieve server, e.g. http://127.0.0.1:8000/retrieve."""
    retriever: Literal["bm25", "dense"] = "bm25"
    """How the corpus is searched: bm25 (bm25s) or dense (sentence-transformers + FAISS)."""
    max_turns: int = 3
    """Steps that may search before the final step."""
    topk: int = 3
    """Passages per search."""
    max_new_tokens: int = 500
    """Tokens per agent step."""
    max_obs_tokens: int = 500
    """Tokens per observation (longer ones are truncated)."""
    max_context: int = 4096
    """Prompt plus all steps and observations, in tokens."""
    temperature: float = 1.0
    """Sampling temperature during training (evaluation is greedy)."""
    top_p: float = 0.95
    """Nucleus sampling during training (the paper's 0.95)."""


DEFAULT_DATA = DataConfig()

# The sections of a `treegrpo train --config` file (configs/*.yaml) and their defaults: the
# embedded preset. `treegrpo bench budget --config` reads the same files.
TRAIN_SECTIONS: dict[str, Any] = {
    "algo": DEFAULT_ALGO,
    "optim": DEFAULT_OPTIM,
    "run": DEFAULT_RUN,
    "world": DEFAULT_EMBEDDED,
    "model": ModelConfig(),
    "data": DEFAULT_DATA,
}
