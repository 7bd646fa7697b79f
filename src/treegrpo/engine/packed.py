"""oneDNN-packed weights for the linear layers while generating on CPU.

On CPU, ``F.linear`` in fp32 runs on MKL's sgemm. On the AMD EPYC machines this project is
developed and tested on, MKL takes its AVX2 path: about 100 GFLOPS on one core at large batch,
and much less at the few rows of a decode step, where the weights stream from memory. oneDNN
with each weight reordered once into its blocked layout (what inductor's CPU freezing does)
runs 2.2-2.5x faster at every row count measured, in the same fp32 (``bench/linear.py``,
BENCHMARKS.md). Generation is then mostly linear layers, so this is the engine's largest CPU
lever.

``PackedLinears(model)`` finds the model's ``nn.Linear`` modules (also the base layers inside
peft's LoRA wrappers); ``with packed.active():`` routes their forward through the packed copies
and restores it on exit, so training, which needs autograd, never sees them. A packed copy is
rebuilt only when its weight changed (the tensor's version counter, bumped by every in-place
optimizer update, or a new storage), so an RL step repacks once after each update. Results
equal ``F.linear`` up to fp32 rounding (summation order), checked in the tests.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import torch
from torch import nn


def available(model: nn.Module) -> bool:
    """Whether packing applies: oneDNN present, the model on CPU in fp32."""
    mkldnn = getattr(torch.ops, "mkldnn", None)
    if not torch.backends.mkldnn.is_available() or mkldnn is None:
        return False
    if not hasattr(mkldnn, "_linear_pointwise") or not hasattr(mkldnn, "_reorder_linear_weight"):
        return False
    p = next(model.parameters(), None)
    return p is not None and p.device.type == "cpu" and p.dtype == torch.float32


class PackedLinears:
    """The packed weights of a model's linear layers, kept in step with the live weights."""

    def __init__(self, model: nn.Module, batch_hint: int = 16) -> None:
        self.linears = [m for m in model.modules() if type(m) is nn.Linear]
        self.batch_hint = batch_hint
        # id(module) -> (weight version, storage pointer, packed weight)
        self._packs: dict[int, tuple[int, int, torch.Tensor]] = {}

    def _packed(self, m: nn.Linear) -> torch.Tensor:
        w = m.weight
        key = (w._version, w.data_ptr())
        hit = self._packs.get(id(m))
        if hit is not None and hit[:2] == key:
            return hit[2]
        packed: torch.Tensor = torch.ops.mkldnn._reorder_linear_weight(w.detach(), self.batch_hint)
        self._packs[id(m)] = (*key, packed)
        return packed

    @contextmanager
    def active(self) -> Iterator[None]:
        """Within the block, every found linear layer computes with its packed weight."""
        with torch.no_grad():
            for m in self.linears:
                m.forward = _packed_forward(self._packed(m), m.bias)  # type: ignore[method-assign]
        try:
            yield
        finally:
            for m in self.linears:
                m.__dict__.pop("forward", None)


def _packed_forward(packed: torch.Tensor, bias: torch.Tensor | None) -> Any:
    def forward(x: torch.Tensor) -> torch.Tensor:  # (..., in) -> (..., out)
        out: torch.Tensor = torch.ops.mkldnn._linear_pointwise(x, packed, bias, "none", [], "")
        return out

    return forward
