"""The segmentation recurrence against every partition, with and without a size limit."""

from __future__ import annotations

import itertools
import math
import random

import pytest

from treegrpo.core.partition import contiguous_partition


def _all_partitions(n: int) -> list[list[tuple[int, int]]]:
    out = []
    for k in range(n):
        for cuts in itertools.combinations(range(1, n), k):
            bounds = [0, *cuts, n]
            out.append(list(itertools.pairwise(bounds)))
    return out


def test_by_hand() -> None:
    widths = [1, 1, 9, 9]
    # a range costs its size × its widest item + 2
    cost = lambda a, b: (b - a) * widths[b - 1] + 2  # noqa: E731
    assert contiguous_partition(4, cost) == [(0, 2), (2, 4)]  # 2·1 + 2 + 2·9 + 2 = 24 < 38
    assert contiguous_partition(0, cost) == []


@pytest.mark.parametrize("limit", [None, 2, 3])
def test_least_cost_against_every_partition(limit: int | None) -> None:
    rng = random.Random(limit)
    for _ in range(150):
        n = rng.randint(1, 7)
        widths = sorted(rng.randint(1, 40) for _ in range(n))
        overhead = rng.randint(0, 30)

        def cost(a: int, b: int, widths: list[int] = widths, overhead: int = overhead) -> float:
            if limit is not None and b - a > limit:
                return math.inf
            return (b - a) * widths[b - 1] + overhead

        got = contiguous_partition(n, cost)
        assert [a for a, _ in got] == [0] + [b for _, b in got[:-1]] and got[-1][1] == n
        assert all(cost(a, b) < math.inf for a, b in got)
        best = min(sum(cost(a, b) for a, b in p) for p in _all_partitions(n))
        assert sum(cost(a, b) for a, b in got) == best


def test_a_single_item_must_be_allowed() -> None:
    with pytest.raises(ValueError, match="single item"):
        contiguous_partition(2, lambda a, b: math.inf)
