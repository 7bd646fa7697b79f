"""Per-token log-probabilities of target tokens under a causal LM."""

from __future__ import annotations

from typing import Any

import torch

from treegrpo.train.losses import entropy_from_logits


def token_logprobs(
    model: Any,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    with_entropy: bool = False,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """log p(ids[t + 1] | ids[≤ t]) for every position: (b, T) ids → (b, T − 1), and the entropy
    of each predictive distribution when asked (b, T − 1). Computed in float32."""
    logits = model(input_ids=input_ids, attention_mask=attention_mask).logits[:, :-1]
    logits = logits.float()  # (b, T − 1, V)
    logp = torch.log_softmax(logits, dim=-1)
    target_logp = logp.gather(-1, input_ids[:, 1:, None]).squeeze(-1)
    entropy = entropy_from_logits(logits) if with_entropy else None
    return target_logp, entropy
