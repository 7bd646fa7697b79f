"""The informed expansion rule on rollout workers: each worker scores its own prompts' leaves
(``LeafRewards`` travels with the prompts), so two workers give the forests of one process."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import ray
import ray.cloudpickle

import agent_fixtures
from agent_fixtures import FACTS, PEOPLE, WordTool, trained_agent, trees_by_prompt
from treegrpo.agent.protocol import SearchProtocol
from treegrpo.agent.stops import StepStopper
from treegrpo.core.budget import TreeShape
from treegrpo.core.expansion import Expansion
from treegrpo.distributed.rollout import RayRollout, WorkerSpec
from treegrpo.engine.hf import HFEngine
from treegrpo.engine.sampling import SamplingParams
from treegrpo.models.load import load_model
from treegrpo.rollout.records import Rollout
from treegrpo.rollout.sampler import AgentLimits, sample_forest
from treegrpo.rollout.scoring import LeafRewards

pytestmark = pytest.mark.slow

SAMPLING = SamplingParams(max_new_tokens=40)
LIMITS = AgentLimits(max_turns=2, topk=3, max_context=1024)
SHAPE = TreeShape(2, 2, 2, expansion=Expansion("informed"))


@pytest.fixture(scope="module")
def cluster() -> Iterator[None]:
    """A local Ray cluster: two worker slots of one CPU each, and the driver."""
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    ray.cloudpickle.register_pickle_by_value(agent_fixtures)  # the test tools, by value
    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
    yield
    ray.shutdown()


def test_two_workers_expand_as_one_process(cluster: None, tmp_path: Path) -> None:
    agent = trained_agent()
    agent.model.save_pretrained(tmp_path)
    agent.tokenizer.save_pretrained(tmp_path)  # type: ignore[attr-defined]
    people = PEOPLE[:3]
    prompts = [agent.prompt(p) for p in people]
    rewards = LeafRewards([[FACTS[p]] for p in people])
    workers = RayRollout(WorkerSpec(str(tmp_path), max_obs_tokens=120), WordTool(), workers=2)
    try:
        got = workers.sample(prompts, SHAPE, SAMPLING, LIMITS, 3, rewards)
    finally:
        workers.close()
    model, tok = load_model(tmp_path)
    protocol = SearchProtocol(tok, max_obs_tokens=120)
    engine = HFEngine(model.eval(), tok, StepStopper(tok))
    want = sample_forest(
        engine,
        protocol,
        WordTool(),
        prompts,
        SHAPE,
        SAMPLING,
        LIMITS,
        3,
        score=rewards.scorer(protocol.decode),
    )
    assert trees_by_prompt(got) == trees_by_prompt(want)
    assert _why(got) == _why(want)  # node ids and order differ: parts are merged in turn
    assert all(r.startswith("p̂=") for r in got.expansion_reasons)


def _why(ro: Rollout) -> list[tuple[int, int, int, str]]:
    """Each expansion as (prompt, tree, depth of its node, reason), sorted."""
    f = ro.forest
    nodes = ro.expansions.tolist()
    return sorted(
        (int(f.prompt_id[v]), int(f.tree_id[v]), int(f.depth[v]), why)
        for v, why in zip(nodes, ro.expansion_reasons, strict=True)
    )
