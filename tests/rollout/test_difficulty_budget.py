"""Difficulty budgets in the sampler (core.allocation through rollout.sampler): each round
spends T·N over the batch's trees, an all-right prompt gets fewer than an uncertain one, the
allocation is recorded, and a batch split into parts driven round by round (as rollout workers
are) gives the forests of one process."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytest

from agent_fixtures import PEOPLE, Agent, WordTool, trained_agent, trees_by_prompt
from treegrpo.agent.stops import StepStopper
from treegrpo.core.allocation import allocate
from treegrpo.core.budget import SpendAccountant, TreeShape
from treegrpo.core.expansion import Expansion
from treegrpo.core.tree import Forest
from treegrpo.engine.hf import HFEngine
from treegrpo.engine.sampling import SamplingParams
from treegrpo.rollout.records import Rollout, merge_rollouts
from treegrpo.rollout.sampler import (
    AgentLimits,
    ForestSampler,
    TreeOutcomes,
    sample_forest,
    share_by_difficulty,
)

SAMPLING = SamplingParams(max_new_tokens=40)
LIMITS = AgentLimits(max_turns=2, topk=3, max_context=1024)
SHAPE = TreeShape(2, 2, 2, expansion=Expansion("uniform", budget="difficulty"))


@pytest.fixture(scope="module")
def agent() -> Agent:
    return trained_agent()


def by_tree(keys: Sequence[int] | None = None):  # type: ignore[no-untyped-def]
    """Rewards that depend only on the leaf's prompt and tree: prompt 0 is all right; any other
    prompt's first tree always right, its second always wrong (an uncertain prompt, no tree
    mixed). ``keys``: the batch's index of each prompt, for a part of the batch."""

    def score(rollout: Rollout, leaves: Sequence[int]) -> np.ndarray:
        f = rollout.forest
        first: dict[int, int] = {}  # prompt → its first tree
        for t, root in enumerate(f.roots.tolist()):
            first.setdefault(int(f.prompt_id[root]), t)
        out = []
        for leaf in leaves:
            prompt = int(f.prompt_id[leaf])
            key = prompt if keys is None else keys[prompt]
            out.append(1.0 if key == 0 or int(f.tree_id[leaf]) == first[prompt] else 0.0)
        return np.array(out)

    return score


def _roll(agent: Agent, shape: TreeShape, n_prompts: int = 2) -> Rollout:
    engine = HFEngine(agent.model, agent.tokenizer, StepStopper(agent.tokenizer))
    prompts = [agent.prompt(p) for p in PEOPLE[:n_prompts]]
    return sample_forest(
        engine, agent.protocol, WordTool(), prompts, shape, SAMPLING, LIMITS, 0, score=by_tree()
    )


@pytest.mark.slow
def test_each_round_spends_t_n_and_the_uncertain_prompt_gets_more(agent: Agent) -> None:
    ro = _roll(agent, SHAPE)
    f, counts = ro.forest, ro.expansion_counts  # (L, T)
    assert counts.shape == (SHAPE.l, f.n_trees) and (counts.sum(axis=1) == f.n_trees * 2).all()
    # after the initial chains: prompt 0 right twice, prompt 1 right once and wrong once
    np.testing.assert_array_equal(counts[0], allocate([1, 1, 1, 0], [1] * 4, [0, 0, 1, 1], 8))
    assert counts[:, :2].sum() < counts[:, 2:].sum()  # the all-right prompt gets fewer
    for t in range(f.n_trees):  # each expansion added one leaf to its tree
        assert len(f.leaves(t)) == 1 + counts[:, t].sum()
    assert len(ro.expansions) == len(ro.expansion_reasons) == counts.sum()
    assert np.bincount(f.tree_id[ro.expansions], minlength=f.n_trees).tolist() == (
        counts.sum(axis=0).tolist()
    )
    assert all(r.startswith("uniform; difficulty budget ") for r in ro.expansion_reasons)
    assert ro.expansion_s > 0
    again = _roll(agent, SHAPE)  # no generator in the allocation: the same forest again
    assert trees_by_prompt(again) == trees_by_prompt(ro)
    np.testing.assert_array_equal(again.expansion_counts, counts)


@pytest.mark.slow
def test_the_per_tree_budget_records_n_per_tree_and_round(agent: Agent) -> None:
    ro = _roll(agent, TreeShape(2, 2, 2, expansion=Expansion("informed")))
    assert ro.expansion_counts.tolist() == [[2] * 4, [2] * 4]
    assert ro.expansion_s > 0  # scoring and choosing
    assert not any("budget" in r for r in ro.expansion_reasons)


@pytest.mark.slow
@pytest.mark.parametrize("rule", ["entropy", "informed"])
def test_a_batch_driven_in_parts_gives_the_forests_of_one_process(agent: Agent, rule: str) -> None:
    """What ``RayRollout`` does with two workers, here in one process: each part begins its
    prompts, the round is allocated over both parts' trees, each part expands its own."""
    shape = TreeShape(2, 2, 2, k=4, expansion=Expansion(rule, budget="difficulty"))  # type: ignore[arg-type]
    whole = _roll(agent, shape, n_prompts=3)
    engine = HFEngine(agent.model, agent.tokenizer, StepStopper(agent.tokenizer))
    blocks = [[0], [1, 2]]
    parts = [
        ForestSampler(
            engine,
            agent.protocol,
            WordTool(),
            [agent.prompt(PEOPLE[k]) for k in keys],
            shape,
            SAMPLING,
            LIMITS,
            0,
            keys,
            score=by_tree(keys),
        )
        for keys in blocks
    ]
    for part in parts:
        part.begin()
    for _ in range(shape.l):
        outcomes = [part.outcomes() for part in parts]
        counts = share_by_difficulty(TreeOutcomes.concat(outcomes), shape)
        ends = np.cumsum([len(o.prompt) for o in outcomes])[:-1]
        for part, mine in zip(parts, np.split(counts, ends), strict=True):
            part.expand(mine, int(counts.max()))
    merged = merge_rollouts(
        [(keys, part.finish()) for keys, part in zip(blocks, parts, strict=True)], 3
    )
    assert trees_by_prompt(merged) == trees_by_prompt(whole)
    np.testing.assert_array_equal(merged.expansion_counts, whole.expansion_counts)
    assert merged.expansion_reasons == whole.expansion_reasons


def test_a_difficulty_budget_without_a_scorer_fails_before_sampling() -> None:
    class NoEngine:
        def __getattr__(self, name: str) -> object:
            raise AssertionError(f"the engine was used ({name})")

    with pytest.raises(ValueError, match="a difficulty budget needs the leaves' rewards"):
        sample_forest(NoEngine(), None, WordTool(), [[1, 2]], SHAPE, SAMPLING)  # type: ignore[arg-type]


def test_merged_rollouts_put_the_counts_side_by_side_and_add_the_seconds() -> None:
    def one(counts: list[list[int]], seconds: float) -> Rollout:
        f = Forest()
        f.add_node(f.add_tree(0), payload=0, leaf=True)
        ro = Rollout(f, [[1]], [], np.zeros(0, np.int64), SpendAccountant())
        ro.expansion_counts, ro.expansion_s = np.array(counts, dtype=np.int64), seconds
        return ro

    merged = merge_rollouts([([1], one([[3], [1]], 0.5)), ([0], one([[1], [3]], 0.25))], 2)
    assert merged.expansion_counts.tolist() == [[3, 1], [1, 3]] and merged.expansion_s == 0.75
    with pytest.raises(ValueError, match="different rounds"):
        merge_rollouts([([1], one([[3]], 0.5)), ([0], one([[1], [3]], 0.25))], 2)
