"""Difficulty budgets (core.allocation): hand-computed allocations, the greedy against a brute
force optimum, floor, cap, determinism and input checks."""

import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from treegrpo.core.allocation import allocate, mixed_probability


def test_an_all_right_prompt_gets_fewer_than_an_uncertain_one() -> None:
    """Prompt 0: four trees, each one success; prompt 1: two successes, two failures. N = 2.

    μ0 = (6 + 1) / (8 + 2) = 0.7, κ = 2.
    Prompt 0: α = 1.4 + 4 = 5.4, β = 0.6: gains per tree 0.6/6 = 0.100, then
              (5.4/6)(0.6/7) = 0.077.
    Prompt 1: α = 1.4 + 2 = 3.4, β = 0.6 + 2 = 2.6:
      success trees (a, b) = (3.4, 2.6): 0.433, 0.211, 0.116, then 0.069;
      failure trees (a, b) = (2.6, 3.4): 0.567, 0.211, 0.095, then 0.048.
    The 16 largest gains: 2×0.567, 2×0.433, 4×0.211, 2×0.116, 4×0.100, 2×0.095, so prompt 0's
    trees get 1 each and prompt 1's trees 3 each (the next gain, 0.077, is not taken).
    """
    successes = [1, 1, 1, 1, 1, 1, 0, 0]
    counts = allocate(successes, [1] * 8, [0, 0, 0, 0, 1, 1, 1, 1], 16)
    assert counts.tolist() == [1, 1, 1, 1, 3, 3, 3, 3]
    assert counts.dtype == np.int64


def test_a_mixed_tree_gets_nothing_while_others_gain() -> None:
    # tree 0 is mixed already (one success of two leaves), tree 1 all right
    assert allocate([1, 1], [2, 1], [0, 0], 3).tolist() == [0, 3]
    # what the capped tree cannot take goes round-robin to the trees with room
    assert allocate([1, 1, 1], [2, 2, 1], [0, 1, 2], 7, cap=3).tolist() == [2, 2, 3]


def test_all_mixed_trees_share_round_robin_in_tree_order() -> None:
    assert allocate([1, 1, 1], [2, 2, 2], [0, 1, 2], 7).tolist() == [3, 2, 2]
    assert allocate([1, 1, 1], [2, 2, 2], [0, 1, 2], 7, floor=1).tolist() == [3, 2, 2]


def test_ties_go_to_the_lowest_tree_id() -> None:
    # two identical trees of one prompt: exactly equal gains
    assert allocate([1, 1], [1, 1], [5, 5], 1).tolist() == [1, 0]
    assert allocate([1, 1], [1, 1], [5, 5], 3).tolist() == [2, 1]


def test_prompt_ids_are_labels() -> None:
    a = allocate([1, 0, 1, 1], [1, 1, 1, 2], [9, 9, -3, 9], 8)
    b = allocate([1, 0, 1, 1], [1, 1, 1, 2], [1, 1, 0, 1], 8)
    np.testing.assert_array_equal(a, b)


def test_mixed_probability_by_hand() -> None:
    """One tree, one success, alone in the batch: μ0 = 2/3, α = 4/3 + 1 = 7/3, β = 2/3;
    q(1) = 1 − α/(α+β) = 2/9, q(2) = 1 − (7/9)(10/12) = 38/108."""
    q = [mixed_probability([1], [1], [0], [k])[0] for k in (0, 1, 2)]
    assert q == pytest.approx([0.0, 2 / 9, 38 / 108])
    # failures are the mirror image; a mixed tree stays mixed
    assert mixed_probability([0, 1], [1, 3], [0, 1], [2, 0]).tolist()[1] == 1.0


@st.composite
def batches(draw: st.DrawFn) -> tuple[list[int], list[int], list[int], int, int, int]:
    n_trees = draw(st.integers(1, 4))
    scored = draw(st.lists(st.integers(1, 3), min_size=n_trees, max_size=n_trees))
    successes = [draw(st.integers(0, s)) for s in scored]
    prompts = draw(st.lists(st.integers(0, 2), min_size=n_trees, max_size=n_trees))
    floor = draw(st.integers(0, 1))
    cap = draw(st.integers(max(floor, 1), 4))
    total = draw(st.integers(floor * n_trees, min(cap * n_trees, 7)))
    return successes, scored, prompts, total, floor, cap


@settings(max_examples=150, deadline=None)
@given(batches())
def test_greedy_is_a_brute_force_optimum_within_floor_and_cap(
    batch: tuple[list[int], list[int], list[int], int, int, int],
) -> None:
    successes, scored, prompts, total, floor, cap = batch
    counts = allocate(successes, scored, prompts, total, floor=floor, cap=cap)
    assert counts.sum() == total
    assert ((floor <= counts) & (counts <= cap)).all()

    def value(ks: tuple[int, ...] | np.ndarray) -> float:
        return float(mixed_probability(successes, scored, prompts, list(ks)).sum())

    best = max(
        value(ks)
        for ks in itertools.product(range(floor, cap + 1), repeat=len(scored))
        if sum(ks) == total
    )
    assert math.isclose(value(counts), best, rel_tol=1e-12, abs_tol=1e-12)
    again = allocate(successes, scored, prompts, total, floor=floor, cap=cap)
    np.testing.assert_array_equal(again, counts)


@settings(max_examples=100, deadline=None)
@given(
    st.lists(st.tuples(st.integers(1, 6), st.integers(0, 6)), min_size=1, max_size=12),
    st.integers(1, 5),
)
def test_the_counts_sum_to_the_round_per_tree_share(trees: list[tuple[int, int]], n: int) -> None:
    scored = [s for s, _ in trees]
    successes = [min(w, s) for s, w in trees]
    prompts = [t // 2 for t in range(len(trees))]
    counts = allocate(successes, scored, prompts, n * len(trees), cap=4 * n)
    assert counts.sum() == n * len(trees) and counts.max() <= 4 * n and counts.min() >= 0


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"scored": [0, 1]}, "at least one scored leaf"),
        ({"successes": [2, 0]}, r"in \[0, scored\]"),
        ({"prompt_of_tree": [0]}, "one shape"),
        ({"successes": [0.5, 1.0]}, "integer array"),
        ({"total": -1}, "total must be >= 0"),
        ({"total": 9, "cap": 4}, "cannot be split"),
        ({"total": 1, "floor": 1}, "cannot be split"),
        ({"cap": 0, "floor": 1}, "cap must be >= floor"),
        ({"floor": -1}, "floor must be >= 0"),
        ({"prior_strength": 0.0}, "prior_strength must be > 0"),
    ],
)
def test_bad_inputs_are_refused_clearly(kwargs: dict[str, object], match: str) -> None:
    args: dict[str, object] = {
        "successes": [1, 0],
        "scored": [1, 1],
        "prompt_of_tree": [0, 0],
        "total": 4,
    }
    args.update(kwargs)
    with pytest.raises(ValueError, match=match):
        allocate(**args)  # type: ignore[arg-type]


def test_an_empty_batch_gets_an_empty_allocation() -> None:
    assert allocate([], [], [], 0).tolist() == []
