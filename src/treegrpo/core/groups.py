"""Dense group ids that never collide across data sources.

GRPO normalizes rewards within a group of rollouts of the same prompt, so the group id must be
unique per prompt across the whole batch. The authors' code used the dataset row index, so two
datasets mixed in one run (NQ row 7 and HotpotQA row 7) were merged into one group
(docs/algorithm.md §8). Build ids from every column that identifies a prompt instead.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence

import numpy as np
import numpy.typing as npt


def dense_ids(*columns: Sequence[Hashable] | npt.NDArray[np.generic]) -> npt.NDArray[np.int64]:
    """Map each distinct row of ``columns`` to an id 0..G-1, in order of first appearance.

    >>> dense_ids(["nq", "hotpotqa", "nq"], [7, 7, 7]).tolist()
    [0, 1, 0]
    """
    if not columns:
        raise ValueError("dense_ids needs at least one column")
    n = len(columns[0])
    for i, col in enumerate(columns):
        if len(col) != n:
            raise ValueError(f"column {i} has {len(col)} rows, column 0 has {n}")
    seen: dict[tuple[Hashable, ...], int] = {}
    out = np.empty(n, dtype=np.int64)  # (B,)
    for row, key in enumerate(zip(*columns, strict=True)):
        key = tuple(k.item() if isinstance(k, np.generic) else k for k in key)
        out[row] = seen.setdefault(key, len(seen))
    return out


def uniform_share(rewards: npt.ArrayLike, group_ids: npt.ArrayLike) -> float:
    """Share of groups whose rewards are all equal: they give z-scored GRPO advantages of zero,
    so their prompts teach nothing this step (TRL logs the same as ``frac_reward_zero_std``).
    ``rewards`` and ``group_ids``: (B,) per leaf; ids as from ``dense_ids``.

    >>> uniform_share([0, 0, 1, 0, 1, 1], [0, 0, 1, 1, 2, 2])
    0.6666666666666666
    """
    r = np.asarray(rewards, dtype=np.float64)  # (B,)
    g = np.asarray(group_ids, dtype=np.int64)  # (B,)
    if r.shape != g.shape or r.ndim != 1:
        raise ValueError(f"rewards {r.shape} and group_ids {g.shape} must be the same 1-D shape")
    if r.size == 0:
        return 0.0
    _, inverse = np.unique(g, return_inverse=True)  # (B,) in 0..G-1
    return float(np.mean(all_equal(r, inverse.reshape(-1))))


def all_equal(
    values: npt.NDArray[np.float64], inverse: npt.NDArray[np.int64]
) -> npt.NDArray[np.bool_]:
    """(G,) whether each group's values are all equal; ``inverse``: (B,) dense group index
    0..G-1 of each value (as from ``np.unique(..., return_inverse=True)``)."""
    n = int(inverse.max()) + 1 if inverse.size else 0
    lo = np.full(n, np.inf)  # (G,)
    hi = np.full(n, -np.inf)  # (G,)
    np.minimum.at(lo, inverse, values)
    np.maximum.at(hi, inverse, values)
    equal: npt.NDArray[np.bool_] = lo == hi
    return equal


def distinct_per_group(keys: Sequence[Hashable], group_ids: npt.ArrayLike) -> float:
    """Mean number of distinct ``keys`` per group: with keys the leaves' trajectories and groups
    the trees, how many different trajectories a tree really holds (1: every branch repeated
    its backbone, so the tree taught nothing a single chain would not).

    >>> distinct_per_group(["a", "a", "b", "c", "c", "c"], [0, 0, 0, 1, 1, 1])
    1.5
    """
    g = np.asarray(group_ids, dtype=np.int64)  # (B,)
    if g.ndim != 1 or len(keys) != g.size:
        raise ValueError(f"{len(keys)} keys and group_ids {g.shape} must be the same length")
    if g.size == 0:
        return 0.0
    seen: dict[int, set[Hashable]] = {}
    for key, gid in zip(keys, g.tolist(), strict=True):
        seen.setdefault(gid, set()).add(key)
    return float(np.mean([len(s) for s in seen.values()]))
