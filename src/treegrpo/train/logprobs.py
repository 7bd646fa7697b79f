"""Per-token log-probabilities of target tokens under a causal LM (the policy or its reference)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import torch
from torch.nn.functional import pad

from treegrpo.engine.sampling import policy_logprobs
from treegrpo.train.head import logits_at
from treegrpo.train.losses import entropy_from_logits
from treegrpo.train.policy import is_lora
from treegrpo.train.precision import autocast


def token_logprobs(
    model: Any,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor | None,
    with_entropy: bool = False,
    autocast_dtype: torch.dtype | None = None,
    keep: torch.Tensor | None = None,
    temperature: float = 1.0,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """log p(ids[t + 1] | ids[≤ t]) for every position, p = softmax(logits / temperature) as the
    rollout sampled (``engine.sampling.policy_logprobs``): (b, T) ids → (b, T − 1), and each
    predictive distribution's entropy when asked. Autocast on CUDA where ``autocast_dtype`` is below
    float32; the softmax is float32. ``keep`` (b, T − 1): nonzero at the targets read; the LM head
    runs there only (``train.head``), other entries are 0. Rows padded on the right need no mask (a
    real token never attends to later padding), so it is dropped for the causal kernel."""
    if _right_padded(attention_mask):
        attention_mask = None
    targets = input_ids[:, 1:]  # (b, T − 1)
    chosen = None if keep is None else keep.bool()  # (b, T − 1)
    with autocast(input_ids.device, autocast_dtype):
        if chosen is None:
            logits = model(input_ids=input_ids, attention_mask=attention_mask).logits[:, :-1]
        else:
            logits = logits_at(model, input_ids, attention_mask, pad(chosen, (0, 1)))
    read = targets if chosen is None else targets[chosen]  # (b, T − 1) or (n,)
    target_logp, entropy = picked_logprobs(logits, read, temperature, with_entropy)
    if chosen is None:
        return target_logp, entropy
    zeros = torch.zeros(chosen.shape, dtype=target_logp.dtype, device=target_logp.device)
    scatter = zeros.masked_scatter  # the kept values in place, 0 elsewhere: (b, T − 1)
    return scatter(chosen, target_logp), None if entropy is None else scatter(chosen, entropy)


def picked_logprobs(
    logits: torch.Tensor, targets: torch.Tensor, temperature: float, with_entropy: bool
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """log p(target) under p = softmax(logits / temperature) in float32, and the entropy of p
    when asked: logits (..., V), targets (...) → (...)."""
    logits = logits.float()
    if temperature != 1.0:
        logits = logits / temperature  # the entropy too is the sampled distribution's
    logp = policy_logprobs(logits).gather(-1, targets[..., None]).squeeze(-1)
    return logp, entropy_from_logits(logits) if with_entropy else None


def _right_padded(attention_mask: torch.Tensor | None) -> bool:
    """True when every row is ones then zeros (``(b, T)`` mask, non-increasing along T)."""
    if attention_mask is None:
        return False
    return bool((attention_mask[:, 1:] <= attention_mask[:, :-1]).all())


@contextmanager
def as_reference(policy: Any, reference: Any | None) -> Iterator[Any]:
    """The frozen reference to run: ``reference`` when one is loaded, else the LoRA policy
    with its adapters disabled for the duration (its base model)."""
    if reference is not None:
        yield reference
        return
    if not is_lora(policy):
        raise ValueError("a KL term needs a reference model, or a LoRA policy whose base is one")
    with policy.disable_adapter():
        yield policy
