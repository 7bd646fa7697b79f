"""Denormals are flushed after ``flush_denormals`` in the calling thread and in threads created
afterwards (as torch's CPU workers are when the commands call it first)."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest
import torch

from treegrpo.engine.cpu.denormal import flush_denormals

TINY = 1e-39  # a denormal in fp32


def _kept() -> bool:
    return bool(torch.tensor([TINY], dtype=torch.float32).mul(1.0).item() != 0.0)


@pytest.fixture
def restore() -> Iterator[None]:
    yield
    torch.set_flush_denormal(False)


def test_flushed_here_and_in_new_threads(restore) -> None:  # type: ignore[no-untyped-def]
    torch.set_flush_denormal(False)
    assert _kept()
    if not flush_denormals():
        pytest.skip("CPU without FTZ/DAZ")
    assert not _kept()
    seen: list[bool] = []
    t = threading.Thread(target=lambda: seen.append(_kept()))
    t.start()
    t.join()
    assert seen == [False]  # a thread created afterwards inherits the mode
