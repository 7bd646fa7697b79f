"""One switch for the CPU speed-ups of a model's own forwards (``enabled``): ``CpuSpeedups.attach``
routes its linear layers on oneDNN and its peft LoRA layers on folded weights (docs/library.md,
"The engine" and "CPU speed-ups")."""

from __future__ import annotations

import copy
import types
import weakref
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Literal

import torch
import torch.nn.functional as F
from torch import nn

from treegrpo.engine.cpu import onednn
from treegrpo.engine.cpu.denormal import flush_denormals
from treegrpo.engine.cpu.lora import FoldedLoRA
from treegrpo.engine.cpu.memory import release_freed_memory


def enabled(where: nn.Module | torch.device | str, switch: bool | None) -> bool:
    """``switch``, or (None) whether the model's parameters (the device) are on CPU."""
    if switch is not None:
        return switch
    if isinstance(where, nn.Module):
        p = next(where.parameters(), None)
        return p is not None and p.device.type == "cpu"
    return torch.device(where).type == "cpu"


def start_process(device: torch.device | str, switch: bool | None) -> bool:
    """For a command computing on ``device``, before any tensor work: flush denormals to zero
    (``engine.cpu.denormal``) where the switch is on; returns whether it is."""
    on = enabled(device, switch)
    if on:
        flush_denormals()
    return on


def release_memory(on: bool) -> None:
    """Freed heap memory back to the system (``engine.cpu.memory``) where the switch is on; the
    trainer calls it after every RL step, the SFT loop every few dozen updates."""
    if on:
        release_freed_memory()


_ATTACHED: weakref.WeakKeyDictionary[nn.Module, CpuSpeedups] = weakref.WeakKeyDictionary()


class CpuSpeedups:
    """The routes installed on one model. packed: where gradient-free forwards use packed weights
    (True, "decode" inside ``decoding()`` only, False); trainable: forwards with autograd on oneDNN;
    fold_lora: LoRA layers on folded weights in gradient-free forwards."""

    def __init__(
        self,
        model: nn.Module,
        packed: bool | Literal["decode"],
        trainable: bool,
        fold_lora: bool,
    ) -> None:
        _check_supported(model, packed, trainable)
        self.packed: bool | Literal["decode"] = packed
        self.trainable = trainable
        self._packs = onednn.PackedLinears(model)
        lora = FoldedLoRA(model) if fold_lora else None
        self.lora = lora if lora else None  # None also when the model has no LoRA layers
        self._decoding = False
        routes: list[tuple[nn.Module, Any]] = [(m, self._linear) for m in self._packs.linears]
        routes += [(m, self._lora) for m in (self.lora.layers if self.lora else [])]
        for layer, route in routes:  # an instance attribute over the class's forward
            layer.__dict__["forward"] = _Route(route, layer)
        self._routed = [layer for layer, _ in routes]

    @classmethod
    def attach(
        cls,
        model: nn.Module,
        packed: bool | Literal["decode"] | None = None,
        trainable: bool | None = None,
        fold_lora: bool | None = None,
    ) -> CpuSpeedups:
        """The model's routes, installed at the first call and kept while the model lives;
        each argument left None keeps its current value (at the first call: ``packed`` =
        ``onednn.engine_mode``, ``trainable`` = ``onednn.preferred``, ``fold_lora`` = True)."""
        have = _ATTACHED.get(model)
        if have is None:
            packed = onednn.engine_mode(model) if packed is None else packed
            trainable = onednn.preferred(model) if trainable is None else trainable
            have = _ATTACHED[model] = cls(model, packed, trainable, fold_lora is not False)
            return have
        _check_supported(model, packed, trainable)
        if packed is not None:
            have.packed = packed
        if trainable is not None:
            have.trainable = trainable
        if fold_lora is not None and fold_lora != (have.lora is not None):
            have.detach()
            return cls.attach(model, have.packed, have.trainable, fold_lora)
        return have

    @staticmethod
    def of(model: nn.Module) -> CpuSpeedups | None:
        """The routes attached to ``model``, if any."""
        return _ATTACHED.get(model)

    def detach(self) -> None:
        """Give every routed layer its own forward back."""
        for m in self._routed:
            m.__dict__.pop("forward", None)
        self._routed = []
        for model, have in list(_ATTACHED.items()):
            if have is self:
                del _ATTACHED[model]

    @property
    def packs_now(self) -> bool:
        """Whether a gradient-free forward here and now computes on packed weights."""
        return self.packed is True or (self.packed == "decode" and self._decoding)

    @contextmanager
    def decoding(self) -> Iterator[None]:
        """Decode steps: packed weights also where ``packed`` is "decode"."""
        before, self._decoding = self._decoding, True
        try:
            yield
        finally:
            self._decoding = before

    def _linear(self, m: nn.Linear, x: torch.Tensor) -> torch.Tensor:
        if torch.is_grad_enabled():
            if self.trainable:
                return onednn.trainable_linear(x, m.weight, m.bias)
        elif self.packs_now:
            return onednn.linear(x, self._packs.weight_of(m), m.bias)
        return F.linear(x, m.weight, m.bias)

    def _lora(self, m: Any, x: torch.Tensor, *args: Any, **kwargs: Any) -> torch.Tensor:
        if args or kwargs or torch.is_grad_enabled() or self.lora is None:
            out: torch.Tensor = type(m).forward(m, x, *args, **kwargs)
            return out
        return self.lora.forward(m, x, packed=self.packs_now)


def _check_supported(model: nn.Module, packed: object, trainable: object) -> None:
    """Refuse oneDNN routes where oneDNN cannot run them."""
    if (packed or trainable) and not onednn.supported(model):
        raise ValueError("packed or trainable linear layers need oneDNN and a CPU fp32 model")


class _Route:
    """A layer's routed forward, ``route(layer, *args)``. A deep copy of the model (a reference
    model made with ``copy.deepcopy``) gets plain layers: its own forward, bound to the copy."""

    def __init__(self, route: Any, layer: nn.Module) -> None:
        self.route, self.layer = route, layer

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.route(self.layer, *args, **kwargs)

    def __deepcopy__(self, memo: dict[int, Any]) -> Any:
        layer = copy.deepcopy(self.layer, memo)  # the copy being made (memo holds it)
        return types.MethodType(type(layer).forward, layer)
