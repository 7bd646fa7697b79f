"""A transformers KV-cache layer that writes into a preallocated buffer.

``DynamicLayer`` grows by ``torch.cat`` at every decode step, copying the whole cache each time
(O(L²) over a step; a fifth of decode time on CPU in bench/rollout.py). The engine knows how
long a step can get, so it reserves the room once and writes each new column in place.
"""

from __future__ import annotations

from typing import Any

import torch
from transformers import DynamicCache
from transformers.cache_utils import DynamicLayer


class BufferLayer(DynamicLayer):
    """Keys and values in (B, H, capacity, D) buffers; ``keys``/``values`` are views of the
    filled part. Grows by doubling if a write would overflow."""

    def __init__(
        self, capacity: int, keys: torch.Tensor | None = None, values: torch.Tensor | None = None
    ) -> None:
        super().__init__()  # type: ignore[no-untyped-call]
        self.capacity = capacity
        self._len = 0
        if keys is not None and values is not None:
            self._allocate(keys, max(capacity, keys.shape[-2]))
            self._write(keys, values)

    def _allocate(self, like: torch.Tensor, capacity: int) -> None:
        b, h, _, d = like.shape
        self._k = like.new_zeros(b, h, capacity, d)
        self._v = like.new_zeros(b, h, capacity, d)
        self.capacity = capacity
        self.device = like.device
        self.is_initialized = True

    def _write(self, keys: torch.Tensor, values: torch.Tensor) -> None:
        n = keys.shape[-2]
        if self._len + n > self.capacity:
            k, v = self._k[:, :, : self._len], self._v[:, :, : self._len]
            self._allocate(keys, max(2 * self.capacity, self._len + n))
            self._k[:, :, : self._len] = k
            self._v[:, :, : self._len] = v
        self._k[:, :, self._len : self._len + n] = keys
        self._v[:, :, self._len : self._len + n] = values
        self._len += n
        self.keys = self._k[:, :, : self._len]
        self.values = self._v[:, :, : self._len]

    def lazy_initialization(self, key_states: torch.Tensor, value_states: torch.Tensor) -> None:
        self._allocate(key_states, max(self.capacity, key_states.shape[-2]))

    def update(
        self, key_states: torch.Tensor, value_states: torch.Tensor, *args: Any, **kwargs: Any
    ) -> tuple[torch.Tensor, torch.Tensor]:
        if not self.is_initialized:
            self.lazy_initialization(key_states, value_states)
        self._write(key_states, value_states)
        assert self.keys is not None and self.values is not None
        return self.keys, self.values

    def get_seq_length(self) -> int:
        return self._len

    def batch_select_indices(self, indices: torch.Tensor) -> None:
        if self.is_initialized:
            self._k, self._v = self._k[indices], self._v[indices]
            self.keys = self._k[:, :, : self._len]
            self.values = self._v[:, :, : self._len]


def buffer_cache(
    config: Any, n_layers: int, capacity: int, data: torch.Tensor | None = None
) -> DynamicCache:
    """A DynamicCache of BufferLayers with room for ``capacity`` columns, optionally filled with
    ``data`` (layers, 2, B, H, L, D)."""
    cache = DynamicCache(config=config)
    if data is None:
        cache.layers = [BufferLayer(capacity) for _ in range(n_layers)]
    else:
        cache.layers = [BufferLayer(capacity, data[i, 0], data[i, 1]) for i in range(n_layers)]
    return cache
