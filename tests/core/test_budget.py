import numpy as np
import pytest

from treegrpo.core.budget import (
    CHAIN_LADDER,
    TREE_LADDER,
    SpendAccountant,
    TreeShape,
    expected_cost,
    expected_cost_l1,
)
from treegrpo.core.tree import Forest


def test_paper_ladder() -> None:
    shapes = {b: (s.m, s.n, s.l) for b, s in TREE_LADDER.items()}
    assert shapes == {2: (1, 2, 1), 4: (2, 2, 1), 8: (2, 6, 1), 16: (4, 5, 1)}
    assert [expected_cost(*v) for v in shapes.values()] == [2.0, 4.0, 8.0, 14.0]
    assert {b: s.m for b, s in CHAIN_LADDER.items()} == {2: 2, 4: 4, 8: 8, 16: 16}
    assert all(s.is_chain for s in CHAIN_LADDER.values())
    assert [s.leaves_per_prompt for s in TREE_LADDER.values()] == [3, 6, 14, 24]


def test_tree_shape_validation() -> None:
    assert TreeShape(2, 2, 1, k=3).leaves_per_prompt == 6
    for bad in ({"m": 0}, {"m": 1, "n": 2}, {"m": 1, "n": 2, "l": 1, "k": 4}, {"m": 1, "n": -1}):
        with pytest.raises(ValueError):
            TreeShape(**bad)  # type: ignore[arg-type]


def _simulated_cost(m: int, n: int, depth: int, trials: int, seed: int) -> float:
    """Monte Carlo of one expansion round on chains of ``depth`` equal steps, built with the
    real Forest and its expansion sampler."""
    rng = np.random.default_rng(seed)
    total = 0.0
    for _ in range(trials):
        f = Forest()
        for _ in range(m):
            f.add_chain(f.add_tree(0), [-1] * depth)
        picks = f.choose_expansions(n, rng)
        total += m + ((depth - f.depth[picks]) / depth).sum()
    return total / trials


@pytest.mark.parametrize(("m", "n", "depth"), [(2, 2, 2), (2, 2, 3), (1, 2, 4), (4, 5, 3)])
def test_exact_l1_cost_matches_simulation(m: int, n: int, depth: int) -> None:
    sim = _simulated_cost(m, n, depth, trials=3000, seed=m * 100 + depth)
    assert sim == pytest.approx(expected_cost_l1(m, n, depth), rel=0.02)


def test_exact_cost_on_short_chains_exceeds_paper_formula() -> None:
    # The (2,2,1) tree costs 4.5–5 chain-equivalents on 2–4 step chains (docs/algorithm.md §2).
    assert expected_cost_l1(2, 2, 2) == pytest.approx(5.0)
    assert expected_cost_l1(2, 2, 4) == pytest.approx(4.5)
    assert expected_cost_l1(2, 2, 10_000) == pytest.approx(expected_cost(2, 2, 1), rel=1e-3)
    with pytest.raises(ValueError):
        expected_cost_l1(1, 1, 0)


def test_accountant() -> None:
    acc = SpendAccountant()
    acc.add(0, generated=100, processed=150, tool_calls=2, leaves=1)
    acc.add(0, generated=50, processed=60, tool_calls=1, leaves=1)
    acc.add(1, generated=30, processed=30, leaves=1)
    assert acc.by_prompt[0].generated == 150 and acc.by_prompt[0].tool_calls == 3
    t = acc.total()
    assert (t.generated, t.processed, t.tool_calls, t.leaves) == (180, 240, 3, 3)
    with pytest.raises(ValueError):
        acc.add(0, generated=-1)
