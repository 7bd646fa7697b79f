"""The training data order: resumable streams, plain and weighted over files."""

from __future__ import annotations

import numpy as np
import pytest

from treegrpo.train.order import data_order, mixed_order

# 60 questions of file 0, 5 of file 1, interleaved the way concatenated files are not
SOURCES = [0] * 30 + [1] * 5 + [0] * 30


def test_data_order_is_a_resumable_stream() -> None:
    whole = data_order(5, seed=1, position=0, count=12)
    assert sorted(whole[:5]) == list(range(5)) and sorted(whole[5:10]) == list(range(5))
    assert data_order(5, seed=1, position=7, count=5) == whole[7:12]
    assert data_order(5, seed=2, position=0, count=5) != whole[:5]


def test_mixed_order_is_a_resumable_stream() -> None:
    whole = mixed_order(SOURCES, (3, 1), seed=4, position=0, count=50)
    parts = [mixed_order(SOURCES, (3, 1), seed=4, position=p, count=10) for p in range(0, 50, 10)]
    assert [q for part in parts for q in part] == whole
    assert mixed_order(SOURCES, (3, 1), seed=5, position=0, count=50) != whole


def test_mixed_order_takes_each_file_at_its_weight() -> None:
    drawn = np.array(mixed_order(SOURCES, (3, 1), seed=0, position=0, count=4000))
    from_small = np.isin(drawn, np.flatnonzero(np.array(SOURCES) == 1))
    # weights 3 : 1 → a quarter of the prompts from the 5-question file (by size it would be 1/13)
    assert abs(from_small.mean() - 0.25) < 0.03
    # each file's draws walk its own epochs: every 5 consecutive draws of the small file are
    # all of its questions once
    small = drawn[from_small]
    for k in range(0, len(small) - 5, 5):
        assert sorted(small[k : k + 5].tolist()) == list(range(30, 35))
    # a file of weight 0 is never drawn
    assert set(mixed_order(SOURCES, (0, 1), seed=0, position=0, count=40)) == set(range(30, 35))


@pytest.mark.parametrize(
    ("sources", "weights", "message"),
    [
        (SOURCES, (1, -1), "finite, >= 0"),
        (SOURCES, (0, 0), "not all 0"),
        (SOURCES, (1, float("nan")), "finite"),
        (SOURCES, (1,), r"sources must lie in 0\.\.0"),
        ([0, 0], (1, 1), "source 1 has weight 1.0 but no questions"),
    ],
)
def test_mixed_order_refuses_bad_weights(
    sources: list[int], weights: tuple[float, ...], message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        mixed_order(sources, weights, seed=0, position=0, count=4)
