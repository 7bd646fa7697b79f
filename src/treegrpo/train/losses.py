"""Policy-gradient losses as pure torch functions (docs/algorithm.md §4).

Shapes: B sequences, T tokens. Every function takes per-token tensors (B, T) and a float mask
(B, T) that is 1 on model-action tokens and 0 on prompt, observation and padding tokens; masked
tokens contribute nothing to any loss or gradient.
"""

from __future__ import annotations

import torch

from treegrpo.train.config import Aggregation, KLEstimator


def aggregate(
    values: torch.Tensor, mask: torch.Tensor, mode: Aggregation = "token-mean"
) -> torch.Tensor:
    """Reduce per-token values (B, T) to a scalar.

    token-mean:          Σ_bt v·m / Σ_bt m  (every action token in the batch weighs the same)
    seq-mean-token-mean: mean_b (Σ_t v·m / Σ_t m)  (every sequence weighs the same)
    seq-mean-token-sum:  mean_b Σ_t v·m  (Dr. GRPO's length-unbiased sum)
    Sequences without action tokens count as zero in the sequence means."""
    m = mask.to(values.dtype)
    if mode == "token-mean":
        return (values * m).sum() / m.sum().clamp(min=1.0)
    per_seq = (values * m).sum(dim=-1)  # (B,)
    if mode == "seq-mean-token-mean":
        per_seq = per_seq / m.sum(dim=-1).clamp(min=1.0)
    elif mode != "seq-mean-token-sum":
        raise ValueError(f"unknown aggregation {mode!r}")
    return per_seq.mean()


def ppo_clip_loss(
    logp: torch.Tensor,
    logp_old: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    clip_eps: float = 0.2,
    dual_clip: float | None = 3.0,
    aggregation: Aggregation = "token-mean",
    is_weight: torch.Tensor | None = None,
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """Clipped surrogate of PPO (Schulman et al. 2017) with dual clip (Ye et al. 2020, "Mastering
    Complex Control in MOBA Games"), per token:

        r = exp(clamp(logp − logp_old, −20, 20))
        L = max(−A·r, −A·clip(r, 1 − ε, 1 + ε))
        L = min(L, −c·A)  where A < 0   (dual clip: bounds the loss of a very unlikely bad token)

    logp, logp_old, advantages, mask: (B, T). ``is_weight`` (B, T): a detached factor on each
    token's term, the sampler–trainer importance weight (``train.offpolicy``; None: 1). Returns
    the aggregated loss and diagnostics (the clipped-token fraction and the approximate KL to
    the old policy)."""
    log_ratio = torch.clamp(logp - logp_old, -20.0, 20.0)
    ratio = torch.exp(log_ratio)
    loss1 = -advantages * ratio
    loss2 = -advantages * torch.clamp(ratio, 1.0 - clip_eps, 1.0 + clip_eps)
    clipped = torch.maximum(loss1, loss2)
    per_token = clipped
    if dual_clip is not None:
        if dual_clip <= 1.0:
            raise ValueError(f"dual_clip must be > 1, got {dual_clip}")
        per_token = torch.where(
            advantages < 0, torch.minimum(clipped, -dual_clip * advantages), clipped
        )
    if is_weight is not None:
        per_token = per_token * is_weight
    m = mask.to(logp.dtype)
    with torch.no_grad():
        stats = {
            "clip_frac": aggregate((loss2 > loss1).to(logp.dtype), m),
            "approx_kl": aggregate(-log_ratio, m),
        }
    return aggregate(per_token, m, aggregation), stats


def kl_penalty(
    logp: torch.Tensor, logp_ref: torch.Tensor, estimator: KLEstimator = "k3"
) -> torch.Tensor:
    """Per-token estimate of KL(π ‖ π_ref) from samples of π (Schulman, "Approximating KL
    Divergence", 2020), with x = logp_ref − logp:

        k1 = −x              unbiased, high variance, can be negative
        k2 = x² / 2          biased, low variance
        k3 = eˣ − x − 1      unbiased, low variance, ≥ 0; clamped to [−10, 10] as in the
                             authors' code ("low_var_kl")"""
    x = logp_ref - logp
    if estimator == "k1":
        return -x
    if estimator == "k2":
        return 0.5 * x * x
    if estimator == "k3":
        return torch.clamp(torch.exp(x) - x - 1.0, -10.0, 10.0)
    raise ValueError(f"unknown KL estimator {estimator!r}")


def entropy_from_logits(logits: torch.Tensor) -> torch.Tensor:
    """Entropy of the softmax of each position's logits: (B, T, V) → (B, T)."""
    logp = torch.log_softmax(logits.float(), dim=-1)
    return -(logp.exp() * logp).sum(dim=-1)
