"""Grouping prefill rows by feed and context length (engine.chunks)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from treegrpo.engine.chunks import prefill_chunks


def test_equal_feeds_on_very_different_contexts_go_to_different_chunks() -> None:
    # four 500-token observations, two on short contexts and two on long ones
    feeds, contexts = [500, 500, 500, 500], [150, 1300, 160, 1250]
    # attention negligible: context padding costs nothing, one chunk
    assert prefill_chunks(feeds, contexts, 0.0, 10_000, 0.05) == [[1, 3, 2, 0]]
    # attention a third of the linear work at 1,000 columns: split by context
    assert prefill_chunks(feeds, contexts, 3e-4, 10_000, 0.05) == [[1, 3], [2, 0]]
    # the position cap still applies (a single row may exceed it)
    assert prefill_chunks(feeds, contexts, 0.0, 1_000, 0.05) == [[1, 3], [2, 0]]
    assert prefill_chunks([800], [0], 0.0, 100, 0.05) == [[0]]


def test_feed_padding_alone_starts_a_chunk() -> None:
    # no attention cost and no contexts: the old rule, padding positions ≤ 5% of positions
    feeds = [100, 98, 60, 59, 58, 10]
    assert prefill_chunks(feeds, [0] * 6, 0.0, 10_000, 0.05) == [[0, 1], [2, 3, 4], [5]]
    with pytest.raises(ValueError, match="contexts"):
        prefill_chunks(feeds, [0], 0.0, 10_000, 0.05)


def _work(feeds: list[int], contexts: list[int], chunk: list[int], att: float) -> float:
    p, c = max(feeds[i] for i in chunk), max(contexts[i] for i in chunk)
    return len(chunk) * p * (1 + att * (c + p))


@given(
    st.lists(st.tuples(st.integers(1, 600), st.integers(0, 2000)), min_size=1, max_size=30),
    st.sampled_from([0.0, 1e-4, 1e-3]),
    st.integers(1, 4000),
    st.sampled_from([0.0, 0.05, 0.5]),
)
def test_every_row_once_and_padding_within_bounds(
    rows: list[tuple[int, int]], att: float, cap: int, waste: float
) -> None:
    feeds, contexts = [f for f, _ in rows], [c for _, c in rows]
    chunks = prefill_chunks(feeds, contexts, att, cap, waste)
    assert sorted(i for ch in chunks for i in ch) == list(range(len(rows)))
    for ch in chunks:
        if len(ch) == 1:
            continue
        p = max(feeds[i] for i in ch)
        assert len(ch) * p <= cap
        need = sum(feeds[i] * (1 + att * (contexts[i] + feeds[i])) for i in ch)
        work = _work(feeds, contexts, ch, att)
        assert work - need <= waste * work + 1e-6 * work
