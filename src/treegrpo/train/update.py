"""The PPO update of one RL step (docs/algorithm.md §4): old and reference log-probs, then one
optimizer step per mini-batch with gradients accumulated over its micro-batches.

The same function runs in one process (``train.step.rl_step``) and on every rank of a sharded
update (``treegrpo.distributed.fsdp``): each micro-batch carries its weight in the mini-batch's
loss, so a rank holding some of a mini-batch's micro-batches computes its part of the one
loss, and FSDP sums the parts' gradients. Ranks must run the same number of forwards and
backwards (each is a collective under FSDP), so a rank with fewer micro-batches runs stand-ins:
copies with weight 0 that count in no metric.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any, cast

import torch

from treegrpo.train.batch import MicroBatch, TokenBatch
from treegrpo.train.config import AlgorithmConfig, OptimConfig
from treegrpo.train.logprobs import as_reference
from treegrpo.train.losses import kl_penalty
from treegrpo.train.offpolicy import GAP_TERMS, gap_sums, is_weights
from treegrpo.train.precision import autocast
from treegrpo.train.sft import Collated, weighted_nll


@dataclass
class Part:
    """A micro-batch and its share of its mini-batch's loss."""

    batch: TokenBatch
    weight: float  # token-mean: its action tokens / the mini-batch's; seq-mean: its rows / …
    # (a packed batch's own weights carry its share: 1)
    counted: bool = True  # False: a stand-in that keeps the ranks in step (weight 0)


PHASES = ("old_logprobs", "ref_logprobs", "policy")
TERMS = ("pg_loss", "kl", "entropy", "clip_frac", "approx_kl")  # the loss terms' metrics


@dataclass
class UpdateStats:
    """Sums over the counted micro-batches (each term weighted by the micro-batch's share of its
    mini-batch: Σ / share is the mean over mini-batches), and one entry per optimizer step."""

    sums: dict[str, float] = field(default_factory=lambda: dict.fromkeys(TERMS, 0.0))
    share: float = 0.0  # Σ the counted micro-batches' shares of their mini-batches
    grad_norms: list[float] = field(default_factory=list)
    skipped: int = 0  # optimizer steps dropped for a non-finite gradient
    # wall seconds of each of PHASES ("policy": passes and optimizer steps) and the path tokens
    # it went through (whole paths, as a duplicated update holds them; counted micro-batches only)
    seconds: dict[str, float] = field(default_factory=dict)
    tokens: dict[str, int] = field(default_factory=lambda: dict.fromkeys(PHASES, 0))
    # the sampler–trainer gap over the counted action targets, each counted once per leaf
    # through it (``train.offpolicy.gap_sums``): its sums and its maximum |Δ log p|
    gap: dict[str, float] = field(default_factory=lambda: dict.fromkeys(GAP_TERMS, 0.0))
    gap_max: float = 0.0
    demo_nll: list[float] = field(default_factory=list)  # per optimizer step (algo.demo_coef)

    def merge(self, other: UpdateStats) -> None:
        """Add another rank's sums (its counted micro-batches; the optimizer steps, grad norms
        and skips are every rank's alike)."""
        for k, v in other.sums.items():
            self.sums[k] += v
        self.share += other.share
        for k, n in other.tokens.items():
            self.tokens[k] += n
        for k, v in other.gap.items():
            self.gap[k] += v
        self.gap_max = max(self.gap_max, other.gap_max)

    def add_gap(self, d: TokenBatch, logp_old: torch.Tensor, cap: float) -> None:
        """Count the gap between ``d``'s sampled log-probs and the trainer's ``logp_old``."""
        sums, top = gap_sums(logp_old, d.sampled_logprobs, d.target_weight, cap)
        for k, v in sums.items():
            self.gap[k] += v
        self.gap_max = max(self.gap_max, top)

    def gap_metrics(self) -> dict[str, float]:
        """``offpolicy/*``: mean and max |Δ log p|, the k3 KL and the share of tokens whose
        ratio lies outside [1/C, C] (zeros without tokens)."""
        n = self.gap["tokens"]
        mean = {k: self.gap[k] / n if n else 0.0 for k in ("abs_sum", "k3_sum", "over_cap")}
        return {
            "offpolicy/abs_logp_gap": mean["abs_sum"],
            "offpolicy/max_logp_gap": self.gap_max,
            "offpolicy/k3": mean["k3_sum"],
            "offpolicy/over_cap": mean["over_cap"],
        }


@dataclass(frozen=True)
class UpdatePlan:
    """One RL step's update: its mini-batches, the order they are stepped in (``schedule``:
    indices into ``minis``, each once per PPO epoch), the configs, and the sampled distribution's
    ``temperature`` (log-probs under softmax(logits / T)). With ``algo.demo_coef``: ``demos``
    holds one batch per scheduled optimizer step (``train.sft.collate``'s ids, action mask and
    labels, each (B, T)), its term counted ``demo_share`` times here (sharded: 1 on one rank)."""

    minis: Sequence[Sequence[Part]]
    schedule: Sequence[int]
    algo: AlgorithmConfig
    optim: OptimConfig
    temperature: float
    demos: Sequence[Collated] = ()
    demo_share: float = 1.0


def weighted(mbs: Sequence[MicroBatch], aggregation: str) -> list[Part]:
    """The weights that turn per-micro-batch means into the mean over the whole mini-batch."""
    sizes = [mb.n_action_tokens if aggregation == "token-mean" else len(mb.index) for mb in mbs]
    total = sum(sizes)
    return [Part(mb, s / total if total else 0.0) for mb, s in zip(mbs, sizes, strict=True)]


def ppo_update(
    policy: Any,
    reference: Any | None,
    optimizer: torch.optim.Optimizer,
    scheduler: Any | None,
    plan: UpdatePlan,
    autocast_dtype: torch.dtype | None = None,
) -> UpdateStats:
    """Update ``policy`` by ``plan``: its mini-batches in the order of its schedule, one
    optimizer step per mini-batch, gradient clipped, skipped when not finite.

    Old log-probs are computed for every micro-batch before the first update, except those of
    the first scheduled mini-batch: before any optimizer step the policy is the old policy, so
    their old log-probs are the update forward's own, detached (ratio 1, as TRL does; exact
    without active dropout)."""
    minis, schedule, algo, temperature = plan.minis, plan.schedule, plan.algo, plan.temperature
    first = {id(p) for p in minis[schedule[0]]} if schedule else set()
    device = next(policy.parameters()).device
    old: dict[int, torch.Tensor] = {}  # id(part) → its old log-probs
    ref: dict[int, torch.Tensor] = {}  # … and its reference log-probs
    stats = UpdateStats(seconds={"old_logprobs": 0.0, "ref_logprobs": 0.0})
    clock, tokens = stats.seconds, stats.tokens
    with torch.no_grad():
        for part in (p for parts in minis for p in parts):
            held = part.batch.path_tokens if part.counted else 0  # before the copy to device
            d = _to(part.batch, device)
            t0 = _now(device)
            if id(part) not in first:
                old[id(part)] = d.logprobs(policy, False, autocast_dtype, temperature)[0]
                tokens["old_logprobs"] += held
                if part.counted:
                    stats.add_gap(d, old[id(part)], algo.sampler_correction_cap)
            t1 = _now(device)
            clock["old_logprobs"] += t1 - t0
            if algo.kl_coef > 0:
                with as_reference(policy, reference) as model:
                    ref[id(part)] = d.logprobs(model, False, autocast_dtype, temperature)[0]
                clock["ref_logprobs"] += _now(device) - t1
                tokens["ref_logprobs"] += held

    _reshard(policy)
    policy.train()
    params = [p for p in policy.parameters() if p.requires_grad]
    t_policy = _now(device)
    sums = stats.sums
    for j, parts in enumerate(minis[i] for i in schedule):
        if plan.demos:  # γ · NLL of the step's demonstrations (its gradient joins the parts')
            _gradient_sync(policy, False)
            weight = algo.demo_coef * plan.demo_share
            stats.demo_nll.append(_demo_term(policy, plan.demos[j], weight, autocast_dtype))
        for k, part in enumerate(parts):
            _gradient_sync(policy, k == len(parts) - 1)  # sharded: reduce once per mini-batch
            d = _to(part.batch, device)
            with_entropy = algo.entropy_coef > 0
            logp, ent = d.logprobs(policy, with_entropy, autocast_dtype, temperature)
            if id(part) not in old:  # first update: its own, detached
                old[id(part)] = logp.detach()
                if part.counted:
                    stats.add_gap(d, old[id(part)], algo.sampler_correction_cap)
            logp_old = old[id(part)]
            loss, terms = _loss(logp, logp_old, ref.get(id(part)), ent, d, algo)
            (loss * part.weight).backward()
            if part.counted:  # the mini-batch's means: each micro-batch's by its share
                share = d.metric_share(part.weight)
                for name, value in terms.items():
                    sums[name] += share * value.item()
                stats.share += share
                tokens["policy"] += part.batch.path_tokens
        norm = _total(torch.nn.utils.clip_grad_norm_(params, plan.optim.grad_clip))
        stats.grad_norms.append(norm)
        if math.isfinite(norm):
            optimizer.step()
            if scheduler is not None:
                scheduler.step()
        else:
            stats.skipped += 1  # a non-finite gradient: drop this update, keep the weights
        optimizer.zero_grad(set_to_none=True)
    policy.eval()
    stats.seconds["policy"] = _now(device) - t_policy
    return stats


def _demo_term(
    policy: Any, demos: Collated, weight: float, autocast_dtype: torch.dtype | None
) -> float:
    """Back-propagate ``weight`` × the mean NLL per action token of the collated ``demos``
    (ids, action mask, labels; ``train.sft.weighted_nll``); returns that NLL."""
    device = next(policy.parameters()).device
    ids, action, labels = (t.to(device) for t in demos)
    with autocast(device, autocast_dtype):
        nll = weighted_nll(policy, ids, action, labels, 0.0)
    (weight * nll).backward()
    return nll.item()


def _to(batch: TokenBatch, device: torch.device) -> TokenBatch:
    """``batch`` with its tensors on ``device``."""
    moved: dict[str, Any] = {
        k: v.to(device) for k, v in vars(batch).items() if isinstance(v, torch.Tensor)
    }
    return cast(TokenBatch, replace(cast(Any, batch), **moved))  # both kinds are dataclasses


def _gradient_sync(model: Any, on: bool) -> None:
    """Under FSDP, reduce the accumulated gradients on a mini-batch's last backward only."""
    setter = getattr(model, "set_requires_gradient_sync", None)
    if setter is not None:
        setter(on)


def _loss(
    logp: torch.Tensor,
    logp_old: torch.Tensor,
    logp_ref: torch.Tensor | None,
    ent: torch.Tensor | None,
    d: TokenBatch,
    algo: AlgorithmConfig,
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """The micro-batch's loss, PPO's clipped term + β·KL − entropy bonus (docs/algorithm.md §4),
    and its terms for the metrics, each its own mean (a packed batch's loss is its part of the
    mini-batch's: its terms are divided by its share, ``term_scale``). With a sampler correction
    each token's policy-gradient term carries its importance weight (``train.offpolicy``)."""
    w = is_weights(
        logp_old, d.sampled_logprobs, d.target_weight, algo.sampler_correction,
        algo.sampler_correction_level, algo.sampler_correction_cap,
    )  # fmt: skip
    pg, terms = d.policy_loss(logp, logp_old, algo.clip_eps, algo.dual_clip, algo.aggregation, w)
    scale = d.term_scale
    loss = pg
    terms = {"pg_loss": pg * scale, **terms}
    if logp_ref is not None:
        kl = d.reduce(kl_penalty(logp, logp_ref, algo.kl_estimator), algo.aggregation)
        loss = loss + algo.kl_coef * kl
        terms["kl"] = kl * scale
    if ent is not None:
        entropy = d.reduce(ent, algo.aggregation)
        loss = loss - algo.entropy_coef * entropy
        terms["entropy"] = entropy * scale
    return loss, terms


def _now(device: torch.device) -> float:
    """perf_counter after the device's queued work (CUDA runs kernels asynchronously)."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    return time.perf_counter()


def _reshard(model: Any) -> None:
    """Under FSDP, free the parameters that gradient-free forwards left gathered. Needed for
    exact gradients: after forwards under no_grad the root unit stays gathered, and then the
    gradients of its tied parameters (input and output embeddings) come out wrong (torch 2.13,
    gloo; ``tests/distributed/test_fsdp.py`` catches it)."""
    for m in model.modules():
        reshard = getattr(m, "reshard", None)
        if reshard is not None and hasattr(m, "set_requires_gradient_sync"):
            reshard()


def _total(norm: torch.Tensor) -> float:
    """The gradient norm as a float (a sharded model's is a replicated DTensor)."""
    full = getattr(norm, "full_tensor", None)
    return float((full() if full is not None else norm).item())
