"""Rollout budget: what a tree shape is expected to cost, and what a rollout really spent.

Budget is counted in complete trajectories per prompt (docs/algorithm.md §2). A chain costs 1;
an expansion from a uniformly random depth regenerates about half a trajectory, so

    C(M, N, L) = M · (1 + L · N / 2).

That ignores that the root is a candidate (a whole trajectory) and that chains are short:
``expected_cost_l1`` is the exact expectation for one round on chains of known length, and
``SpendAccountant`` records the real spend (generated and processed tokens, tool calls, leaves
per prompt), which is what a fair comparison counts.
"""

from __future__ import annotations

from dataclasses import astuple, dataclass, field

from treegrpo.core.expansion import Expansion


@dataclass(frozen=True)
class TreeShape:
    """Sampling shape per prompt: M trees, N expansions per tree per round, L rounds, K kept leaves
    per tree (None = all), and the expansion rule (``core.expansion``; uniform by default). Chain
    sampling is L = 0 (and N = 0). Under a difficulty budget N is a tree's average share
    (``core.allocation``), so its leaves vary around 1 + N·L; K still caps them."""

    m: int
    n: int = 0
    l: int = 0  # noqa: E741  (the paper's name)
    k: int | None = None
    expansion: Expansion = field(default_factory=Expansion)

    def __post_init__(self) -> None:
        if self.m < 1:
            raise ValueError(f"M (trees per prompt) must be >= 1, got {self.m}")
        if self.n < 0 or self.l < 0:
            raise ValueError(f"N and L must be >= 0, got N={self.n}, L={self.l}")
        if (self.n == 0) != (self.l == 0):
            raise ValueError(
                f"N and L must both be 0 (chains) or both > 0, got N={self.n}, L={self.l}"
            )
        if self.k is not None and not 1 <= self.k <= self.leaves_per_tree:
            raise ValueError(f"K must be in [1, 1 + N·L = {self.leaves_per_tree}], got {self.k}")
        e = self.expansion
        if e.budget == "difficulty" and self.n and not e.floor <= self.n <= e.budget_cap(self.n):
            raise ValueError(
                f"a difficulty budget needs floor <= N <= cap (the round's T·N must fit), got "
                f"floor={e.floor}, N={self.n}, cap={e.budget_cap(self.n)}"
            )

    @property
    def is_chain(self) -> bool:
        return self.l == 0

    @property
    def leaves_per_tree(self) -> int:
        """Each expansion adds exactly one leaf: 1 + N·L (on average under a difficulty budget)."""
        return 1 + self.n * self.l

    @property
    def leaves_per_prompt(self) -> int:
        """Trajectories trained on per prompt, M · K (K = 1 + N·L when all are kept; on average
        over the batch under a difficulty budget when all are kept)."""
        return self.m * (self.leaves_per_tree if self.k is None else self.k)


def expected_cost(m: int, n: int, l: int) -> float:  # noqa: E741
    """Paper's budget estimate M·(1 + L·N/2), in trajectories per prompt."""
    return m * (1.0 + l * n / 2.0)


def expected_cost_l1(m: int, n: int, depth: int) -> float:
    """Exact expected cost of one expansion round (L = 1) when every chain has ``depth`` steps of
    equal length, the root a candidate (as in the authors' code): expanding the node at depth j
    regenerates depth − j steps, so one expansion costs on average
    Σ_{j=0}^{depth−1} (depth − j)/depth / depth = (depth + 1) / (2·depth) trajectories, and

        C = M · (1 + N · (depth + 1) / (2·depth)),

    which tends to the paper's M·(1 + N/2) as depth → ∞ and is higher for 2–4 step chains."""
    if depth < 1:
        raise ValueError(f"depth must be >= 1, got {depth}")
    return m * (1.0 + n * (depth + 1) / (2.0 * depth))


# The paper's budget ladder (Qwen2.5-3B budget ablation): budget ≈ b trajectories per prompt.
# (4, 5, 1) is reported as ≈ 16 although the formula gives 14.
TREE_LADDER: dict[int, TreeShape] = {
    2: TreeShape(m=1, n=2, l=1),
    4: TreeShape(m=2, n=2, l=1),
    8: TreeShape(m=2, n=6, l=1),
    16: TreeShape(m=4, n=5, l=1),
}
CHAIN_LADDER: dict[int, TreeShape] = {b: TreeShape(m=b) for b in (2, 4, 8, 16)}


@dataclass
class Spend:
    """What one prompt's rollout consumed."""

    generated: int = 0  # tokens sampled by the policy (decode steps that produced a token)
    processed: int = 0  # token positions the model computed: prefill + decode, padding included
    tool_calls: int = 0  # executed searches
    leaves: int = 0  # finished trajectories

    def __add__(self, other: Spend) -> Spend:
        """The two spends summed field by field."""
        return Spend(*(a + b for a, b in zip(astuple(self), astuple(other), strict=True)))


@dataclass
class SpendAccountant:
    """Per-prompt ledger of real rollout spend; the engine and sampler call ``add``."""

    by_prompt: dict[int, Spend] = field(default_factory=dict)

    def add(
        self,
        prompt_id: int,
        *,
        generated: int = 0,
        processed: int = 0,
        tool_calls: int = 0,
        leaves: int = 0,
    ) -> None:
        if min(generated, processed, tool_calls, leaves) < 0:
            raise ValueError("spend counts must be >= 0")
        new = Spend(generated, processed, tool_calls, leaves)
        self.by_prompt[int(prompt_id)] = self.by_prompt.get(int(prompt_id), Spend()) + new

    def total(self) -> Spend:
        return sum(self.by_prompt.values(), Spend())
