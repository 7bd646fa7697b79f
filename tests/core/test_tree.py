import numpy as np
import pytest

from treegrpo.core.tree import Forest

# χ² critical value for 3 degrees of freedom at p = 0.001 (tables; scipy.stats.chi2.ppf(0.999, 3)).
CHI2_3DF_P001 = 16.266


def _example() -> tuple[Forest, dict[str, int]]:
    # prompt 7, tree 0:  root ─┬─ a ─┬─ b ─ c (leaf)
    #                          │     └─ d (leaf)       an expansion from a
    #                          └─ e ─── f (leaf)       an expansion from the root
    # prompt 8, tree 1:  root2 ── g (leaf)
    f = Forest()
    root = f.add_tree(7, payload=100)
    a, b, c = f.add_chain(root, [0, 1, 2])
    d = f.add_node(a, payload=3, leaf=True)
    e, g_ = f.add_chain(root, [4, 5])
    root2 = f.add_tree(8)
    g = f.add_chain(root2, [6])[0]
    return f, {
        "root": root,
        "a": a,
        "b": b,
        "c": c,
        "d": d,
        "e": e,
        "f": g_,
        "root2": root2,
        "g": g,
    }


def test_flat_arrays() -> None:
    f, n = _example()
    assert f.n_nodes == 9 and f.n_trees == 2
    assert f.parent.tolist() == [-1, 0, 1, 2, 1, 0, 5, -1, 7]
    assert f.depth.tolist() == [0, 1, 2, 3, 2, 1, 2, 0, 1]
    assert f.prompt_id.tolist() == [7] * 7 + [8, 8]
    assert f.tree_id.tolist() == [0] * 7 + [1, 1]
    assert f.is_leaf.tolist() == [False, False, False, True, True, False, True, False, True]
    assert f.payload.tolist() == [100, 0, 1, 2, 3, 4, 5, -1, 6]
    assert f.roots.tolist() == [n["root"], n["root2"]]
    with pytest.raises(ValueError):
        f.parent[0] = 5  # snapshots are read-only


def test_paths_and_descendants() -> None:
    f, n = _example()
    assert f.path(n["c"]).tolist() == [n["a"], n["b"], n["c"]]
    assert f.path(n["d"], include_root=True).tolist() == [n["root"], n["a"], n["d"]]
    assert f.descendant_leaves(n["a"]).tolist() == [n["c"], n["d"]]
    assert f.descendant_leaves(n["root"]).tolist() == [n["c"], n["d"], n["f"]]
    assert f.descendant_leaves(n["d"]).tolist() == [n["d"]]
    assert f.leaves().tolist() == [n["c"], n["d"], n["f"], n["g"]]
    assert f.leaves(1).tolist() == [n["g"]]
    prompts, trees = f.leaf_groups(f.leaves())
    assert prompts.tolist() == [7, 7, 7, 8] and trees.tolist() == [0, 0, 0, 1]


def test_expansion_candidates_are_root_and_non_leaf_steps() -> None:
    f, n = _example()
    assert f.expansion_candidates(0).tolist() == [n["root"], n["a"], n["b"], n["e"]]
    assert f.expansion_candidates(1).tolist() == [n["root2"]]


def test_choose_expansions_shape_no_leaves_and_reproducible() -> None:
    f, _ = _example()
    picks = f.choose_expansions(50, np.random.default_rng(3))
    assert picks.shape == (2, 50)
    assert not f.is_leaf[picks].any()
    assert (f.tree_id[picks] == np.array([[0], [1]])).all()
    again = f.choose_expansions(50, np.random.default_rng(3))
    np.testing.assert_array_equal(picks, again)
    other = f.choose_expansions(50, np.random.default_rng(4))
    assert not np.array_equal(picks, other)
    assert f.choose_expansions(2, np.random.default_rng(0), trees=[1]).shape == (1, 2)


def test_choose_expansions_is_uniform() -> None:
    """χ² goodness of fit over the 4 candidates of tree 0 (root, a, b, e), 40,000 draws.

    A sampler that skipped the root, or weighted by depth, gives χ² in the hundreds."""
    f, _n = _example()
    picks = f.choose_expansions(40_000, np.random.default_rng(12345), trees=[0])[0]
    cand = f.expansion_candidates(0)
    counts = np.array([(picks == c).sum() for c in cand])
    assert counts.sum() == 40_000  # nothing outside the candidates
    expected = 40_000 / len(cand)
    chi2 = ((counts - expected) ** 2 / expected).sum()
    assert chi2 < CHI2_3DF_P001, f"counts {counts.tolist()} are not uniform (χ² = {chi2:.1f})"


def test_sample_leaves() -> None:
    f = Forest()
    for prompt in range(2):
        root = f.add_tree(prompt)
        for _ in range(5):
            f.add_node(root, leaf=True)
    rng = np.random.default_rng(0)
    kept = f.sample_leaves(2, rng)
    assert len(kept) == 4 and f.is_leaf[kept].all()
    assert np.bincount(f.tree_id[kept]).tolist() == [2, 2]
    assert np.array_equal(kept, np.sort(kept))
    assert f.sample_leaves(None, rng).tolist() == f.leaves().tolist()
    assert f.sample_leaves(9, rng).tolist() == f.leaves().tolist()
    np.testing.assert_array_equal(
        f.sample_leaves(2, np.random.default_rng(5)), f.sample_leaves(2, np.random.default_rng(5))
    )
    # Every leaf is equally likely to be kept: 3,000 draws of 2 out of 5 → 1,200 each.
    hits = np.zeros(f.n_nodes)
    draw = np.random.default_rng(1)
    for _ in range(3000):
        hits[f.sample_leaves(2, draw)] += 1
    leaf_hits = hits[f.leaves()]
    assert np.all(np.abs(leaf_hits - 1200) < 120), leaf_hits
    with pytest.raises(ValueError, match="k must be"):
        f.sample_leaves(0, rng)


def test_growth_errors_say_what_is_wrong() -> None:
    f, n = _example()
    with pytest.raises(ValueError, match="is a leaf"):
        f.add_node(n["c"])
    with pytest.raises(IndexError, match="does not exist"):
        f.add_node(99)
    with pytest.raises(IndexError, match="tree 5 does not exist"):
        f.expansion_candidates(5)
    with pytest.raises(ValueError, match="at least one step"):
        f.add_chain(n["root"], [])


def test_incremental_growth() -> None:
    f = Forest()
    root = f.add_tree(0)
    step = f.add_node(root, payload=0)
    assert f.expansion_candidates(0).tolist() == [root, step]
    end = f.add_node(step, payload=9, leaf=True)
    assert f.is_leaf.tolist() == [False, False, True] and f.payload[end] == 9
