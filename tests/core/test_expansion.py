import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from treegrpo.core.budget import TreeShape
from treegrpo.core.expansion import (
    RULES,
    Expansion,
    NodeStats,
    branch_surprise,
    choose,
    surprise,
)
from treegrpo.core.tree import Forest

NAN = float("nan")


def _example() -> tuple[Forest, dict[str, int]]:
    # prompt 0, tree 0:  r0 ─┬─ a ─┬─ b ─ c (leaf)
    #                        │     └─ d (leaf)      an expansion from a
    #                        └─ e ─── f (leaf)      an expansion from the root
    # prompt 0, tree 1:  r1 ── g ── h (leaf)
    # prompt 1, tree 2:  r2 ── i (leaf)              (the root is its only candidate)
    f = Forest()
    r0 = f.add_tree(0)
    a, b, c = f.add_chain(r0, [0, 1, 2])
    d = f.add_node(a, leaf=True)
    e, f_ = f.add_chain(r0, [3, 4])
    r1 = f.add_tree(0)
    g, h = f.add_chain(r1, [5, 6])
    r2 = f.add_tree(1)
    (i,) = f.add_chain(r2, [7])
    names = ["r0", "a", "b", "c", "d", "e", "f", "r1", "g", "h", "r2", "i"]
    ids = [r0, a, b, c, d, e, f_, r1, g, h, r2, i]
    return f, dict(zip(names, ids, strict=True))


def _logprobs(f: Forest, by_node: dict[int, list[float]]) -> list[list[float]]:
    return [by_node.get(v, [-1.0]) if f.parent[v] >= 0 else [] for v in range(f.n_nodes)]


def _rewards(f: Forest, by_leaf: dict[int, float]) -> np.ndarray:
    out = np.full(f.n_nodes, NAN)
    for v, r in by_leaf.items():
        out[v] = r
    return out


def _rngs(f: Forest, seed: int) -> list[np.random.Generator]:
    return [np.random.default_rng([seed, t]) for t in range(f.n_trees)]


@st.composite
def forests(draw: st.DrawFn) -> tuple[Forest, NodeStats]:
    """Random forests grown like the sampler's: chains, then branches from non-leaf nodes."""
    f = Forest()
    for t in range(draw(st.integers(1, 4))):
        root = f.add_tree(draw(st.integers(0, 2)))
        f.add_chain(root, [0] * draw(st.integers(1, 4)))
        for _ in range(draw(st.integers(0, 3))):
            cand = f.expansion_candidates(t).tolist()
            node = cand[draw(st.integers(0, len(cand) - 1))]
            f.add_chain(node, [0] * draw(st.integers(1, 3)))
    floats = st.floats(-6.0, 0.0, allow_nan=False)
    logprobs = [
        draw(st.lists(floats, max_size=12)) if f.parent[v] >= 0 else [] for v in range(f.n_nodes)
    ]
    rewards = np.full(f.n_nodes, NAN)
    for leaf in f.leaves().tolist():
        rewards[leaf] = draw(st.sampled_from([0.0, 0.2, 1.0, NAN]))
    return f, NodeStats(logprobs, rewards)


@settings(max_examples=60, deadline=None)
@given(forests(), st.sampled_from(RULES), st.integers(0, 5), st.integers(0, 2**32 - 1))
def test_picks_are_candidates_and_deterministic(
    fs: tuple[Forest, NodeStats], rule: str, n: int, seed: int
) -> None:
    f, stats = fs
    picks = choose(rule, f, n, _rngs(f, seed), stats)
    assert picks.nodes.shape == (f.n_trees, n)
    assert len(picks.reasons) == f.n_trees and all(len(r) == n for r in picks.reasons)
    for t, row in enumerate(picks.nodes.tolist()):
        assert set(row) <= set(f.expansion_candidates(t).tolist())  # never a leaf, own tree
    again = choose(rule, f, n, _rngs(f, seed), stats)
    np.testing.assert_array_equal(picks.nodes, again.nodes)
    assert picks.reasons == again.reasons


@settings(max_examples=60, deadline=None)
@given(forests(), st.integers(0, 6), st.integers(0, 2**32 - 1))
def test_uniform_is_exactly_choose_expansions(
    fs: tuple[Forest, NodeStats], n: int, seed: int
) -> None:
    f, _ = fs
    picks = choose("uniform", f, n, _rngs(f, seed))
    np.testing.assert_array_equal(picks.nodes, f.choose_expansions(n, _rngs(f, seed)))
    shared = choose("uniform", f, n, np.random.default_rng(seed))  # one generator, tree by tree
    np.testing.assert_array_equal(shared.nodes, f.choose_expansions(n, np.random.default_rng(seed)))
    assert all(r == "uniform" for row in picks.reasons for r in row)


@settings(max_examples=60, deadline=None)
@given(forests(), st.integers(1, 6), st.integers(0, 2**32 - 1))
def test_no_root_picks_a_root_only_when_nothing_else(
    fs: tuple[Forest, NodeStats], n: int, seed: int
) -> None:
    f, _ = fs
    picks = choose("no-root", f, n, _rngs(f, seed))
    for t, row in enumerate(picks.nodes.tolist()):
        cand = f.expansion_candidates(t)
        if len(cand) > 1:
            assert int(f.roots[t]) not in row
        else:
            assert row == [int(f.roots[t])] * n


def test_no_root_on_the_example() -> None:
    f, v = _example()
    picks = choose("no-root", f, 2000, _rngs(f, 0))
    assert set(picks.nodes[0].tolist()) == {v["a"], v["b"], v["e"]}
    assert set(picks.nodes[1].tolist()) == {v["g"]}
    assert set(picks.nodes[2].tolist()) == {v["r2"]}
    assert picks.reasons[2][0] == "root (no other candidate)"
    assert picks.reasons[0][0] == "uniform (no root)"


def test_surprise_is_the_mean_over_the_first_k_tokens() -> None:
    assert surprise([-1.0, -3.0, -8.0], k=2) == 2.0
    assert surprise([-1.0, -3.0], k=8) == 2.0
    assert surprise([], k=8) == 0.0
    f, v = _example()
    lp = _logprobs(f, {v["a"]: [-2.0, -4.0], v["e"]: [-0.5], v["b"]: [-1.0], v["d"]: [-9.0]})
    s = branch_surprise(f, lp, k=8)
    assert s[v["r0"]] == 3.0  # the root: the first step of its chain (a), not e
    assert s[v["a"]] == 1.0  # a's first child b, not the branch d
    assert s[v["e"]] == 1.0  # f's default [-1.0]
    assert s[v["c"]] == 0.0  # no step follows a leaf


def test_entropy_with_a_cold_temperature_picks_the_most_surprising_node() -> None:
    f, v = _example()
    # following steps: r0 → a (3.0), a → b (1.0), b → c (5.0), e → f (0.5)
    lp = _logprobs(f, {v["a"]: [-3.0], v["b"]: [-1.0], v["c"]: [-5.0], v["f"]: [-0.5]})
    picks = choose("entropy", f, 4, _rngs(f, 1), NodeStats(lp), temperature=1e-6)
    assert picks.nodes[0].tolist() == [v["b"]] * 4
    assert picks.reasons[0][0] == "entropy 5.00 (rank 1)"
    assert picks.nodes[2].tolist() == [v["r2"]] * 4  # the only candidate


def test_entropy_probabilities_match_the_formula() -> None:
    """One pick, no repeats: p(v) ∝ exp(s_v / τ), with ρ^(r_v + h_v) for the root's earlier
    expansion (r = 1: it has two children) and for a and e, whose parent (the root) was
    expanded and is high-entropy (s = 3.0 ≥ mean)."""
    f, v = _example()
    lp = _logprobs(f, {v["a"]: [-3.0], v["b"]: [-1.0], v["c"]: [-2.0], v["f"]: [-0.5]})
    tau, rho = 2.0, 0.5
    s = {v["r0"]: 3.0, v["a"]: 1.0, v["b"]: 2.0, v["e"]: 0.5}
    # a: parent r0 expanded + high → h = 1; a was itself expanded (d) → r = 1; b: parent a
    # expanded but s_a = 1.0 < mean 1.625 → h = 0; e: parent r0 → h = 1
    penalty = {v["r0"]: 1, v["a"]: 2, v["b"]: 0, v["e"]: 1}
    w = {u: math.exp(s[u] / tau) * rho ** penalty[u] for u in s}
    total = sum(w.values())
    draws = 4000
    counts = {u: 0 for u in s}
    rng = np.random.default_rng(11)  # shared by the trees, drawing tree by tree
    for _ in range(draws):
        row = choose("entropy", f, 1, rng, NodeStats(lp), temperature=tau, repeat_penalty=rho)
        counts[int(row.nodes[0, 0])] += 1
    for u in s:
        expect = w[u] / total * draws
        assert abs(counts[u] - expect) < 5 * math.sqrt(expect) + 5, (u, counts, expect)


def test_entropy_with_a_hot_temperature_approaches_uniform() -> None:
    f, v = _example()
    lp = _logprobs(f, {v["a"]: [-3.0], v["b"]: [-1.0], v["c"]: [-5.0], v["f"]: [-0.5]})
    picks = choose(
        "entropy", f, 8000, _rngs(f, 2), NodeStats(lp), temperature=1e9, repeat_penalty=1.0
    )
    counts = np.array([(picks.nodes[0] == c).sum() for c in f.expansion_candidates(0)])
    assert np.all(np.abs(counts - 2000) < 250), counts


def test_the_repeat_penalty_lowers_repeats() -> None:
    """On a fresh chain with equal surprise everywhere, the share of picks that repeat a node
    already picked in the tree falls with the penalty."""
    f = Forest()
    for _ in range(200):
        f.add_chain(f.add_tree(0), [0] * 4)  # candidates: root + 3 steps
    lp = [[] if f.parent[v] < 0 else [-1.0] for v in range(f.n_nodes)]

    def repeat_share(rho: float) -> float:
        picks = choose("entropy", f, 3, _rngs(f, 3), NodeStats(lp), repeat_penalty=rho)
        return float(np.mean([3 - len(set(row)) for row in picks.nodes.tolist()]) / 2)

    none, strong = repeat_share(1.0), repeat_share(0.1)
    assert strong < 0.5 * none, (none, strong)


def test_informed_weights_match_the_formula() -> None:
    """Prompt 0 has leaves c, d, f (tree 0) and h (tree 1); rewards 1, 0, 0, 1: S = 2, N = 4,
    μ = 3/6 = 0.5. Candidates of tree 0 with κ = 2, c = 0.25:
      r0: all 4 prompt leaves, p̂ = (1 + 2) / 6 = 0.5 → w = 0.25 + 0.25/√5
      a:  c, d → 1 of 2, p̂ = 0.5 → w = 0.25 + 0.25/√3
      b:  c → 1 of 1, p̂ = 2/3 → w = 2/9 + 0.25/√2
      e:  f → 0 of 1, p̂ = 1/3 → w = 2/9 + 0.25/√2"""
    f, v = _example()
    r = _rewards(f, {v["c"]: 1.0, v["d"]: 0.0, v["f"]: 0.2, v["h"]: 1.0, v["i"]: 0.0})
    w = {
        v["r0"]: 0.25 + 0.25 / math.sqrt(5),
        v["a"]: 0.25 + 0.25 / math.sqrt(3),
        v["b"]: 2 / 9 + 0.25 / math.sqrt(2),
        v["e"]: 2 / 9 + 0.25 / math.sqrt(2),
    }
    total = sum(w.values())
    picks = choose("informed", f, 40_000, _rngs(f, 4), NodeStats(rewards=r))
    for u, wu in w.items():
        share = float((picks.nodes[0] == u).mean())
        assert abs(share - wu / total) < 0.01, (u, share, wu / total)
    reason = dict(zip(picks.nodes[0].tolist(), picks.reasons[0], strict=True))
    assert reason[v["a"]] == "p̂=0.50 from 2 leaves"
    assert reason[v["b"]] == "p̂=0.67 from 1 leaf"
    assert reason[v["r0"]] == "p̂=0.50 from 4 leaves"


def test_informed_prefers_mixed_over_settled_nodes() -> None:
    """Two nodes with the same evidence (2 leaves each): one split 1:1, one all right (then all
    wrong). Prompt rate μ = 4/6 (then 2/6); without the bonus, w = p̂(1 − p̂) with
    p̂_mixed = (2μ + 1)/4 = 7/12 (5/12) and p̂_settled = (2μ + 2)/4 = 5/6 (then 2μ/4 = 1/6):
    w = 0.243 against 0.139 both times."""
    f = Forest()
    root = f.add_tree(0)
    (x,) = f.add_chain(root, [0], leaf_last=False)
    mixed = f.add_node(x)
    settled = f.add_node(x)
    leaves = [f.add_node(mixed, leaf=True), f.add_node(mixed, leaf=True)]
    leaves += [f.add_node(settled, leaf=True), f.add_node(settled, leaf=True)]
    r = _rewards(f, dict(zip(leaves, [1.0, 0.0, 1.0, 1.0], strict=True)))
    picks = choose("informed", f, 4000, _rngs(f, 5), NodeStats(rewards=r), bonus=0.0)
    assert (picks.nodes == mixed).sum() > 1.5 * (picks.nodes == settled).sum()
    # an all-wrong node is disfavoured the same way
    r = _rewards(f, dict(zip(leaves, [1.0, 0.0, 0.0, 0.0], strict=True)))
    picks = choose("informed", f, 4000, _rngs(f, 5), NodeStats(rewards=r), bonus=0.0)
    assert (picks.nodes == mixed).sum() > 1.5 * (picks.nodes == settled).sum()


def test_informed_gives_an_unexplored_node_the_bonus() -> None:
    """A node whose leaf is unscored gets c/√1, the most a node can get from the bonus; with a
    settled prompt (every scored leaf right) it is picked most."""
    f = Forest()
    root = f.add_tree(0)
    seen_a, seen_b, unseen = (f.add_node(root) for _ in range(3))
    leaves = [f.add_node(seen_a, leaf=True), f.add_node(seen_b, leaf=True)]
    blind = f.add_node(unseen, leaf=True)
    r = _rewards(f, {leaves[0]: 1.0, leaves[1]: 1.0})  # blind stays NaN
    picks = choose("informed", f, 3000, _rngs(f, 6), NodeStats(rewards=r), bonus=1.0)
    counts = {u: int((picks.nodes == u).sum()) for u in (root, seen_a, seen_b, unseen)}
    assert counts[unseen] == max(counts.values()), counts
    assert blind not in picks.nodes
    reason = dict(zip(picks.nodes[0].tolist(), picks.reasons[0], strict=True))
    assert reason[unseen] == "unexplored"


def test_informed_pulls_a_settled_prompts_nodes_to_its_rate() -> None:
    """All of prompt 0's leaves wrong: μ = (0 + 1) / (4 + 2) = 1/6, so every node's p̂ is low
    (r0: (2/6) / 6, a: (2/6) / 4, b and e: (2/6) / 3) and p̂(1 − p̂) far below its 1/4 peak."""
    f, v = _example()
    wrong = _rewards(f, {v["c"]: 0.0, v["d"]: 0.0, v["f"]: 0.0, v["h"]: 0.0, v["i"]: 0.0})
    picks = choose("informed", f, 400, _rngs(f, 8), NodeStats(rewards=wrong))
    reason = dict(zip(picks.nodes[0].tolist(), picks.reasons[0], strict=True))
    assert reason[v["r0"]] == "p̂=0.06 from 4 leaves"
    assert reason[v["a"]] == "p̂=0.08 from 2 leaves"
    assert reason[v["b"]] == reason[v["e"]] == "p̂=0.11 from 1 leaf"


def test_shape_and_argument_errors_say_what_is_wrong() -> None:
    f, _ = _example()
    lp = _logprobs(f, {})
    with pytest.raises(ValueError, match="unknown expansion rule 'best'"):
        choose("best", f, 1, _rngs(f, 0))
    with pytest.raises(ValueError, match="takes no temperature"):
        choose("uniform", f, 1, _rngs(f, 0), temperature=1.0)
    with pytest.raises(ValueError, match="n must be >= 0"):
        choose("no-root", f, -1, _rngs(f, 0))
    with pytest.raises(ValueError, match="2 generators for 3 trees"):
        choose("entropy", f, 1, _rngs(f, 0)[:2], NodeStats(lp))
    with pytest.raises(ValueError, match=r"needs stats\.logprobs"):
        choose("entropy", f, 1, _rngs(f, 0))
    with pytest.raises(ValueError, match="5 entries for 12 nodes"):
        choose("entropy", f, 1, _rngs(f, 0), NodeStats(lp[:5]))
    with pytest.raises(ValueError, match=r"needs stats\.rewards"):
        choose("informed", f, 1, _rngs(f, 0), NodeStats(lp))
    with pytest.raises(ValueError, match=r"shape \(3,\), expected \(12,\)"):
        choose("informed", f, 1, _rngs(f, 0), NodeStats(rewards=np.zeros(3)))
    with pytest.raises(ValueError, match="temperature must be > 0"):
        choose("entropy", f, 1, _rngs(f, 0), NodeStats(lp), temperature=0.0)
    with pytest.raises(ValueError, match="repeat_penalty must be in"):
        choose("entropy", f, 1, _rngs(f, 0), NodeStats(lp), repeat_penalty=0.0)


def test_expansion_spec_checks_and_gives_the_rules_params() -> None:
    assert Expansion().params() == {}
    assert Expansion("entropy", k=4).params() == {
        "k": 4,
        "temperature": 1.0,
        "repeat_penalty": 0.5,
    }
    assert set(Expansion("informed").params()) == {"threshold", "bonus", "prior_strength"}
    assert Expansion("entropy").needs_logprobs and Expansion("informed").needs_rewards
    assert not Expansion().needs_logprobs and not Expansion().needs_rewards
    with pytest.raises(ValueError, match="unknown expansion rule"):
        Expansion("best")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="k must be >= 1"):
        Expansion("entropy", k=0)


def test_a_difficulty_budget_reads_rewards_with_any_rule_and_must_fit_the_round() -> None:
    difficulty = Expansion("uniform", budget="difficulty", floor=1, cap=3)
    assert difficulty.needs_rewards and difficulty.params() == {}  # not the rule's parameters
    assert difficulty.budget_cap(2) == 3 and Expansion(budget="difficulty").budget_cap(2) == 8
    assert TreeShape(2, 2, 1, expansion=difficulty).expansion is difficulty
    with pytest.raises(ValueError, match="unknown expansion budget 'all'"):
        Expansion(budget="all")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="floor must be >= 0"):
        Expansion(floor=-1)
    with pytest.raises(ValueError, match="cap must be >= 1 and >= floor 2"):
        Expansion(floor=2, cap=1)
    with pytest.raises(ValueError, match="floor <= N <= cap"):
        TreeShape(2, 4, 1, expansion=difficulty)  # N = 4 > cap 3: T·N cannot be spent
    with pytest.raises(ValueError, match="floor <= N <= cap"):
        TreeShape(2, 1, 1, expansion=Expansion(budget="difficulty", floor=2))
