"""The prefix-shared update: each prompt's kept paths packed once, so a step shared by k leaves
is computed once instead of k times (``core.packing`` lays the tokens out).

Tree-GRPO trains every action token of a leaf's path with that leaf's advantage (docs/algorithm.md
§3), so a token t shared by the leaves l ∈ L(t) is in the duplicated loss once per leaf. The
PPO term of one token is linear in A on each side of zero,

    A > 0:  −A · min(r, 1 + ε)
    A < 0:  −A · max(r, 1 − ε)             (dual clip c: −A · min(max(r, 1 − ε), c))

so the sum over the leaves through t is exact with two weights per token,

    pg_t = −P_t · min(r_t, 1 + ε) − N_t · g(r_t),   P_t = Σ_{l∋t, A_l>0} w_l A_l,
                                                    N_t = Σ_{l∋t, A_l<0} w_l A_l,

and the KL and entropy terms take W_t = Σ_{l∋t} w_l. w_l is the leaf's weight in the mini-batch's
loss: token-mean 1 / Σ_l n_l (n_l: the leaf's action tokens, each shared one counted once per
leaf, as the duplicated update counts it), seq-mean-token-mean 1 / (B n_l), seq-mean-token-sum
1 / B over the B leaves. The per-token weights already carry the normalisation, so a micro-batch's
loss is its part of the mini-batch's, to be summed (``Part.weight`` 1).

Shapes: b packed rows of S tokens, n action targets of a micro-batch.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from treegrpo.core.packing import Layout, pack
from treegrpo.rollout.records import Rollout
from treegrpo.train.batch import cut_by_length
from treegrpo.train.config import Aggregation
from treegrpo.train.head import logits_at
from treegrpo.train.logprobs import picked_logprobs
from treegrpo.train.precision import autocast
from treegrpo.train.sft import right_pad

SUPPORTED_ATTENTION = ("eager", "sdpa")
"""Attention implementations that take a custom (b, 1, S, S) mask as transformers passes it."""


@dataclass
class PackedBatch:
    """Packed rows (one per prompt) padded to S, and their n action targets."""

    index: list[int]  # the caller's leaf positions packed here
    input_ids: torch.Tensor  # (b, S)
    position_ids: torch.Tensor  # (b, S) each token's offset on its own path
    slots: torch.Tensor  # (b, S) each token's segment slot in its row (padding: slot K)
    ancestors: torch.Tensor  # (b, K + 1, K + 1) bool: slot j is an ancestor-or-self of slot k
    rows: torch.Tensor  # (n,) the row of each target
    cols: torch.Tensor  # (n,) the column whose logits predict it (the token before it)
    targets: torch.Tensor  # (n,) the target ids
    adv_pos: torch.Tensor  # (n,) P_t
    adv_neg: torch.Tensor  # (n,) N_t
    weight: torch.Tensor  # (n,) W_t
    target_weight: torch.Tensor  # (n,) leaves through the target: how many it stands for
    count_pos: torch.Tensor  # (n,) ... with A > 0
    count_neg: torch.Tensor  # (n,) ... with A < 0
    sampled_logprobs: torch.Tensor  # (n,) the engine's log-probs
    share: float  # Σ of its leaves' shares of the mini-batch (its metrics are per share)
    path_tokens: int  # Σ its leaves' path lengths: the positions the paths hold, duplicated

    @property
    def n_real_tokens(self) -> int:
        """Packed tokens, padding left out."""
        return int((self.slots < self.ancestors.shape[1] - 1).sum().item())

    def allowed(self) -> torch.Tensor:
        """(b, 1, S, S) bool: query i may attend to key j (``core.packing``); the padding after a
        row's tokens sees only padding, so no softmax row is empty."""
        rows = torch.arange(self.slots.shape[0], device=self.slots.device)[:, None, None]
        anc = self.ancestors[rows, self.slots[:, :, None], self.slots[:, None, :]]  # (b, S, S)
        s = self.slots.shape[1]
        causal = torch.ones(s, s, dtype=torch.bool, device=self.slots.device).tril()
        return (anc & causal)[:, None]

    def logprobs(
        self,
        policy: Any,
        with_entropy: bool = False,
        autocast_dtype: torch.dtype | None = None,
        temperature: float = 1.0,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """(n,) log p(target | its path before it), and their entropies when asked: p is
        softmax(logits / temperature), as ``train.logprobs.token_logprobs``."""
        dtype = autocast_dtype or next(policy.parameters()).dtype
        allowed = self.allowed()  # (b, 1, S, S)
        mask = torch.zeros(allowed.shape, dtype=dtype, device=allowed.device)
        mask = mask.masked_fill(~allowed, torch.finfo(dtype).min)  # additive: eager and sdpa
        with autocast(self.input_ids.device, autocast_dtype):
            at = (self.rows, self.cols)
            logits = logits_at(policy, self.input_ids, mask, at, self.position_ids)  # (n, V)
        return picked_logprobs(logits, self.targets, temperature, with_entropy)

    def policy_loss(
        self,
        logp: torch.Tensor,
        logp_old: torch.Tensor,
        clip_eps: float = 0.2,
        dual_clip: float | None = 3.0,
        aggregation: Aggregation = "token-mean",
        is_weight: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """Σ_t pg_t (module docstring): the duplicated update's clipped PPO loss of these targets'
        leaves, weighted into the mini-batch's loss (the weights already hold ``aggregation``,
        ``leaf_weights``), with ``losses.ppo_clip_loss``'s clipped fraction and approximate KL
        over the targets counted once per leaf. ``is_weight`` (n,): a detached token-level
        importance weight per target (``train.offpolicy``)."""
        log_ratio = torch.clamp(logp - logp_old, -20.0, 20.0)  # (n,)
        ratio = torch.exp(log_ratio)
        up = torch.clamp(ratio, max=1.0 + clip_eps)  # min(r, 1 + ε)
        down = torch.clamp(ratio, min=1.0 - clip_eps)  # max(r, 1 − ε)
        if dual_clip is not None:
            down = torch.clamp(down, max=dual_clip)
        per_target = self.adv_pos * up + self.adv_neg * down  # (n,)
        if is_weight is not None:
            per_target = per_target * is_weight
        with torch.no_grad():
            total = self.target_weight.sum().clamp(min=1.0)
            clipped = self.count_pos * (ratio > 1.0 + clip_eps) + self.count_neg * (
                ratio < 1.0 - clip_eps
            )
            stats = {
                "clip_frac": clipped.sum() / total,
                "approx_kl": (self.target_weight * -log_ratio).sum() / total,
            }
        return -per_target.sum(), stats

    def reduce(self, x: torch.Tensor, aggregation: Aggregation) -> torch.Tensor:
        """A per-target term (KL, entropy) summed with the weights W_t, which hold the
        mini-batch's normalisation under ``aggregation`` already."""
        return (self.weight * x).sum()

    def metric_share(self, part_weight: float) -> float:
        """The share of its mini-batch its leaves are (its ``Part`` weight is 1)."""
        return self.share

    @property
    def term_scale(self) -> float:
        """What turns its loss terms, parts of the mini-batch's loss, into its own means."""
        return 1.0 / self.share if self.share > 0 else 0.0


def leaf_weights(n_actions: Sequence[int], aggregation: str) -> tuple[np.ndarray, np.ndarray]:
    """(B,) w_l (module docstring) and (B,) each leaf's share of the mini-batch, for the leaves
    of one mini-batch with ``n_actions`` action tokens each."""
    n = np.asarray(n_actions, dtype=np.float64)  # (B,)
    if aggregation == "token-mean":
        total = n.sum()
        w = np.full(n.shape, 1.0 / total if total else 0.0)
        return w, n * w
    share = np.full(n.shape, 1.0 / len(n))
    if aggregation == "seq-mean-token-mean":
        return np.divide(share, n, out=np.zeros_like(n), where=n > 0), share
    if aggregation == "seq-mean-token-sum":
        return share, share
    raise ValueError(f"unknown aggregation {aggregation!r}")


def pack_batches(
    rollout: Rollout,
    leaves: Sequence[int],
    advantages: Sequence[float],
    aggregation: str,
    max_tokens: int,
    span: int | None = None,
    pad_id: int = 0,
) -> list[PackedBatch]:
    """The kept ``leaves`` of one mini-batch (node ids, with their ``advantages``) packed a row per
    prompt, or several where one row's attention would cost more (``span``, ``row_span``; None: one
    row), the rows cut into micro-batches of at most ``max_tokens`` padded positions as
    ``train.batch`` cuts sequences."""
    if len(leaves) != len(advantages):
        raise ValueError(f"{len(leaves)} leaves but {len(advantages)} advantages")
    forest = rollout.forest
    paths = [forest.path(int(leaf)).tolist() for leaf in leaves]
    n_act = [sum(len(rollout.step(v).action_ids) for v in path) for path in paths]
    w, share = leaf_weights(n_act, aggregation)
    adv = np.asarray(advantages, dtype=np.float64)
    per_leaf = np.stack(
        [w * np.maximum(adv, 0), w * np.minimum(adv, 0), w, np.ones_like(w), adv > 0, adv < 0],
        axis=1,
    )  # (B, 6)
    prompts: dict[int, list[int]] = {}
    for i, leaf in enumerate(leaves):
        prompts.setdefault(int(forest.prompt_id[int(leaf)]), []).append(i)
    size = {v: _step_size(rollout, v) for path in paths for v in path}  # tokens per step
    path_len = [  # (B,) each leaf's whole sequence: prompt, actions, observations
        len(rollout.prompts[int(forest.prompt_id[int(leaf)])]) + sum(size[v] for v in path)
        for leaf, path in zip(leaves, paths, strict=True)
    ]
    rows = [
        _row(rollout, p, part, paths, per_leaf)
        for p, idx in prompts.items()
        for part in _split_row(len(rollout.prompts[p]), idx, paths, size, span)
    ]
    groups = cut_by_length([r.size for r in rows], max_tokens)
    return [_tensors([rows[r] for r in g], share, path_len, pad_id) for g in groups]


def _step_size(rollout: Rollout, node: int) -> int:
    """Tokens of one step: its action and its observation."""
    rec = rollout.step(node)
    return len(rec.action_ids) + len(rec.obs_ids)


def _split_row(
    start: int, idx: list[int], paths: list[list[int]], size: dict[int, int], span: int | None
) -> list[list[int]]:
    """One prompt's leaves ``idx`` (a prompt of ``start`` tokens, steps of ``size`` tokens) cut into
    packed rows (``span`` None: one). A row of S tokens costs about S · (1 + S / span)
    (``row_span``). Leaves go in depth-first order, each joining the current row while the tokens it
    adds cost less than a row of its own, which repeats the prompt and the shared steps."""
    if span is None:
        return [idx]

    def cost(s: int) -> float:
        return s * (1.0 + s / span)

    rows: list[list[int]] = []
    seen: set[int] = set()
    width = start
    for i in sorted(idx, key=lambda i: paths[i]):
        alone = start + sum(size[v] for v in paths[i])
        joined = width + sum(size[v] for v in paths[i] if v not in seen)
        if rows and cost(joined) - cost(width) <= cost(alone):
            rows[-1].append(i)
            width = joined
        else:
            rows.append([i])
            seen, width = set(), alone
        seen.update(paths[i])
    return rows


def row_span(config: Any) -> int:
    """The row width at which a packed row's attention costs as much as the rest of its layers:
    per token the projections and MLP take about 2 (4H + 3I) flops (H hidden, I the MLP's width)
    and each attended pair 4H, so S0 = (4H + 3I) / 2; Qwen2.5-3B: 20,608, the others in
    docs/configuration.md, "Algorithm settings worth knowing"."""
    hidden = int(config.hidden_size)
    inner = int(getattr(config, "intermediate_size", None) or 4 * hidden)
    return (4 * hidden + 3 * inner) // 2


@dataclass
class _Row:
    """One prompt's packed row, as arrays."""

    index: list[int]  # leaf positions
    ids: np.ndarray  # (S,)
    layout: Layout
    action: np.ndarray  # (S,) bool: the token is a model action with a token before it
    logprobs: np.ndarray  # (S,) the engine's log-probs on actions
    sums: np.ndarray  # (S, 6) per-token sums of per_leaf

    @property
    def size(self) -> int:
        return int(self.ids.size)


def _row(
    rollout: Rollout, prompt: int, idx: list[int], paths: list[list[int]], per_leaf: np.ndarray
) -> _Row:
    """Pack prompt ``prompt``'s leaves ``idx``: the prompt is segment −1 − prompt, shared by
    its trees; a step is its node id (its action then its observation)."""
    root, prompt_ids = -1 - prompt, rollout.prompts[prompt]
    segs = [[root, *paths[i]] for i in idx]  # forest.path: the steps, below the tree's root
    lengths = {v: _step_size(rollout, v) for path in segs for v in path[1:]}
    layout = pack(segs, lengths | {root: len(prompt_ids)})
    ids, action, lps = [], [], []
    for seg in layout.segments.tolist():
        if seg == root:  # the prompt: context only
            acts, logps, obs = [], [], prompt_ids
        else:
            rec = rollout.step(seg)
            acts, logps, obs = rec.action_ids, rec.action_logprobs, rec.obs_ids
        ids += acts + obs
        action += [True] * len(acts) + [False] * len(obs)
        lps += logps + [0.0] * len(obs)
    act = np.array(action, dtype=np.bool_) & (layout.prev >= 0)  # (S,)
    return _Row(
        idx, np.array(ids, np.int64), layout, act, np.array(lps), layout.per_token(per_leaf[idx])
    )


def _tensors(rows: list[_Row], share: np.ndarray, path_len: list[int], pad_id: int) -> PackedBatch:
    """The micro-batch of ``rows``; ``share``, ``path_len``: (B,) per leaf of the mini-batch."""
    index = [i for r in rows for i in r.index]
    b, k = len(rows), max(len(r.layout.segments) for r in rows)
    ids = right_pad([r.ids for r in rows], pad_id, torch.long)
    pos = right_pad([r.layout.position for r in rows], 0, torch.long)
    slots = right_pad([r.layout.token_slot for r in rows], k, torch.long)  # padding: extra slot k
    ancestors = torch.zeros((b, k + 1, k + 1), dtype=torch.bool)
    ancestors[:, k, k] = True
    for i, r in enumerate(rows):
        kr = len(r.layout.segments)
        ancestors[i, :kr, :kr] = torch.from_numpy(r.layout.ancestors())
    row_of = np.repeat(np.arange(b), [int(r.action.sum()) for r in rows]).astype(np.int64)
    cols = np.concatenate([r.layout.prev[r.action] for r in rows]).astype(np.int64)
    sums = np.concatenate([r.sums[r.action] for r in rows])  # (n, 6)
    targets = np.concatenate([r.ids[r.action] for r in rows])
    lps = np.concatenate([r.logprobs[r.action] for r in rows])
    columns = (torch.from_numpy(sums[:, j]).float() for j in range(6))
    adv_pos, adv_neg, weight, count, count_pos, count_neg = columns
    return PackedBatch(
        index,
        ids,
        pos,
        slots,
        ancestors,
        torch.from_numpy(row_of),
        torch.from_numpy(cols),
        torch.from_numpy(targets),
        adv_pos,
        adv_neg,
        weight,
        count,
        count_pos,
        count_neg,
        torch.from_numpy(lps).float(),
        float(share[index].sum()),
        sum(path_len[i] for i in index),
    )


def supports_packing(model: Any) -> str | None:
    """None when ``model`` can run a packed batch, else why not (no custom 4D attention mask)."""
    impl = getattr(model.config, "_attn_implementation", None) or "eager"
    if impl not in SUPPORTED_ATTENTION:
        return (
            f"{type(model).__name__} uses {impl} attention, which takes no custom attention "
            f"mask; the prefix-shared update needs one of {', '.join(SUPPORTED_ATTENTION)}"
        )
    return None
