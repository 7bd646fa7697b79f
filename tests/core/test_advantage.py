import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from treegrpo.core.advantage import (
    EPS,
    group_relative,
    node_advantage,
    token_advantages,
    tree_advantage,
)
from treegrpo.core.tree import Forest


def test_two_tree_example_by_hand() -> None:
    """One prompt, two trees; leaf rewards tree 0 = [1, 0, 1], tree 1 = [0, 0].

    Intra, tree 0: mean 2/3, deviations (1/3, -2/3, 1/3), unbiased variance
    (1/9 + 4/9 + 1/9) / 2 = 1/3, std √(1/3) ≈ 0.57735, so Â = (0.57735, -1.15470, 0.57735).
    Intra, tree 1: mean 0, std 0, so Â = 0 / (0 + ε) = (0, 0).
    Inter (all five): mean 0.4, deviations (0.6, -0.4, 0.6, -0.4, -0.4), variance 1.2 / 4 = 0.3,
    std ≈ 0.547723, so Â = (1.095445, -0.730297, 1.095445, -0.730297, -0.730297).
    Sum: (1.672795, -1.884997, 1.672795, -0.730297, -0.730297).
    """
    rewards = np.array([1.0, 0.0, 1.0, 0.0, 0.0])
    prompts = np.zeros(5, dtype=np.int64)
    trees = np.array([0, 0, 0, 1, 1])
    s_intra = math.sqrt(1 / 3)
    intra = [
        (1 / 3) / (s_intra + EPS),
        (-2 / 3) / (s_intra + EPS),
        (1 / 3) / (s_intra + EPS),
        0.0,
        0.0,
    ]
    s_inter = math.sqrt(0.3)
    inter = [
        0.6 / (s_inter + EPS),
        -0.4 / (s_inter + EPS),
        0.6 / (s_inter + EPS),
        -0.4 / (s_inter + EPS),
        -0.4 / (s_inter + EPS),
    ]
    np.testing.assert_allclose(
        tree_advantage(rewards, prompts, trees, "intra"), intra, rtol=0, atol=1e-12
    )
    np.testing.assert_allclose(
        tree_advantage(rewards, prompts, trees, "inter"), inter, rtol=0, atol=1e-12
    )
    both = tree_advantage(rewards, prompts, trees)
    np.testing.assert_allclose(both, np.add(intra, inter), rtol=0, atol=1e-12)
    np.testing.assert_allclose(
        both, [1.672795, -1.884997, 1.672795, -0.730297, -0.730297], atol=1e-5
    )
    assert both.dtype == np.float64


def test_group_of_one_keeps_raw_reward() -> None:
    adv = group_relative([0.7, 0.2, 0.4], [0, 1, 1])
    assert adv[0] == pytest.approx(0.7 / (1 + EPS), abs=1e-15)


def test_equal_rewards_score_exactly_zero() -> None:
    # Search-R1's format-only rewards: three leaves of 0.1 have a mean that rounds (0.1 + 0.1 +
    # 0.1) / 3 != 0.1, and dividing by std + ε = 1e-6 would turn that into -1.4e-11
    rewards = [0.1, 0.1, 0.1, 0.2, 0.2, 0.8, 0.8, 0.8, 0.8, 0.8, 0.8, 0.8, 1.0, 0.0]
    groups = [0, 0, 0, 1, 1, 2, 2, 2, 2, 2, 2, 2, 3, 3]
    for scale in (True, False):
        adv = group_relative(rewards, groups, scale=scale)
        assert (adv[:12] == 0.0).all(), adv
        assert adv[12] > 0 > adv[13]  # a group with a winner and a loser is untouched
    # and so every leaf of a prompt whose leaves all scored alike: skip_uniform_prompts sees it
    adv = tree_advantage([0.2] * 5, [0] * 5, [0, 0, 1, 1, 1])
    assert (adv == 0.0).all()


def test_unscaled_is_mean_centering() -> None:
    adv = group_relative([1.0, 0.0, 0.5, 3.0], [0, 0, 0, 1], scale=False)
    np.testing.assert_allclose(adv, [0.5, -0.5, 0.0, 3.0])


def _loop_reference(rewards: list[float], groups: list[int]) -> list[float]:
    """Straight transcription of the authors' per-group loop."""
    by_group: dict[int, list[float]] = {}
    for r, g in zip(rewards, groups, strict=True):
        by_group.setdefault(g, []).append(r)
    stats = {}
    for g, rs in by_group.items():
        if len(rs) == 1:
            stats[g] = (0.0, 1.0)
        else:
            m = sum(rs) / len(rs)
            stats[g] = (m, math.sqrt(sum((x - m) ** 2 for x in rs) / (len(rs) - 1)))
    return [(r - stats[g][0]) / (stats[g][1] + EPS) for r, g in zip(rewards, groups, strict=True)]


leaf_sets = st.integers(1, 40).flatmap(
    lambda n: st.tuples(
        st.lists(st.floats(-5, 5, allow_nan=False), min_size=n, max_size=n),
        st.lists(st.integers(0, 3), min_size=n, max_size=n),
        st.lists(st.integers(0, 2), min_size=n, max_size=n),
    )
)


@settings(max_examples=200, deadline=None)
@given(leaf_sets)
def test_vectorized_equals_loop_reference(case: tuple[list[float], list[int], list[int]]) -> None:
    rewards, prompts, trees = case
    pair = [p * 10 + t for p, t in zip(prompts, trees, strict=True)]
    expected = np.add(_loop_reference(rewards, pair), _loop_reference(rewards, prompts))
    got = tree_advantage(rewards, prompts, trees)
    np.testing.assert_allclose(got, expected, rtol=1e-9, atol=1e-6)


@pytest.mark.slow
@settings(max_examples=200, deadline=None)
@given(leaf_sets)
def test_intra_advantages_sum_to_zero_within_each_tree(
    case: tuple[list[float], list[int], list[int]],
) -> None:
    rewards, prompts, trees = case
    adv = tree_advantage(rewards, prompts, trees, mode="intra")
    r, p, t = np.array(rewards), np.array(prompts), np.array(trees)
    for key in set(zip(prompts, trees, strict=True)):
        sel = (p == key[0]) & (t == key[1])
        if sel.sum() >= 2:
            # Σ (R − mean) = 0 exactly; what is left is the mean's rounding (a few ulps per
            # leaf), divided by std + ε, which is large only for nearly equal rewards
            scale = np.abs(adv[sel]).sum() + 1.0
            ulps = 4 * sel.sum() * np.spacing(np.abs(r[sel]).max()) / (r[sel].std(ddof=1) + EPS)
            assert abs(adv[sel].sum()) <= 1e-9 * scale + ulps
        else:
            assert adv[sel][0] == pytest.approx(r[sel][0] / (1 + EPS))


@settings(max_examples=100, deadline=None)
@given(leaf_sets)
def test_independent_of_leaf_order_and_id_labels(
    case: tuple[list[float], list[int], list[int]],
) -> None:
    rewards, prompts, trees = (np.array(x) for x in case)
    base = tree_advantage(rewards, prompts, trees)
    perm = np.random.default_rng(len(rewards)).permutation(len(rewards))
    np.testing.assert_allclose(
        tree_advantage(rewards[perm], prompts[perm], trees[perm]),
        base[perm],
        rtol=1e-12,
        atol=1e-12,
    )
    # Relabel prompts and trees with other integers (a bijection): nothing changes.
    np.testing.assert_allclose(
        tree_advantage(rewards, 100 - 7 * prompts, trees + 50), base, rtol=1e-12, atol=1e-12
    )


def test_chain_forest_gives_chain_grpo() -> None:
    """L = 0: M chains per prompt, each its own tree. Mode "inter" is exactly chain GRPO."""
    rng = np.random.default_rng(0)
    forest = Forest()
    for prompt in range(3):
        for _ in range(4):
            forest.add_chain(forest.add_tree(prompt), [-1] * int(rng.integers(1, 4)))
    leaves = forest.leaves()
    prompts, trees = forest.leaf_groups(leaves)
    rewards = rng.random(len(leaves))
    expected = np.concatenate(
        [(r - r.mean()) / (r.std(ddof=1) + EPS) for r in np.split(rewards, 3)]
    )
    np.testing.assert_allclose(
        tree_advantage(rewards, prompts, trees, mode="inter"), expected, rtol=1e-12
    )
    # Each chain is a group of one, so "intra" is the raw reward and the sum is not chain GRPO:
    # chain runs must use mode "inter".
    np.testing.assert_allclose(
        tree_advantage(rewards, prompts, trees, mode="intra"), rewards / (1 + EPS)
    )


def test_tree_ids_are_scoped_to_their_prompt() -> None:
    # Tree 0 of prompt 0 and tree 0 of prompt 1 are different trees.
    adv = tree_advantage([1.0, 0.0, 1.0, 1.0], [0, 0, 1, 1], [0, 0, 0, 0], mode="intra")
    np.testing.assert_allclose(adv[2:], 0.0)
    assert adv[0] > 0 > adv[1]


def test_batch_term_gives_an_all_wrong_prompt_a_negative_advantage() -> None:
    """Prompt 0 has rewards [1, 0], prompt 1 [0, 0]: chain GRPO gives prompt 1 nothing; the
    batch term adds w·(R − 0.25) / std([1, 0, 0, 0]) to every leaf."""
    rewards, prompts, trees = [1.0, 0.0, 0.0, 0.0], [0, 0, 1, 1], [0, 1, 2, 3]
    plain = tree_advantage(rewards, prompts, trees, mode="inter")
    np.testing.assert_allclose(plain[2:], 0.0)
    std = np.std(rewards, ddof=1)  # 0.5
    for w in (0.5, 1.0):
        adv = tree_advantage(rewards, prompts, trees, mode="inter", batch=w)
        expected = plain + w * (np.array(rewards) - 0.25) / (std + EPS)
        np.testing.assert_allclose(adv, expected, rtol=1e-12)
        assert adv[2] == adv[3] < 0
    unscaled = tree_advantage(rewards, prompts, trees, mode="inter", batch=1.0, scale=False)
    np.testing.assert_allclose(unscaled[2:], -0.25)
    with pytest.raises(ValueError, match="batch weight"):
        tree_advantage(rewards, prompts, trees, batch=-1.0)


def test_bad_input_is_rejected_with_a_reason() -> None:
    with pytest.raises(ValueError, match="unknown advantage mode"):
        tree_advantage([1.0], [0], [0], mode="both")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="finite"):
        tree_advantage([1.0, float("nan")], [0, 0], [0, 0])
    with pytest.raises(ValueError, match="prompt_ids has shape"):
        tree_advantage([1.0, 0.0], [0], [0, 0])
    with pytest.raises(ValueError, match="integers"):
        tree_advantage([1.0], [0.5], [0])
    assert tree_advantage([], np.array([], dtype=int), np.array([], dtype=int)).shape == (0,)


def test_token_advantages_cover_action_tokens_only() -> None:
    mask = np.array([[0, 1, 1, 0, 1], [0, 0, 1, 1, 0]])
    out = token_advantages([2.0, -1.0], mask)
    np.testing.assert_array_equal(out, [[0, 2, 2, 0, 2], [0, 0, -1, -1, 0]])
    with pytest.raises(ValueError, match="action_mask"):
        token_advantages([1.0], mask)


def test_node_advantage_by_hand() -> None:
    # root ─┬─ a ─┬─ b (leaf, Â = 1)       a:    sum -1,   mean -0.5,  2 leaves
    #       │     └─ c (leaf, Â = -2)      root: sum -0.5, mean -1/6,  3 leaves
    #       └─ d ─── e (leaf, Â = 0.5)     d:    sum 0.5,  mean 0.5,   1 leaf
    f = Forest()
    root = f.add_tree(0)
    a = f.add_node(root)
    b = f.add_node(a, leaf=True)
    c = f.add_node(a, leaf=True)
    d = f.add_node(root)
    e = f.add_node(d, leaf=True)
    total, mean, count = node_advantage(f.parent, [b, c, e], [1.0, -2.0, 0.5])
    np.testing.assert_allclose(total[[root, a, b, c, d, e]], [-0.5, -1.0, 1.0, -2.0, 0.5, 0.5])
    np.testing.assert_allclose(mean[[root, a, d]], [-0.5 / 3, -0.5, 0.5])
    assert count.tolist() == [3, 2, 1, 1, 1, 1]


def test_node_advantage_shared_step_gets_zero_intra_signal() -> None:
    f = Forest()
    root = f.add_tree(0)
    shared = f.add_node(root)
    left = f.add_chain(shared, [-1, -1])[-1]
    right = f.add_node(shared, leaf=True)
    other = f.add_node(f.children(shared)[0], leaf=True)
    leaves = np.array([left, right, other])
    adv = tree_advantage([1.0, 0.0, 0.0], [0, 0, 0], [0, 0, 0], mode="intra")
    total, _mean, _ = node_advantage(f.parent, leaves, adv)
    assert abs(total[shared]) < 1e-9 and abs(total[root]) < 1e-9
    first = f.children(shared)[0]
    # Below the branch point the two sides get opposite signals.
    assert total[first] * total[right] < 0
    assert np.isnan(node_advantage(f.parent, leaves[:1], adv[:1])[1][right])


def test_node_advantage_rejects_cycles() -> None:
    with pytest.raises(ValueError, match="cycle"):
        node_advantage([1, 0], [0], [1.0])
