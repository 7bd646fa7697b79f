"""Expansion selectors: which nodes a tree branches from in one expansion round
(docs/expansion.md). ``uniform``, the paper's rule (arXiv 2509.21240), is the default; the others
are opt-in and spend the same expansions where a branch is more likely to teach something:

``uniform``   p(v) = 1/|C_t| over the candidates C_t of tree t (root and non-leaf steps).
``no-root``   p(v) = 1/|C_t \\ {root}|; the root only when it is the tree's only candidate.
``entropy``   p(v) ∝ exp(s_v / τ) · ρ^(r_v + h_v): s_v the policy's surprise where the next step
              after v begins (``surprise``), τ the temperature, ρ the repeat penalty, r_v the
              times v was expanded, h_v = 1 when v's parent was a high-entropy branch point
              (AEPO, Dong et al. 2025, arXiv 2510.14545).
``informed``  p(v) ∝ p̂_v (1 − p̂_v) + c / √(1 + n_v), p̂_v a Beta-posterior estimate of the
              success rate below v with the prompt's success rate as prior mean (``informed``).

How many expansions a tree gets is the budget's (``core.allocation``). Every rule has one
signature, ``rule(forest, n, rngs, stats, **params) -> Picks``, dispatched by ``choose``; each
tree draws from its own generator (one shared generator, drawn tree by tree, is accepted too),
so seeded generators give the same picks every time. Shapes use ``core.tree``'s letters: N
nodes, T trees, n picks per tree.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal, get_args

import numpy as np
import numpy.typing as npt

from treegrpo.core.tree import Forest, IntArray, Rng, per_tree

FloatArray = npt.NDArray[np.float64]
Rule = Literal["uniform", "no-root", "entropy", "informed"]
RULES: tuple[str, ...] = get_args(Rule)
Budget = Literal["per-tree", "difficulty"]
BUDGETS: tuple[str, ...] = get_args(Budget)


@dataclass(frozen=True)
class NodeStats:
    """What the rules read about the nodes, by node id; a rule missing a field it needs raises a
    ValueError naming it. ``logprobs[v]``: log p of each token sampled in node v's own step ([] for
    a root; the engines return them, so ``entropy`` costs no forward pass). ``rewards``: (N,) each
    leaf's reward, NaN where not scored."""

    logprobs: Sequence[Sequence[float]] | None = None  # [N][tokens of the node's step]
    rewards: FloatArray | None = None  # (N,)


@dataclass(frozen=True)
class Picks:
    """The nodes a round expands and why: ``nodes`` (T, n) node ids, a row per tree in tree-id
    order; ``reasons`` [T][n] a text per pick (docs/expansion.md, "Seeing what a rule did")."""

    nodes: IntArray  # (T, n)
    reasons: tuple[tuple[str, ...], ...]  # [T][n]


# ------------------------------------------------------------------------------------- rules
def uniform(forest: Forest, n: int, rngs: Rng, stats: NodeStats | None = None) -> Picks:
    """p(v) = 1/|C_t| for v in C_t, the root and non-leaf steps of tree t (docs/algorithm.md §2):
    exactly ``Forest.choose_expansions``, the same generators giving the same picks."""
    nodes = forest.choose_expansions(n, rngs)  # (T, n)
    return Picks(nodes, tuple(("uniform",) * n for _ in range(len(nodes))))


def no_root(forest: Forest, n: int, rngs: Rng, stats: NodeStats | None = None) -> Picks:
    """p(v) = 1/|C_t \\ {root_t}| over the non-leaf steps of tree t; the root only when the tree
    has no other candidate (its chain is a single step)."""
    gens = _gens(forest, rngs, n)
    nodes = np.empty((forest.n_trees, n), dtype=np.int64)  # (T, n)
    reasons: list[tuple[str, ...]] = []
    for t in range(forest.n_trees):
        cand = forest.expansion_candidates(t)[1:]  # the root comes first (lowest id of its tree)
        why = "uniform (no root)"
        if len(cand) == 0:
            cand, why = forest.roots[t : t + 1], "root (no other candidate)"
        nodes[t] = cand[gens[t].integers(0, len(cand), size=n)]
        reasons.append((why,) * n)
    return Picks(nodes, tuple(reasons))


def entropy(
    forest: Forest,
    n: int,
    rngs: Rng,
    stats: NodeStats | None = None,
    *,
    k: int = 8,
    temperature: float = 1.0,
    repeat_penalty: float = 0.5,
) -> Picks:
    """Branch where the policy was uncertain as the next step began (docs/expansion.md, "entropy").
    The n picks are drawn one after another, each with

        p(v) ∝ exp(s_v / τ) · ρ^(r_v + h_v)

    s_v = ``surprise``(v, k): the mean −log p of the first k sampled tokens of the step after v (0
    if none); r_v: times v was already expanded (earlier rounds and picks); h_v = 1 when v's parent
    was expanded and a high-entropy pick (s_p ≥ the mean over C_t), else 0: AEPO's penalty (Dong et
    al. 2025, arXiv 2510.14545). τ = ``temperature`` > 0, ρ = ``repeat_penalty`` in (0, 1]. Reason:
    "entropy 2.31 (rank 1)", the rank of s_v among C_t."""
    _check_params("entropy: ", k=k, temperature=temperature, repeat_penalty=repeat_penalty)
    gens = _gens(forest, rngs, n)
    surprise = branch_surprise(forest, _need_logprobs(forest, stats, "entropy"), k)  # (N,)
    log_rho = math.log(repeat_penalty)
    nodes = np.empty((forest.n_trees, n), dtype=np.int64)  # (T, n)
    reasons: list[tuple[str, ...]] = []
    for t in range(forest.n_trees):
        cand = forest.expansion_candidates(t)
        s = surprise[cand]  # (C,)
        rank = {int(v): 1 + int((s > s[i]).sum()) for i, v in enumerate(cand)}
        high = s >= s.mean()  # (C,) high-entropy candidates
        index = {int(v): i for i, v in enumerate(cand)}
        parent = forest.parent[cand]  # (C,)
        expanded = np.array([max(len(forest.children(int(v))) - 1, 0) for v in cand], np.int64)
        row: list[str] = []
        for j in range(n):
            # h_v: the parent is a candidate of this tree that was expanded and is high-entropy
            h = np.array(
                [p >= 0 and expanded[index[int(p)]] > 0 and high[index[int(p)]] for p in parent]
            )
            logits = s / temperature + (expanded + h) * log_rho  # (C,)
            w = np.exp(logits - logits.max())
            i = int(gens[t].choice(len(cand), p=w / w.sum()))
            nodes[t, j] = cand[i]
            expanded[i] += 1
            row.append(f"entropy {s[i]:.2f} (rank {rank[int(cand[i])]})")
        reasons.append(tuple(row))
    return Picks(nodes, tuple(reasons))


def informed(
    forest: Forest,
    n: int,
    rngs: Rng,
    stats: NodeStats | None = None,
    *,
    threshold: float = 0.5,
    bonus: float = 0.25,
    prior_strength: float = 2.0,
) -> Picks:
    """Branch where the subtree is likely to end in mixed rewards (docs/expansion.md, "informed"). A
    leaf succeeds when its reward ≥ ``threshold``. For prompt P, with S_P successes among its N_P
    scored leaves, and a candidate v with s_v successes among n_v scored leaves below it (for a
    root: all the prompt's), κ = ``prior_strength`` and c = ``bonus``:

        μ_P = (S_P + 1) / (N_P + 2),
        p̂_v = (κ μ_P + s_v) / (κ + n_v),
        w_v = p̂_v (1 − p̂_v) + c / √(1 + n_v),      p(v) ∝ w_v over C_t.

    The n picks are independent draws. Reason: "p̂=0.50 from 2 leaves", or "unexplored" when no
    scored leaf lies below v."""
    _check_params("informed: ", bonus=bonus, prior_strength=prior_strength)
    gens = _gens(forest, rngs, n)
    rewards = _need_rewards(forest, stats)  # (N,)
    scored = forest.is_leaf & ~np.isnan(rewards)  # (N,)
    success = scored & (np.nan_to_num(rewards, nan=-np.inf) >= threshold)  # (N,)
    by_prompt: dict[int, tuple[int, int]] = {}  # prompt id → (successes, scored leaves)
    for p in np.unique(forest.prompt_id).tolist():
        mine = forest.prompt_id == p
        by_prompt[p] = (int(success[mine].sum()), int(scored[mine].sum()))
    nodes = np.empty((forest.n_trees, n), dtype=np.int64)  # (T, n)
    reasons: list[tuple[str, ...]] = []
    for t in range(forest.n_trees):
        cand = forest.expansion_candidates(t)
        wins, seen = by_prompt[int(forest.prompt_id[cand[0]])]
        mu = (wins + 1) / (seen + 2)
        w = np.empty(len(cand))  # (C,)
        why: list[str] = []
        for i, v in enumerate(cand.tolist()):
            if forest.parent[v] < 0:
                s_v, n_v = wins, seen
            else:
                below = forest.descendant_leaves(v)
                s_v, n_v = int(success[below].sum()), int(scored[below].sum())
            p_hat = (prior_strength * mu + s_v) / (prior_strength + n_v)
            w[i] = p_hat * (1 - p_hat) + bonus / math.sqrt(1 + n_v)
            leaves = "leaf" if n_v == 1 else "leaves"
            why.append(f"p̂={p_hat:.2f} from {n_v} {leaves}" if n_v else "unexplored")
        if w.sum() <= 0:  # bonus 0 and every p̂ at 0 or 1 cannot happen (κ > 0); guard anyway
            w[:] = 1.0
        pick = gens[t].choice(len(cand), size=n, p=w / w.sum())  # (n,)
        nodes[t] = cand[pick]
        reasons.append(tuple(why[i] for i in pick.tolist()))
    return Picks(nodes, tuple(reasons))


SELECTORS: dict[str, Callable[..., Picks]] = {
    "uniform": uniform,
    "no-root": no_root,
    "entropy": entropy,
    "informed": informed,
}
PARAMS: dict[str, tuple[str, ...]] = {
    "uniform": (),
    "no-root": (),
    "entropy": ("k", "temperature", "repeat_penalty"),
    "informed": ("threshold", "bonus", "prior_strength"),
}


def choose(
    rule: str,
    forest: Forest,
    n: int,
    rngs: Rng,
    stats: NodeStats | None = None,
    **params: float,
) -> Picks:
    """Pick ``n`` expansion nodes per tree of ``forest`` with ``rule`` (one of ``RULES``);
    ``params``: the rule's own (see ``PARAMS``). Returns ``Picks`` with (T, n) node ids."""
    _check_known("rule", rule, RULES)
    unknown = sorted(set(params) - set(PARAMS[rule]))
    if unknown:
        takes = ", ".join(PARAMS[rule]) or "none"
        raise ValueError(f"expansion rule {rule!r} takes no {', '.join(unknown)} (takes: {takes})")
    return SELECTORS[rule](forest, n, rngs, stats, **params)


@dataclass(frozen=True)
class Expansion:
    """An expansion rule and its parameters, and the budget that says how many expansions each
    tree gets, as plain values (a ``TreeShape`` carries one to the sampler and its workers).
    Only the rule's own parameters go to the rule (``params``)."""

    rule: Rule = "uniform"
    k: int = 8  # entropy: tokens of the following step whose surprise is averaged
    temperature: float = 1.0  # entropy: softmax temperature τ over the surprise
    repeat_penalty: float = 0.5  # entropy: factor ρ per repeat / high-entropy parent
    threshold: float = 0.5  # informed, difficulty: a leaf with reward >= threshold succeeds
    bonus: float = 0.25  # informed: exploration bonus c of c/√(1 + n)
    prior_strength: float = 2.0  # informed, difficulty: κ, pseudo-leaves of the rate's prior
    budget: Budget = "per-tree"  # per-tree: N per tree; difficulty: T·N shared by uncertainty
    floor: int = 0  # difficulty: expansions per tree and round, at least
    cap: int | None = None  # difficulty: expansions per tree and round, at most (None: 4·N)

    def __post_init__(self) -> None:
        _check_known("rule", self.rule, RULES)
        _check_params("", **{name: getattr(self, name) for name in _BOUNDS})
        _check_known("budget", self.budget, BUDGETS)
        if self.floor < 0:
            raise ValueError(f"floor must be >= 0, got {self.floor}")
        if self.cap is not None and self.cap < max(self.floor, 1):
            raise ValueError(f"cap must be >= 1 and >= floor {self.floor}, got {self.cap}")

    def params(self) -> dict[str, float]:
        """The rule's own parameters, as ``choose`` takes them."""
        return {name: getattr(self, name) for name in PARAMS[self.rule]}

    @property
    def needs_logprobs(self) -> bool:
        return self.rule == "entropy"

    @property
    def needs_rewards(self) -> bool:
        return self.rule == "informed" or self.budget == "difficulty"

    def budget_cap(self, n: int) -> int:
        """The most expansions a tree gets in a round of N = ``n`` on average: ``cap``, or 4·N
        (docs/expansion.md, "Budgets that follow difficulty", says why)."""
        return 4 * n if self.cap is None else self.cap


# ---------------------------------------------------------------------------- statistics
def surprise(logprobs: Sequence[float], k: int) -> float:
    """s = −(1/k') Σ_{i<k'} log p_i over the first k' = min(k, len) sampled tokens; 0 when the
    step has no tokens. E[−log p(x)] over x ~ p is the entropy H(p), so each term is an unbiased
    one-sample estimate of the entropy at that position."""
    head = list(logprobs[:k])
    return -float(np.mean(head)) if head else 0.0


def branch_surprise(forest: Forest, logprobs: Sequence[Sequence[float]], k: int) -> FloatArray:
    """(N,) for each node, ``surprise`` of the step that followed it (its first child, the step
    that continued the chain the node was sampled in); 0 for a node without children."""
    out = np.zeros(forest.n_nodes)  # (N,)
    for v in range(forest.n_nodes):
        kids = forest.children(v)
        if kids:
            out[v] = surprise(logprobs[kids[0]], k)
    return out


# ------------------------------------------------------------------------------- helpers
_BOUNDS: dict[str, tuple[Callable[[float], bool], str]] = {  # parameter → (out of bounds, bound)
    "k": (lambda v: v < 1, ">= 1"),
    "temperature": (lambda v: not v > 0, "> 0"),
    "repeat_penalty": (lambda v: not 0 < v <= 1, "in (0, 1]"),
    "bonus": (lambda v: v < 0, ">= 0"),
    "prior_strength": (lambda v: not v > 0, "> 0"),
}


def _check_known(kind: str, value: str, known: Sequence[str]) -> None:
    """Raise a ValueError when ``value`` is none of the ``known`` expansion ``kind``s."""
    if value not in known:
        raise ValueError(f"unknown expansion {kind} {value!r}; choose one of {', '.join(known)}")


def _check_params(where: str, **params: float) -> None:
    """Raise a ValueError, prefixed with ``where``, for the first of ``params`` out of its bound
    (``_BOUNDS``)."""
    for name, value in params.items():
        bad, bound = _BOUNDS[name]
        if bad(value):
            raise ValueError(f"{where}{name} must be {bound}, got {value}")


def _gens(forest: Forest, rngs: Rng, n: int) -> Sequence[np.random.Generator]:
    if n < 0:
        raise ValueError(f"n must be >= 0, got {n}")
    return per_tree(rngs, forest.n_trees)


def _need_logprobs(forest: Forest, stats: NodeStats | None, rule: str) -> Sequence[Sequence[float]]:
    if stats is None or stats.logprobs is None:
        raise ValueError(f"the {rule} rule needs stats.logprobs (each node's sampled log-probs)")
    if len(stats.logprobs) != forest.n_nodes:
        raise ValueError(
            f"stats.logprobs has {len(stats.logprobs)} entries for {forest.n_nodes} nodes"
        )
    return stats.logprobs


def _need_rewards(forest: Forest, stats: NodeStats | None) -> FloatArray:
    if stats is None or stats.rewards is None:
        raise ValueError(
            "the informed rule needs stats.rewards (each leaf's reward, NaN where unscored): "
            "give the sampler a way to score leaves"
        )
    rewards = np.asarray(stats.rewards, dtype=np.float64)
    if rewards.shape != (forest.n_nodes,):
        raise ValueError(
            f"stats.rewards has shape {rewards.shape}, expected ({forest.n_nodes},): one per node"
        )
    return rewards
