"""Group-relative advantages for tree and chain rollouts (Tree-GRPO, arXiv 2509.21240;
docs/algorithm.md §3, which records the authors' code).

Every estimator takes one entry per kept leaf and returns (B,) float64 advantages:

    rewards     (B,) float   outcome reward R(H_i) of leaf i
    prompt_ids  (B,) int     prompt (inter-tree group) of leaf i, unique per prompt in the batch
    tree_ids    (B,) int     tree (intra-tree group) of leaf i

    Â_g(H_i) = (R(H_i) − mean_g R) / (std_g R + ε),   std unbiased (n − 1), ε = 1e-6,
    Â_tree = Â_intra + Â_inter;   chain GRPO: Â_inter on chains (each chain its own tree).

A group of one has mean 0 and std 1 (advantage R/(1 + ε), as in the authors' code); a group of
two or more equal rewards scores exactly 0 (as written, the mean's rounding divided by ε would
leave about ±1e-10). An optional batch term w·Â_batch scores each reward against the whole batch
(REINFORCE++'s global baseline, Hu 2025, arXiv 2501.03262), so a prompt whose leaves all fail
still gets a signal (docs/algorithm.md §9).
"""

from __future__ import annotations

from typing import Literal

import numpy as np
import numpy.typing as npt

from treegrpo.core.groups import all_equal

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
Mode = Literal["intra+inter", "intra", "inter"]
MODES: tuple[Mode, ...] = ("intra+inter", "intra", "inter")
EPS = 1e-6


def group_relative(
    rewards: npt.ArrayLike, groups: npt.ArrayLike, *, eps: float = EPS, scale: bool = True
) -> FloatArray:
    """GRPO score of each reward within its group (DeepSeekMath, arXiv 2402.03300); ``scale=False``
    keeps only R − mean_g R (Dr. GRPO, arXiv 2503.20783). (B,) rewards and group labels → (B,)."""
    r = _as_rewards(rewards)
    g = np.asarray(groups)
    if g.shape != r.shape:
        raise ValueError(f"groups has shape {g.shape}, rewards has shape {r.shape}")
    if r.size == 0:
        return np.zeros(0, dtype=np.float64)
    _, inv = np.unique(g, return_inverse=True)  # (B,) dense group index
    inv = inv.reshape(-1)
    count = np.bincount(inv).astype(np.float64)  # (G,)
    mean = np.bincount(inv, weights=r) / count  # (G,)
    dev = r - mean[inv]
    var = np.bincount(inv, weights=dev * dev) / np.maximum(count - 1.0, 1.0)  # unbiased
    std = np.sqrt(var)
    single = count == 1.0
    mean[single] = 0.0
    std[single] = 1.0
    centered = r - mean[inv]
    # A group whose rewards are all equal carries no signal: exactly 0, not the rounding of its
    # mean (three leaves of 0.1 would give −1.4e-11 after the division by ε, and prompts that
    # look uniform to `adv != 0` must really be uniform).
    centered[(all_equal(r, inv) & ~single)[inv]] = 0.0
    if not scale:
        return centered
    return np.asarray(centered / (std[inv] + eps), dtype=np.float64)


def tree_advantage(
    rewards: npt.ArrayLike,
    prompt_ids: npt.ArrayLike,
    tree_ids: npt.ArrayLike,
    mode: Mode = "intra+inter",
    *,
    eps: float = EPS,
    scale: bool = True,
    batch: float = 0.0,
) -> FloatArray:
    """Tree-GRPO advantage of each kept leaf (docs/algorithm.md §3).

    mode "intra":       Â_intra, the group is the kept leaves of the same tree;
    mode "inter":       Â_inter, the group is all kept leaves of the same prompt (chain GRPO
                        when every tree is a single chain);
    mode "intra+inter": Â_intra + Â_inter (Tree-GRPO's default).

    ``scale=False`` skips the division by the standard deviation (Dr. GRPO); ``batch`` w > 0 adds
    w·Â_batch, every leaf against all B leaves. rewards, prompt_ids, tree_ids: (B,) → (B,) float64.
    """
    if mode not in MODES:
        raise ValueError(f"unknown advantage mode {mode!r}; expected one of {MODES}")
    if batch < 0:
        raise ValueError(f"batch weight must be >= 0, got {batch}")
    r = _as_rewards(rewards)
    prompts = _as_ids(prompt_ids, "prompt_ids", r.shape)
    trees = _as_ids(tree_ids, "tree_ids", r.shape)
    adv = np.zeros_like(r)
    if mode in ("intra", "intra+inter"):
        # A tree id is only meaningful within its prompt: group on the (prompt, tree) pair.
        pair = np.stack([prompts, trees], axis=1)  # (B, 2)
        _, intra_groups = np.unique(pair, axis=0, return_inverse=True)
        adv += group_relative(r, intra_groups.reshape(-1), eps=eps, scale=scale)
    if mode in ("inter", "intra+inter"):
        adv += group_relative(r, prompts, eps=eps, scale=scale)
    if batch > 0:
        adv += batch * group_relative(r, np.zeros_like(prompts), eps=eps, scale=scale)
    return adv


def token_advantages(leaf_adv: npt.ArrayLike, action_mask: npt.ArrayLike) -> FloatArray:
    """Spread each leaf's advantage over the action tokens of its whole root-to-leaf path, shared
    steps included (docs/algorithm.md §3); prompt and observation tokens get 0. leaf_adv: (B,),
    action_mask: (B, T), 1 on model-action tokens. Returns (B, T)."""
    adv = np.asarray(leaf_adv, dtype=np.float64)
    mask = np.asarray(action_mask)
    if adv.ndim != 1 or mask.ndim != 2 or mask.shape[0] != adv.shape[0]:
        raise ValueError(
            f"expected leaf_adv (B,) and action_mask (B, T); got {adv.shape} and {mask.shape}"
        )
    out: FloatArray = adv[:, None] * (mask != 0)  # (B, T)
    return out


def node_advantage(
    parent: npt.ArrayLike, leaf_nodes: npt.ArrayLike, leaf_adv: npt.ArrayLike
) -> tuple[FloatArray, FloatArray, IntArray]:
    """Per node: sum and mean of its descendant kept leaves' advantages, and their count. Under
    token-mean aggregation a shared step's gradient is proportional to the sum; the mean is the
    advantage when each node is trained once. A step shared by every leaf of a tree gets
    Σ Â_intra = 0, sibling subtrees opposite signs (the paper's link to step-level DPO); nodes
    without kept descendant leaves get mean NaN. parent: (N,) parent id (-1 for roots);
    leaf_nodes: (B,) each kept leaf's node; leaf_adv: (B,). Returns sum, mean, count (N,) each."""
    par = np.asarray(parent, dtype=np.int64)
    leaves = np.asarray(leaf_nodes, dtype=np.int64)
    adv = np.asarray(leaf_adv, dtype=np.float64)
    n = par.shape[0]
    if par.ndim != 1 or leaves.shape != adv.shape or leaves.ndim != 1:
        raise ValueError(
            f"expected parent (N,), leaf_nodes (B,), leaf_adv (B,); "
            f"got {par.shape}, {leaves.shape}, {adv.shape}"
        )
    if leaves.size and (leaves.min() < 0 or leaves.max() >= n):
        raise ValueError(f"leaf_nodes must index the {n} nodes")
    total = np.zeros(n, dtype=np.float64)  # (N,)
    count = np.zeros(n, dtype=np.int64)  # (N,)
    cur = leaves
    for _ in range(n + 1):  # a path is at most N nodes long; one more step proves termination
        live = cur >= 0
        if not live.any():
            break
        np.add.at(total, cur[live], adv[live])
        np.add.at(count, cur[live], 1)
        cur = np.where(live, par[np.maximum(cur, 0)], -1)
    else:
        raise ValueError("parent links contain a cycle")
    mean = np.divide(total, count, out=np.full(n, np.nan), where=count > 0)  # NaN: no leaves
    return total, mean, count


def _as_rewards(rewards: npt.ArrayLike) -> FloatArray:
    r = np.asarray(rewards, dtype=np.float64)
    if r.ndim != 1:
        raise ValueError(f"rewards must be 1-D (one per leaf), got shape {r.shape}")
    if not np.all(np.isfinite(r)):
        bad = np.flatnonzero(~np.isfinite(r))[:5].tolist()
        raise ValueError(f"rewards must be finite; non-finite at positions {bad}")
    return r


def _as_ids(ids: npt.ArrayLike, name: str, shape: tuple[int, ...]) -> IntArray:
    a = np.asarray(ids)
    if a.shape != shape:
        raise ValueError(f"{name} has shape {a.shape}, rewards has shape {shape}")
    if a.size and not np.issubdtype(a.dtype, np.integer):
        raise ValueError(
            f"{name} must be integers, got dtype {a.dtype}; "
            "build them with treegrpo.core.groups.dense_ids"
        )
    return a.astype(np.int64)
