"""The Ray cluster of a run: starting or joining it, the CPUs each rollout worker and training
rank reserves when left unset (``sized``), and a refusal before any actor starts when the cluster
can never hold them (``fit_error``); docs/configuration.md, "The `cluster` section"."""

from __future__ import annotations

import logging
import math
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal

from treegrpo.train.config import ClusterConfig

log = logging.getLogger(__name__)

Kind = Literal["worker", "rank"]
NAMES: dict[Kind, tuple[str, str]] = {  # kind: (its actors in words, the flag of their number)
    "worker": ("rollout workers", "--cluster.rollout-workers"),
    "rank": ("training ranks", "--cluster.train-ranks"),
}


class ClusterTooSmall(ValueError):
    """The Ray cluster can never hold the actors asked for (``fit_error`` says why)."""


@dataclass(frozen=True)
class Ask:
    """What ``count`` actors of one kind ask Ray for, each."""

    kind: Kind
    count: int
    cpus: float
    gpus: float


def asks_of(cluster: ClusterConfig) -> list[Ask]:
    """The rollout workers' and training ranks' asks of a ``sized`` ``cluster``."""
    assert cluster.cpus_per_worker is not None and cluster.cpus_per_rank is not None
    return [
        Ask("worker", cluster.rollout_workers, cluster.cpus_per_worker, cluster.gpus_per_worker),
        Ask("rank", cluster.train_ranks, cluster.cpus_per_rank, cluster.gpus_per_rank),
    ]


def fair_share(cpus: float, actors: int) -> float:
    """Each of ``actors`` actors' equal share of ``cpus`` cores, as Ray takes it: whole cores
    from one core up (older Rays refuse fractions above one), else the fraction rounded down to
    Ray's resolution of 1e-4 (2 cores, 4 actors: 0.5 each; 2 cores, 3 actors: 0.6666 each)."""
    if actors < 1:
        raise ValueError(f"actors must be >= 1, got {actors}")
    share = cpus / actors
    return float(math.floor(share)) if share >= 1 else math.floor(share * 1e4) / 1e4


def sized(cluster: ClusterConfig, cpus: float, local: bool) -> ClusterConfig:
    """``cluster`` with its unset CPUs per worker and per rank filled in, on a cluster of
    ``cpus`` CPUs: an equal share (``fair_share``) for every worker and rank on a ``local``
    cluster (one this process starts), one each on a joined one. Values that are set are kept."""
    actors = cluster.rollout_workers + cluster.train_ranks
    share = fair_share(cpus, actors) if local and actors else 1.0
    return replace(
        cluster,
        cpus_per_worker=share if cluster.cpus_per_worker is None else cluster.cpus_per_worker,
        cpus_per_rank=share if cluster.cpus_per_rank is None else cluster.cpus_per_rank,
    )


def fit_error(
    asks: Sequence[Ask], total: Mapping[str, float], largest: Mapping[str, float]
) -> str | None:
    """Why Ray can never place ``asks`` on a cluster of ``total`` resources whose largest node
    has ``largest`` (CPU, GPU), in one line naming the flags; None if they fit."""
    for res, field in (("CPU", "cpus"), ("GPU", "gpus")):
        used = [a for a in asks if a.count > 0 and getattr(a, field) > 0]
        need = sum(a.count * getattr(a, field) for a in used)
        have = total.get(res, 0.0)
        if need > have + 1e-9:
            parts = " + ".join(
                f"{a.count} {NAMES[a.kind][0]} x {_num(getattr(a, field))} {res}" for a in used
            )
            per = " / ".join(f"--cluster.{field}-per-{a.kind}" for a in used)
            counts = " / ".join(NAMES[a.kind][1] for a in used)
            hint = "fractions such as 0.5 are fine" if res == "CPU" else "0: on CPU cores"
            return (
                f"{parts} ask Ray for {_num(need)} {res}s but the cluster has {_num(have)}: "
                f"lower {per} ({hint}) or {counts}, or add nodes to the cluster"
            )
        for a in used:
            each, node = getattr(a, field), largest.get(res, 0.0)
            if each > node + 1e-9:
                return (
                    f"one of the {NAMES[a.kind][0]} asks Ray for {_num(each)} {res}s but the "
                    f"largest node of the cluster has {_num(node)}: lower "
                    f"--cluster.{field}-per-{a.kind}"
                )
    return None


def _num(x: float) -> str:
    return f"{x:g}"


def refuse_unless_fits(asks: Sequence[Ask], timeout: float | None = None) -> None:
    """Raise ``ClusterTooSmall`` (``fit_error``) if Ray's cluster can never hold ``asks``; with a
    ``timeout``, also log when they will wait for resources held now (by other jobs, or by
    actors just stopped, which Ray frees a moment later: hence info, not a warning)."""
    import ray

    total = ray.cluster_resources()  # type: ignore[no-untyped-call]
    largest: dict[str, float] = {}
    for node in ray.nodes():  # type: ignore[no-untyped-call]
        if node.get("Alive"):
            for k, v in node.get("Resources", {}).items():
                largest[k] = max(largest.get(k, 0.0), v)
    error = fit_error(asks, total, largest)
    if error is not None:
        raise ClusterTooSmall(error)
    if timeout is not None:
        free = ray.available_resources()  # type: ignore[no-untyped-call]
        for res, field in (("CPU", "cpus"), ("GPU", "gpus")):
            need = sum(a.count * getattr(a, field) for a in asks)
            if need > free.get(res, 0.0) + 1e-9:
                log.info(
                    "asking Ray for %s %ss, %s free now of %s: waiting up to %.0f s for them",
                    _num(need),
                    res,
                    _num(free.get(res, 0.0)),
                    _num(total.get(res, 0.0)),
                    timeout,
                )


def check_ask(ask: Ask, timeout: float) -> None:
    """Refuse, before any of its actors starts, an ``ask`` for no actors (``ValueError``) or for
    more than the cluster can ever hold (``refuse_unless_fits``, given ``timeout``)."""
    if ask.count < 1:
        raise ValueError(f"{ask.kind}s must be >= 1, got {ask.count}")
    refuse_unless_fits([ask], timeout)


def wait_started(refs: Any, timeout: float, what: str, stop: Callable[[], None]) -> Any:
    """``ray.get(refs)`` for calls that return once their actors are placed and started; when they
    have not within ``timeout`` seconds, ``stop()`` (the actors never started: nothing to leave)
    and raise a ``RuntimeError`` saying what Ray has free, instead of waiting on in silence."""
    import ray

    try:
        return ray.get(refs, timeout=timeout)
    except ray.exceptions.GetTimeoutError:
        stop()
        raise RuntimeError(
            f"{what} did not start within {timeout:.0f} s; Ray has "
            f"{ray.available_resources()} free of {ray.cluster_resources()}"  # type: ignore[no-untyped-call]
        ) from None


def _quiet_token_notice(record: logging.LogRecord) -> bool:
    """A logging filter dropping Ray's notice, printed on every start, that it turned on token
    authentication for a new local cluster (nothing to do); its warning of a cluster without
    authentication is kept."""
    return not record.getMessage().startswith("Token authentication is enabled for this Ray")


# Where Ray logs the notice (Ray's module path; if Ray moves it, the filter just does nothing).
_TOKEN_LOGGER = "ray._private.authentication.authentication_token_setup"


def init_ray(address: str | None = None, **kwargs: Any) -> None:
    """``ray.init``: join the cluster at ``address`` (None: start a local one unless the
    environment names one in ``RAY_ADDRESS``), without the dashboard and leaving logging to the
    application; ``kwargs`` go to ``ray.init`` (``num_cpus``, ``log_to_driver``, ...)."""
    import ray

    logging.getLogger(_TOKEN_LOGGER).addFilter(_quiet_token_notice)  # added once, however often
    ray.init(address=address, include_dashboard=False, configure_logging=False, **kwargs)


def join_ray(cluster: ClusterConfig) -> ClusterConfig:
    """Join the Ray cluster of ``cluster.ray_address`` (None: start a local one), once; ``cluster``
    ``sized`` to it, after refusing (``ClusterTooSmall``) workers and ranks it can never hold."""
    import ray

    if not ray.is_initialized():
        init_ray(cluster.ray_address)
    local = cluster.ray_address is None and not os.environ.get("RAY_ADDRESS")
    cpus = float(ray.cluster_resources().get("CPU", 0.0))  # type: ignore[no-untyped-call]
    cluster = sized(cluster, cpus, local)
    refuse_unless_fits(asks_of(cluster))
    return cluster
