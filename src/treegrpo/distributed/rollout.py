"""Rollout workers on Ray: ``RolloutWorker`` (one engine each) samples the forests of the
prompts it is given, ``RetrieverActor`` holds an in-process search index once for all of them,
and ``RayRollout``, the driver (a ``rollout.source.RolloutSource``), splits a step's prompts
over the workers and merges their forests. How prompts, weights, difficulty budgets and
restarts travel: docs/configuration.md, "The `cluster` section". Ray re-creates a restarted
worker from its constructor arguments, which are therefore plain values (no object or actor
references: Ray cannot promise those on a restart, ray-project/ray#53727).
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import torch
from transformers.utils import logging as hf_logging

from treegrpo.agent.stops import StepStopper
from treegrpo.core.budget import TreeShape
from treegrpo.distributed.cluster import Ask, check_ask, join_ray, wait_started
from treegrpo.engine.base import EngineKind, state_dict_of
from treegrpo.engine.build import build_engine
from treegrpo.engine.cpu.speedups import start_process
from treegrpo.models.load import load_model
from treegrpo.retrieval.base import Passage, SearchTool
from treegrpo.retrieval.http_client import RemoteRetriever
from treegrpo.rollout.records import Rollout, merge_rollouts
from treegrpo.rollout.sampler import (
    ForestSampler,
    TreeOutcomes,
    agent_protocol,
    check_scorer,
    share_by_difficulty,
)
from treegrpo.rollout.source import Draw, LocalRollout
from treegrpo.tools.registry import Toolbox
from treegrpo.train.config import ClusterConfig

log = logging.getLogger(__name__)

_Call = tuple[str, tuple[Any, ...]]  # a worker method's name and its arguments


@dataclass(frozen=True)
class WorkerSpec:
    """What every rollout worker runs."""

    model_dir: str
    """The starting model (a Hugging Face directory); later weights come from the driver."""
    engine: EngineKind = "hf"
    """The worker's engine (``engine.build.build_engine``)."""
    max_obs_tokens: int = 500
    """Tokens per observation."""
    device: str = "cpu"
    """Where the worker's model runs: cpu, or cuda (the GPU Ray gives the worker)."""
    cpu_speedups: bool | None = None
    """``ModelConfig.cpu_speedups`` for the worker's engine."""
    threads: int = 1
    """torch threads of a CPU worker (the cores Ray reserves for it)."""


@dataclass(frozen=True)
class Block:
    """A worker's part of a step: the batch's prompts ``keys`` (their ids: ``prompts``), how to
    sample them (``draw``, with their leaves' rewards) and with which weights (``version``)."""

    prompts: list[list[int]]
    keys: list[int]
    draw: Draw  # with the rewards of these prompts only
    version: int


class StaleWeights(RuntimeError):
    """A worker was asked to sample with weights it does not hold."""


class LostStep(RuntimeError):
    """A worker was asked to go on with a step it does not hold (its process was restarted)."""


class RolloutWorker:
    """One engine and a search tool, in a Ray actor process."""

    def __init__(self, spec: WorkerSpec, tool: SearchTool | Toolbox) -> None:
        # Ray forwards an actor's output to the driver: a loading bar per worker and start tells
        # nobody anything (the driver's own loads keep theirs)
        hf_logging.disable_progress_bar()
        torch.set_num_threads(spec.threads)
        start_process(spec.device, spec.cpu_speedups)
        model, tokenizer = load_model(Path(spec.model_dir))
        model.to(spec.device).eval()
        self.protocol = agent_protocol(tokenizer, tool, spec.max_obs_tokens)
        stopper = StepStopper(tokenizer, self.protocol.stop_tags)
        self.engine = build_engine(spec.engine, model, tokenizer, stopper, spec.cpu_speedups)
        self.local = LocalRollout(self.engine, self.protocol, tool)
        self.version = 0  # 0: the starting model's weights
        self.sampler: ForestSampler | None = None  # the step in progress (difficulty budgets)

    def ready(self) -> int:
        """The version of the weights this worker holds (a call that waits for its start)."""
        return self.version

    def sample(self, block: Block) -> Rollout:
        """The forests of ``block`` (``rollout.sampler.ForestSampler.sample``)."""
        return self._sampler(block).sample()

    def begin(self, block: Block) -> None:
        """Begin ``block``'s step by rounds (``ForestSampler``), sampling the initial chains now."""
        self.sampler = self._sampler(block)
        self.sampler.begin()

    def _sampler(self, block: Block) -> ForestSampler:
        """``block``'s sampler, refused (``StaleWeights``) unless this worker holds its weights."""
        if block.version != self.version:
            raise StaleWeights(f"asked for weights version {block.version}, holds {self.version}")
        return self.local.sampler(block.prompts, block.draw, block.keys)

    def outcomes(self) -> TreeOutcomes:
        """Each tree's successes and scored leaves so far."""
        return self._step().outcomes()

    def expand(self, counts: Sequence[int], n_max: int) -> None:
        """One round: ``counts[t]`` expansions from this block's tree t; ``n_max``: the batch's."""
        self._step().expand(np.asarray(counts, dtype=np.int64), n_max)

    def finish(self) -> Rollout:
        """The step's forests; the step is done."""
        rollout = self._step().finish()
        self.sampler = None  # its cached contexts are freed
        return rollout

    def _step(self) -> ForestSampler:
        if self.sampler is None:
            raise LostStep("no step in progress here: begin it (again)")
        return self.sampler

    def update_weights(self, state: Mapping[str, torch.Tensor], version: int) -> float:
        """Load ``state`` (Hugging Face names) into the engine; returns the seconds it took."""
        t0 = time.perf_counter()
        self.engine.update_weights(state)
        self.version = version
        return time.perf_counter() - t0

    def pad_id(self) -> int:
        return self.engine.pad_id


class RetrieverActor:
    """A search tool held once, in a Ray actor, for every rollout worker."""

    def __init__(self, tool: SearchTool) -> None:
        self.tool = tool

    def search(self, queries: list[str], topk: int = 3) -> list[list[Passage]]:
        return self.tool.search(queries, topk)


class ActorTool:
    """A ``SearchTool`` asking the ``RetrieverActor`` named ``name``, found on first use: a name,
    not an actor handle, so a worker's constructor arguments stay plain values (see module)."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._actor: Any = None

    def search(self, queries: list[str], topk: int = 3) -> list[list[Passage]]:
        import ray

        if self._actor is None:
            self._actor = ray.get_actor(self.name)
        hits: list[list[Passage]] = ray.get(self._actor.search.remote(list(queries), topk))
        return hits


class RayRollout:
    """Forests sampled by ``workers`` rollout workers on Ray (see the module docstring). spec: what
    each worker runs; tool: the search tool (a ``/retrieve`` client goes to each worker as it is,
    any other is held once by a ``RetrieverActor``) or the toolbox (sent as it is: its tools must
    pickle); cpus_per_worker / gpus_per_worker: Ray's reservation per worker; max_restarts: per dead
    worker before the run fails; start_timeout: seconds for all workers to start (more than the
    cluster has is refused at once: ``ClusterTooSmall``). Ray must be running; call ``close``."""

    def __init__(
        self,
        spec: WorkerSpec,
        tool: SearchTool | Toolbox,
        workers: int,
        cpus_per_worker: float = 1.0,
        gpus_per_worker: float = 0.0,
        max_restarts: int = 3,
        start_timeout: float = 600.0,
    ) -> None:
        import ray

        check_ask(Ask("worker", workers, cpus_per_worker, gpus_per_worker), start_timeout)
        self.max_restarts = max_restarts
        remote_tool: SearchTool | Toolbox = tool
        self._retriever: Any = None  # Ray actor handles, typed loosely
        if not isinstance(tool, RemoteRetriever | Toolbox):  # an in-process index: held once
            name = f"treegrpo-retriever-{uuid.uuid4().hex}"
            retriever: Any = ray.remote(num_cpus=0)(RetrieverActor)
            self._retriever = retriever.options(name=name).remote(tool)
            remote_tool = ActorTool(name)
        actor: Any = ray.remote(
            num_cpus=cpus_per_worker, num_gpus=gpus_per_worker, max_restarts=max_restarts
        )(RolloutWorker)
        self.workers: list[Any] = [actor.remote(spec, remote_tool) for _ in range(workers)]
        self.version = 0
        self._state: Any = None  # the object-store reference of the latest weights
        what = f"{workers} rollout workers ({cpus_per_worker} CPUs, {gpus_per_worker} GPUs)"
        wait_started([w.ready.remote() for w in self.workers], start_timeout, what, self.close)
        self.pad_id: int = ray.get(self.workers[0].pad_id.remote())
        self.restarts = 0
        self.sync_seconds = 0.0  # the latest weight push, slowest worker

    def sample(self, prompts: Sequence[list[int]], draw: Draw) -> Rollout:
        """The batch's forest: one contiguous block of prompts per worker, merged."""
        split = [b.tolist() for b in np.array_split(np.arange(len(prompts)), len(self.workers))]
        shape, rewards = draw.shape, draw.rewards
        blocks: dict[int, Block] = {}  # worker → its block
        for i, keys in enumerate(split):
            if keys:
                mine = replace(draw, rewards=rewards.only(keys) if rewards is not None else None)
                blocks[i] = Block([prompts[k] for k in keys], keys, mine, self.version)
        if shape.expansion.budget == "difficulty" and shape.l > 0:
            check_scorer(shape, rewards is not None)
            return self._by_rounds(blocks, shape, len(prompts))
        calls: dict[int, _Call] = {i: ("sample", (block,)) for i, block in blocks.items()}
        parts = self._on_each(calls, {i: [] for i in blocks})
        return merge_rollouts([(blocks[i].keys, parts[i]) for i in sorted(parts)], len(prompts))

    def _by_rounds(self, blocks: dict[int, Block], shape: TreeShape, n_prompts: int) -> Rollout:
        """The batch's forest under a difficulty budget: each round allocated over the whole
        batch's trees (the worker blocks' trees in block order are the batch's in tree order,
        as in one process), each worker expanding its own."""
        busy = list(blocks)
        done: dict[int, list[_Call]] = {i: [] for i in busy}  # each worker's step so far
        self._on_each({i: ("begin", (block,)) for i, block in blocks.items()}, done)
        spent = 0.0  # seconds allocating, here; the workers count their own
        for _ in range(shape.l):
            got = self._on_each({i: ("outcomes", ()) for i in busy}, done)
            t0 = time.perf_counter()
            counts = share_by_difficulty(TreeOutcomes.concat([got[i] for i in busy]), shape)
            ends = np.cumsum([len(got[i].prompt) for i in busy])[:-1]
            n_max = int(counts.max())
            parts = dict(zip(busy, np.split(counts, ends), strict=True))  # (T_i,) per worker
            spent += time.perf_counter() - t0
            self._on_each({i: ("expand", (parts[i].tolist(), n_max)) for i in busy}, done)
        out = self._on_each({i: ("finish", ()) for i in busy}, done)
        merged = merge_rollouts([(blocks[i].keys, out[i]) for i in busy], n_prompts)
        merged.expansion_s += spent
        return merged

    def _on_each(self, calls: dict[int, _Call], done: dict[int, list[_Call]]) -> dict[int, Any]:
        """Call ``calls[i] = (method, args)`` on every worker i and gather the results. A worker
        that died (or restarted: ``LostStep``) is revived, its step replayed from ``done[i]`` (the
        calls that changed it, in order, each added once it returns) and the call made again."""
        import ray

        refs = {i: [self._call(i, call)] for i, call in calls.items()}
        out: dict[int, Any] = {}
        while refs:
            i, pending = next(iter(refs.items()))
            try:
                out[i] = ray.get(pending)[-1]
            except (ray.exceptions.RayActorError, LostStep) as err:
                self._revive(i, err)
                refs[i] = [self._call(i, call) for call in [*done[i], calls[i]]]
                continue
            del refs[i]
            if calls[i][0] in ("begin", "expand"):
                done[i].append(calls[i])
        return out

    def _call(self, i: int, call: _Call) -> Any:
        name, args = call
        return getattr(self.workers[i], name).remote(*args)

    def update_weights(self, weights: torch.nn.Module | Mapping[str, torch.Tensor]) -> None:
        """Load the weights into every worker, through the object store once (``sync_seconds``)."""
        import ray

        t0 = time.perf_counter()
        state = {k: v.detach().to("cpu") for k, v in state_dict_of(weights).items()}
        self.version += 1
        self._state = ray.put(state)
        times = ray.get([w.update_weights.remote(self._state, self.version) for w in self.workers])
        self.sync_seconds = time.perf_counter() - t0
        what = f"weights version {self.version} to {len(self.workers)} workers"
        log.info("%s in %.2f s (slowest load %.2f s)", what, self.sync_seconds, max(times))

    def close(self) -> None:
        """Stop the workers and the retriever actor."""
        import ray

        for actor in [*self.workers, *([self._retriever] if self._retriever else [])]:
            ray.kill(actor, no_restart=True)
        self.workers = []

    def _revive(self, i: int, err: Exception) -> None:
        """Wait for worker ``i``'s new process (Ray restarts it) and give it the current weights."""
        import ray

        self.restarts += 1
        if self.restarts > self.max_restarts * len(self.workers):
            raise RuntimeError(f"rollout worker {i} keeps dying: {err}") from err
        log.warning("rollout worker %d died (%s); restarting it and redoing its prompts", i, err)
        worker = self.workers[i]
        ray.get(worker.ready.options(max_task_retries=-1).remote())
        if self._state is not None:
            ray.get(worker.update_weights.remote(self._state, self.version))


def start_workers(
    cluster: ClusterConfig,
    model_dir: Path,
    tool: SearchTool | Toolbox,
    max_obs_tokens: int,
    engine: EngineKind,
    cpu_speedups: bool | None,
) -> RayRollout:
    """Join (or start) the Ray cluster of ``cluster.ray_address`` and start its rollout workers on
    ``model_dir``, after refusing what it can never hold (``distributed.cluster.join_ray``)."""
    cluster = join_ray(cluster)
    assert cluster.cpus_per_worker is not None  # sized by join_ray
    spec = WorkerSpec(
        str(model_dir),
        engine,
        max_obs_tokens,
        device="cuda" if cluster.gpus_per_worker > 0 else "cpu",
        cpu_speedups=cpu_speedups,
        threads=max(1, int(cluster.cpus_per_worker)),
    )
    return RayRollout(
        spec,
        tool,
        cluster.rollout_workers,
        cluster.cpus_per_worker,
        cluster.gpus_per_worker,
        cluster.max_restarts,
    )
