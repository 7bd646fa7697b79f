"""Difficulty budgets: how many expansions each tree of a batch gets in one round.

Instead of N per tree (Tree-GRPO, arXiv 2509.21240), the round's total T·N is shared across the
batch's T trees so that the expected number of trees with mixed rewards, the only ones with an
intra-tree signal, is largest (docs/expansion.md, "Budgets that follow difficulty"). Tree t has
``scored[t]`` scored leaves, ``successes[t]`` of them at or above the threshold; new leaves of
prompt P succeed with p ~ Beta(α_P, β_P), κ = ``prior_strength``:

    μ0 = (S + 1) / (D + 2)                   (the batch's success rate, Beta(1, 1) smoothed)
    α_P = κ μ0 + S_P,   β_P = κ (1 − μ0) + F_P,

    q_t(k) = 1 − E[p^k]          all its leaves succeeded,
             1 − E[(1 − p)^k]    all failed,
             1                   already mixed,

    E[p^k] = Π_{i<k} (α + i) / (α + β + i)   under Beta(α, β)  (swap α, β for (1 − p)^k).

Maximise Σ_t q_t(k_t) subject to Σ_t k_t = total and floor ≤ k_t ≤ cap. The gain
q_t(k) − q_t(k − 1) = E[p^(k−1) (1 − p)] falls with k (q_t is concave), so giving expansions one
at a time to the tree of largest gain is optimal; ties go to the lowest tree id. What is left
once every tree with a positive gain is capped goes round-robin to trees below their cap, so
the counts always sum to ``total``. Shapes: T trees, in the forest's tree order.
"""

from __future__ import annotations

import heapq
import math

import numpy as np
import numpy.typing as npt

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]


def allocate(
    successes: npt.ArrayLike,
    scored: npt.ArrayLike,
    prompt_of_tree: npt.ArrayLike,
    total: int,
    *,
    prior_strength: float = 2.0,
    floor: int = 0,
    cap: int | None = None,
) -> IntArray:
    """(T,) expansions per tree, summing to ``total``, that maximise the expected number of trees
    with mixed rewards (docs/expansion.md, "Budgets that follow difficulty"). ``successes``,
    ``scored``, ``prompt_of_tree``: (T,) each tree's successful and scored leaves (one or more) and
    its prompt; ``floor``, ``cap``: expansions per tree at least, at most (None: no cap)."""
    wins, seen, prompt = _check(successes, scored, prompt_of_tree)
    n_trees = len(seen)
    if total < 0:
        raise ValueError(f"total must be >= 0, got {total}")
    if floor < 0:
        raise ValueError(f"floor must be >= 0, got {floor}")
    top = total if cap is None else cap
    if top < floor:
        raise ValueError(f"cap must be >= floor, got cap={cap}, floor={floor}")
    if not floor * n_trees <= total <= top * n_trees:
        raise ValueError(
            f"total {total} cannot be split over {n_trees} trees with floor {floor} and cap {top}"
        )
    a, b = _odds(wins, seen, prompt, prior_strength)  # (T,) each
    counts = np.full(n_trees, floor, dtype=np.int64)  # (T,)
    left = total - floor * n_trees
    # max-heap of the next expansion's gain per tree; (−gain, t) breaks ties by lowest t
    heap = [(-_gain(a[t], b[t], floor + 1), t) for t in range(n_trees) if b[t] > 0 and top > floor]
    heapq.heapify(heap)
    while left and heap:
        _, t = heapq.heappop(heap)
        counts[t] += 1
        left -= 1
        if counts[t] < top:
            heapq.heappush(heap, (-_gain(a[t], b[t], int(counts[t]) + 1), t))
    while left:  # only zero gains remain: round-robin over the trees with room
        for t in range(n_trees):
            if left and counts[t] < top:
                counts[t] += 1
                left -= 1
    return counts


def mixed_probability(
    successes: npt.ArrayLike,
    scored: npt.ArrayLike,
    prompt_of_tree: npt.ArrayLike,
    counts: npt.ArrayLike,
    *,
    prior_strength: float = 2.0,
) -> FloatArray:
    """(T,) q_t(k_t): the probability that tree t ends with mixed rewards after ``counts[t]``
    more leaves (module docstring). ``allocate`` maximises its sum."""
    wins, seen, prompt = _check(successes, scored, prompt_of_tree)
    ks = np.asarray(counts, dtype=np.int64)  # (T,)
    if ks.shape != seen.shape or (ks < 0).any():
        raise ValueError(f"counts must be (T,) = {seen.shape} non-negative integers")
    a, b = _odds(wins, seen, prompt, prior_strength)  # (T,) each
    out = np.ones(len(seen))  # (T,)
    for t, k in enumerate(ks.tolist()):
        if b[t] > 0:
            out[t] = 1.0 - _moment(a[t], b[t], k)
    return out


def _odds(
    wins: IntArray, seen: IntArray, prompt: IntArray, prior_strength: float
) -> tuple[FloatArray, FloatArray]:
    """(T,) (a, b) per tree: E[x^k] = Π_{i<k} (a + i) / (a + b + i) is the chance that k new
    leaves all repeat the tree's one outcome (x = p after successes, 1 − p after failures);
    b = 0 for a mixed tree, which nothing can un-mix."""
    if not prior_strength > 0:
        raise ValueError(f"prior_strength must be > 0, got {prior_strength}")
    mu0 = (wins.sum() + 1) / (seen.sum() + 2)
    _, dense = np.unique(prompt, return_inverse=True)  # (T,) prompt index
    dense = dense.reshape(-1)
    s_p = np.bincount(dense, weights=wins)[dense]  # (T,) the prompt's successes
    f_p = np.bincount(dense, weights=seen - wins)[dense]  # (T,) ... and failures
    alpha = prior_strength * mu0 + s_p  # (T,)
    beta = prior_strength * (1 - mu0) + f_p  # (T,)
    all_right = wins == seen
    all_wrong = wins == 0
    a = np.where(all_right, alpha, beta)
    b = np.where(all_right, beta, alpha)
    b = np.where(all_right | all_wrong, b, 0.0)
    return a.astype(np.float64), b.astype(np.float64)


def _moment(a: float, b: float, k: int) -> float:
    """E[x^k] = Π_{i<k} (a + i) / (a + b + i) for x ~ Beta(a, b)."""
    return math.prod(((a + i) / (a + b + i) for i in range(k)), start=1.0)


def _gain(a: float, b: float, k: int) -> float:
    """q(k) − q(k − 1) = E[x^(k−1) (1 − x)] = E[x^(k−1)] · b / (a + b + k − 1), for k >= 1:
    positive and falling in k."""
    return _moment(a, b, k - 1) * b / (a + b + k - 1)


def _check(
    successes: npt.ArrayLike, scored: npt.ArrayLike, prompt_of_tree: npt.ArrayLike
) -> tuple[IntArray, IntArray, IntArray]:
    arrays = []
    named = (("successes", successes), ("scored", scored), ("prompt_of_tree", prompt_of_tree))
    for name, x in named:
        arr = np.asarray(x)
        if arr.ndim != 1 or not (arr.size == 0 or np.issubdtype(arr.dtype, np.integer)):
            raise ValueError(f"{name} must be a 1-D integer array, got {arr.dtype} {arr.shape}")
        arrays.append(arr.astype(np.int64))
    wins, seen, prompt = arrays
    if not wins.shape == seen.shape == prompt.shape:
        raise ValueError(
            f"successes, scored and prompt_of_tree must have one shape (T,), got "
            f"{wins.shape}, {seen.shape}, {prompt.shape}"
        )
    if (seen < 1).any():
        raise ValueError("every tree needs at least one scored leaf (scored >= 1)")
    if ((wins < 0) | (wins > seen)).any():
        raise ValueError("successes must be in [0, scored] for every tree")
    return wins, seen, prompt
