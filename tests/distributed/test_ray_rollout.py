"""Rollout workers on a local Ray cluster of CPU workers (``distributed.rollout``): the forests
of one process for the same seeds, weight pushes, a worker killed in the middle of a step, and
the README's two workers and two ranks on two cores."""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest
import ray
import ray.cloudpickle

import agent_fixtures
from agent_fixtures import CORPUS, PEOPLE, TINY_WARM, WordTool, trained_agent, trees_by_prompt
from treegrpo import cli
from treegrpo.agent.protocol import SearchProtocol
from treegrpo.agent.stops import StepStopper
from treegrpo.core.budget import TreeShape
from treegrpo.distributed.cluster import ClusterTooSmall, init_ray
from treegrpo.distributed.rollout import RayRollout, WorkerSpec, start_workers
from treegrpo.engine.hf import HFEngine
from treegrpo.engine.sampling import SamplingParams
from treegrpo.jobs.embedded import run_embedded
from treegrpo.jobs.presets import DEFAULT_ALGO, DEFAULT_EMBEDDED, DEFAULT_OPTIM, DEFAULT_RUN
from treegrpo.models.load import load_model
from treegrpo.retrieval.base import Passage
from treegrpo.retrieval.bm25 import BM25Retriever
from treegrpo.rollout.records import Rollout
from treegrpo.rollout.sampler import AgentLimits, agent_protocol, sample_forest
from treegrpo.rollout.source import Draw
from treegrpo.tools.calculator import calculate
from treegrpo.tools.registry import Toolbox
from treegrpo.train.config import ClusterConfig
from treegrpo.train.task import TrainSettings

pytestmark = pytest.mark.slow

SAMPLING = SamplingParams(max_new_tokens=40)
LIMITS = AgentLimits(max_turns=2, topk=3, max_context=1024)
SHAPE = TreeShape(2, 2, 1)


@pytest.fixture(scope="module")
def cluster() -> Iterator[None]:
    """A local Ray cluster: two worker slots of one CPU each, and the driver."""
    init_ray(num_cpus=2, log_to_driver=False)
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


def one_process(  # type: ignore[no-untyped-def]
    model_dir: Path, prompts: list[list[int]], seed: int, state=None, tool=None
) -> Rollout:
    """The forest this process samples from the same model (weights ``state`` loaded; the
    search tool ``WordTool`` unless given)."""
    model, tok = load_model(model_dir)
    if state is not None:
        model.load_state_dict(state)
    engine = HFEngine(model.eval(), tok, StepStopper(tok))
    protocol = SearchProtocol(tok, max_obs_tokens=120)
    tool = WordTool() if tool is None else tool
    return sample_forest(engine, protocol, tool, prompts, SHAPE, SAMPLING, LIMITS, seed)


def test_two_workers_sample_the_forests_of_one_process(cluster, model_dir) -> None:  # type: ignore[no-untyped-def]
    agent = trained_agent()
    prompts = [agent.prompt(p) for p in PEOPLE[:5]]
    bm25 = BM25Retriever(CORPUS, use_cache=False)  # held once, by a retriever actor
    workers = RayRollout(WorkerSpec(str(model_dir), max_obs_tokens=120), bm25, workers=2)
    try:
        got = workers.sample(prompts, Draw(SHAPE, SAMPLING, LIMITS, seed=3))
        want = one_process(model_dir, prompts, seed=3, tool=bm25)
        assert trees_by_prompt(got) == trees_by_prompt(want)
        assert got.prompts == want.prompts
        # the same tokens and searches per prompt (positions computed depend on the batching)
        assert {
            k: (s.generated, s.tool_calls, s.leaves) for k, s in got.spend.by_prompt.items()
        } == {k: (s.generated, s.tool_calls, s.leaves) for k, s in want.spend.by_prompt.items()}
        # weights pushed to both workers: the forests of one process with those weights
        moved = {k: v * 1.05 if "mlp" in k else v for k, v in agent.model.state_dict().items()}
        workers.update_weights(moved)
        assert workers.version == 1 and workers.sync_seconds > 0
        pushed = workers.sample(prompts, Draw(SHAPE, SAMPLING, LIMITS, seed=3))
        again = one_process(model_dir, prompts, 3, moved, bm25)
        assert trees_by_prompt(pushed) == trees_by_prompt(again)
        assert trees_by_prompt(pushed) != trees_by_prompt(got)
    finally:
        workers.close()


def test_a_toolbox_goes_to_each_worker_and_gives_the_forests_of_one_process(  # type: ignore[no-untyped-def]
    cluster, model_dir
) -> None:
    tools = Toolbox.search_r1(BM25Retriever(CORPUS, use_cache=False), topk=3)
    tools.function("calculate", "expression", "evaluates arithmetic")(calculate)
    model, tok = load_model(model_dir)
    protocol = agent_protocol(tok, tools, 120)
    prompts = [protocol.prompt_ids(agent_fixtures.question(p)) for p in PEOPLE[:4]]
    workers = RayRollout(WorkerSpec(str(model_dir), max_obs_tokens=120), tools, workers=2)
    try:
        got = workers.sample(prompts, Draw(SHAPE, SAMPLING, LIMITS, seed=5))
        engine = HFEngine(model.eval(), tok, StepStopper(tok, protocol.stop_tags))
        want = sample_forest(engine, protocol, tools, prompts, SHAPE, SAMPLING, LIMITS, 5)
        assert trees_by_prompt(got) == trees_by_prompt(want)
        assert [s.tool for s in got.steps if s.called] != []  # the tools were called
    finally:
        workers.close()


class SlowTool:
    """``WordTool`` that first marks a file (the step has started searching) and waits a
    little, so the test can kill a worker while its step runs."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def search(self, queries: list[str], topk: int = 3) -> list[list[Passage]]:
        self.marker.touch()
        time.sleep(0.3)
        return WordTool().search(queries, topk)


def test_a_worker_killed_mid_step_is_restarted_and_its_prompts_redone(  # type: ignore[no-untyped-def]
    cluster, model_dir, tmp_path
) -> None:
    agent = trained_agent()
    prompts = [agent.prompt(p) for p in PEOPLE[:4]]
    marker = tmp_path / "searching"
    workers = RayRollout(
        WorkerSpec(str(model_dir), max_obs_tokens=120), SlowTool(marker), workers=2
    )
    try:
        moved = {k: v * 0.97 if "attn" in k else v for k, v in agent.model.state_dict().items()}
        workers.update_weights(moved)  # a restarted worker must get these back
        pid = ray.get(workers.workers[0].__ray_call__.remote(lambda self: os.getpid()))
        out: dict[str, Rollout] = {}
        step = threading.Thread(
            target=lambda: out.update(ro=workers.sample(prompts, Draw(SHAPE, SAMPLING, LIMITS, 5)))
        )
        step.start()
        deadline = time.monotonic() + 120
        while not marker.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert marker.exists()
        os.kill(pid, signal.SIGKILL)  # in the middle of the step
        step.join(timeout=300)
        assert not step.is_alive() and workers.restarts == 1
        want = one_process(model_dir, prompts, seed=5, state=moved)
        assert trees_by_prompt(out["ro"]) == trees_by_prompt(want)
        new_pid = ray.get(workers.workers[0].__ray_call__.remote(lambda self: os.getpid()))
        assert new_pid != pid
    finally:
        workers.close()


def test_workers_and_ranks_the_cluster_cannot_hold_are_refused_before_any_starts(  # type: ignore[no-untyped-def]
    cluster, tmp_path, monkeypatch
) -> None:
    """Two workers of one CPU and two ranks of one CPU on two CPUs: the workers would start
    and the ranks wait for CPUs that never come; instead nothing starts."""

    def no_actor(*args, **kwargs):  # type: ignore[no-untyped-def]
        raise AssertionError("an actor was started")

    monkeypatch.setattr(ray, "remote", no_actor)
    ones = ClusterConfig(2, cpus_per_worker=1, train_ranks=2, cpus_per_rank=1)
    with pytest.raises(ClusterTooSmall, match="ask Ray for 4 CPUs but the cluster has 2"):
        start_workers(ones, tmp_path, WordTool(), 120, "hf", False)


def test_the_cli_refuses_them_in_one_line_before_the_warm_start(  # type: ignore[no-untyped-def]
    cluster, tmp_path, monkeypatch
) -> None:
    monkeypatch.setenv("TREEGRPO_CACHE_DIR", str(tmp_path / "cache"))
    args = ["train", "--run.out-dir", str(tmp_path / "run"), "--cluster.rollout-workers", "2"]
    args += ["--cluster.train-ranks", "2", "--cluster.cpus-per-worker", "1"]
    with pytest.raises(SystemExit) as err:
        cli.main([*args, "--cluster.cpus-per-rank", "1"])
    message = str(err.value)
    assert message.startswith("treegrpo train: ") and "\n" not in message
    assert "ask Ray for 4 CPUs but the cluster has 2" in message
    assert not (tmp_path / "cache").exists()  # no warm start was built


def test_the_embedded_job_on_two_workers_and_two_ranks_trains_as_in_one_process(  # type: ignore[no-untyped-def]
    cluster, tmp_path, monkeypatch
) -> None:
    """The README's `treegrpo train --cluster.rollout-workers 2 --cluster.train-ranks 2` on two
    cores (half a core each by default): the same forests, rewards and spend per step as the
    job in one process with the same seed, the loss within fp32 rounding."""
    monkeypatch.setenv("TREEGRPO_CACHE_DIR", str(tmp_path / "cache"))
    world = replace(DEFAULT_EMBEDDED, eval_questions=4, max_new_tokens=16)
    algo = replace(DEFAULT_ALGO, skip_uniform_prompts=False)
    metrics = []
    readme = ClusterConfig(rollout_workers=2, train_ranks=2)
    for name, cluster_cfg in (("local", ClusterConfig()), ("ray", readme)):
        run = replace(DEFAULT_RUN, out_dir=str(tmp_path / name), steps=2, prompts_per_step=4)
        settings = TrainSettings(algo, DEFAULT_OPTIM, run)
        run_embedded(settings, world, warm=TINY_WARM, progress=False, cluster=cluster_cfg)
        lines = (tmp_path / name / "metrics.jsonl").read_text().splitlines()
        metrics.append([json.loads(line) for line in lines])
    keys = ("reward/mean", "agent/leaves", "spend/generated_per_prompt", "tree/distinct_leaves")
    for local, ray_step in zip(*metrics, strict=True):
        assert [ray_step[k] for k in keys] == [local[k] for k in keys]
        assert ray_step["loss/pg_loss"] == pytest.approx(local["loss/pg_loss"], abs=1e-5)
