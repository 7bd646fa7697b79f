"""A retriever that fails mid-rollout: a search that cannot be answered becomes an observation
that says so and the episode goes on; a batch where only some searches fail fails only those;
too many failed searches stop the step before its update; a real `treegrpo serve` killed and
restarted during a rollout costs the rollout nothing (the client's retries ride through the
restart)."""

from __future__ import annotations

import copy
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest
import torch

from agent_fixtures import CORPUS, PEOPLE, Agent, WordTool, trained_agent, trees_by_prompt
from tests.live import LiveServer
from treegrpo.agent.protocol import FAILED_SEARCH
from treegrpo.agent.stops import StepStopper
from treegrpo.core.budget import TreeShape
from treegrpo.engine.hf import HFEngine
from treegrpo.engine.sampling import SamplingParams
from treegrpo.retrieval.base import Passage, SearchFailed, SearchTool
from treegrpo.retrieval.bm25 import BM25Retriever
from treegrpo.retrieval.corpus import write_corpus
from treegrpo.retrieval.http_client import RemoteRetriever
from treegrpo.retrieval.server import create_app
from treegrpo.rollout.records import Rollout
from treegrpo.rollout.sampler import AgentLimits, sample_forest
from treegrpo.rollout.source import LocalRollout
from treegrpo.train.config import AlgorithmConfig, OptimConfig
from treegrpo.train.health import SearchOutage
from treegrpo.train.step import Batch, Learning, Rollouts, StepSettings, rl_step

SAMPLING = SamplingParams(max_new_tokens=40)
LIMITS = AgentLimits(max_turns=2, topk=3, max_context=1024)
SHAPE = TreeShape(2, 2, 1)


@pytest.fixture(scope="module")
def agent() -> Agent:
    return trained_agent()


class FailingCalls:
    """``tool``, but the calls numbered in ``fail`` (from 1) raise ``SearchFailed``."""

    def __init__(self, tool: SearchTool, fail: set[int] | None = None) -> None:
        self.tool, self.fail, self.calls = tool, fail, 0

    def search(self, queries: list[str], topk: int = 3) -> list[list[Passage]]:
        self.calls += 1
        if self.fail is None or self.calls in self.fail:
            raise SearchFailed(f"retriever down (call {self.calls})")
        return self.tool.search(queries, topk)


def roll(agent: Agent, tool: SearchTool, seed: int = 0) -> Rollout:
    engine = HFEngine(agent.model, agent.tokenizer, StepStopper(agent.tokenizer))
    prompts = [agent.prompt(p) for p in PEOPLE[:3]]
    return sample_forest(engine, agent.protocol, tool, prompts, SHAPE, SAMPLING, LIMITS, seed)


@pytest.mark.slow
def test_a_failed_search_becomes_an_observation_and_the_episodes_go_on(agent: Agent) -> None:
    ro = roll(agent, FailingCalls(WordTool(), fail={1}))
    failed = [s for s in ro.steps if s.tool_failed]
    assert failed and all(s.searched for s in failed)
    for s in failed:  # the model reads that the search failed, inside <information>
        assert s.obs_ids == agent.protocol.text_ids(FAILED_SEARCH)
        assert "The search failed" in agent.protocol.decode(s.obs_ids)
    answered = [s for s in ro.steps if s.searched and not s.tool_failed]
    assert answered and all(s.passages for s in answered)  # later searches were answered
    # every episode still ran to a leaf: as many leaves as without the failure
    assert len(ro.forest.leaves()) == len(roll(agent, WordTool()).forest.leaves())


class RefusesQueries:
    """``tool``, but the queries naming ``who`` fail alone, as ``RemoteRetriever`` reports a
    server that refuses some queries of a batch: ``SearchFailed.results`` holds the others'
    passages (None when every query of the call failed)."""

    def __init__(self, tool: SearchTool, who: str) -> None:
        self.tool, self.who, self.partial = tool, who, 0

    def search(self, queries: list[str], topk: int = 3) -> list[list[Passage]]:
        found = self.tool.search(queries, topk)
        bad = [self.who in q for q in queries]
        if not any(bad):
            return found
        results = [None if b else hits for b, hits in zip(bad, found, strict=True)]
        self.partial += not all(bad)
        raise SearchFailed(f"{sum(bad)} refused", None if all(bad) else results)


def assert_only_refused_searches_failed(
    agent: Agent, ro: Rollout, refused: Callable[[str], bool], tool: SearchTool
) -> None:
    """Each searched step failed exactly when its query was refused; a failed one reads the
    failed-search observation, an answered one the passages ``tool`` finds for it alone."""
    searched = [s for s in ro.steps if s.searched]
    failed = [s for s in searched if s.tool_failed]
    assert 0 < len(failed) < len(searched)
    for s in searched:
        assert s.tool_failed == refused(s.action.text), s.action.text
        if s.tool_failed:
            assert s.obs_ids == agent.protocol.text_ids(FAILED_SEARCH) and not s.passages
        else:
            contents = [p.contents for p in tool.search([s.action.text], LIMITS.topk)[0]]
            assert s.passages == contents and s.obs_ids == agent.protocol.observation_ids(contents)


@pytest.mark.slow
def test_only_the_refused_searches_of_a_batch_fail(agent: Agent) -> None:
    tool = RefusesQueries(WordTool(), "Berta")
    ro = roll(agent, tool)
    assert tool.partial  # a call where the others were answered
    assert_only_refused_searches_failed(agent, ro, lambda q: "Berta" in q, WordTool())
    # every episode still ran to a leaf: as many leaves as without the failure
    assert len(ro.forest.leaves()) == len(roll(agent, WordTool()).forest.leaves())


@pytest.mark.slow
def test_a_query_too_long_for_the_server_fails_alone(agent: Agent) -> None:
    limit = len("Alan born")  # "Berta born" and longer are refused (HTTP 422)
    local = BM25Retriever(CORPUS, use_cache=False)
    app = create_app(BM25Retriever(CORPUS, use_cache=False), max_query_chars=limit)
    with LiveServer(app) as server, RemoteRetriever(server.url, retries=0) as remote:
        ro = roll(agent, remote)
    assert_only_refused_searches_failed(agent, ro, lambda q: len(q) > limit, local)


@pytest.mark.slow
def test_too_many_failed_searches_stop_the_step_before_its_update(agent: Agent) -> None:
    policy = copy.deepcopy(agent.model)
    opt = torch.optim.AdamW(policy.parameters(), lr=1e-2)
    engine = HFEngine(policy, agent.tokenizer, StepStopper(agent.tokenizer))
    before = {n: p.detach().clone() for n, p in policy.named_parameters()}
    batch = Batch([agent.prompt(p) for p in PEOPLE[:2]], [["x"], ["y"]], ["a", "b"])
    algo, optim = AlgorithmConfig(kl_coef=0.0), OptimConfig(lr=1e-2, mini_batch_prompts=2)
    source = LocalRollout(engine, agent.protocol, FailingCalls(WordTool()))
    rollouts = Rollouts(source, agent.protocol, SAMPLING, LIMITS)
    learning = Learning(policy, None, opt)
    with pytest.raises(SearchOutage, match=r"searches failed \(100%, more than .* 25%\)"):
        rl_step(learning, rollouts, batch, StepSettings(algo, optim, 0.25), seed=0)
    assert all(torch.equal(p, before[n]) for n, p in policy.named_parameters())
    # at the default limit (all may fail) the step runs and counts them
    metrics = rl_step(learning, rollouts, batch, StepSettings(algo, optim), seed=0)
    assert metrics["agent/failed_searches"] > 0
    assert metrics["agent/tool_calls_per_leaf"] > 0  # Search-R1's agent: no per-tool copy of it
    assert not [k for k in metrics if k.startswith("agent/calls_per_leaf/")]


class Server:
    """`treegrpo serve` over the toy corpus as a real process on a fixed loopback port."""

    def __init__(self, corpus: Path, port: int, cache: Path) -> None:
        self.args = [sys.executable, "-m", "treegrpo.cli", "serve", "--corpus", str(corpus)]
        self.args += ["--port", str(port)]
        self.env = {**os.environ, "TREEGRPO_CACHE_DIR": str(cache)}
        self.url = f"http://127.0.0.1:{port}"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        self.proc = subprocess.Popen(self.args, env=self.env, start_new_session=True)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"{self.url}/health", timeout=1).status_code == 200:
                    return
            except httpx.TransportError:
                time.sleep(0.1)
        raise RuntimeError("treegrpo serve did not start")

    def kill(self) -> None:
        assert self.proc is not None
        os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait()


class KillsTheServer:
    """Searches through ``client``; before call ``at`` it kills ``server`` and, when
    ``restart``, starts it again in the background while the client retries."""

    def __init__(self, client: RemoteRetriever, server: Server, at: int, restart: bool) -> None:
        self.client, self.server, self.at, self.restart = client, server, at, restart
        self.calls, self.restarter = 0, threading.Thread(target=server.start)

    def search(self, queries: list[str], topk: int = 3) -> list[list[Passage]]:
        self.calls += 1
        if self.calls == self.at:
            self.server.kill()
            if self.restart:
                self.restarter.start()
        return self.client.search(queries, topk)


@pytest.mark.slow
def test_the_retriever_killed_and_restarted_mid_rollout(agent: Agent, tmp_path: Path) -> None:
    corpus = tmp_path / "corpus.jsonl"
    write_corpus(corpus, CORPUS)
    with socket.socket() as s:  # a port that is free now
        s.bind(("127.0.0.1", 0))
        port = int(s.getsockname()[1])
    server = Server(corpus, port, tmp_path / "cache")
    server.start()
    steady = roll(agent, RemoteRetriever(server.url, retries=0))
    try:
        # killed before the second search call, back a few seconds later (a new `treegrpo serve`
        # takes up to 20 s to start on 2 busy cores): the client's retries (0.5 + 1 + 2 + 4 + 8
        # + 16 s of backoff) reach the new server
        tool = KillsTheServer(RemoteRetriever(server.url, retries=6), server, 2, restart=True)
        again = roll(agent, tool)
        tool.restarter.join()
        assert not any(s.tool_failed for s in again.steps)
        assert trees_by_prompt(again) == trees_by_prompt(steady)  # as if nothing happened
        # killed for good: the rest of the searches fail after their retries, each one an
        # observation that says so, and the rollout still ends every episode
        down = KillsTheServer(
            RemoteRetriever(server.url, retries=1, backoff=0.05), server, 2, restart=False
        )
        broken = roll(agent, down)
        failed = sum(s.tool_failed for s in broken.steps)
        assert 0 < failed < sum(s.searched for s in broken.steps)  # the first call was answered
        assert len(broken.forest.leaves()) == len(steady.forest.leaves())  # every branch ended
    finally:
        if server.proc is not None and server.proc.poll() is None:
            server.kill()
