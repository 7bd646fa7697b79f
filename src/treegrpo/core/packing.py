"""Paths that share prefixes, packed so that each shared token is laid out once.

The union of a prompt's paths is one row with every segment (the prompt, a step's action and
observation) once, each after its parent, and each token attends only to its own path:

    allowed(i, j) = seg(j) is an ancestor-or-self of seg(i)  and  j ≤ i,
    position(i)   = i's offset on its path (the prompt starts at 0),
    prev(i)       = the token before i on its path (−1 for the first prompt token),

so a causal LM given this mask and these positions computes for every token exactly what it
computes on each path alone (masked keys get zero weight), and the logits at prev(i) predict
token i. A loss that is a sum over paths of per-token terms is the same sum over the packed
tokens weighted by the paths through each token (``per_token``). A path is its list of segment
ids, root first; a segment sits under the same parent in every path that holds it. Shapes:
P paths, K segments, S packed tokens.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]
FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True)
class Layout:
    """The packing of P paths: segments in order, every token's segment, position and
    predecessor, and which path holds which segment."""

    segments: IntArray  # (K,) segment names, each after its parent (depth-first)
    parent: IntArray  # (K,) the parent segment's slot, −1 for a root
    start: IntArray  # (K,) the packed index of each segment's first token
    length: IntArray  # (K,) tokens per segment
    token_slot: IntArray  # (S,) each token's segment slot
    position: IntArray  # (S,) each token's offset on its path
    prev: IntArray  # (S,) the packed index of the token before it on its path (−1: none)
    member: BoolArray  # (P, K) path p holds segment k

    @property
    def n_tokens(self) -> int:
        return int(self.token_slot.size)

    def path_tokens(self, p: int) -> IntArray:
        """(n_p,) the packed indices of path ``p``'s tokens, in path order."""
        slots = np.flatnonzero(self.member[p])  # ancestors come first in the packing
        return np.concatenate(
            [np.arange(self.start[k], self.start[k] + self.length[k]) for k in slots]
        ).astype(np.int64)

    def ancestors(self) -> BoolArray:
        """(K, K) a[k, j]: segment j is an ancestor-or-self of segment k."""
        k = len(self.segments)
        out = np.eye(k, dtype=np.bool_)
        for slot in range(k):  # parents come first: a slot's row extends its parent's
            if self.parent[slot] >= 0:
                out[slot] |= out[self.parent[slot]]
        return out

    def attention(self) -> BoolArray:
        """(S, S) allowed(i, j): token i may attend to token j (module docstring)."""
        anc = self.ancestors()
        s = self.token_slot
        return anc[s[:, None], s[None, :]] & np.tri(len(s), dtype=np.bool_)

    def per_token(self, values: npt.ArrayLike) -> FloatArray:
        """(S,) Σ over the paths through each token of ``values`` (P,) (or (P, C) → (S, C))."""
        v = np.asarray(values, dtype=np.float64)
        if v.shape[0] != self.member.shape[0]:
            raise ValueError(f"values has {v.shape[0]} rows for {self.member.shape[0]} paths")
        by_slot = self.member.T.astype(np.float64) @ v  # (K,) or (K, C)
        return np.asarray(by_slot[self.token_slot])


def pack(paths: Sequence[Sequence[int]], lengths: Mapping[int, int]) -> Layout:
    """Lay out the union of ``paths`` (each a list of segment names, root first) once per
    segment, depth-first in the order the paths first reach them. ``lengths``: tokens per
    segment (a segment may be empty). Raises ValueError when a segment sits under two parents,
    a path repeats a segment, or a length is missing or negative."""
    if not paths:
        raise ValueError("pack needs at least one path")
    parent_of: dict[int, int | None] = {}  # segment → parent segment, None for a root
    children: dict[int, list[int]] = {}
    roots: list[int] = []
    for p, path in enumerate(paths):
        if not path:
            raise ValueError(f"path {p} is empty")
        if len(set(path)) != len(path):
            raise ValueError(f"path {p} holds a segment twice: {list(path)}")
        up: int | None = None
        for seg in path:
            seg = int(seg)
            if seg not in lengths or lengths[seg] < 0:
                raise ValueError(f"segment {seg} has no length (or a negative one)")
            if seg in parent_of:
                if parent_of[seg] != up:
                    raise ValueError(
                        f"segment {seg} sits under {parent_of[seg]} and under {up}: "
                        "the paths do not form a tree"
                    )
            else:
                parent_of[seg] = up
                if up is None:
                    roots.append(seg)
                else:
                    children.setdefault(up, []).append(seg)
            up = seg
    order: list[int] = []
    stack = list(reversed(roots))
    while stack:  # depth-first, children in first-reached order
        seg = stack.pop()
        order.append(seg)
        stack.extend(reversed(children.get(seg, [])))
    slot = {seg: i for i, seg in enumerate(order)}
    length = np.array([lengths[s] for s in order], dtype=np.int64)  # (K,)
    start = np.concatenate([[0], np.cumsum(length)[:-1]]).astype(np.int64)  # (K,)
    ups = (parent_of[s] for s in order)  # any int names a segment, negative ones too
    parent = np.array([-1 if u is None else slot[u] for u in ups], dtype=np.int64)  # (K,)
    offset = np.zeros(len(order), dtype=np.int64)  # (K,) path position of a segment's start
    last = np.full(len(order), -1, dtype=np.int64)  # (K,) packed index of its last token
    for k in range(len(order)):  # parents first: their offsets and last tokens are known
        up = parent[k]
        offset[k] = 0 if up < 0 else offset[up] + length[up]
        before = -1 if up < 0 else last[up]
        last[k] = start[k] + length[k] - 1 if length[k] else before
    token_slot = np.repeat(np.arange(len(order), dtype=np.int64), length)  # (S,)
    within = np.arange(token_slot.size, dtype=np.int64) - start[token_slot]  # (S,)
    position = offset[token_slot] + within  # (S,)
    prev = np.arange(token_slot.size, dtype=np.int64) - 1  # (S,) inside a segment
    for k in np.flatnonzero(length > 0).tolist():  # a first token follows its parent's last
        prev[start[k]] = -1 if parent[k] < 0 else last[parent[k]]
    member = np.zeros((len(paths), len(order)), dtype=np.bool_)  # (P, K)
    for p, path in enumerate(paths):
        member[p, [slot[int(s)] for s in path]] = True
    return Layout(
        np.array(order, dtype=np.int64),
        parent,
        start,
        length,
        token_slot,
        position,
        prev,
        member,
    )
