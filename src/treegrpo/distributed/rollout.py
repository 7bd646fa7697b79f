"""Rollout workers on Ray: each worker holds an engine and searches through a shared tool; the
driver splits a step's prompts over them and merges their forests into one.

- ``RolloutWorker`` (a Ray actor, one per worker: a GPU with vLLM, or CPU cores with
  ``HFEngine``) loads the starting model, builds its engine and samples forests for the prompts
  it is given (``rollout.sampler.sample_forest`` with the prompts' indices in the whole batch,
  so a prompt's trees are the ones one process samples: the sampler's randomness is per
  prompt). A whole prompt goes to one worker, so its prefix cache serves all of the prompt's
  trees.
- ``RetrieverActor`` holds the search tool once (a BM25 or dense index over a corpus) for all
  workers (``ActorTool``, which finds it by name); a ``/retrieve`` server's client
  (``tools.http_client``) goes to the workers as it is, each calling the server itself.
- ``RayRollout`` is the driver, a ``rollout.source.RolloutSource`` for the trainer: ``sample``
  shards the prompts in contiguous blocks, one per worker, gathers the rollouts and merges them
  (``rollout.records.merge_rollouts``); ``update_weights`` puts the policy's weights (LoRA
  merged, ``engine.base.state_dict_of``) into Ray's object store once and loads them into
  every worker, with a version number that every later ``sample`` call carries, so no worker
  samples from old weights.
- Faults: workers restart when their process dies (Ray's ``max_restarts``); the driver then
  waits for the new process, loads the current weights into it and samples its block again.
  The other blocks are kept, so the step's forest is the one it would have been. Ray re-creates
  a worker from its constructor arguments, which are therefore plain values (no object or
  actor references: Ray cannot promise those on a restart, ray-project/ray#53727).
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from transformers.utils import logging as hf_logging

from treegrpo.agent.protocol import SearchProtocol
from treegrpo.agent.stops import StepStopper
from treegrpo.core.budget import TreeShape
from treegrpo.distributed.cluster import Ask, join_ray, not_started, refuse_unless_fits
from treegrpo.engine.base import EngineKind, state_dict_of
from treegrpo.engine.build import build_engine
from treegrpo.engine.cpu.speedups import start_process
from treegrpo.engine.sampling import SamplingParams
from treegrpo.models.load import load_model
from treegrpo.rollout.records import Rollout, merge_rollouts
from treegrpo.rollout.sampler import AgentLimits
from treegrpo.rollout.scoring import LeafRewards
from treegrpo.rollout.source import LocalRollout
from treegrpo.tools.base import Passage, SearchTool
from treegrpo.tools.http_client import RemoteRetriever
from treegrpo.train.config import ClusterConfig

log = logging.getLogger(__name__)


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


class StaleWeights(RuntimeError):
    """A worker was asked to sample with weights it does not hold."""


class RolloutWorker:
    """One engine and a search tool, in a Ray actor process."""

    def __init__(self, spec: WorkerSpec, tool: SearchTool) -> None:
        # Ray forwards an actor's output to the driver: a weight-loading bar per worker and
        # start (folded by Ray's log deduplication, with a notice of its own) tells nobody
        # anything; the driver's own loads keep theirs
        hf_logging.disable_progress_bar()
        torch.set_num_threads(spec.threads)
        start_process(spec.device, spec.cpu_speedups)
        model, tokenizer = load_model(Path(spec.model_dir))
        model.to(spec.device).eval()
        self.engine = build_engine(
            spec.engine, model, tokenizer, StepStopper(tokenizer), spec.cpu_speedups
        )
        self.protocol = SearchProtocol(tokenizer, spec.max_obs_tokens)
        self.tool = tool
        self.version = 0  # 0: the starting model's weights

    def ready(self) -> int:
        """The version of the weights this worker holds (a call that waits for its start)."""
        return self.version

    def sample(
        self,
        prompts: Sequence[list[int]],
        keys: Sequence[int],
        shape: TreeShape,
        sampling: SamplingParams,
        limits: AgentLimits,
        seed: int,
        version: int,
        rewards: LeafRewards | None = None,
    ) -> Rollout:
        """The forests of ``prompts``, the batch's prompts ``keys``, with weights ``version``;
        ``rewards``: the reward of these prompts' leaves (for the informed expansion rule)."""
        if version != self.version:
            raise StaleWeights(f"asked for weights version {version}, holds {self.version}")
        local = LocalRollout(self.engine, self.protocol, self.tool)
        return local.sample(prompts, shape, sampling, limits, seed, rewards, prompt_keys=keys)

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
    """A ``SearchTool`` that asks the ``RetrieverActor`` named ``name``, found on first use: a
    name, not an actor handle, so a worker's constructor arguments stay plain values (see the
    module docstring)."""

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
    """Forests sampled by ``workers`` rollout workers on Ray (see the module docstring).

    spec: what each worker runs; tool: the search tool (a ``/retrieve`` client goes to each
    worker as it is; any other tool is held once by a ``RetrieverActor``); workers: how many;
    cpus_per_worker / gpus_per_worker: what Ray reserves for each; max_restarts: how often a
    dead worker is restarted before the run fails; start_timeout: seconds to wait for all
    workers to be placed and started (more than the cluster has is refused at once:
    ``distributed.cluster.ClusterTooSmall``). Ray must be running (``ray.init()``, or
    ``ray start`` and ``ray.init(address="auto")`` on a cluster); call ``close`` when done."""

    def __init__(
        self,
        spec: WorkerSpec,
        tool: SearchTool,
        workers: int,
        cpus_per_worker: float = 1.0,
        gpus_per_worker: float = 0.0,
        max_restarts: int = 3,
        start_timeout: float = 600.0,
    ) -> None:
        import ray

        if workers < 1:
            raise ValueError(f"workers must be >= 1, got {workers}")
        refuse_unless_fits(
            [Ask("worker", workers, cpus_per_worker, gpus_per_worker)], start_timeout
        )
        self.spec = spec
        self.max_restarts = max_restarts
        remote_tool: SearchTool = tool
        self._retriever: Any = None  # Ray actor handles, typed loosely
        if not isinstance(tool, RemoteRetriever):  # an in-process index: held once, shared
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
        try:  # every worker placed and started, or a clear error instead of a silent wait
            ray.get([w.ready.remote() for w in self.workers], timeout=start_timeout)
        except ray.exceptions.GetTimeoutError:
            self.close()
            what = f"{workers} rollout workers ({cpus_per_worker} CPUs, {gpus_per_worker} GPUs)"
            raise not_started(what, start_timeout) from None
        self._pad_id: int = ray.get(self.workers[0].pad_id.remote())
        self.restarts = 0
        self.sync_seconds = 0.0  # the latest weight push, slowest worker

    @property
    def pad_id(self) -> int:
        return self._pad_id

    def sample(
        self,
        prompts: Sequence[list[int]],
        shape: TreeShape,
        sampling: SamplingParams,
        limits: AgentLimits,
        seed: int,
        rewards: LeafRewards | None = None,
    ) -> Rollout:
        """The batch's forest: one contiguous block of prompts per worker, merged."""
        import ray

        blocks = [b.tolist() for b in np.array_split(np.arange(len(prompts)), len(self.workers))]
        jobs = {
            i: self._submit(i, prompts, keys, shape, sampling, limits, seed, rewards)
            for i, keys in enumerate(blocks)
            if keys
        }
        parts: dict[int, Rollout] = {}
        while jobs:
            i, ref = next(iter(jobs.items()))
            try:
                parts[i] = ray.get(ref)
            except ray.exceptions.RayActorError as err:  # the worker's process died
                self._revive(i, err)
                keys = blocks[i]
                jobs[i] = self._submit(i, prompts, keys, shape, sampling, limits, seed, rewards)
                continue
            del jobs[i]
        return merge_rollouts([(blocks[i], parts[i]) for i in sorted(parts)], len(prompts))

    def update_weights(self, weights: torch.nn.Module | Mapping[str, torch.Tensor]) -> None:
        """Put the weights into the object store once and load them into every worker; the
        slowest worker's time is ``sync_seconds`` (logged)."""
        import ray

        t0 = time.perf_counter()
        state = {k: v.detach().to("cpu") for k, v in state_dict_of(weights).items()}
        self.version += 1
        self._state = ray.put(state)
        times = ray.get([w.update_weights.remote(self._state, self.version) for w in self.workers])
        self.sync_seconds = time.perf_counter() - t0
        log.info(
            "weights version %d to %d workers in %.2f s (slowest load %.2f s)",
            self.version,
            len(self.workers),
            self.sync_seconds,
            max(times),
        )

    def close(self) -> None:
        """Stop the workers and the retriever actor."""
        import ray

        for actor in [*self.workers, *([self._retriever] if self._retriever else [])]:
            ray.kill(actor, no_restart=True)
        self.workers = []

    def _submit(
        self,
        i: int,
        prompts: Sequence[list[int]],
        keys: list[int],
        shape: TreeShape,
        sampling: SamplingParams,
        limits: AgentLimits,
        seed: int,
        rewards: LeafRewards | None,
    ) -> Any:
        """Worker ``i`` samples the batch's prompts ``keys``."""
        mine = rewards.only(keys) if rewards is not None else None
        return self.workers[i].sample.remote(
            [prompts[k] for k in keys], keys, shape, sampling, limits, seed, self.version, mine
        )

    def _revive(self, i: int, err: Exception) -> None:
        """Wait for worker ``i``'s new process (Ray restarts it) and give it the current
        weights."""
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
    tool: SearchTool,
    max_obs_tokens: int,
    engine: EngineKind,
    cpu_speedups: bool | None,
) -> RayRollout:
    """Join (or start) the Ray cluster of ``cluster.ray_address`` and start its rollout
    workers on ``model_dir``; the workers and ranks that the cluster can never hold are refused
    first (``distributed.cluster.join_ray``)."""
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
