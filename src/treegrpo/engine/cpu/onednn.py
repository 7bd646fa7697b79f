"""Linear layers on oneDNN instead of MKL on CPU, for generation (packed weights) and training: on
AMD CPUs with AVX-512, MKL's fp32 sgemm takes its AVX2 path while oneDNN
(``torch.ops.mkldnn._linear_pointwise``) uses AVX-512; elsewhere MKL is as fast. Results equal
``F.linear`` up to fp32 rounding. Measurements: docs/library.md, "CPU speed-ups".
"""

from __future__ import annotations

import functools
import os
import weakref
from typing import Any, Literal

import torch
from torch import nn

from treegrpo.engine.cpu.paths import LinearPath

ENV = "TREEGRPO_ONEDNN"  # "auto" (by CPU vendor), "1" (wherever supported) or "0" (never)


def supported(model: nn.Module) -> bool:
    """Whether oneDNN linear layers can run: oneDNN present, the model on CPU in fp32."""
    if not _kernels():
        return False
    p = next(model.parameters(), None)
    return p is not None and p.device.type == "cpu" and p.dtype == torch.float32


def preferred(model: nn.Module) -> bool:
    """Whether to use them by default: where ``supported`` and the CPU has AVX-512 that MKL leaves
    unused (AMD; MKL runs AVX-512 on Intel only), or as ``TREEGRPO_ONEDNN`` says."""
    return supported(model) and cpu_prefers()


def resolve_path(path: LinearPath) -> Literal["mkl", "onednn"]:
    """The path ``path`` names on this CPU for a CPU fp32 model, auto resolved as ``preferred``
    would; builds that hash their settings hash this. ValueError for onednn without the kernels."""
    if path == "mkl":
        return "mkl"
    if not _kernels():
        if path == "onednn":
            raise ValueError("linear path onednn: this torch build has no oneDNN linear kernels")
        return "mkl"
    return "onednn" if path == "onednn" or cpu_prefers() else "mkl"


def cpu_prefers() -> bool:
    """``preferred``'s choice: ``TREEGRPO_ONEDNN``, else this CPU's vendor and vector width."""
    choice = os.environ.get(ENV, "auto")
    if choice in ("0", "1"):
        return choice == "1"
    vendor = _cpu_vendor()
    if vendor == "AuthenticAMD":
        return _cpu_capability().startswith("AVX512")
    return vendor != "GenuineIntel"


def _kernels() -> bool:
    """Whether this torch has the oneDNN linear kernels."""
    mkldnn = getattr(torch.ops, "mkldnn", None)
    if not torch.backends.mkldnn.is_available() or mkldnn is None:
        return False
    return hasattr(mkldnn, "_linear_pointwise") and hasattr(mkldnn, "_reorder_linear_weight")


# Model width from which packed weights pay at decode even where MKL runs AVX-512.
DECODE_MIN_WIDTH = 512


def engine_mode(model: nn.Module) -> bool | Literal["decode"]:
    """Where the engine runs linear layers on packed weights: everywhere where ``preferred``; else
    in decode steps only ("decode") on a ``supported`` model at least ``DECODE_MIN_WIDTH`` wide
    (unless ``TREEGRPO_ONEDNN=0``); else nowhere (False). Why: docs/library.md, "CPU speed-ups"."""
    if preferred(model):
        return True
    if os.environ.get(ENV, "auto") == "0" or not supported(model):
        return False
    width = getattr(getattr(model, "config", None), "hidden_size", 0) or 0
    return "decode" if width >= DECODE_MIN_WIDTH else False


@functools.cache
def _cpu_vendor() -> str:
    """``vendor_id`` of /proc/cpuinfo ("GenuineIntel", "AuthenticAMD", …; "" if unknown)."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("vendor_id"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return ""


@functools.cache
def _cpu_capability() -> str:
    """The widest vector ISA ATen dispatches to here ("AVX512", "AVX2", "DEFAULT", …)."""
    return str(torch.backends.cpu.get_cpu_capability())


def linear(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
    """x Wᵀ + b on oneDNN: (..., in) × (out, in) → (..., out); ``weight`` plain or packed."""
    out: torch.Tensor = torch.ops.mkldnn._linear_pointwise(x, weight, bias, "none", [], "")
    return out


def pack(weight: torch.Tensor, batch_hint: int = 16) -> torch.Tensor:
    """``weight`` (out, in) reordered once into oneDNN's blocked layout for ``linear``."""
    packed: torch.Tensor = torch.ops.mkldnn._reorder_linear_weight(weight.detach(), batch_hint)
    return packed


class PackedLinears:
    """The packed weights of a model's linear layers, kept in step with the live weights; a weight
    is packed when first asked for (the lean decode step packs its own fused products)."""

    def __init__(self, model: nn.Module, batch_hint: int = 16) -> None:
        self.linears = [m for m in model.modules() if type(m) is nn.Linear]
        self.batch_hint = batch_hint
        # module -> (weight version, storage pointer, packed weight); weak, so a layer that is
        # gone (a deep copy's) leaves nothing behind
        self._packs: weakref.WeakKeyDictionary[nn.Module, tuple[int, int, torch.Tensor]] = (
            weakref.WeakKeyDictionary()
        )

    def weight_of(self, m: nn.Linear) -> torch.Tensor:
        """``m``'s packed weight, packed again if the weight changed since."""
        w = m.weight
        key = (w._version, w.data_ptr())
        hit = self._packs.get(m)
        if hit is not None and hit[:2] == key:
            return hit[2]
        packed = pack(w, self.batch_hint)
        self._packs[m] = (*key, packed)
        return packed


class _OneDNNLinear(torch.autograd.Function):
    """y = x Wᵀ + b with all three products of forward and backward on oneDNN."""

    @staticmethod
    def forward(
        ctx: Any, x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None
    ) -> torch.Tensor:
        ctx.save_for_backward(x, weight)
        ctx.has_bias = bias is not None
        return linear(x, weight, bias)  # (..., out)

    @staticmethod
    def backward(ctx: Any, g: torch.Tensor) -> tuple[torch.Tensor | None, ...]:
        x, weight = ctx.saved_tensors
        g = g.contiguous()
        grad_x = grad_w = grad_b = None
        if ctx.needs_input_grad[0]:
            grad_x = linear(g, weight.t().contiguous(), None)  # g W: (..., in)
        g2 = g.reshape(-1, g.shape[-1])  # (R, out)
        if ctx.needs_input_grad[1]:
            x2 = x.reshape(-1, x.shape[-1])  # (R, in)
            grad_w = linear(g2.t().contiguous(), x2.t().contiguous(), None)  # gᵀ x: (out, in)
        if ctx.has_bias and ctx.needs_input_grad[2]:
            grad_b = g2.sum(0)
        return grad_x, grad_w, grad_b


def trainable_linear(
    x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None
) -> torch.Tensor:
    """x Wᵀ + b with autograd, forward and both gradients on oneDNN with plain weights."""
    out: torch.Tensor = _OneDNNLinear.apply(x.contiguous(), weight, bias)  # type: ignore[no-untyped-call]
    return out
