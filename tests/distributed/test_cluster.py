"""The Ray cluster of a run (``distributed.cluster``): CPUs per worker and rank sized to a local
machine, requests the cluster can never hold refused with the numbers and the flags, and a start
that prints none of Ray's notices that need nothing done."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import textwrap
from dataclasses import replace
from pathlib import Path

import pytest

from treegrpo.distributed.cluster import (
    Ask,
    _quiet_token_notice,
    asks_of,
    fair_share,
    fit_error,
    sized,
)
from treegrpo.train.config import ClusterConfig

README = ClusterConfig(rollout_workers=2, train_ranks=2)  # the README's command on CPU


@pytest.mark.parametrize(
    ("cpus", "actors", "share"),
    [
        (2, 4, 0.5),
        (2, 2, 1.0),
        (2, 1, 2.0),
        (3, 2, 1.0),
        (16, 4, 4.0),
        (2, 3, 0.6666),
        (1, 8, 0.125),
    ],
)
def test_fair_share_splits_the_cores_as_ray_takes_them(
    cpus: int, actors: int, share: float
) -> None:
    got = fair_share(cpus, actors)
    assert got == share
    assert got * actors <= cpus  # all of them fit
    assert got < 1 or got == int(got)  # whole cores from one up


def test_unset_cpus_are_an_equal_share_of_a_local_cluster_and_one_on_a_joined_one() -> None:
    local = sized(README, cpus=2, local=True)
    assert (local.cpus_per_worker, local.cpus_per_rank) == (0.5, 0.5)
    assert fit_error(asks_of(local), {"CPU": 2.0}, {"CPU": 2.0}) is None
    assert sized(ClusterConfig(rollout_workers=2), cpus=2, local=True).cpus_per_worker == 1.0
    joined = sized(replace(README, ray_address="auto"), cpus=64, local=False)
    assert (joined.cpus_per_worker, joined.cpus_per_rank) == (1.0, 1.0)
    given = sized(ClusterConfig(2, cpus_per_worker=1.0, train_ranks=2), cpus=2, local=True)
    assert (given.cpus_per_worker, given.cpus_per_rank) == (1.0, 0.5)  # a given value is kept


def test_more_cpus_than_the_cluster_has_is_refused_with_the_numbers_and_the_flags() -> None:
    ones = sized(ClusterConfig(2, cpus_per_worker=1, train_ranks=2, cpus_per_rank=1), 2, True)
    error = fit_error(asks_of(ones), {"CPU": 2.0}, {"CPU": 2.0})
    assert error is not None and "\n" not in error
    assert "2 rollout workers x 1 CPU + 2 training ranks x 1 CPU ask Ray for 4 CPUs" in error
    assert "the cluster has 2" in error
    for flag in ("--cluster.cpus-per-worker", "--cluster.cpus-per-rank", "--cluster.train-ranks"):
        assert flag in error


def test_gpus_the_cluster_lacks_name_only_the_actors_that_ask_for_them() -> None:
    asks = [Ask("worker", 2, 0.5, 0.0), Ask("rank", 2, 0.5, 1.0)]
    error = fit_error(asks, {"CPU": 2.0}, {"CPU": 2.0})
    assert error is not None
    assert error.startswith("2 training ranks x 1 GPU ask Ray for 2 GPUs but the cluster has 0")
    assert "--cluster.gpus-per-rank" in error and "worker" not in error
    assert fit_error(asks, {"CPU": 2.0, "GPU": 2.0}, {"CPU": 2.0, "GPU": 2.0}) is None


def test_an_actor_larger_than_every_node_is_refused() -> None:
    asks = [Ask("worker", 0, 1.0, 0.0), Ask("rank", 2, 3.0, 0.0)]
    error = fit_error(asks, {"CPU": 8.0}, {"CPU": 4.0})  # two nodes of 4 CPUs: 6 fit in total
    assert error is None
    error = fit_error([Ask("rank", 1, 6.0, 0.0)], {"CPU": 8.0}, {"CPU": 4.0})
    assert error is not None and "largest node of the cluster has 4" in error
    assert "--cluster.cpus-per-rank" in error


def test_only_rays_token_notice_is_dropped() -> None:
    def record(message: str) -> logging.LogRecord:
        return logging.LogRecord("ray", logging.WARNING, __file__, 1, message, None, None)

    assert not _quiet_token_notice(
        record("Token authentication is enabled for this Ray cluster. Set RAY_AUTH_MODE=...")
    )
    assert _quiet_token_notice(record("Token authentication is disabled for this Ray cluster. ..."))


@pytest.mark.slow
def test_starting_workers_prints_none_of_rays_notices_that_need_nothing_done(
    model_dir: Path, tmp_path: Path
) -> None:
    """A fresh process (Ray prints each notice once per process) starts a local cluster and a
    rollout worker with an in-process search tool, the way `treegrpo train` does."""
    script = textwrap.dedent(
        f"""
        from pathlib import Path

        from treegrpo.distributed.rollout import start_workers
        from treegrpo.train.config import ClusterConfig

        class Tool:
            def search(self, queries, topk=3):
                return [[] for _ in queries]

        workers = start_workers(
            ClusterConfig(rollout_workers=1), Path({str(model_dir)!r}), Tool(), 100, "hf", False
        )
        print("pad id", workers.pad_id)
        workers.close()
        """
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}
    done = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert "pad id" in done.stdout
    assert "Token authentication is enabled" not in done.stderr
    assert "constructor arguments in the object store" not in done.stderr
    assert "Loading weights" not in done.stderr  # no progress bars forwarded from the worker
