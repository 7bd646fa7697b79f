"""A rollout forest for a batch of prompts, stored as flat arrays (docs/algorithm.md §2).

A node is one complete agent step (thought, action, observation); branching happens only
between steps. Each tree's root stands for the prompt (depth 0, no step): expanding it samples a
fresh chain that shares only the prompt, as the authors' code does. The forest only knows
structure; ``payload`` is the caller's index into its own store of tokens (-1 = none).

Dimension letters used in shape comments across ``core``:
    N  nodes of the forest      T  trees
    L  leaves (kept leaves)      n  picks per tree (expansions per round)
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]


class Forest:
    """Growable forest of agent-step trees with flat-array views. Node ids are dense in insertion
    order; tree ids dense in creation order and unique across the batch (never reused for another
    prompt). The properties' arrays are read-only snapshots, rebuilt lazily after a mutation."""

    def __init__(self) -> None:
        self._parent: list[int] = []
        self._depth: list[int] = []
        self._prompt: list[int] = []
        self._tree: list[int] = []
        self._leaf: list[bool] = []
        self._payload: list[int] = []
        self._children: list[list[int]] = []
        self._roots: list[int] = []  # root node id of each tree id
        self._tree_nodes: list[list[int]] = []  # node ids of each tree id, in id order
        self._cache: dict[str, npt.NDArray[np.generic]] = {}

    # ----------------------------------------------------------------- growing
    def add_tree(self, prompt_id: int, payload: int = -1) -> int:
        """Start a new tree for ``prompt_id``; returns its root node id (depth 0)."""
        tree_id = len(self._roots)
        node = self._append(
            parent=-1, depth=0, prompt=int(prompt_id), tree=tree_id, payload=payload, leaf=False
        )
        self._roots.append(node)
        return node

    def add_node(self, parent: int, payload: int = -1, leaf: bool = False) -> int:
        """Append one step under ``parent``; returns the new node id."""
        self._check_node(parent)
        if self._leaf[parent]:
            raise ValueError(
                f"node {parent} is a leaf (the episode ended there); "
                "a step cannot be added under it"
            )
        depth, prompt, tree = self._depth[parent] + 1, self._prompt[parent], self._tree[parent]
        return self._append(parent, depth, prompt, tree, payload, leaf)

    def add_chain(self, parent: int, payloads: Sequence[int], leaf_last: bool = True) -> list[int]:
        """Append a chain of ``len(payloads)`` steps under ``parent``, the last a leaf; the new ids,
        top down."""
        if len(payloads) == 0:
            raise ValueError("a chain needs at least one step")
        nodes: list[int] = []
        node = parent
        for i, payload in enumerate(payloads):
            node = self.add_node(node, payload, leaf=leaf_last and i == len(payloads) - 1)
            nodes.append(node)
        return nodes

    # ------------------------------------------------------------ flat arrays
    @property
    def n_nodes(self) -> int:
        return len(self._parent)

    @property
    def n_trees(self) -> int:
        return len(self._roots)

    @property
    def parent(self) -> IntArray:
        """(N,) parent node id, -1 for roots."""
        return self._array("parent", self._parent)

    @property
    def depth(self) -> IntArray:
        """(N,) number of steps from the root (root = 0)."""
        return self._array("depth", self._depth)

    @property
    def prompt_id(self) -> IntArray:
        """(N,) prompt (group) id of each node's tree."""
        return self._array("prompt_id", self._prompt)

    @property
    def tree_id(self) -> IntArray:
        """(N,) tree id of each node."""
        return self._array("tree_id", self._tree)

    @property
    def payload(self) -> IntArray:
        """(N,) caller's record index, -1 where none."""
        return self._array("payload", self._payload)

    @property
    def is_leaf(self) -> BoolArray:
        """(N,) True where the node ended its episode."""
        return self._array("is_leaf", self._leaf, np.bool_)

    @property
    def roots(self) -> IntArray:
        """(T,) root node id of each tree."""
        return self._array("roots", self._roots)

    # ----------------------------------------------------------------- queries
    def children(self, node: int) -> list[int]:
        self._check_node(node)
        return list(self._children[node])

    def leaves(self, tree: int | None = None) -> IntArray:
        """(L,) leaf node ids in id order, of one tree or of the whole forest."""
        if tree is None:
            return np.flatnonzero(self.is_leaf).astype(np.int64)
        self._check_tree(tree)
        return np.array([v for v in self._tree_nodes[tree] if self._leaf[v]], dtype=np.int64)

    def expansion_candidates(self, tree: int) -> IntArray:
        """Nodes an expansion may start from: the root and every non-leaf step of ``tree``."""
        self._check_tree(tree)
        return np.array([v for v in self._tree_nodes[tree] if not self._leaf[v]], dtype=np.int64)

    def choose_expansions(self, n: int, rng: Rng, trees: Sequence[int] | None = None) -> IntArray:
        """Pick ``n`` expansion nodes per tree, uniformly with replacement among the root and
        non-leaf nodes, as in the authors' code (docs/algorithm.md §2). ``rng``: one generator
        drawing tree by tree in order, or one per tree of ``trees`` (a tree's picks then depend on
        its own only). Returns (T, n) node ids, a row per tree of ``trees`` (default: all)."""
        if n < 0:
            raise ValueError(f"n must be >= 0, got {n}")
        order = range(self.n_trees) if trees is None else [int(t) for t in trees]
        rngs = per_tree(rng, len(order))
        picks = np.empty((len(order), n), dtype=np.int64)  # (T, n)
        for row, tree in enumerate(order):
            cand = self.expansion_candidates(tree)
            picks[row] = cand[rngs[row].integers(0, len(cand), size=n)]
        return picks

    def sample_leaves(self, k: int | None, rng: Rng) -> IntArray:
        """Keep ``k`` leaves per tree at random without replacement (all when ``k`` is None or ≥ the
        leaf count); ``rng``: one generator, or one per tree. Returns kept leaf ids in id order."""
        if k is not None and k < 1:
            raise ValueError(f"k must be >= 1 or None, got {k}")
        if k is None:
            return self.leaves()
        rngs = per_tree(rng, self.n_trees)
        kept: list[IntArray] = []
        for tree in range(self.n_trees):
            mine = self.leaves(tree)
            kept.append(rngs[tree].choice(mine, size=k, replace=False) if len(mine) > k else mine)
        return np.sort(np.concatenate(kept)) if kept else self.leaves()

    def path(self, node: int, include_root: bool = False) -> IntArray:
        """Node ids from the top of the tree down to ``node`` (the root only if asked)."""
        self._check_node(node)
        out: list[int] = []
        while node >= 0:
            out.append(node)
            node = self._parent[node]
        if not include_root:
            out.pop()
        return np.array(out[::-1], dtype=np.int64)

    def descendant_leaves(self, node: int) -> IntArray:
        """Leaf ids in the subtree of ``node`` (a leaf's own subtree is itself), in id order."""
        self._check_node(node)
        out: list[int] = []
        stack = [node]
        while stack:
            cur = stack.pop()
            if self._leaf[cur]:
                out.append(cur)
            stack.extend(self._children[cur])
        return np.array(sorted(out), dtype=np.int64)

    def leaf_groups(self, leaves: IntArray) -> tuple[IntArray, IntArray]:
        """The (prompt ids, tree ids) of ``leaves``: the grouping ``tree_advantage`` takes."""
        leaves = np.asarray(leaves, dtype=np.int64)
        return self.prompt_id[leaves], self.tree_id[leaves]

    # ----------------------------------------------------------------- private
    def _append(
        self, parent: int, depth: int, prompt: int, tree: int, payload: int, leaf: bool
    ) -> int:
        node = len(self._parent)
        self._parent.append(parent)
        self._depth.append(depth)
        self._prompt.append(prompt)
        self._tree.append(tree)
        self._leaf.append(bool(leaf))
        self._payload.append(int(payload))
        self._children.append([])
        if parent < 0:
            self._tree_nodes.append([])
        self._tree_nodes[tree].append(node)
        if parent >= 0:
            self._children[parent].append(node)
        self._cache.clear()
        return node

    def _array(
        self, name: str, values: list[int] | list[bool], dtype: type[np.generic] = np.int64
    ) -> npt.NDArray[Any]:
        cached = self._cache.get(name)
        if cached is None:
            cached = np.array(values, dtype=dtype)
            cached.flags.writeable = False
            self._cache[name] = cached
        return cached

    def _check_node(self, node: int) -> None:
        if not 0 <= node < len(self._parent):
            raise IndexError(f"node {node} does not exist (forest has {len(self._parent)} nodes)")

    def _check_tree(self, tree: int) -> None:
        if not 0 <= tree < len(self._roots):
            raise IndexError(f"tree {tree} does not exist (forest has {len(self._roots)} trees)")


Rng = np.random.Generator | Sequence[np.random.Generator]
"""One generator shared by all trees, or one per tree."""


def per_tree(rng: Rng, n_trees: int) -> Sequence[np.random.Generator]:
    """``rng`` as one generator per tree (the same one for every tree when it is shared)."""
    if isinstance(rng, np.random.Generator):
        return [rng] * n_trees
    if len(rng) != n_trees:
        raise ValueError(f"{len(rng)} generators for {n_trees} trees")
    return rng
