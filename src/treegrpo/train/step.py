"""One RL step, top to bottom (docs/algorithm.md §3–4):

    rollout → rewards → advantages → token batch → old (and reference) log-probs
    → PPO update over mini-batches with gradient accumulation → metrics

Chain GRPO and Tree-GRPO share every line; they differ only in the sampling shape and the
advantage mode that ``AlgorithmConfig`` hands in.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
import torch

from treegrpo.agent.protocol import ToolProtocol
from treegrpo.core.advantage import tree_advantage
from treegrpo.core.groups import dense_ids, distinct_per_group, uniform_share
from treegrpo.engine.sampling import SamplingParams
from treegrpo.rollout.records import Rollout
from treegrpo.rollout.sampler import AgentLimits
from treegrpo.rollout.scoring import OUTCOMES, LeafRewards, LeafScores, ScoredRollout, score_leaves
from treegrpo.rollout.source import Draw, RolloutSource
from treegrpo.train.batch import make_micro_batches, pad_fraction
from treegrpo.train.config import AlgorithmConfig, OptimConfig
from treegrpo.train.health import SearchOutage
from treegrpo.train.sft import Collated, SFTExample, collate
from treegrpo.train.shared import pack_batches, row_span, supports_packing
from treegrpo.train.update import Part, UpdatePlan, UpdateStats, ppo_update, weighted

log = logging.getLogger(__name__)


class Learner(Protocol):
    """An update that runs elsewhere (``distributed.fsdp.FSDPLearner``)."""

    def update(self, plan: UpdatePlan) -> UpdateStats:
        """``plan`` run on the learner's own policy and optimizer."""
        ...

    def load_into(self, policy: Any, scheduler: Any | None) -> None:
        """Copy the updated weights into ``policy``, the schedule's position into ``scheduler``."""
        ...

    def load_optimizer_into(self, optimizer: torch.optim.Optimizer) -> None:
        """Copy the optimizer's state into ``optimizer`` (a checkpoint saves it)."""
        ...


@dataclass
class Batch:
    """The prompts of one RL step."""

    prompts: list[list[int]]  # rendered prompt token ids
    golds: list[list[str]]  # gold answers per prompt
    uids: list[str]  # a key unique per prompt across all data sources (the GRPO group)


@dataclass
class Learning:
    """The policy and what trains it: its frozen ``reference`` (None without a KL term, or for a
    LoRA policy, whose base is the reference), the optimizer and learning-rate ``scheduler``, the
    forward precision on CUDA, and the ``learner`` when the update runs elsewhere (the ranks of
    ``distributed.fsdp.FSDPLearner``: ``policy`` and ``scheduler`` then mirror its weights and
    learning rate after each update; ``optimizer`` is unused); ``demos`` for ``algo.demo_coef``."""

    policy: Any
    reference: Any | None
    optimizer: torch.optim.Optimizer | None
    scheduler: Any | None = None
    autocast_dtype: torch.dtype | None = None
    learner: Learner | None = None
    demos: Sequence[SFTExample] = ()


@dataclass(frozen=True)
class Rollouts:
    """Where the forests come from: the ``source`` that samples them (``source.LocalRollout`` or
    rollout workers) and takes the updated weights; the ``protocol`` that decodes answers for the
    reward; the sampling parameters and the agent's limits."""

    source: RolloutSource
    protocol: ToolProtocol
    sampling: SamplingParams
    limits: AgentLimits


@dataclass(frozen=True)
class StepSettings:
    """The settings one RL step reads: the algorithm, the optimizer, and the share of a
    rollout's tool calls that may fail before the step stops (``health.max_failed_searches``)."""

    algo: AlgorithmConfig
    optim: OptimConfig
    max_failed_searches: float = 1.0


DEPTHS = ("0", "1", "2", "3+")
"""The depths ``tree/expansions_at_depth/<d>`` counts expansions at (0: the root)."""


def _can_pack(policy: Any) -> bool:
    """Whether the policy takes packed batches; says once why not (the update then trains on
    each path whole, as without ``shared_prefix``)."""
    why = supports_packing(policy)
    if why is not None and why not in _WARNED:
        _WARNED.add(why)
        log.warning("algo.shared_prefix: %s; training on each path whole", why)
    return why is None


_WARNED: set[str] = set()  # the reasons already said


def depth_shares(starts: np.ndarray | None) -> dict[str, float]:
    """Each ``DEPTHS`` entry's share of the expansions that branched there ({}: chains)."""
    if starts is None or starts.size == 0:
        return {}
    capped = np.minimum(starts, len(DEPTHS) - 1)  # (E,)
    counts = np.bincount(capped, minlength=len(DEPTHS)) / starts.size
    return {f"tree/expansions_at_depth/{d}": float(c) for d, c in zip(DEPTHS, counts, strict=True)}


def _mean_where(x: np.ndarray, where: np.ndarray) -> float:
    """Mean of ``x`` where ``where`` holds (0 where it never does)."""
    return float(x[where].mean()) if where.any() else 0.0


def rl_step(
    learning: Learning,
    rollouts: Rollouts,
    batch: Batch,
    settings: StepSettings,
    seed: int,
    observe: Callable[[ScoredRollout], None] | None = None,
) -> dict[str, float]:
    """One RL step on ``batch``: the metrics. ``observe`` is called with the step's rollout,
    scores and advantages before the update. When more than ``settings.max_failed_searches``
    of the rollout's tool calls failed, ``SearchOutage`` is raised before the update."""
    algo, optim = settings.algo, settings.optim
    t0 = time.perf_counter()
    # 1. rollout: the policy samples a forest (chains when algo.l == 0)
    rollout = _sample(learning.policy, rollouts, batch, settings, seed)
    t_rollout = time.perf_counter() - t0
    leaves = [int(x) for x in rollout.kept]

    # 2. rewards on every kept leaf
    scores = score_leaves(
        rollout, leaves, batch.golds, rollouts.protocol.decode, algo.reward, algo.format_score,
        rollouts.protocol.names, algo.format_gate,
    )  # fmt: skip

    # 3. advantages: groups are prompts (by uid, never by row index) and trees within them
    prompt_of, tree_of = rollout.forest.leaf_groups(np.array(leaves, dtype=np.int64))
    groups = dense_ids([batch.uids[p] for p in prompt_of.tolist()])
    adv = tree_advantage(scores.reward, groups, tree_of, algo.mode(), scale=algo.scale_std,
                         batch=algo.batch_baseline)  # fmt: skip
    if observe is not None:
        observe(ScoredRollout(rollout, leaves, scores, groups, adv))

    # 4. token batch, cut into mini-batches of whole prompts, each into micro-batches
    rng = np.random.default_rng(seed)
    trained = np.arange(len(batch.prompts))
    if algo.skip_uniform_prompts:  # only the prompts with a nonzero advantage on some leaf
        trained = np.unique(prompt_of[adv != 0])
    order = rng.permutation(trained)
    keep = scores.void_turns == 0 if algo.void_turn_filter else np.ones(len(leaves), bool)
    picks = _pick(order, prompt_of, keep, optim.mini_batch_prompts)
    minis = _mini_batches(learning.policy, rollout, leaves, adv, picks, rollouts.source.pad_id,
                          algo, optim)  # fmt: skip

    # 5–6. old (and reference) log-probs, then the PPO update: an optimizer step per mini-batch
    # (train.update), here or on the ranks of a sharded update, which hand the weights back
    schedule = [i for _ in range(optim.ppo_epochs) for i in rng.permutation(len(minis)).tolist()]
    demos = _demo_batches(learning.demos, len(schedule), algo, rollouts.source.pad_id, seed)
    plan = UpdatePlan(minis, schedule, algo, optim, rollouts.sampling.logprob_temperature, demos)
    log.debug("updating the policy: %d optimizer steps", len(schedule))
    t1 = time.perf_counter()  # the update starts
    stats = _update(learning, plan)
    t2 = time.perf_counter()  # the weight push starts
    rollouts.source.update_weights(learning.policy)  # the next rollout samples from it
    times = {"rollout": t_rollout, "update": t2 - t1, "push": time.perf_counter() - t2}

    # 7. metrics
    metrics = _leaf_metrics(rollout, leaves, scores, groups, tree_of, adv, stats)
    metrics |= _cost_metrics(rollout, len(batch.prompts), minis, stats, times, t0)
    metrics |= {"train/updates": float(len(schedule)), "train/prompts_updated": float(len(trained))}
    return metrics


def _sample(
    policy: Any, rollouts: Rollouts, batch: Batch, settings: StepSettings, seed: int
) -> Rollout:
    """The step's forests, or ``SearchOutage`` when too many of their tool calls failed."""
    algo = settings.algo
    log.debug("sampling the forests of %d prompts", len(batch.prompts))
    policy.eval()
    protocol = rollouts.protocol
    rewards = LeafRewards(  # for the informed expansion rule, on rollout workers too
        batch.golds, algo.reward, algo.format_score, protocol.names, algo.format_gate
    )
    rollout = rollouts.source.sample(
        batch.prompts, Draw(algo.shape(), rollouts.sampling, rollouts.limits, seed, rewards)
    )
    called = sum(s.called for s in rollout.steps)
    failed = sum(s.tool_failed for s in rollout.steps)
    if failed > settings.max_failed_searches * called:
        what = "searches" if protocol.search_only else "tool calls"
        raise SearchOutage(
            f"{failed} of {called} {what} failed ({failed / called:.0%}, more than "
            f"health.max_failed_searches {settings.max_failed_searches:.0%}): the tool is down, "
            "too slow or refusing the requests (see the warnings above); the step was not "
            "trained on"
        )
    return rollout


def _pick(order: np.ndarray, prompt_of: np.ndarray, keep: np.ndarray, size: int) -> list[list[int]]:
    """The leaves (indices into the kept leaves) of each mini-batch: ``order``'s prompts, ``size``
    at a time, their leaves where ``keep`` holds; a mini-batch left with no leaf is dropped."""
    picks = []
    for start in range(0, len(order), size):
        chosen = set(order[start : start + size].tolist())
        idx = [i for i, p in enumerate(prompt_of.tolist()) if p in chosen and keep[i]]
        if idx:
            picks.append(idx)
    return picks


def _mini_batches(
    policy: Any,
    rollout: Rollout,
    leaves: list[int],
    adv: np.ndarray,
    picks: list[list[int]],
    pad_id: int,
    algo: AlgorithmConfig,
    optim: OptimConfig,
) -> list[list[Part]]:
    """Each mini-batch of ``picks`` cut into micro-batches: packed by shared prefix
    (``train.shared``; the weights carry each part's share) or each leaf's path whole."""
    # sequence-level importance weights need each leaf's tokens in a row of its own
    whole = algo.sampler_correction != "none" and algo.sampler_correction_level == "sequence"
    shared = algo.shared_prefix and not whole and _can_pack(policy)
    seqs = [] if shared else [rollout.leaf_sequence(leaf) for leaf in leaves]
    span = (optim.packed_row_span or row_span(policy.config)) if shared else 0
    minis: list[list[Part]] = []
    for idx in picks:
        advs = [float(adv[i]) for i in idx]
        if shared:
            packed = pack_batches(rollout, [leaves[i] for i in idx], advs, algo.aggregation,
                                  optim.micro_batch_tokens, span, pad_id)  # fmt: skip
            minis.append([Part(b, 1.0) for b in packed])
        else:
            mbs = make_micro_batches([seqs[i] for i in idx], advs, optim.micro_batch_tokens, pad_id)
            minis.append(weighted(mbs, algo.aggregation))
    return minis


def _demo_batches(
    demos: Sequence[SFTExample], steps: int, algo: AlgorithmConfig, pad_id: int, seed: int
) -> list[Collated]:
    """``algo.demo_batch`` demonstrations drawn afresh for each of the ``steps`` optimizer steps
    (from a generator of their own, so the step's other draws stay as without them), collated
    (``train.sft.collate``); none without ``algo.demo_coef``."""
    if algo.demo_coef == 0:
        return []
    if not demos:
        raise ValueError("algo.demo_coef > 0 needs demonstrations (TrainTask.demos), got none")
    rng = np.random.default_rng([seed, 0xDE30])
    size = min(algo.demo_batch, len(demos))
    return [
        collate([demos[i] for i in rng.choice(len(demos), size, replace=False)], pad_id)
        for _ in range(steps)
    ]


def _update(learning: Learning, plan: UpdatePlan) -> UpdateStats:
    """The PPO update in this process, or on the learner's ranks (then copied back)."""
    if learning.learner is not None:
        stats = learning.learner.update(plan)
        learning.learner.load_into(learning.policy, learning.scheduler)
        return stats
    assert learning.optimizer is not None, "an update in this process needs the optimizer"
    return ppo_update(
        learning.policy, learning.reference, learning.optimizer, learning.scheduler, plan,
        learning.autocast_dtype,
    )  # fmt: skip


def _leaf_metrics(
    rollout: Rollout,
    leaves: list[int],
    scores: LeafScores,
    groups: np.ndarray,
    tree_of: np.ndarray,
    adv: np.ndarray,
    stats: UpdateStats,
) -> dict[str, float]:
    """What the leaves held and what the update did with them: rewards, outcomes, format,
    advantages, the trees' mixed rewards and distinct paths, where expansions branched off (0:
    at the root, a fresh chain), the loss terms and the sampler–trainer gap."""
    void_keys = ("agent/logp_after_void", "agent/logp_elsewhere")
    logps = dict(zip(void_keys, rollout.logprob_after_void(), strict=True))
    tree_ids = dense_ids(tree_of)
    trajectories = [tuple(rollout.action_ids(leaf)) for leaf in leaves]
    starts = rollout.forest.depth[rollout.expansions] if rollout.expansions.size else None
    failed = sum(s.tool_failed for s in rollout.steps)
    grad_norms = stats.grad_norms
    metrics = {f"loss/{k}": v / stats.share if stats.share else 0.0 for k, v in stats.sums.items()}
    return metrics | {
        "reward/mean": float(scores.reward.mean()),
        "reward/em": float(scores.em.mean()),
        "reward/f1": float(scores.f1.mean()),
        "reward/valid_format": float(scores.valid_format.mean()),
        "reward/answered": float(scores.answered.mean()),
        # how the leaves ended, and the shares holding a void turn (no valid action) and a
        # broken turn (not one well-formed think-then-action step)
        **{f"leaves/{o}": float(scores.outcome.count(o)) for o in OUTCOMES},
        "agent/void_turn_leaves": float((scores.void_turns > 0).mean()),
        "agent/broken_turn_leaves": float((scores.broken_turns > 0).mean()),
        # broken-turn leaves that answered right: ranked above every wrong well-formed leaf
        # of their group unless format_gate says otherwise
        "leaves/broken_right": float(((scores.broken_turns > 0) & (scores.em > 0)).sum()),
        "adv/broken_mean": _mean_where(adv, scores.broken_turns > 0),
        "adv/well_formed_mean": _mean_where(adv, scores.broken_turns == 0),
        # sampled log-prob per token after a void turn's feedback and elsewhere (a key is
        # left out when no step of its kind was sampled)
        **{k: v for k, v in logps.items() if v == v},
        **stats.gap_metrics(),
        "agent/tool_calls_per_leaf": float(scores.tool_calls.mean()),
        "agent/failed_searches": float(failed),  # tool calls that got no answer
        "agent/tool_errors": float(sum(s.tool_status == "error" for s in rollout.steps)),
        **{f"agent/calls_per_leaf/{t}": float(c.mean()) for t, c in scores.calls.items()},
        "agent/leaves": float(len(leaves)),
        "adv/abs_mean": float(np.abs(adv).mean()),
        "adv/uniform_prompts": uniform_share(scores.reward, groups),
        "tree/mixed_reward_share": 1.0 - uniform_share(scores.reward, tree_ids),
        "tree/distinct_leaves": distinct_per_group(trajectories, tree_ids),
        "tree/expansion_depth": float(starts.mean()) if starts is not None else 0.0,
        "tree/root_expansions": float((starts == 0).mean()) if starts is not None else 0.0,
        **depth_shares(starts),
        **({"loss/demo_nll": float(np.mean(stats.demo_nll))} if stats.demo_nll else {}),
        "train/grad_norm": float(np.mean(grad_norms)) if grad_norms else 0.0,
        "train/skipped_updates": float(stats.skipped),
    }


def _cost_metrics(
    rollout: Rollout,
    n_prompts: int,
    minis: list[list[Part]],
    stats: UpdateStats,
    times: dict[str, float],
    t0: float,
) -> dict[str, float]:
    """What the step spent: tokens and tool calls per prompt, and where its time went
    (sampling, the update's parts, pushing the weights to the rollout, and the rest: rewards,
    advantages, batching, metrics), with the tokens each part went through."""
    spend = rollout.spend.total()
    elapsed = time.perf_counter() - t0
    parts = [p.batch for ps in minis for p in ps]
    rest = elapsed - times["rollout"] - times["update"] - times["push"]
    return {
        "spend/generated_per_prompt": spend.generated / n_prompts,
        "spend/tool_calls_per_prompt": spend.tool_calls / n_prompts,
        "spend/processed_per_prompt": spend.processed / n_prompts,
        "spend/token_efficiency": spend.processed / max(rollout.distinct_tokens(), 1),
        "train/pad_fraction": pad_fraction(parts),
        "time/rollout_s": times["rollout"],
        "time/expansion_choice_s": rollout.expansion_s,  # within the rollout: where to expand
        "time/update_s": times["update"],
        # the update's parts: old and reference log-probs, then the policy's passes
        **{f"time/update/{phase}_s": sec for phase, sec in stats.seconds.items()},
        # the path tokens each part went through (whole paths, as the duplicated update holds them)
        # and the positions computed per pass (fewer with shared_prefix): tokens/s in report.html
        **{f"tokens/update/{phase}": float(n) for phase, n in stats.tokens.items()},
        "tokens/update/computed": float(sum(b.n_real_tokens for b in parts)),
        "tokens/generated": float(spend.generated),
        "time/weight_push_s": times["push"],
        "time/other_s": max(rest, 0.0),
        "time/step_s": elapsed,
        "time/gen_tokens_per_s": spend.generated / max(times["rollout"], 1e-9),
    }
