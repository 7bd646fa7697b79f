"""Expansion rules and budgets on rollout workers. The informed rule: each worker scores its own
prompts' leaves (``LeafRewards`` travels with the prompts), so two workers give the forests of one
process. Difficulty budgets: the driver allocates every round over the whole batch, so one or two
workers give the forests of one process, also when a worker dies between rounds."""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import ray
import ray.cloudpickle

import agent_fixtures
import treegrpo.distributed.rollout as ray_rollout
from agent_fixtures import FACTS, PEOPLE, WordTool, trained_agent, trees_by_prompt
from treegrpo.agent.protocol import SearchProtocol
from treegrpo.agent.stops import StepStopper
from treegrpo.core.budget import TreeShape
from treegrpo.core.expansion import Expansion
from treegrpo.distributed.rollout import LostStep, RayRollout, WorkerSpec
from treegrpo.engine.hf import HFEngine
from treegrpo.engine.sampling import SamplingParams
from treegrpo.models.load import load_model
from treegrpo.rollout.records import Rollout
from treegrpo.rollout.sampler import AgentLimits, TreeOutcomes, sample_forest
from treegrpo.rollout.scoring import LeafRewards
from treegrpo.rollout.source import Draw

pytestmark = pytest.mark.slow

SAMPLING = SamplingParams(max_new_tokens=40)
LIMITS = AgentLimits(max_turns=2, topk=3, max_context=1024)
SHAPE = TreeShape(2, 2, 2, expansion=Expansion("informed"))
DIFFICULTY = TreeShape(2, 2, 2, k=4, expansion=Expansion("informed", budget="difficulty"))


@pytest.fixture(scope="module")
def cluster() -> Iterator[None]:
    """A local Ray cluster: two worker slots of one CPU each, and the driver."""
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    ray.cloudpickle.register_pickle_by_value(agent_fixtures)  # the test tools, by value
    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
    yield
    ray.shutdown()


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    agent = trained_agent()
    path = tmp_path_factory.mktemp("agent")
    agent.model.save_pretrained(path)
    agent.tokenizer.save_pretrained(path)  # type: ignore[attr-defined]
    return path


PEOPLE_3 = PEOPLE[:3]
# prompt 1's golds are wrong: an all-wrong prompt beside (most likely) all-right ones
REWARDS = LeafRewards([[FACTS[p]] if p != PEOPLE[1] else ["Nowhere"] for p in PEOPLE_3])


def one_process(model_dir: Path, shape: TreeShape, seed: int) -> Rollout:
    """The forest this process samples from the same model, tool, rewards and seed."""
    model, tok = load_model(model_dir)
    protocol = SearchProtocol(tok, max_obs_tokens=120)
    engine = HFEngine(model.eval(), tok, StepStopper(tok))
    prompts = [trained_agent().prompt(p) for p in PEOPLE_3]
    score = REWARDS.scorer(protocol.decode)
    return sample_forest(
        engine, protocol, WordTool(), prompts, shape, SAMPLING, LIMITS, seed, score=score
    )


def test_two_workers_expand_as_one_process(cluster: None, model_dir: Path) -> None:
    prompts = [trained_agent().prompt(p) for p in PEOPLE_3]
    workers = RayRollout(WorkerSpec(str(model_dir), max_obs_tokens=120), WordTool(), workers=2)
    try:
        got = workers.sample(prompts, Draw(SHAPE, SAMPLING, LIMITS, 3, REWARDS))
    finally:
        workers.close()
    want = one_process(model_dir, SHAPE, 3)
    assert trees_by_prompt(got) == trees_by_prompt(want)
    assert _why(got) == _why(want)  # node ids and order differ: parts are merged in turn
    assert all(r.startswith("p̂=") for r in got.expansion_reasons)


def test_difficulty_budgets_on_one_and_two_workers_give_the_forests_of_one_process(
    cluster: None, model_dir: Path
) -> None:
    prompts = [trained_agent().prompt(p) for p in PEOPLE_3]
    want = one_process(model_dir, DIFFICULTY, 4)
    for n in (1, 2):
        workers = RayRollout(WorkerSpec(str(model_dir), max_obs_tokens=120), WordTool(), n)
        try:
            got = workers.sample(prompts, Draw(DIFFICULTY, SAMPLING, LIMITS, 4, REWARDS))
            with pytest.raises(LostStep, match="no step in progress"):  # the step is done
                ray.get(workers.workers[0].expand.remote([1, 1], 1))
        finally:
            workers.close()
        assert trees_by_prompt(got) == trees_by_prompt(want)
        np.testing.assert_array_equal(got.expansion_counts, want.expansion_counts)
        assert _why(got) == _why(want)
        assert (got.expansion_counts.sum(axis=1) == 2 * 6).all()  # T·N per round
        assert got.expansion_s > 0


def test_a_worker_killed_between_rounds_replays_its_block(
    cluster: None, model_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    prompts = [trained_agent().prompt(p) for p in PEOPLE_3]
    workers = RayRollout(WorkerSpec(str(model_dir), max_obs_tokens=120), WordTool(), 2)
    pid = ray.get(workers.workers[0].__ray_call__.remote(lambda self: os.getpid()))
    share = ray_rollout.share_by_difficulty
    rounds: list[int] = []

    def kill_then_share(outcomes: TreeOutcomes, shape: TreeShape) -> np.ndarray:
        rounds.append(len(outcomes.prompt))
        if len(rounds) == 2:  # after the first round: the next expand finds no worker 0
            os.kill(pid, signal.SIGKILL)
        return share(outcomes, shape)

    monkeypatch.setattr(ray_rollout, "share_by_difficulty", kill_then_share)
    try:
        got = workers.sample(prompts, Draw(DIFFICULTY, SAMPLING, LIMITS, 4, REWARDS))
        assert workers.restarts == 1 and rounds == [6, 6]
        new_pid = ray.get(workers.workers[0].__ray_call__.remote(lambda self: os.getpid()))
        assert new_pid != pid
    finally:
        workers.close()
    want = one_process(model_dir, DIFFICULTY, 4)
    assert trees_by_prompt(got) == trees_by_prompt(want)
    np.testing.assert_array_equal(got.expansion_counts, want.expansion_counts)


def _why(ro: Rollout) -> list[tuple[int, int, int, str]]:
    """Each expansion as (prompt, tree, depth of its node, reason), sorted."""
    f = ro.forest
    nodes = ro.expansions.tolist()
    return sorted(
        (int(f.prompt_id[v]), int(f.tree_id[v]), int(f.depth[v]), why)
        for v, why in zip(nodes, ro.expansion_reasons, strict=True)
    )
