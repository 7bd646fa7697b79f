"""Next-token logits at chosen positions only.

Training reads the model's predictions at action tokens only (DESIGN.md: observation and prompt
tokens are context), yet a causal LM's forward computes the LM head and, after it, the caller's
softmax at every position. For a small model the head is a large share of a step (the tiny
default: vocabulary 1,536 at width 128, where action tokens are about 15% of the positions), and
for a real one its (B, T, V) float logits are the largest tensor of the step (SmolLM2: V =
49,152). Here the decoder gives the hidden states and the output embedding runs on the chosen
rows only.
"""

from __future__ import annotations

from typing import Any

import torch

# config fields of models whose logits are not just the output embedding of the last hidden
# state (Gemma 2's soft-capping, Granite's and Cohere's scaling): those take the full forward
_LOGIT_TRANSFORMS = ("final_logit_softcapping", "logits_scaling", "logit_scale")


def plain_head(model: Any) -> bool:
    """True when the model's logits are its output embedding applied to the last hidden state
    (Llama, Qwen2, SmolLM2 and most causal LMs), so the head can run on chosen rows alone."""
    config = model.config
    return all(getattr(config, k, None) in (None, 1, 1.0) for k in _LOGIT_TRANSFORMS)


def logits_at(
    model: Any,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor | None,
    keep: torch.Tensor,
) -> torch.Tensor:
    """The logits of the positions where ``keep`` is True, in row-major order: ids (B, T),
    keep (B, T) bool → (n, V). Position t's logits predict token t + 1."""
    if not plain_head(model):
        out = model(input_ids=input_ids, attention_mask=attention_mask, use_cache=False)
        logits: torch.Tensor = out.logits[keep]  # (n, V)
        return logits
    decoder = model.get_decoder()
    hidden = decoder(
        input_ids=input_ids, attention_mask=attention_mask, use_cache=False
    ).last_hidden_state  # (B, T, H)
    head: torch.Tensor = model.get_output_embeddings()(hidden[keep])  # (n, V)
    return head
