"""The update on several ranks: PyTorch FSDP2 (``fully_shard``) in Ray actors. ``TrainRank`` holds
its shard of the policy, the reference and the AdamW state and runs ``train.update.ppo_update`` on
the micro-batches that ``FSDPLearner`` (the ``train.step.Learner`` of ``rl_step``) deals it
(docs/configuration.md, "The `cluster` section")."""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
from torch.distributed.checkpoint.state_dict import (
    StateDictOptions,
    get_model_state_dict,
    set_model_state_dict,
)
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import FSDPModule, fully_shard
from torch.distributed.tensor import DTensor, distribute_tensor
from transformers.utils import logging as hf_logging

from treegrpo.distributed.cluster import Ask, check_ask, join_ray, wait_started
from treegrpo.models.load import load_model
from treegrpo.train.config import ClusterConfig, ModelConfig, OptimConfig
from treegrpo.train.policy import prepare_policy
from treegrpo.train.precision import autocast_dtype
from treegrpo.train.task import TrainSettings
from treegrpo.train.trainer import make_optimizer
from treegrpo.train.update import Part, UpdatePlan, UpdateStats, ppo_update

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RankSpec:
    """What every training rank holds."""

    model_dir: str
    """The starting model (its architecture; the weights come from the driver)."""
    model: ModelConfig
    """LoRA or full fine-tuning, gradient checkpointing, precision (device: see ``cuda``)."""
    optim: OptimConfig
    """AdamW and its schedule, as ``train.trainer.make_optimizer`` builds them."""
    reference: bool = False
    """Hold a frozen copy of the starting model for the KL term (full fine-tuning with kl > 0)."""
    seed: int = 0
    """The run seed (LoRA's initial adapters; they are replaced by the driver's anyway)."""
    cuda: bool = False
    """Ranks on the GPU Ray gives each of them (NCCL), else on CPU cores (gloo)."""
    threads: int = 1
    """torch threads of a CPU rank."""


def shard(model: Any, mesh: Any) -> Any:
    """FSDP2 over ``mesh``: each decoder layer (the model's ``_no_split_modules`` classes) is one
    unit, the embeddings, final norm and head are the root's; gradients are summed over ranks,
    not averaged (each rank's loss is already its share of the mean)."""
    layers: set[str] = set()
    for m in model.modules():
        layers.update(getattr(m, "_no_split_modules", None) or ())
    for m in model.modules():
        if type(m).__name__ in layers:
            fully_shard(m, mesh=mesh)
    fully_shard(model, mesh=mesh)
    for m in model.modules():
        if isinstance(m, FSDPModule):  # each unit reduces its own gradients: a plain sum
            m.set_gradient_divide_factor(1.0)
            m.set_force_sum_reduction_for_comms(True)  # gloo has no pre-multiplied sum
    return model


def full_optimizer_state(optimizer: torch.optim.Optimizer) -> dict[str, Any]:
    """The optimizer's state with every sharded tensor gathered, on the CPU, in the layout of a
    single-process ``state_dict`` (parameter indices). Collective: every rank calls it."""
    sd = optimizer.state_dict()  # its per-parameter dicts are the optimizer's own: copy
    # the same order on every rank
    state = {i: {k: _gathered(v) for k, v in sd["state"][i].items()} for i in sorted(sd["state"])}
    return {"state": state, "param_groups": sd["param_groups"]}


def _gathered(value: Any) -> Any:
    if isinstance(value, DTensor):  # a shard: the whole tensor, gathered from every rank
        value = value.full_tensor()
    return value.detach().cpu() if torch.is_tensor(value) else value


def load_full_optimizer_state(optimizer: torch.optim.Optimizer, state: dict[str, Any]) -> None:
    """Load a single-process optimizer state into an optimizer over sharded parameters: each
    tensor shaped like its parameter is cut into the parameter's shard."""
    params = [p for g in optimizer.param_groups for p in g["params"]]
    sd = {"state": {}, "param_groups": state["param_groups"]}
    for i, st in state["state"].items():
        p = params[int(i)]
        sd["state"][i] = {
            k: distribute_tensor(v.to(p.device), p.device_mesh, p.placements)
            if isinstance(p, DTensor) and torch.is_tensor(v) and v.shape == p.shape
            else v
            for k, v in st.items()
        }
    optimizer.load_state_dict(sd)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("", 0))
        return int(s.getsockname()[1])


class TrainRank:
    """One rank of the sharded update, in a Ray actor process."""

    def __init__(self, spec: RankSpec, rank: int, world_size: int) -> None:
        hf_logging.disable_progress_bar()  # as in a rollout worker: no bars from actors
        torch.set_num_threads(spec.threads)
        self.spec, self.rank, self.world_size = spec, rank, world_size
        self.device = torch.device("cuda", 0) if spec.cuda else torch.device("cpu")
        self.policy: Any = None
        self.reference: Any = None

    def address(self) -> tuple[str, int]:
        """Where rank 0 listens for the process group."""
        import ray

        return ray.util.get_node_ip_address(), free_port()  # type: ignore[no-untyped-call]

    def setup(
        self,
        master: tuple[str, int],
        state: Mapping[str, torch.Tensor],
        optimizer_state: dict[str, Any],
        scheduler_state: dict[str, Any] | None,
    ) -> None:
        """Join the process group, build the sharded policy (and reference) and load the
        driver's weights, optimizer state and schedule position into them."""
        os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"] = master[0], str(master[1])
        backend = "nccl" if self.spec.cuda else "gloo"
        if self.spec.cuda:
            torch.cuda.set_device(self.device)
        dist.init_process_group(backend, rank=self.rank, world_size=self.world_size)
        mesh = init_device_mesh(self.device.type, (self.world_size,))
        cfg = replace(self.spec.model, device=str(self.device), cpu_speedups=False)
        model, _ = load_model(Path(self.spec.model_dir))
        policy = prepare_policy(model, cfg, seed=self.spec.seed).to(self.device)
        self.policy = shard(policy, mesh)
        set_model_state_dict(
            self.policy, dict(state), options=StateDictOptions(full_state_dict=True)
        )
        if self.spec.reference:
            reference, _ = load_model(Path(self.spec.model_dir))
            reference.eval().requires_grad_(False).to(self.device)
            self.reference = shard(reference, mesh)
        self.optimizer, self.scheduler = make_optimizer(self.policy, self.spec.optim)
        if optimizer_state["state"]:
            load_full_optimizer_state(self.optimizer, optimizer_state)
        if scheduler_state is not None:
            self.scheduler.load_state_dict(scheduler_state)
        self.amp = autocast_dtype(cfg.dtype, self.device)
        self.policy.eval()

    def update(self, plan: UpdatePlan) -> UpdateStats:
        return ppo_update(
            self.policy, self.reference, self.optimizer, self.scheduler, plan, self.amp
        )

    def model_state(self) -> dict[str, Any]:
        """The full weights on the CPU (rank 0; the others return an empty dict)."""
        opts = StateDictOptions(full_state_dict=True, cpu_offload=True)
        return get_model_state_dict(self.policy, options=opts)

    def optimizer_state(self) -> dict[str, Any]:
        return full_optimizer_state(self.optimizer)

    def scheduler_state(self) -> dict[str, Any]:
        return dict(self.scheduler.state_dict())

    def close(self) -> None:
        if dist.is_initialized():
            dist.destroy_process_group()


def deal(minis: Sequence[Sequence[Part]], ranks: int) -> list[list[list[Part]]]:
    """Each mini-batch's micro-batches dealt to ``ranks`` ranks, largest first to the least loaded,
    shares padded to one count with weight-0 copies of the smallest: shares[rank][mini] → parts."""
    shares: list[list[list[Part]]] = [[] for _ in range(ranks)]
    for parts in minis:
        load = [0] * ranks
        split: list[list[Part]] = [[] for _ in range(ranks)]
        for part in sorted(parts, key=lambda p: -p.batch.input_ids.numel()):
            r = min(range(ranks), key=lambda i: (load[i], i))
            split[r].append(part)
            load[r] += part.batch.input_ids.numel()
        width = max(len(s) for s in split)
        if parts:
            smallest = min(parts, key=lambda p: p.batch.input_ids.numel())
            for s in split:
                s.extend(Part(smallest.batch, 0.0, counted=False) for _ in range(width - len(s)))
        for r in range(ranks):
            shares[r].append(split[r])
    return shares


class FSDPLearner:
    """The update on ``ranks`` ``TrainRank`` actors, from ``policy``'s weights and ``optimizer``'s
    and ``scheduler``'s states. Too many ranks for the cluster: ``ClusterTooSmall`` at once; waiting
    past ``start_timeout``: ``RuntimeError``. Needs Ray running; call ``close``."""

    def __init__(
        self,
        spec: RankSpec,
        ranks: int,
        policy: Any,
        optimizer: torch.optim.Optimizer,
        scheduler: Any | None,
        cpus_per_rank: float = 1.0,
        gpus_per_rank: float = 0.0,
        start_timeout: float = 600.0,
    ) -> None:
        import ray

        check_ask(Ask("rank", ranks, cpus_per_rank, gpus_per_rank), start_timeout)
        actor: Any = ray.remote(num_cpus=cpus_per_rank, num_gpus=gpus_per_rank)(TrainRank)
        self.ranks: list[Any] = [actor.remote(spec, r, ranks) for r in range(ranks)]
        what = f"{ranks} training ranks ({cpus_per_rank} CPUs, {gpus_per_rank} GPUs each)"
        stop = partial(self.close, graceful=False)
        master = wait_started(self.ranks[0].address.remote(), start_timeout, what, stop)
        state = ray.put({k: v.detach().cpu() for k, v in policy.state_dict().items()})
        opt = optimizer.state_dict()
        sched = scheduler.state_dict() if scheduler is not None else None
        ray.get([r.setup.remote(master, state, opt, sched) for r in self.ranks])
        self.gather_seconds = 0.0  # the latest weight gather into the driver

    def update(self, plan: UpdatePlan) -> UpdateStats:
        """``plan`` run on the ranks, each on its share of every mini-batch (``deal``)."""
        import ray

        shares = deal(plan.minis, len(self.ranks))
        out: list[UpdateStats] = ray.get(
            [
                r.update.remote(replace(plan, minis=share, demo_share=float(k == 0)))
                for k, (r, share) in enumerate(zip(self.ranks, shares, strict=True))
            ]
        )
        stats = out[0]  # grad norms and skips are the same on every rank
        for other in out[1:]:
            stats.merge(other)
        return stats

    def load_into(self, policy: Any, scheduler: Any | None) -> None:
        """The gathered weights into ``policy``, the schedule's position into ``scheduler``."""
        import ray

        t0 = time.perf_counter()
        states = ray.get([r.model_state.remote() for r in self.ranks])
        with torch.no_grad():
            policy.load_state_dict(states[0])
        if scheduler is not None:
            scheduler.load_state_dict(ray.get(self.ranks[0].scheduler_state.remote()))
        self.gather_seconds = time.perf_counter() - t0
        log.info("weights gathered from %d ranks in %.2f s", len(self.ranks), self.gather_seconds)

    def load_optimizer_into(self, optimizer: torch.optim.Optimizer) -> None:
        """The gathered AdamW state into the driver's ``optimizer`` (before a checkpoint)."""
        import ray

        states = ray.get([r.optimizer_state.remote() for r in self.ranks])
        optimizer.load_state_dict(states[0])

    def close(self, graceful: bool = True) -> None:
        """Leave the process group (``graceful``) and stop the ranks."""
        import ray

        if graceful:
            with contextlib.suppress(Exception):  # a dead rank: killing it is all that is left
                ray.get([r.close.remote() for r in self.ranks], timeout=30)
        for r in self.ranks:
            ray.kill(r, no_restart=True)
        self.ranks = []


def start_learner(
    cluster: ClusterConfig,
    model_dir: Path,
    settings: TrainSettings,
    policy: Any,
    optimizer: torch.optim.Optimizer,
    scheduler: Any | None,
) -> FSDPLearner:
    """Join (or start) the Ray cluster of ``cluster.ray_address`` and start ``cluster.train_ranks``
    ranks from ``policy``, ``optimizer`` and ``scheduler`` (made by ``settings``' model and
    optimizer configs; a reference model when full fine-tuning has a KL term), after refusing
    what the cluster can never hold (``distributed.cluster.join_ray``)."""
    cluster = join_ray(cluster)
    assert cluster.cpus_per_rank is not None  # sized by join_ray
    model = settings.model
    spec = RankSpec(
        str(model_dir),
        model,
        settings.optim,
        reference=settings.algo.kl_coef > 0 and model.lora_rank == 0,
        seed=settings.run.seed,
        cuda=cluster.gpus_per_rank > 0,
        threads=max(1, int(cluster.cpus_per_rank)),
    )
    return FSDPLearner(
        spec,
        cluster.train_ranks,
        policy,
        optimizer,
        scheduler,
        cluster.cpus_per_rank,
        cluster.gpus_per_rank,
    )
