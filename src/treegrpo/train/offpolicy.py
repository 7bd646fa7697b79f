"""The sampler–trainer gap: how far the engine's log-probs of the sampled tokens lie from the
trainer's recomputation of the same tokens, and importance-sampling corrections for it.

The rollout samples from the engine's distribution π_s (its KV cache, its kernels: vLLM's, or
the CPU engine's packed weights), while the PPO ratio is taken against the trainer's own
recomputation π_old of the same weights (docs/algorithm.md, "Policy loss"). Where the two
differ, the update is off-policy without knowing it (Yao et al. 2025, "Your efficient RL
framework secretly brings you off-policy RL training"; verl logs the gap and offers the same
corrections). Per action token t, with Δ_t = log π_old(y_t) − log π_s(y_t) and ρ_t = exp Δ_t:

    gap metrics   mean |Δ_t|, max |Δ_t|, k3 = ρ_t − Δ_t − 1 (an estimate of KL(π_s ‖ π_old)
                  from π_s's samples, ≥ 0), and the share of tokens with ρ_t outside [1/C, C]
    tis           w_t = min(ρ_t, C)              truncated importance sampling
    mis           w_t = ρ_t · 1[ρ_t ≤ C]          masked: a token past the cap drops out

and at the sequence level ρ_l = exp Σ_{t ∈ l} Δ_t, one weight for all of leaf l's tokens. The
weight multiplies each token's policy-gradient term (not the KL or entropy terms), detached.

Shapes: the tensors are per target, (b, T − 1) for a micro-batch of sequences or (n,) for a
packed one; ``weight`` says how often each target counts (the mask, or the leaves through a
packed target).
"""

from __future__ import annotations

import math

import torch

from treegrpo.train.config import Correction, Level

GAP_TERMS = ("abs_sum", "k3_sum", "over_cap", "tokens")
"""The sums ``gap_sums`` returns besides the maximum; means are each / tokens."""


def gap_sums(
    logp_old: torch.Tensor, logp_sampled: torch.Tensor, weight: torch.Tensor, cap: float
) -> tuple[dict[str, float], float]:
    """The gap's sums over the weighted targets (``GAP_TERMS``) and max |Δ| over the targets of
    nonzero weight. ``cap`` C: a target counts in ``over_cap`` when ρ is outside [1/C, C]."""
    w = weight.to(torch.float64)
    delta = (logp_old - logp_sampled).to(torch.float64)  # Δ = log ρ
    delta = torch.where(w > 0, delta, torch.zeros_like(delta))  # padding may hold anything
    k3 = torch.exp(delta.clamp(max=20.0)) - delta - 1.0
    over = (delta.abs() > math.log(cap)).to(torch.float64)
    sums = {
        "abs_sum": float((w * delta.abs()).sum()),
        "k3_sum": float((w * k3).sum()),
        "over_cap": float((w * over).sum()),
        "tokens": float(w.sum()),
    }
    return sums, float(delta.abs().max()) if delta.numel() else 0.0


def is_weights(
    logp_old: torch.Tensor,
    logp_sampled: torch.Tensor,
    mask: torch.Tensor,
    correction: Correction,
    level: Level,
    cap: float,
) -> torch.Tensor | None:
    """The importance weights w (module docstring) of a micro-batch's targets, shaped as
    ``logp_old``; None for ``correction`` "none". ``level`` "sequence" needs rows of whole sequences
    (a packed batch's rows hold several leaves: token level only)."""
    if correction == "none":
        return None
    with torch.no_grad():
        delta = (logp_old - logp_sampled).float() * (mask > 0)  # (…) 0 off the action targets
        if level == "sequence":
            if delta.dim() != 2:
                raise ValueError("sequence-level weights need (b, T − 1) rows of whole leaves")
            delta = delta.sum(dim=-1, keepdim=True).expand_as(delta)  # (b, T − 1)
        ratio = torch.exp(delta.clamp(-20.0, 20.0))
        if correction == "tis":
            return ratio.clamp(max=cap)
        if correction == "mis":
            return ratio * (ratio <= cap)
    raise ValueError(f"unknown correction {correction!r}")
