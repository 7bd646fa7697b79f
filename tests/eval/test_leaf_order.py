"""Evaluation pairs each question with its own episode: leaf ids follow the order in which
episodes ended, so a short episode's leaf comes before a longer one's of an earlier prompt."""

from __future__ import annotations

import pytest

from treegrpo.core.tree import Forest
from treegrpo.eval.evaluate import leaf_per_prompt


def test_leaves_come_back_in_prompt_order() -> None:
    f = Forest()
    r0, r1 = f.add_tree(prompt_id=0), f.add_tree(prompt_id=1)
    step0 = f.add_node(r0)  # prompt 0 searches first …
    leaf1 = f.add_node(r1, leaf=True)  # … while prompt 1 answers at once
    leaf0 = f.add_node(step0, leaf=True)
    assert [int(v) for v in f.leaves()] == [leaf1, leaf0]
    assert leaf_per_prompt(f) == [leaf0, leaf1]


def test_a_prompt_without_its_leaf_is_an_error() -> None:
    f = Forest()
    f.add_node(f.add_tree(prompt_id=0), leaf=True)
    f.add_node(f.add_tree(prompt_id=1))  # unfinished
    f.add_node(f.add_tree(prompt_id=2), leaf=True)
    with pytest.raises(ValueError, match="one leaf per prompt"):
        leaf_per_prompt(f)
