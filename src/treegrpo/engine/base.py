"""What the rollout and the trainer need from a generation backend (docs/design.md, "Layers";
docs/library.md, "The engine"): one agent step for a batch of requests, in token ids, each
request a context (a ``Segment`` chain that branches share), the tokens still to feed and a
token limit. Log-probs are log softmax(logits / T) at the sampling temperature T (1 when greedy),
``engine.sampling.policy_logprobs`` (docs/algorithm.md §4).
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol

import torch

from treegrpo.engine.cpu.lora import is_lora_layer
from treegrpo.engine.sampling import SamplingParams
from treegrpo.engine.segments import Segment

Finish = Literal["stop", "eos", "length"]
EngineKind = Literal["hf", "vllm"]


class Stopper(Protocol):
    def hit(self, tokens: Sequence[int]) -> bool:
        """Whether the newest token of ``tokens`` ends the step."""
        ...


@dataclass
class StepRequest:
    context: Segment  # what the model has already seen
    pending: list[int]  # tokens to feed before sampling (at least one)
    max_new_tokens: int | None = None  # None: SamplingParams.max_new_tokens
    # own random stream (None: the step's generator): the same tokens in any batch, on any worker
    seed: int | None = None


Requests = Sequence[StepRequest]  # one engine step's batch


@dataclass
class StepResult:
    tokens: list[int]  # sampled ids, the step-end token included
    logprobs: list[float]  # log p(token) under the sampled distribution, one per token
    finish: Finish
    fork: Segment  # context + pending[:-1]
    end: Segment  # context + pending + tokens[:-1]
    processed: int  # positions this row cost the model: prefill (padding included) + decode
    reused: int = 0  # context positions read from the prefix cache instead of computed


class Engine(Protocol):
    """A generation backend as ``rollout`` and ``train`` use it."""

    @property
    def device(self) -> torch.device:
        """Where the sampler's ``torch.Generator`` lives."""
        ...

    @property
    def pad_id(self) -> int:
        """The padding id of the tokenizer (the trainer pads its batches with it)."""
        ...

    def root(self) -> Segment:
        """The empty context."""
        ...

    def prefill(
        self, contexts: Sequence[Segment], tokens: Sequence[list[int]]
    ) -> tuple[list[Segment], list[int]]:
        """Extend each context by its tokens without sampling (a prompt that several trees
        share); returns the new contexts and the positions each row cost now."""
        ...

    def step(
        self, requests: Requests, params: SamplingParams, generator: torch.Generator | None = None
    ) -> list[StepResult]:
        """Generate one agent step for every request; results in request order. The draws come
        from ``generator`` (per-request seeds drawn from it where the backend needs them), so a
        seeded generator gives the same forest again."""
        ...

    def update_weights(self, weights: torch.nn.Module | Mapping[str, torch.Tensor]) -> None:
        """Generate with these weights from now on (the policy after an update, or its state
        dict with Hugging Face names) and drop every prefix cached with the old ones."""
        ...

    def reset_prefix_cache(self) -> None:
        """Forget every cached prefix (after the weights changed in place)."""
        ...


def state_dict_of(weights: torch.nn.Module | Mapping[str, Any]) -> dict[str, torch.Tensor]:
    """The tensors of a module or a state dict, detached, by Hugging Face name. A peft LoRA model
    (or the model inside one) gives what ``merge_and_unload`` would save, without changing it: W =
    W₀ + Σₐ sₐ Bₐ Aₐ over the active adapters (Hu et al. 2021, eq. 3), under the base names."""
    if not isinstance(weights, torch.nn.Module):
        return {k: v.detach() for k, v in weights.items()}
    inner = getattr(weights, "get_base_model", None)
    model = inner() if callable(inner) else weights
    lora = {n: m for n, m in model.named_modules() if is_lora_layer(m)}
    out: dict[str, torch.Tensor] = {}
    with torch.no_grad():
        for key, value in model.state_dict().items():
            owner, _, leaf = key.rpartition(".")
            layer_name = owner.removesuffix(".base_layer")
            layer = lora.get(layer_name) if owner.endswith(".base_layer") else None
            if layer is not None:  # the wrapped linear layer: its weight with the deltas added
                key = f"{layer_name}.{leaf}"
                if leaf == "weight":
                    value = value + _lora_delta(layer, layer_name)
            elif "lora_" in key:
                if any(key.startswith(f"{n}.lora_") for n in lora):
                    continue  # A and B, already in the merged weight
                raise ValueError(f"{key}: only LoRA on linear layers can be merged")
            out[key] = value.detach()
    return out


def _lora_delta(layer: Any, name: str) -> torch.Tensor | float:
    """Σₐ sₐ Bₐ Aₐ over the adapters active in ``layer`` (0 when they are disabled or merged)."""
    if getattr(layer, "disable_adapters", False) or getattr(layer, "merged", False):
        return 0.0
    active = [a for a in layer.active_adapters if a in layer.lora_A]
    if any(getattr(layer, "use_dora", {}).get(a, False) for a in active):
        raise ValueError(f"{name}: DoRA adapters cannot be merged into plain weights")
    return sum((layer.get_delta_weight(a) for a in active), 0.0)


def token_limits(requests: Requests, params: SamplingParams) -> list[int]:
    """Each request's limit (its own, else ``params.max_new_tokens``); a pending token is a must."""
    for i, req in enumerate(requests):
        if not req.pending:
            raise ValueError(f"request {i} has no pending token to start from")
    default = params.max_new_tokens
    return [default if r.max_new_tokens is None else r.max_new_tokens for r in requests]


def unwrap_peft(model: Any) -> Any:
    """The transformers model inside a peft wrapper (a LoRA policy: its layers carry the
    adapters in place), else ``model`` (if peft was never imported, it cannot be a peft model)."""
    peft = sys.modules.get("peft")
    if peft is not None and isinstance(model, peft.PeftModel):
        return model.get_base_model()
    return model


def special_ids(model: Any, tokenizer: Any, eos_ids: Sequence[int] | None) -> tuple[set[int], int]:
    """An engine's end-of-sequence ids (``eos_ids`` when given, else those of the model's generation
    config, its config and the tokenizer) and its padding id (the tokenizer's, else 0)."""
    pad: int = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    if eos_ids is not None:
        return set(eos_ids), pad
    eos: set[int] = set()
    for src in (getattr(model, "generation_config", None), model.config, tokenizer):
        ids = getattr(src, "eos_token_id", None)
        if isinstance(ids, int):
            eos.add(ids)
        elif isinstance(ids, (list, tuple)):
            eos.update(int(e) for e in ids)
    return eos, pad
