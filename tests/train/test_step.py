"""One RL step on the tiny trained agent: every parameter moves, zero advantage moves nothing."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch

from agent_fixtures import FACTS, PEOPLE, WordTool, trained_agent
from treegrpo.agent.stops import StepStopper
from treegrpo.engine.hf import HFEngine
from treegrpo.engine.sampling import SamplingParams
from treegrpo.rollout.sampler import AgentLimits
from treegrpo.train import step as step_module
from treegrpo.train.config import AlgorithmConfig, OptimConfig
from treegrpo.train.step import Batch, rl_step

LIMITS = AgentLimits(max_turns=2, topk=3, max_context=1024)
SAMPLING = SamplingParams(max_new_tokens=40)


def _setup(lr: float, weight_decay: float = 0.0):  # type: ignore[no-untyped-def]
    agent = trained_agent()
    policy = copy.deepcopy(agent.model)
    ref = copy.deepcopy(agent.model)
    opt = torch.optim.AdamW(policy.parameters(), lr=lr, weight_decay=weight_decay)
    eng = HFEngine(policy, agent.tokenizer, StepStopper(agent.tokenizer))
    people = PEOPLE[:4]
    batch = Batch(
        [agent.prompt(p) for p in people],
        [[FACTS[p]] for p in people],
        [f"toy-{p}" for p in people],
    )
    return agent, policy, ref, opt, eng, batch


@pytest.mark.parametrize("algo", ["tree", "chain"])
def test_one_step_changes_every_parameter(algo: str) -> None:
    agent, policy, ref, opt, eng, batch = _setup(lr=1e-2)
    before = {n: p.detach().clone() for n, p in policy.named_parameters()}
    cfg = AlgorithmConfig(algo=algo, m=2 if algo == "tree" else 4)  # type: ignore[arg-type]
    metrics = rl_step(
        policy,
        ref,
        opt,
        None,
        eng,
        agent.protocol,
        WordTool(),
        batch,
        cfg,
        OptimConfig(lr=1e-2, mini_batch_prompts=2, micro_batch_tokens=1500),
        SAMPLING,
        LIMITS,
        seed=0,
    )
    assert metrics["train/updates"] == 2 and metrics["train/skipped_updates"] == 0
    assert metrics["agent/leaves"] == (4 * 2 * 3 if algo == "tree" else 4 * 4)
    assert 0.0 <= metrics["reward/em"] <= 1.0 and metrics["adv/abs_mean"] > 0
    unchanged = [n for n, p in policy.named_parameters() if torch.equal(p, before[n])]
    assert unchanged == []


def test_zero_advantage_without_kl_or_entropy_does_not_move_the_policy(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    agent, policy, ref, opt, eng, batch = _setup(lr=1e-2)
    monkeypatch.setattr(
        step_module, "tree_advantage", lambda rewards, *a, **k: np.zeros(len(rewards))
    )
    before = {n: p.detach().clone() for n, p in policy.named_parameters()}
    cfg = AlgorithmConfig(kl_coef=0.0, entropy_coef=0.0)
    metrics = rl_step(
        policy,
        ref,
        opt,
        None,
        eng,
        agent.protocol,
        WordTool(),
        batch,
        cfg,
        OptimConfig(lr=1e-2),
        SAMPLING,
        LIMITS,
        seed=0,
    )
    assert metrics["train/grad_norm"] == 0.0
    for n, p in policy.named_parameters():
        assert torch.equal(p, before[n]), n


def test_non_finite_gradient_skips_the_update(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    agent, policy, ref, opt, eng, batch = _setup(lr=1e-2)
    monkeypatch.setattr(
        step_module, "tree_advantage", lambda rewards, *a, **k: np.full(len(rewards), np.inf)
    )
    before = {n: p.detach().clone() for n, p in policy.named_parameters()}
    metrics = rl_step(
        policy,
        ref,
        opt,
        None,
        eng,
        agent.protocol,
        WordTool(),
        batch,
        AlgorithmConfig(),
        OptimConfig(lr=1e-2),
        SAMPLING,
        LIMITS,
        seed=0,
    )
    assert metrics["train/skipped_updates"] == metrics["train/updates"] == 1
    for n, p in policy.named_parameters():
        assert torch.equal(p, before[n]), n
