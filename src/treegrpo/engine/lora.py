"""peft LoRA layers as one linear map, W = W₀ + Σₐ sₐ Bₐ Aₐ, for gradient-free forwards.

peft computes a LoRA projection as W₀x + b₀ + Σₐ sₐ Bₐ(Aₐ x) (Hu et al. 2021, eq. 3): the base
product, then per adapter two thin products, a scaling and an addition over the whole
(tokens, out) output. While generating, the adapters do not change between optimizer steps,
so the same map is one product with the folded weight W₀ + Σₐ sₐ Bₐ Aₐ (the r-rank update
costs out·r·in multiply-adds once, not per token). ``fold`` reads a layer as that map (or says
it cannot: DoRA and other variants, transposed weights, active dropout); the lean decode step
stacks folded weights into its fused products (``engine.lean``) and ``FoldedLoRA`` routes a
whole model's LoRA layers through them for prefill and the trainer's old log-probs, where the
SmolLM2 + LoRA prefill of bench/rollout.py's R workload runs 1.20× faster (one forward of
8 × 400 tokens: 1.27×).

A folded weight is a copy of W₀ per adapted projection (SmolLM2-135M with LoRA on every
projection: 0.43 GB in fp32), rebuilt when the base, A or B tensors change (their version
counters, bumped by in-place optimizer updates, or their storage) or the active adapters do.
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F

from treegrpo.models import onednn


@dataclass
class Folded:
    """One projection as y = x Wᵀ + b with W = W₀ + Σₐ sₐ Bₐ Aₐ and b = b₀ + Σₐ sₐ b_Bₐ: the
    base layer plus its active LoRA adapters (Hu et al. 2021, eq. 3), the sum peft's forward
    computes as W₀x + sₐ Bₐ(Aₐx)."""

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

    def bias(self, n: int) -> torch.Tensor:
        out: torch.Tensor = (
            self.base.bias if self.base.bias is not None else self.base.weight.new_zeros(n)
        )
        for _, b, s in self.adapters:
            if b.bias is not None:
                out = out + s * b.bias
        return out


def fold(m: Any) -> Folded | None:
    """``m`` as one linear map: a plain ``nn.Linear``, or a peft LoRA ``Linear`` (a
    ``base_layer`` plus ``lora_A``/``lora_B`` per adapter) whose forward is exactly W₀x + b₀ +
    Σₐ sₐ Bₐ(Aₐ x); None for anything else (DoRA and other variants, weights stored transposed,
    dropout active in training mode, layers that are not ``nn.Linear``)."""
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


class FoldedLoRA:
    """Within ``active()``, every peft LoRA layer of ``model`` that folds computes
    x Wᵀ + b with its folded weight; a layer whose adapters are disabled, merged, not plain LoRA
    or under dropout in training mode runs its own forward, decided at each call (so
    ``disable_adapter()`` inside the block, as for the reference log-probs, still gives the base
    model), and so does every call with autograd on: the folded weight carries no gradient."""

    def __init__(self, model: torch.nn.Module) -> None:
        self.layers = [m for m in model.modules() if _is_lora(m)]
        # id(layer) -> (key of the fold, weight, bias); packed or plain as the key says
        self._weights: dict[int, tuple[tuple[Any, ...], torch.Tensor, torch.Tensor | None]] = {}

    def __bool__(self) -> bool:
        return bool(self.layers)

    def active(self, packed: bool = False) -> AbstractContextManager[None]:
        """Route the LoRA layers' forwards; ``packed``: keep folded weights in oneDNN's blocked
        layout (where the engine packs its linear layers everywhere)."""
        return onednn.routed(self.layers, lambda m: self._forward_of(m, packed))

    def _forward_of(self, m: Any, packed: bool) -> Any:
        own = type(m).forward

        def forward(x: torch.Tensor, *args: Any, **kwargs: Any) -> torch.Tensor:
            f = fold(m)
            if f is None or not f.adapters or args or kwargs or torch.is_grad_enabled():
                out: torch.Tensor = own(m, x, *args, **kwargs)
                return out
            w, b = self._weight(m, f, packed)
            return onednn.linear(x, w, b) if packed else F.linear(x, w, b)

        return forward

    def _weight(self, m: Any, f: Folded, packed: bool) -> tuple[torch.Tensor, torch.Tensor | None]:
        key = (packed, *f.key())
        hit = self._weights.get(id(m))
        if hit is None or hit[0] != key:
            with torch.no_grad():
                w = f.weight()
                bias = f.bias(m.out_features) if f.has_bias else None
                hit = (key, onednn.pack(w) if packed else w, bias)
            self._weights[id(m)] = hit
        return hit[1], hit[2]


def _is_lora(m: Any) -> bool:
    """A peft LoRA layer wrapping a linear one (``base_layer`` plus ``lora_A``)."""
    return isinstance(getattr(m, "base_layer", None), torch.nn.Linear) and hasattr(m, "lora_A")
