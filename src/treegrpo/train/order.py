"""The order in which a run draws its training questions: a resumable stream of prompt indices,
a pure function of (seed, position), so a resumed run draws what the uninterrupted run would have
(docs/data.md, "Mixing training files"): ``data_order`` walks seeded epochs over all questions,
``mixed_order`` mixes the training files with given weights.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

MIX_STREAM = 0x6D6978
"""Seeds the source draws of ``mixed_order`` apart from the per-source permutations."""


def data_order(n: int, seed: int, position: int, count: int) -> list[int]:
    """Indices ``position .. position + count`` of an endless stream of seeded permutations of
    range(n): epoch e is ``permutation(seed, e)``, so any position can be recomputed on resume."""
    return _stream(n, (seed,), position, count)


def mixed_order(
    sources: Sequence[int], weights: Sequence[float], seed: int, position: int, count: int
) -> list[int]:
    """Draws ``position .. position + count`` of the weighted mixture over sources. sources[i]: the
    source of question i; weights[s]: source s's share (finite, ≥ 0, some > 0; 0 for a source
    without questions). Draw j picks s_j = F⁻¹(u_j), u_j ~ U[0, 1) from the seeded stream (F: the
    cumulative normalised weights), then takes the next element of s_j's permutation stream
    (``data_order``, seeded by (seed, s)). Returns question indices."""
    src = np.asarray(sources, dtype=np.int64)  # [n_questions]
    w = np.asarray(weights, dtype=np.float64)  # [n_sources]
    if w.ndim != 1 or not np.all(np.isfinite(w)) or np.any(w < 0) or w.sum() <= 0:
        raise ValueError(f"mixture weights must be finite, >= 0 and not all 0, got {list(w)}")
    if src.size and (src.min() < 0 or src.max() >= w.size):
        raise ValueError(f"question sources must lie in 0..{w.size - 1}")
    members = [np.flatnonzero(src == s) for s in range(w.size)]  # questions of each source
    for s, m in enumerate(members):
        if w[s] > 0 and m.size == 0:
            raise ValueError(f"source {s} has weight {w[s]} but no questions")
    # the source of every draw so far: a prefix of one seeded uniform stream
    u = np.random.default_rng([seed, MIX_STREAM]).random(position + count)  # [position + count]
    cdf = np.cumsum(w) / w.sum()
    drawn = np.minimum(np.searchsorted(cdf, u, side="right"), w.size - 1)  # [position + count]
    out: list[tuple[int, int]] = []  # (draw, question)
    for s in range(w.size):
        new = np.flatnonzero(drawn[position:] == s)  # this call's draws from source s
        if new.size:
            before = int(np.count_nonzero(drawn[:position] == s))
            picks = _stream(members[s].size, (seed, s), before, new.size)
            out.extend(zip(new.tolist(), members[s][picks].tolist(), strict=True))
    return [q for _, q in sorted(out)]


def _stream(n: int, key: tuple[int, ...], position: int, count: int) -> list[int]:
    """``position .. position + count`` of range(n)'s permutations, seeded ``(*key, epoch)``."""
    out: list[int] = []
    while len(out) < count:
        epoch, offset = divmod(position + len(out), n)
        perm = np.random.default_rng([*key, epoch]).permutation(n)
        out.extend(perm[offset : offset + count - len(out)].tolist())
    return out
