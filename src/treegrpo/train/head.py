"""Next-token logits at chosen positions only: the decoder gives the hidden states and the output
embedding runs on the rows the loss reads (prompt and observation tokens are context), not on
every position (what that saves: docs/library.md, "The update").

That is only right where the logits are the output embedding of the last hidden state: a model
whose config says otherwise (below), or whose logits differ from it on a short probe (checked
once per model; with a warning), takes the full forward. So does a model sharded with FSDP
(``treegrpo.distributed.fsdp``): the hooks of its own forward gather its parameters, which
calling the decoder and the head one by one would skip.
"""

from __future__ import annotations

import sys
import warnings
import weakref
from typing import Any

import torch

# config fields of models whose logits are not just the output embedding of the last hidden
# state (Gemma 2's soft-capping, Granite's and Cohere's scaling): those take the full forward
_LOGIT_TRANSFORMS = ("final_logit_softcapping", "logits_scaling", "logit_scale")
_PROBE_TOKENS = 8
_checked: weakref.WeakKeyDictionary[Any, bool] = weakref.WeakKeyDictionary()


def plain_head(model: Any) -> bool:
    """True when the model's config declares no logit transform (Llama, Qwen2, SmolLM2 and most
    causal LMs), so its logits should be the output embedding of the last hidden state."""
    config = model.config
    return all(getattr(config, k, None) in (None, 1, 1.0) for k in _LOGIT_TRANSFORMS)


def head_matches_forward(model: Any) -> bool:
    """Whether ``model``'s output embedding of its decoder's last hidden state equals its own
    logits, on a probe of a few tokens in eval mode (no dropout); computed once per model."""
    known = _checked.get(model)
    if known is not None:
        return known
    device = model.get_input_embeddings().weight.device  # where the ids go in
    vocab = model.get_output_embeddings().weight.shape[0]
    probe = (torch.arange(_PROBE_TOKENS, device=device) * 7919 % vocab)[None]  # (1, P)
    modes = [(m, m.training) for m in model.modules()]
    model.eval()
    try:
        with torch.no_grad():
            full = model(input_ids=probe, use_cache=False).logits[0].float()  # (P, V)
            hidden = model.get_decoder()(input_ids=probe, use_cache=False).last_hidden_state
            head = model.get_output_embeddings()(hidden[0]).float()  # (P, V)
    finally:
        for m, training in modes:
            m.training = training
    # a loose tolerance (reduced precision computes both alike); a logit transform is far larger
    ok = bool((head - full).abs().max() <= 1e-2 * full.abs().max() + 1e-5)
    if not ok:
        warnings.warn(
            f"{type(model).__name__}: its logits are not the output embedding of the last "
            "hidden state; log-probs take the full forward (slower, more memory)",
            stacklevel=2,
        )
    _checked[model] = ok
    return ok


def logits_at(
    model: Any,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor | None,
    keep: torch.Tensor | tuple[torch.Tensor, torch.Tensor],
    position_ids: torch.Tensor | None = None,
) -> torch.Tensor:
    """The logits of the positions ``keep`` picks, in its order: ids (B, T), keep (B, T) bool
    (row-major) or (rows, columns), (n,) each → (n, V). Position t's logits predict token t + 1."""
    kwargs = {"attention_mask": attention_mask, "position_ids": position_ids, "use_cache": False}
    if not split_head(model):
        logits: torch.Tensor = model(input_ids=input_ids, **kwargs).logits[keep]  # (n, V)
        return logits
    hidden = model.get_decoder()(input_ids=input_ids, **kwargs).last_hidden_state  # (B, T, H)
    head: torch.Tensor = model.get_output_embeddings()(hidden[keep])  # (n, V)
    return head


def split_head(model: Any) -> bool:
    """Whether the decoder and the output embedding may be called one after the other, the head
    on chosen rows only (module docstring): a plain head that matches the forward, unsharded (not
    an FSDP2 module, ``fully_shard``)."""
    fsdp = sys.modules.get("torch.distributed.fsdp")
    sharded = fsdp is not None and isinstance(model, fsdp.FSDPModule)
    return not sharded and plain_head(model) and head_matches_forward(model)
