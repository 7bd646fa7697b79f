"""peft LoRA layers as one linear map for gradient-free forwards: peft computes W₀x + b₀ +
Σₐ sₐ Bₐ(Aₐ x) (Hu et al. 2021, eq. 3), one product with W = W₀ + Σₐ sₐ Bₐ Aₐ while the adapters
do not change; that copy of W₀ is rebuilt when the base, A or B tensors (version counter or
storage) or the active adapters change. Why and measurements: docs/library.md, "CPU speed-ups".
"""

from __future__ import annotations

import weakref
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F

from treegrpo.engine.cpu import onednn


@dataclass
class Folded:
    """A base layer and its active LoRA adapters as y = x Wᵀ + b, W = W₀ + Σₐ sₐ Bₐ Aₐ and
    b = b₀ + Σₐ sₐ b_Bₐ."""

    base: torch.nn.Linear
    adapters: list[tuple[torch.nn.Linear, torch.nn.Linear, float]]  # (A, B, scaling s)

    @property
    def has_bias(self) -> bool:
        return self.base.bias is not None or any(b.bias is not None for _, b, _ in self.adapters)

    def key(self) -> list[Any]:
        """What the folded weight depends on: each tensor's version and storage, each scale."""
        layers = [self.base, *(m for a, b, _ in self.adapters for m in (a, b))]
        tensors = [t for m in layers for t in (m.weight, m.bias) if t is not None]
        return [*((t._version, t.data_ptr()) for t in tensors), *(s for *_, s in self.adapters)]

    def weight(self) -> torch.Tensor:
        w = self.base.weight  # (out, in)
        for a, b, s in self.adapters:
            w = w + s * (b.weight @ a.weight)  # (out, r) @ (r, in)
        return w

    def bias(self) -> torch.Tensor:
        base = self.base.bias
        b0 = base if base is not None else self.base.weight.new_zeros(self.base.out_features)
        return b0 + sum(s * b.bias for _, b, s in self.adapters if b.bias is not None)


def fold(m: Any) -> Folded | None:
    """``m`` as one linear map: a plain ``nn.Linear``, or a peft LoRA ``Linear`` whose forward is
    exactly W₀x + b₀ + Σₐ sₐ Bₐ(Aₐ x); None for anything else."""
    if type(m) is torch.nn.Linear:
        return Folded(m, [])
    base = getattr(m, "base_layer", None)
    if type(base) is not torch.nn.Linear or not hasattr(m, "lora_A"):
        return None
    if getattr(m, "fan_in_fan_out", False):
        return None
    if m.disable_adapters or m.merged:  # the forward is the base layer alone
        return None if m.disable_adapters and m.merged else Folded(base, [])
    adapters = []
    for name in m.active_adapters:
        if name not in m.lora_A:
            continue
        a, b, drop = m.lora_A[name], m.lora_B[name], m.lora_dropout[name]
        variant = name in getattr(m, "lora_variant", {}) or getattr(m, "use_dora", {}).get(name)
        if variant or type(a) is not torch.nn.Linear:  # DoRA and the like: not W₀ + s·B·A
            return None
        if type(b) is not torch.nn.Linear or a.weight.dtype != base.weight.dtype:
            return None
        if m.training and not isinstance(drop, torch.nn.Identity) and drop.p > 0:
            return None
        adapters.append((a, b, float(m.scaling[name])))
    return Folded(base, adapters)


class Fused:
    """Linear layers that read the same input as one product, y = x [W_1; …; W_m]ᵀ + [b_1; …], split
    into m outputs; a part is an ``nn.Linear`` or a LoRA layer ``fold`` reads. ``refresh`` rebuilds
    it when a part's weight, bias (version counter or storage) or active adapters changed."""

    def __init__(self, modules: Sequence[Any]) -> None:
        self.modules = list(modules)
        self.sizes = [m.out_features for m in self.modules]
        self._key: tuple[Any, ...] | None = None
        self.weight: torch.Tensor | None = None  # (Σ out, in), or its packed layout
        self.bias: torch.Tensor | None = None  # (Σ out,) or None

    def refresh(self, packed: bool) -> None:
        """Bring the stacked weight in step; none (``ready`` False) when a part no longer folds (an
        adapter that is not plain LoRA, dropout in training mode): the caller calls the modules."""
        folds = [fold(m) for m in self.modules]
        if any(f is None for f in folds):
            self._key, self.weight, self.bias = None, None, None
            return
        terms = [f for f in folds if f is not None]
        key = (packed, *(k for f in terms for k in f.key()))
        if key == self._key:
            return
        with torch.no_grad():
            w = torch.cat([f.weight() for f in terms])
            self.bias = None
            if any(f.has_bias for f in terms):
                self.bias = torch.cat([f.bias() for f in terms])
            self.weight = onednn.pack(w) if packed else w
        self._key = key

    @property
    def ready(self) -> bool:
        """Whether the last ``refresh`` built a weight."""
        return self.weight is not None

    @property
    def packed(self) -> bool:
        """Whether the stacked weight is in oneDNN's layout (as of the last ``refresh``)."""
        return self._key is not None and bool(self._key[0])

    def __call__(self, x: torch.Tensor, split: int | None = None) -> tuple[torch.Tensor, ...]:
        """The m outputs; with ``split`` two: the first ``split`` features and the rest."""
        assert self.weight is not None, "call LeanDecoder.prepare (or refresh) first"
        y = (onednn.linear if self.packed else F.linear)(x, self.weight, self.bias)
        sizes = self.sizes if split is None else [split, y.shape[-1] - split]
        parts: tuple[torch.Tensor, ...] = y.split(sizes, dim=-1)
        return parts


class FoldedLoRA:
    """A model's peft LoRA layers on folded weights: ``forward(m, x)`` computes x Wᵀ + b where ``m``
    folds and calls ``m``'s own forward where it does not, decided at each call (so
    ``disable_adapter()`` still gives the base model). Gradient-free forwards only."""

    def __init__(self, model: torch.nn.Module) -> None:
        self.layers = [m for m in model.modules() if is_lora_layer(m)]
        # layer -> its folded weight, as a one-part ``Fused`` product (made at first use)
        self._weights: weakref.WeakKeyDictionary[Any, Fused] = weakref.WeakKeyDictionary()

    def __bool__(self) -> bool:
        return bool(self.layers)

    def forward(self, m: Any, x: torch.Tensor, packed: bool = False) -> torch.Tensor:
        """Layer ``m`` on ``x``; ``packed``: its folded weight in oneDNN's blocked layout."""
        f = fold(m)
        if f is None or not f.adapters:
            out: torch.Tensor = type(m).forward(m, x)
            return out
        product = self._weights.get(m)
        if product is None:
            product = self._weights[m] = Fused([m])
        product.refresh(packed)  # rebuilt only when the fold's key changed
        return product(x)[0]


def is_lora_layer(m: Any) -> bool:
    """A peft LoRA layer wrapping a linear one (``base_layer`` plus ``lora_A``)."""
    return isinstance(getattr(m, "base_layer", None), torch.nn.Linear) and hasattr(m, "lora_A")
