"""Choose a generation backend by name (``ModelConfig.engine``)."""

from __future__ import annotations

from typing import Any

from treegrpo.engine.base import Engine, EngineKind, Stopper
from treegrpo.engine.hf import HFEngine
from treegrpo.engine.vllm import TokenStopper, VLLMEngine


def build_engine(
    kind: EngineKind,
    model: Any,
    tokenizer: Any,
    stopper: Stopper,
    cpu_speedups: bool | None = None,
) -> Engine:
    """The ``kind`` engine generating with ``model``: hf shares the policy's weights (``HFEngine``);
    vllm serves a copy, refreshed by ``Engine.update_weights`` (its stopper names its stop ids)."""
    if kind == "hf":
        return HFEngine(model, tokenizer, stopper, cpu_speedups=cpu_speedups)
    if kind == "vllm":
        if not hasattr(stopper, "end_token_ids"):
            raise TypeError("the vllm engine needs a stopper with end_token_ids (StepStopper)")
        token_stopper: TokenStopper = stopper  # type: ignore[assignment]
        return VLLMEngine(model, tokenizer, token_stopper)
    raise ValueError(f"unknown engine {kind!r}: hf or vllm")
