"""Denormals are flushed inside the block only, and nesting keeps the mode until the end."""

from __future__ import annotations

import pytest
import torch

from treegrpo.models.denormal import flush_denormals

TINY = 1e-39  # a denormal in fp32


def _kept() -> bool:
    return bool(torch.tensor([TINY], dtype=torch.float32).mul(1.0).item() != 0.0)


@pytest.mark.skipif(not torch.set_flush_denormal(False), reason="CPU without FTZ/DAZ")
def test_flushed_inside_only_and_nested() -> None:
    assert _kept()
    with flush_denormals():
        assert not _kept()
        with flush_denormals():
            assert not _kept()
        assert not _kept()  # still inside the outer block
    assert _kept()

    @flush_denormals()
    def job() -> bool:
        return _kept()

    assert job() is False and _kept()
