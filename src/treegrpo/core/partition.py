"""Cutting a sorted list into contiguous groups at least cost (dynamic programming).

Both places that batch sequences of different lengths face the same choice: one group per
call wastes positions on padding, many groups pay a fixed cost per call. With the items sorted
by length, the best groups are contiguous ranges, and the best cut of n items follows from

    best[0] = 0,   best[j] = min over a < j of  best[a] + cost(a, j)

(the classic segmentation recurrence, as in optimal 1-D histogram binning). Users: the
trainer's micro-batches (``train.batch``) and the decode attention's row ranges
(``engine.cpu.lean.attention_spans``).
"""

from __future__ import annotations

import math
from collections.abc import Callable


def contiguous_partition(n: int, cost: Callable[[int, int], float]) -> list[tuple[int, int]]:
    """Split items 0..n−1 into contiguous ranges [a, b) minimizing Σ cost(a, b) (``math.inf``: not
    allowed). Ranges ending at b go from a = b − 1 outwards until one is not allowed (so longer ones
    must not be, as with size limits): O(n · longest range) calls. Single items must be allowed.
    Returns the ranges in order; on ties the longer last range wins."""
    best = [0.0] + [math.inf] * n  # best[j]: least cost of items [0, j)
    cut = [0] * (n + 1)
    for j in range(1, n + 1):
        for a in range(j - 1, -1, -1):
            c = cost(a, j)
            if c == math.inf:
                if a == j - 1:
                    raise ValueError(f"cost({a}, {j}) is inf: a single item must be allowed")
                break
            if best[a] + c <= best[j]:
                best[j], cut[j] = best[a] + c, a
    ranges = []
    j = n
    while j > 0:
        ranges.append((cut[j], j))
        j = cut[j]
    return ranges[::-1]
