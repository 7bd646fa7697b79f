"""Tree rollouts with each expansion rule (core.expansion), a tiny trained agent and the real
engine: the rule's picks and reasons reach the rollout, and the informed rule scores leaves."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytest

from agent_fixtures import FACTS, PEOPLE, Agent, WordTool, trained_agent
from treegrpo.agent.stops import StepStopper
from treegrpo.core.budget import TreeShape
from treegrpo.core.expansion import RULES, Expansion
from treegrpo.engine.hf import HFEngine
from treegrpo.engine.sampling import SamplingParams
from treegrpo.rollout.records import Rollout, merge_rollouts
from treegrpo.rollout.sampler import AgentLimits, sample_forest
from treegrpo.rollout.scoring import LeafRewards, score_leaves
from treegrpo.rollout.source import Draw, LocalRollout
from treegrpo.train.config import AlgorithmConfig, ConfigValueError

SAMPLING = SamplingParams(max_new_tokens=40)
LIMITS = AgentLimits(max_turns=2, topk=3, max_context=1024)
N_PROMPTS = 2


@pytest.fixture(scope="module")
def agent() -> Agent:
    return trained_agent()


class Scorer:
    """EM rewards against the people's birthplaces, remembering what it was asked to score."""

    def __init__(self, agent: Agent) -> None:
        self.agent = agent
        self.asked: list[list[int]] = []

    def __call__(self, rollout: Rollout, leaves: Sequence[int]) -> np.ndarray:
        self.asked.append(list(leaves))
        golds = [[FACTS[p]] for p in PEOPLE[:N_PROMPTS]]
        return score_leaves(rollout, leaves, golds, self.agent.protocol.decode).reward


def _roll(
    agent: Agent,
    shape: TreeShape,
    scorer: Scorer | None = None,
    people: Sequence[str] = PEOPLE[:N_PROMPTS],
    keys: Sequence[int] | None = None,
) -> Rollout:
    engine = HFEngine(agent.model, agent.tokenizer, StepStopper(agent.tokenizer))
    prompts = [agent.prompt(p) for p in people]
    tool = WordTool()
    return sample_forest(
        engine, agent.protocol, tool, prompts, shape, SAMPLING, LIMITS, 0, keys, score=scorer
    )


@pytest.mark.slow
@pytest.mark.parametrize("rule", RULES)
def test_each_rule_expands_its_picks_and_records_why(agent: Agent, rule: str) -> None:
    shape = TreeShape(2, 2, 2, expansion=Expansion(rule))  # type: ignore[arg-type]
    scorer = Scorer(agent)
    ro = _roll(agent, shape, scorer)
    f = ro.forest
    assert ro.expansions.shape == (f.n_trees * shape.n * shape.l,)
    assert len(ro.expansion_reasons) == len(ro.expansions)
    assert not f.is_leaf[ro.expansions].any()
    for tree in range(f.n_trees):
        assert len(f.leaves(tree)) == shape.leaves_per_tree  # each expansion adds one leaf
    reasons = set(ro.expansion_reasons)
    if rule == "uniform":
        assert reasons == {"uniform"}
    elif rule == "no-root":
        assert not np.isin(ro.expansions, f.roots).any()  # the agent's chains have 2+ steps
        assert reasons == {"uniform (no root)"}
    elif rule == "entropy":
        assert all(r.startswith("entropy ") and "(rank " in r for r in reasons)
    else:
        assert all(r.startswith("p̂=") or r == "unexplored" for r in reasons)
    if rule == "informed":  # scored before each round: the new leaves only, each once
        first, second = scorer.asked
        assert len(first) == f.n_trees  # the initial chains' leaves
        assert len(second) == f.n_trees * shape.n  # those of the first round
        assert set(first) | set(second) < set(f.leaves().tolist())
        assert not set(first) & set(second)
    else:
        assert scorer.asked == []
    again = _roll(agent, shape, Scorer(agent))  # seeded: the same picks
    np.testing.assert_array_equal(again.expansions, ro.expansions)
    assert again.expansion_reasons == ro.expansion_reasons


@pytest.mark.slow
def test_the_default_rule_is_uniform(agent: Agent) -> None:
    plain = _roll(agent, TreeShape(2, 2, 1))
    explicit = _roll(agent, TreeShape(2, 2, 1, expansion=Expansion("uniform")))
    np.testing.assert_array_equal(plain.expansions, explicit.expansions)
    assert plain.forest.parent.tolist() == explicit.forest.parent.tolist()
    assert [s.action_ids for s in plain.steps] == [s.action_ids for s in explicit.steps]


@pytest.mark.slow
def test_merged_rollouts_keep_the_reasons(agent: Agent) -> None:
    shape = TreeShape(1, 2, 1, expansion=Expansion("entropy"))
    parts = [([k], _roll(agent, shape, people=[PEOPLE[k]], keys=[k])) for k in range(N_PROMPTS)]
    merged = merge_rollouts(parts, N_PROMPTS)
    assert merged.expansion_reasons == [r for _, ro in parts for r in ro.expansion_reasons]
    assert len(merged.expansion_reasons) == len(merged.expansions)


def test_informed_without_a_scorer_fails_before_sampling() -> None:
    class NoEngine:
        def __getattr__(self, name: str) -> object:
            raise AssertionError(f"the engine was used ({name})")

    shape = TreeShape(2, 2, 1, expansion=Expansion("informed"))
    with pytest.raises(ValueError, match="informed expansion rule needs the leaves' rewards"):
        sample_forest(NoEngine(), None, WordTool(), [[1, 2]], shape, SAMPLING)  # type: ignore[arg-type]


@pytest.mark.slow
def test_the_local_source_scores_leaves_for_the_informed_rule(agent: Agent) -> None:
    """What the RL step does: the algorithm config's rule goes in the shape, the batch's golds
    and reward settings in ``LeafRewards``; the rule then reads the prompts' success rates."""
    algo = AlgorithmConfig(m=2, n=2, l=1, expansion="informed", expansion_bonus=0.0)
    engine = HFEngine(agent.model, agent.tokenizer, StepStopper(agent.tokenizer))
    source = LocalRollout(engine, agent.protocol, WordTool())
    prompts = [agent.prompt(p) for p in PEOPLE[:N_PROMPTS]]
    golds = [[FACTS[p]] for p in PEOPLE[:N_PROMPTS]]
    ro = source.sample(prompts, Draw(algo.shape(), SAMPLING, LIMITS, 0, LeafRewards(golds)))
    assert len(ro.expansion_reasons) == len(ro.expansions) == 2 * N_PROMPTS * 2
    assert all(r.startswith("p̂=") for r in ro.expansion_reasons)
    with pytest.raises(ValueError, match="needs the leaves' rewards"):
        source.sample(prompts, Draw(algo.shape(), SAMPLING, LIMITS, 0))


def test_leaf_rewards_of_a_part_of_the_batch() -> None:
    whole = LeafRewards([["a"], ["b"], ["c"]], "f1", 0.1)
    assert whole.only([2, 0]) == LeafRewards([["c"], ["a"]], "f1", 0.1)


def test_the_algorithm_config_carries_the_rule_into_the_shape() -> None:
    assert AlgorithmConfig().shape().expansion == Expansion()  # uniform by default
    algo = AlgorithmConfig(expansion="entropy", expansion_tokens=4, expansion_temperature=0.5)
    assert algo.shape().expansion == Expansion("entropy", k=4, temperature=0.5)
    informed = AlgorithmConfig(expansion="informed", expansion_bonus=0.1, expansion_prior=4.0)
    assert informed.shape().expansion.params() == {
        "threshold": 0.5,
        "bonus": 0.1,
        "prior_strength": 4.0,
    }
    by_difficulty = AlgorithmConfig(expansion_budget="difficulty", expansion_budget_cap=5)
    assert by_difficulty.shape().expansion == Expansion(budget="difficulty", cap=5)


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("expansion", "best"),
        ("expansion_tokens", 0),
        ("expansion_temperature", 0.0),
        ("expansion_repeat_penalty", 0.0),
        ("expansion_repeat_penalty", 1.5),
        ("expansion_bonus", -1.0),
        ("expansion_prior", 0.0),
        ("expansion_budget", "all"),
        ("expansion_budget_floor", -1),
        ("expansion_budget_floor", 3),  # more than n = 2: T·n cannot give every tree 3
        ("expansion_budget_cap", 0),
        ("expansion_budget_cap", 1),  # less than n = 2: T·n does not fit
    ],
)
def test_bad_expansion_settings_name_their_field(field: str, value: object) -> None:
    with pytest.raises(ConfigValueError) as err:
        AlgorithmConfig(**{"expansion_budget": "difficulty", field: value})  # type: ignore[arg-type]
    assert err.value.field == field
