"""Leaf scores of a real rollout: the format bonus is a setting, and without it a wrong answer
earns nothing whatever its format."""

from __future__ import annotations

import numpy as np
import pytest

from agent_fixtures import PEOPLE, WordTool, trained_agent
from treegrpo.agent.stops import StepStopper
from treegrpo.core.budget import TreeShape
from treegrpo.engine.hf import HFEngine
from treegrpo.engine.sampling import SamplingParams
from treegrpo.rollout.sampler import AgentLimits, sample_forest
from treegrpo.rollout.scoring import score_leaves


@pytest.mark.slow
def test_format_bonus_is_a_setting() -> None:
    agent = trained_agent()
    engine = HFEngine(agent.model, agent.tokenizer, StepStopper(agent.tokenizer))
    prompts = [agent.prompt(p) for p in PEOPLE[:3]]
    params = SamplingParams(greedy=True, max_new_tokens=24)
    ro = sample_forest(
        engine, agent.protocol, WordTool(), prompts, TreeShape(2), params, AgentLimits(2, 3, 512)
    )
    leaves = [int(v) for v in ro.forest.leaves()]
    wrong = [["Nowhere"]] * 3  # no leaf can be right
    plain = score_leaves(ro, leaves, wrong, agent.protocol.decode, format_score=0.0)
    bonus = score_leaves(ro, leaves, wrong, agent.protocol.decode, format_score=0.2)
    assert np.all(plain.reward == 0.0)
    assert bonus.valid_format.any()  # the trained agent writes valid trajectories
    expected = np.where(bonus.valid_format == 1.0, 0.2, np.where(bonus.answered == 1.0, 0.1, 0.0))
    np.testing.assert_allclose(bonus.reward, expected)
