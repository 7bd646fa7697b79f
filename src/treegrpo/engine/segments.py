"""Contexts as chains of cached segments: the prefix KV cache that turns and branches share. A
``Segment`` is a span of tokens appended to its parent context, with the keys and values the model
computed for exactly that span given exactly that prefix, so concatenating a path's KV along the
sequence axis *is* the KV cache of the whole context (docs/algorithm.md §8). A segment's ``kv``:
(layers, 2, kv_heads, n, head_dim), n = len(tokens); None when caching is off or for the root.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch


@dataclass(eq=False)
class Segment:
    parent: Segment | None
    tokens: list[int]
    kv: torch.Tensor | None = None
    length: int = field(init=False)  # tokens in the whole context up to and including this

    def __post_init__(self) -> None:
        self.length = len(self.tokens) + (self.parent.length if self.parent else 0)
        if self.kv is not None and self.kv.shape[3] != len(self.tokens):
            raise ValueError(
                f"kv covers {self.kv.shape[3]} positions, segment has {len(self.tokens)} tokens"
            )

    def path(self) -> list[Segment]:
        """Segments from the root to this one (the root first)."""
        out: list[Segment] = []
        seg: Segment | None = self
        while seg is not None:
            out.append(seg)
            seg = seg.parent
        return out[::-1]

    def context_tokens(self) -> list[int]:
        """All token ids of the context this segment ends."""
        return [t for seg in self.path() for t in seg.tokens]

    def kv_parts(self) -> list[torch.Tensor]:
        """The KV of each non-empty segment on the path, root first (empty when caching is off)."""
        parts = [seg.kv for seg in self.path() if seg.tokens]
        if any(p is None for p in parts):
            return []
        return parts  # type: ignore[return-value]

    def extend(self, tokens: list[int], kv: torch.Tensor | None = None) -> Segment:
        """A child segment; extending by nothing returns this segment itself."""
        if not tokens:
            return self
        return Segment(self, list(tokens), kv)
