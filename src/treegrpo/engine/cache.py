"""A transformers KV-cache layer that writes into a preallocated buffer: ``DynamicLayer`` grows by
``torch.cat`` at every decode step, copying the whole cache each time (O(L²) over a step; a fifth
of decode time on CPU in bench/rollout.py), while the engine knows how long a step can get, so it
reserves the room once and writes each new column in place.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from transformers import DynamicCache
from transformers.cache_utils import DynamicLayer


class BufferLayer(DynamicLayer):
    """Keys and values in (B, H, capacity, D) buffers; ``keys``/``values`` are views of the
    filled part. Grows by doubling if a write would overflow."""

    def __init__(
        self,
        capacity: int,
        k_buf: torch.Tensor | None = None,
        v_buf: torch.Tensor | None = None,
        length: int = 0,
    ) -> None:
        super().__init__()  # type: ignore[no-untyped-call]
        self.capacity = capacity
        self._len = length
        if k_buf is not None and v_buf is not None:
            self._adopt(k_buf, v_buf)

    def _adopt(self, k_buf: torch.Tensor, v_buf: torch.Tensor) -> None:
        self._k, self._v = k_buf, v_buf
        self.capacity = k_buf.shape[-2]
        self.device = k_buf.device
        self.is_initialized = True
        self._expose()

    def _allocate(self, like: torch.Tensor, capacity: int) -> None:
        b, h, _, d = like.shape
        self._adopt(like.new_empty(b, h, capacity, d), like.new_empty(b, h, capacity, d))

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
        self._expose()

    def _expose(self) -> None:
        """``keys`` and ``values``: views of the filled columns."""
        self.keys, self.values = self._k[:, :, : self._len], self._v[:, :, : self._len]

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

    def batch_select_indices(self, indices: torch.Tensor) -> None:
        if self.is_initialized:
            self._k, self._v = self._k[indices], self._v[indices]
            self._expose()

    def keep_rows(self, keep: Sequence[int]) -> None:
        """Keep rows ``keep`` (ascending), in place: only the filled columns of each row that moves
        are copied up to its new index (``batch_select_indices`` would copy the whole buffer); the
        buffers keep their strides, so attention sees the same memory layout."""
        if not self.is_initialized:
            return
        n = self._len
        for j, i in enumerate(keep):
            if i != j:
                self._k[j, :, :n] = self._k[i, :, :n]
                self._v[j, :, :n] = self._v[i, :, :n]
        self._k, self._v = self._k[: len(keep)], self._v[: len(keep)]
        self._expose()


def assemble_cache(
    rows: Sequence[Sequence[torch.Tensor]], room: int, config: Any, n_layers: int
) -> tuple[DynamicCache, int]:
    """A cache whose row i holds ``rows[i]``'s segment KVs (each (layers, 2, H, n, D)) concatenated
    and right-aligned in ``width`` (the longest row's columns), with room for ``room`` more columns;
    padding columns are zero (finite, masked by the caller). Returns the cache and ``width``."""
    lengths = [sum(p.shape[3] for p in parts) for parts in rows]
    width = max(lengths, default=0)
    ref = next((p for parts in rows for p in parts), None)
    cache = DynamicCache(config=config)
    if ref is None or width == 0:
        cache.layers = [BufferLayer(room) for _ in range(n_layers)]
        return cache, 0
    layers, _, heads, _, dim = ref.shape
    buf = ref.new_empty(layers, 2, len(rows), heads, width + room, dim)
    for i, (parts, n) in enumerate(zip(rows, lengths, strict=True)):
        buf[:, :, i, :, : width - n] = 0
        pos = width - n
        for p in parts:
            buf[:, :, i, :, pos : pos + p.shape[3]] = p
            pos += p.shape[3]
    cache.layers = [BufferLayer(0, buf[i, 0], buf[i, 1], width) for i in range(layers)]
    return cache, width


def keep_rows(cache: DynamicCache, keep: Sequence[int]) -> None:
    """Keep rows ``keep`` (ascending) of a cache from ``assemble_cache``, in place."""
    for layer in cache.layers:
        assert isinstance(layer, BufferLayer)
        layer.keep_rows(keep)
