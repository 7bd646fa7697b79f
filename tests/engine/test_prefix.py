"""Grouping prompts by a shared start (engine.prefix)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from treegrpo.engine.prefix import common_prefix_length, shared_prefix_groups


def test_one_instruction_many_questions_form_one_group() -> None:
    inst = list(range(100, 140))
    seqs = [[*inst, 1, 2], [9, 9, 9], [*inst, 3], [*inst, 1, 5, 6]]
    assert shared_prefix_groups(seqs, min_shared=8) == [([0, 2, 3], 40)]
    # two of them share one more token: the threshold decides which group forms
    assert shared_prefix_groups(seqs, min_shared=41) == [([0, 3], 41)]
    assert shared_prefix_groups(seqs, min_shared=42) == []
    assert shared_prefix_groups([inst, inst], min_shared=40) == [([0, 1], 40)]
    with pytest.raises(ValueError, match="min_shared"):
        shared_prefix_groups(seqs, min_shared=0)


@given(
    st.lists(st.lists(st.integers(0, 3), max_size=8), max_size=12),
    st.integers(1, 4),
)
def test_groups_share_their_prefix_and_are_disjoint(seqs: list[list[int]], min_shared: int) -> None:
    groups = shared_prefix_groups(seqs, min_shared)
    seen: set[int] = set()
    for idx, n in groups:
        assert len(idx) >= 2 and n >= min_shared and idx == sorted(idx)
        assert not seen & set(idx)
        seen |= set(idx)
        head = seqs[idx[0]][:n]
        assert len(head) == n and all(seqs[i][:n] == head for i in idx)
        # n is the longest prefix the group shares
        assert min(common_prefix_length(seqs[idx[0]], seqs[i]) for i in idx[1:]) == n
    # a sequence left alone shares fewer than min_shared tokens with every other loner
    alone = [i for i in range(len(seqs)) if i not in seen]
    for a in alone:
        for b in alone:
            if a < b:
                assert common_prefix_length(seqs[a], seqs[b]) < min_shared
