"""One RL step, top to bottom (ALGORITHM.md §3–4):

    rollout → rewards → advantages → token batch → old (and reference) log-probs
    → PPO update over mini-batches with gradient accumulation → metrics

Chain GRPO and Tree-GRPO share every line; they differ only in the sampling shape and the
advantage mode that ``AlgorithmConfig`` hands in.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from treegrpo.agent.protocol import SearchProtocol
from treegrpo.core.advantage import tree_advantage
from treegrpo.core.groups import dense_ids, distinct_per_group, uniform_share
from treegrpo.engine.sampling import SamplingParams
from treegrpo.rollout.sampler import AgentLimits
from treegrpo.rollout.scoring import score_leaves
from treegrpo.rollout.source import RolloutSource
from treegrpo.train.batch import MicroBatch, make_micro_batches, pad_fraction
from treegrpo.train.config import AlgorithmConfig, OptimConfig
from treegrpo.train.logprobs import reference_logprobs, token_logprobs
from treegrpo.train.losses import aggregate, kl_penalty, ppo_clip_loss


@dataclass
class Batch:
    """The prompts of one RL step."""

    prompts: list[list[int]]  # rendered prompt token ids
    golds: list[list[str]]  # gold answers per prompt
    uids: list[str]  # a key unique per prompt across all data sources (the GRPO group)


def rl_step(
    policy: Any,
    reference: Any | None,
    optimizer: torch.optim.Optimizer,
    scheduler: Any | None,
    rollouts: RolloutSource,
    protocol: SearchProtocol,
    batch: Batch,
    algo: AlgorithmConfig,
    optim: OptimConfig,
    sampling: SamplingParams,
    limits: AgentLimits,
    seed: int,
    autocast_dtype: torch.dtype | None = None,
) -> dict[str, float]:
    """One RL step; ``reference`` is None when there is no KL term or when the policy is a LoRA
    model (its base is the reference); ``rollouts`` samples the forests (this process's engine,
    ``rollout.source.LocalRollout``, or rollout workers) and takes the updated weights;
    ``protocol`` decodes answers for the reward. ``autocast_dtype`` is the forward precision on
    CUDA."""
    t0 = time.perf_counter()
    # 1. rollout: the policy samples a forest (chains when algo.l == 0)
    policy.eval()
    rollout = rollouts.sample(batch.prompts, algo.shape(), sampling, limits, seed)
    t_rollout = time.perf_counter() - t0
    leaves = [int(x) for x in rollout.kept]

    # 2. rewards on every kept leaf
    scores = score_leaves(
        rollout, leaves, batch.golds, protocol.decode, algo.reward, algo.format_score
    )

    # 3. advantages: groups are prompts (by uid, never by row index) and trees within them
    prompt_of, tree_of = rollout.forest.leaf_groups(np.array(leaves, dtype=np.int64))
    groups = dense_ids([batch.uids[p] for p in prompt_of.tolist()])
    adv = tree_advantage(scores.reward, groups, tree_of, algo.mode(), scale=algo.scale_std)

    # 4. token batch, cut into mini-batches of whole prompts, each into micro-batches. With
    # skip_uniform_prompts only the prompts with a nonzero advantage on some leaf take part
    seqs = [rollout.leaf_sequence(leaf) for leaf in leaves]
    rng = np.random.default_rng(seed)
    trained = np.arange(len(batch.prompts))
    if algo.skip_uniform_prompts:
        trained = np.unique(prompt_of[adv != 0])
    order = rng.permutation(trained)
    minis: list[list[MicroBatch]] = []
    for start in range(0, len(order), optim.mini_batch_prompts):
        chosen = set(order[start : start + optim.mini_batch_prompts].tolist())
        idx = [i for i, p in enumerate(prompt_of.tolist()) if p in chosen]
        mbs = make_micro_batches(
            [seqs[i] for i in idx],
            [float(adv[i]) for i in idx],
            optim.micro_batch_tokens,
            rollouts.pad_id,
        )
        minis.append(mbs)

    # 5. old and reference log-probs, all before the first update. The mini-batch of the first
    # update needs no separate pass: before any optimizer step the policy is the old policy, so
    # its old log-probs are the update forward's own, detached (ratio 1, as TRL does). Exact
    # when the model has no active dropout (ours and the usual LLM configs); the others are
    # computed here, before their weights move.
    schedule = [i for _ in range(optim.ppo_epochs) for i in rng.permutation(len(minis)).tolist()]
    first = {id(mb) for mb in minis[schedule[0]]} if schedule else set()
    device = next(policy.parameters()).device
    temperature = sampling.logprob_temperature  # log-probs of the sampled distribution
    old: dict[int, torch.Tensor] = {}
    ref: dict[int, torch.Tensor] = {}
    with torch.no_grad():
        for mb in (m for mbs in minis for m in mbs):
            d = mb.to(device)
            if id(mb) not in first:
                old[id(mb)] = token_logprobs(
                    policy,
                    d.input_ids,
                    d.attention_mask,
                    False,
                    autocast_dtype,
                    d.action_mask,
                    temperature,
                )[0]
            if algo.kl_coef > 0:
                ref[id(mb)] = reference_logprobs(
                    policy,
                    reference,
                    d.input_ids,
                    d.attention_mask,
                    autocast_dtype,
                    d.action_mask,
                    temperature,
                )

    # 6. PPO update: one optimizer step per mini-batch, gradients accumulated over micro-batches
    policy.train()
    params = [p for p in policy.parameters() if p.requires_grad]
    sums = {"pg_loss": 0.0, "kl": 0.0, "entropy": 0.0, "clip_frac": 0.0, "approx_kl": 0.0}
    grad_norms: list[float] = []
    skipped = 0
    n_micro = 0
    for mbs in (minis[i] for i in schedule):
        weights = _accumulation_weights(mbs, algo.aggregation)
        for mb, w in zip(mbs, weights, strict=True):
            d = mb.to(device)
            logp, ent = token_logprobs(
                policy,
                d.input_ids,
                d.attention_mask,
                with_entropy=algo.entropy_coef > 0,
                autocast_dtype=autocast_dtype,
                keep=d.action_mask,  # the head runs on action tokens only (train.head)
                temperature=temperature,
            )
            logp_old = old.setdefault(id(mb), logp.detach())  # first update: its own
            pg, stats = ppo_clip_loss(
                logp,
                logp_old,
                d.advantages,
                d.action_mask,
                algo.clip_eps,
                algo.dual_clip,
                algo.aggregation,
            )
            loss = pg
            if id(mb) in ref:
                kl = aggregate(
                    kl_penalty(logp, ref[id(mb)], algo.kl_estimator),
                    d.action_mask,
                    algo.aggregation,
                )
                loss = loss + algo.kl_coef * kl
                sums["kl"] += kl.item()
            if ent is not None:
                entropy = aggregate(ent, d.action_mask, algo.aggregation)
                loss = loss - algo.entropy_coef * entropy
                sums["entropy"] += entropy.item()
            (loss * w).backward()
            sums["pg_loss"] += pg.item()
            sums["clip_frac"] += stats["clip_frac"].item()
            sums["approx_kl"] += stats["approx_kl"].item()
            n_micro += 1
        norm = torch.nn.utils.clip_grad_norm_(params, optim.grad_clip).item()
        grad_norms.append(norm)
        if math.isfinite(norm):
            optimizer.step()
            if scheduler is not None:
                scheduler.step()
        else:
            skipped += 1  # a non-finite gradient: drop this update, keep the weights
        optimizer.zero_grad(set_to_none=True)
    policy.eval()
    rollouts.update_weights(policy)  # the next rollout samples from the updated policy

    # 7. metrics, with what the trees held: how many mixed rewards (a tree whose leaves all
    # score alike has no intra-tree signal), how many distinct trajectories, and how deep the
    # expansions branched off (0: at the root, a fresh chain)
    spend = rollout.spend.total()
    tree_ids = dense_ids(tree_of)
    trajectories = [tuple(rollout.action_ids(leaf)) for leaf in leaves]
    starts = rollout.forest.depth[rollout.expansions] if rollout.expansions.size else None
    elapsed = time.perf_counter() - t0
    metrics = {f"loss/{k}": v / max(n_micro, 1) for k, v in sums.items()}
    metrics.update(
        {
            "reward/mean": float(scores.reward.mean()),
            "reward/em": float(scores.em.mean()),
            "reward/f1": float(scores.f1.mean()),
            "reward/valid_format": float(scores.valid_format.mean()),
            "reward/answered": float(scores.answered.mean()),
            "agent/tool_calls_per_leaf": float(scores.tool_calls.mean()),
            "agent/leaves": float(len(leaves)),
            "adv/abs_mean": float(np.abs(adv).mean()),
            "adv/uniform_prompts": uniform_share(scores.reward, groups),
            "tree/mixed_reward_share": 1.0 - uniform_share(scores.reward, tree_ids),
            "tree/distinct_leaves": distinct_per_group(trajectories, tree_ids),
            "tree/expansion_depth": float(starts.mean()) if starts is not None else 0.0,
            "tree/root_expansions": float((starts == 0).mean()) if starts is not None else 0.0,
            "spend/generated_per_prompt": spend.generated / len(batch.prompts),
            "spend/tool_calls_per_prompt": spend.tool_calls / len(batch.prompts),
            "spend/token_efficiency": spend.processed / max(rollout.distinct_tokens(), 1),
            "train/grad_norm": float(np.mean(grad_norms)) if grad_norms else 0.0,
            "train/skipped_updates": float(skipped),
            "train/updates": float(len(schedule)),
            "train/prompts_updated": float(len(trained)),
            "train/pad_fraction": pad_fraction([m for mbs in minis for m in mbs]),
            "time/rollout_s": t_rollout,
            "time/step_s": elapsed,
            "time/gen_tokens_per_s": spend.generated / max(t_rollout, 1e-9),
        }
    )
    return metrics


def _accumulation_weights(mbs: Sequence[MicroBatch], aggregation: str) -> list[float]:
    """Weights that turn per-micro-batch means into the mean over the whole mini-batch."""
    if aggregation == "token-mean":
        sizes = [mb.n_action_tokens for mb in mbs]
    else:
        sizes = [len(mb.index) for mb in mbs]
    total = sum(sizes)
    return [s / total if total else 0.0 for s in sizes]
