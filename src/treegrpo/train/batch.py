"""Token batches for the update: per-leaf sequences grouped by length into micro-batches
(``cut_by_length``, so the padding stays small: ``pad_fraction``).

A causal LM's logits at position t predict token t + 1, so every per-token tensor here lives in
*target* space: for a sequence of n ids, positions 0..n−2 hold the prediction of ids[1..n−1].
Each action token carries its leaf's advantage; prompt, observation and padding tokens have
mask 0 (docs/algorithm.md §3–4).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import torch

from treegrpo.core.partition import contiguous_partition
from treegrpo.rollout.records import LeafSequence
from treegrpo.train.config import Aggregation
from treegrpo.train.logprobs import token_logprobs
from treegrpo.train.losses import aggregate, ppo_clip_loss
from treegrpo.train.sft import right_pad


class TokenBatch(Protocol):
    """What the update asks of a token batch (``train.update``): ``MicroBatch`` (one row per
    leaf) and ``train.shared.PackedBatch`` (a forest's shared prefixes once) both answer it, so
    the update holds no test of which kind it has. Per-target tensors live in target space."""

    input_ids: torch.Tensor  # (b, T) the positions a forward computes
    sampled_logprobs: torch.Tensor  # (…,) the engine's log-probs of the trained targets

    @property
    def n_real_tokens(self) -> int:
        """The positions the batch computes, padding left out."""
        ...

    @property
    def path_tokens(self) -> int:
        """The positions the batch's leaf paths hold, shared prefixes counted per leaf."""
        ...

    @property
    def target_weight(self) -> torch.Tensor:
        """(…,) how many leaves each target stands for (0 where it is not trained)."""
        ...

    @property
    def term_scale(self) -> float:
        """What turns its reported loss terms into its own means."""
        ...

    def logprobs(
        self,
        policy: Any,
        with_entropy: bool,
        autocast_dtype: torch.dtype | None,
        temperature: float,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """The policy's log-probs of the targets (and their entropies when asked)."""
        ...

    def policy_loss(
        self,
        logp: torch.Tensor,
        logp_old: torch.Tensor,
        clip_eps: float,
        dual_clip: float | None,
        aggregation: Aggregation,
        is_weight: torch.Tensor | None,
    ) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """PPO's clipped term with its clipped fraction and approximate KL."""
        ...

    def reduce(self, x: torch.Tensor, aggregation: Aggregation) -> torch.Tensor:
        """A per-target term (KL, entropy) as the batch's part of the mini-batch's loss."""
        ...

    def metric_share(self, part_weight: float) -> float:
        """The share of its mini-batch the batch's metrics stand for."""
        ...


@dataclass
class MicroBatch:
    """b sequences padded to T ids; per-token tensors are (b, T − 1) in target space. It has the
    methods the update calls a token batch through (as ``train.shared.PackedBatch``); here each
    target is one leaf's token, and a term's mean follows ``aggregation`` (``losses.aggregate``)."""

    index: list[int]  # positions of these sequences in the caller's list
    input_ids: torch.Tensor  # (b, T)
    attention_mask: torch.Tensor  # (b, T) 1 on real tokens
    targets: torch.Tensor  # (b, T − 1) ids[1:]
    action_mask: torch.Tensor  # (b, T − 1) float, 1 where the target is a model action
    advantages: torch.Tensor  # (b, T − 1) leaf advantage on action targets, 0 elsewhere
    sampled_logprobs: torch.Tensor  # (b, T − 1) the engine's log-probs on action targets

    @property
    def n_action_tokens(self) -> int:
        return int(self.action_mask.sum().item())

    @property
    def n_real_tokens(self) -> int:
        """Tokens, padding left out."""
        return int(self.attention_mask.sum().item())

    @property
    def path_tokens(self) -> int:
        """The positions its paths hold (``PackedBatch.path_tokens``): here, its real tokens."""
        return self.n_real_tokens

    @property
    def target_weight(self) -> torch.Tensor:
        """(b, T − 1) how many leaves each target stands for: the action mask."""
        return self.action_mask

    def logprobs(
        self,
        policy: Any,
        with_entropy: bool,
        autocast_dtype: torch.dtype | None,
        temperature: float,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """(b, T − 1) the policy's log-probs of the targets under softmax(logits / T), and
        their entropies when asked; the head runs on action targets only (``train.head``)."""
        return token_logprobs(
            policy, self.input_ids, self.attention_mask, with_entropy=with_entropy,
            autocast_dtype=autocast_dtype, keep=self.action_mask, temperature=temperature,
        )  # fmt: skip

    def policy_loss(
        self,
        logp: torch.Tensor,
        logp_old: torch.Tensor,
        clip_eps: float,
        dual_clip: float | None,
        aggregation: Aggregation,
        is_weight: torch.Tensor | None,
    ) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """PPO's clipped term, the micro-batch's mean, with its diagnostics (``ppo_clip_loss``)."""
        return ppo_clip_loss(
            logp, logp_old, self.advantages, self.action_mask, clip_eps, dual_clip,
            aggregation, is_weight,
        )  # fmt: skip

    def reduce(self, x: torch.Tensor, aggregation: Aggregation) -> torch.Tensor:
        """A per-target term (KL, entropy) as the micro-batch's mean under ``aggregation``."""
        return aggregate(x, self.action_mask, aggregation)

    def metric_share(self, part_weight: float) -> float:
        """The share of its mini-batch this batch's metrics stand for: its weight in the loss."""
        return part_weight

    @property
    def term_scale(self) -> float:
        """What turns its reported loss terms into its own means: they are already (1)."""
        return 1.0


BATCH_OVERHEAD = 256
"""The fixed cost of one micro-batch's forward and backward, in positions: a split must save
more padding than this. Small on purpose: on CPU a position costs about the same in a micro-batch
of 1 or 16 rows (within ~15% for the tiny model), so padding is the waste that matters."""


def make_micro_batches(
    seqs: Sequence[LeafSequence],
    advantages: Sequence[float],
    max_tokens: int,
    pad_id: int = 0,
    overhead: int = BATCH_OVERHEAD,
) -> list[MicroBatch]:
    """``seqs`` in micro-batches, grouped as ``cut_by_length`` groups rows."""
    if len(seqs) != len(advantages):
        raise ValueError(f"{len(seqs)} sequences but {len(advantages)} advantages")
    groups = cut_by_length([len(s.ids) for s in seqs], max_tokens, overhead)
    return [_pad([seqs[i] for i in g], [advantages[i] for i in g], g, pad_id) for g in groups]


def cut_by_length(
    lengths: Sequence[int], max_tokens: int, overhead: int = BATCH_OVERHEAD
) -> list[list[int]]:
    """Rows of these ``lengths`` sorted by length and cut into groups (indices into
    ``lengths``) of at most ``max_tokens`` padded positions each (a longer row is a group of its
    own), minimizing the positions computed plus ``overhead`` per group."""
    order = sorted(range(len(lengths)), key=lambda i: lengths[i])
    sizes = [lengths[i] for i in order]

    def cost(a: int, b: int) -> float:  # rows [a, b) padded to the longest, sizes[b - 1]
        size = (b - a) * sizes[b - 1]
        return size + overhead if size <= max_tokens or b - a == 1 else math.inf

    return [order[a:b] for a, b in contiguous_partition(len(order), cost)]


def _pad(seqs: list[LeafSequence], advs: list[float], index: list[int], pad_id: int) -> MicroBatch:
    ids = right_pad([s.ids for s in seqs], pad_id, torch.long)
    attn = right_pad([[1] * len(s.ids) for s in seqs], 0, torch.long)
    act = right_pad([s.action_mask for s in seqs], 0, torch.float32)
    lps = right_pad([s.logprobs for s in seqs], 0, torch.float32)
    mask = act[:, 1:]
    adv = torch.tensor(advs, dtype=torch.float32)[:, None] * mask
    return MicroBatch(index, ids, attn, ids[:, 1:], mask, adv, lps[:, 1:] * mask)


def pad_fraction(batches: Sequence[Any]) -> float:
    """Share of computed positions that are padding (micro-batches of sequences or packed ones)."""
    total = sum(mb.input_ids.numel() for mb in batches)
    real = sum(mb.n_real_tokens for mb in batches)
    return 1.0 - real / total if total else 0.0
