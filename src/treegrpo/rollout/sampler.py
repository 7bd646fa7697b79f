"""Tree sampling ("initialize-then-expand", docs/algorithm.md §2), chains its L = 0 case: per
prompt, M chains, L rounds of N expansions per tree from the nodes the shape's rule picks
(``core.expansion``; under a difficulty budget the round's T·N shared over the batch,
``core.allocation``), then K leaves kept per tree at random. A step's tool calls go to each tool
as one batch; a call the tool cannot answer becomes an observation that says so. Randomness is
per prompt, so a batch split over workers (``prompt_keys``) gives the forests of one process.
Details: docs/library.md, "Sampling a rollout forest" and "Protocol details".
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from treegrpo.agent.protocol import ToolProtocol
from treegrpo.core.allocation import allocate
from treegrpo.core.budget import SpendAccountant, TreeShape
from treegrpo.core.expansion import NodeStats, choose
from treegrpo.core.tree import Forest
from treegrpo.engine.base import Engine, StepRequest
from treegrpo.engine.sampling import SamplingParams
from treegrpo.engine.segments import Segment
from treegrpo.retrieval.base import SearchTool
from treegrpo.rollout.records import Rollout, StepRecord
from treegrpo.tools.registry import Outcome, PastCall, Toolbox

LeafScorer = Callable[[Rollout, Sequence[int]], Sequence[float] | npt.NDArray[np.float64]]
"""``score(rollout, leaves) -> rewards``: one reward per leaf id, for the ``informed`` expansion
rule and difficulty budgets (``rollout.scoring.score_leaves(...).reward`` with the batch's golds,
in training)."""


@dataclass
class _Episode:
    parent: int  # forest node the next step hangs under
    context: Segment  # cached context before ``pending``
    pending: list[int]  # tokens to feed before sampling the step
    stream: tuple[int, ...]  # (seed, prompt key, tree in prompt, branch): its steps' seeds


@dataclass(frozen=True)
class AgentLimits:
    """Episode limits of the search agent (the paper's QA values as defaults)."""

    max_turns: int = 3  # steps that may call a tool; one final step follows
    topk: int = 3  # passages per search (when the tool is a retriever)
    max_context: int = 4096  # prompt + all steps and observations, in tokens


def sample_forest(
    engine: Engine,
    protocol: ToolProtocol,
    tool: SearchTool | Toolbox,
    prompts: Sequence[list[int]],
    shape: TreeShape,
    sampling: SamplingParams,
    limits: AgentLimits = AgentLimits(),
    seed: int = 0,
    prompt_keys: Sequence[int] | None = None,
    score: LeafScorer | None = None,
) -> Rollout:
    """One forest for a batch of prompts: a ``ForestSampler`` of these arguments, run to the end.

    Many arguments: ``ForestSampler``'s fields, so that one call samples a forest (tests and
    benchmarks pass them by position)."""
    how = (shape, sampling, limits, seed, prompt_keys, score)
    return ForestSampler(engine, protocol, tool, prompts, *how).sample()


PER_TREE_RULES = ("uniform", "no-root")
"""Expansion rules whose picks in a tree read that tree and its own generator only."""


def pipelined(shape: TreeShape) -> bool:
    """Whether ``shape``'s rounds may start tree by tree (``ForestSampler.pipeline``): its rule
    reads each tree alone and each tree gets its own N (no difficulty budget)."""
    e = shape.expansion
    return shape.l > 0 and e.rule in PER_TREE_RULES and e.budget == "per-tree"


@dataclass(frozen=True)
class TreeOutcomes:
    """What a difficulty budget reads about each tree so far, (T,) each, in tree order."""

    prompt: npt.NDArray[np.int64]  # (T,) the tree's prompt key (its index in the whole batch)
    successes: npt.NDArray[np.int64]  # (T,) its leaves whose reward reaches the threshold
    scored: npt.NDArray[np.int64]  # (T,) its scored leaves (all of them)

    @staticmethod
    def concat(parts: Sequence[TreeOutcomes]) -> TreeOutcomes:
        """The trees of ``parts``, one part after the other."""
        cols = zip(*((o.prompt, o.successes, o.scored) for o in parts), strict=True)
        return TreeOutcomes(*(np.concatenate(c).astype(np.int64) for c in cols))


def share_by_difficulty(outcomes: TreeOutcomes, shape: TreeShape) -> npt.NDArray[np.int64]:
    """(T,) expansions per tree for a round of ``shape``'s difficulty budget: the round's T·N
    shared so that most trees are expected to end with mixed rewards (``core.allocation``)."""
    e = shape.expansion
    return allocate(
        outcomes.successes,
        outcomes.scored,
        outcomes.prompt,
        len(outcomes.prompt) * shape.n,
        prior_strength=e.prior_strength,
        floor=e.floor,
        cap=e.budget_cap(shape.n),
    )


def check_scorer(shape: TreeShape, given: bool) -> None:
    """Refuse, before sampling, a shape whose expansions read rewards with no scorer (``given``)."""
    e = shape.expansion
    if e.needs_rewards and shape.l > 0 and not given:
        informed = e.rule == "informed"
        who = "the informed expansion rule needs" if informed else "a difficulty budget needs"
        raise ValueError(
            f"{who} the leaves' rewards: pass score= (a function of the rollout and leaf ids "
            "that returns their rewards)"
        )


@dataclass(eq=False)
class ForestSampler:
    """One forest for a batch of prompts (token ids), sampled whole (``sample``) or a phase at a
    time, so that a round's expansions per tree can be decided outside, over a batch split across
    rollout workers (``distributed.rollout``; docs/expansion.md, "As a library"):

        begin()                 prefill the prompts, run the M initial chains per prompt
        outcomes()              score the leaves not scored yet: ``TreeOutcomes``
        expand(counts, n_max)   one round, ``counts[t]`` expansions from tree t (None: N each)
        finish()                keep K leaves per tree: the ``Rollout``

    A tree's prompt id is its prompt's index in ``prompts``. ``tool``: the agent's tools (a
    retriever alone: Search-R1's ``search``), which ``protocol`` must offer too; ``prompt_keys``:
    what seeds each prompt's randomness (default: its index here); ``score``: rewards the leaves
    before each round, for ``informed`` and difficulty budgets."""

    engine: Engine
    protocol: ToolProtocol
    tool: SearchTool | Toolbox
    prompts: Sequence[list[int]]
    shape: TreeShape
    sampling: SamplingParams
    limits: AgentLimits = AgentLimits()
    seed: int = 0
    prompt_keys: Sequence[int] | None = None
    score: LeafScorer | None = None

    def __post_init__(self) -> None:
        prompts, prompt_keys = self.prompts, self.prompt_keys
        if any(len(p) == 0 for p in prompts):
            raise ValueError("every prompt needs at least one token")
        check_scorer(self.shape, self.score is not None)
        keys = list(range(len(prompts))) if prompt_keys is None else [int(k) for k in prompt_keys]
        if len(keys) != len(prompts):
            raise ValueError(f"{len(keys)} prompt keys for {len(prompts)} prompts")
        self.prompt_ids, self.keys = [list(p) for p in prompts], keys  # copies
        self.forest = Forest()
        self.steps: list[StepRecord] = []
        self.spend = SpendAccountant()
        # Where an expansion from a node resumes: (cached context, the one token still to feed).
        self.resume: dict[int, tuple[Segment, int]] = {}
        self.tools = tools = toolbox(self.tool, self.limits.topk)
        if tools.names != self.protocol.names:
            raise ValueError(
                f"the protocol offers the tools {self.protocol.names} but the toolbox holds "
                f"{tools.names}: build the protocol from the toolbox (ToolProtocol(..., tools=))"
            )
        self.tree_keys: list[tuple[int, int, int]] = []  # (seed, prompt key, tree in prompt)
        self.rngs: list[np.random.Generator] = []  # each tree's: expansion picks, kept leaves
        self.branches: list[int] = []  # each tree's next branch number (0: the initial chain)
        self.rewards: dict[int, float] = {}  # leaf → reward, scored once each
        self.expansions: list[int] = []  # each expansion's start node, over all rounds
        self.reasons: list[str] = []
        self.counts: list[npt.NDArray[np.int64]] = []  # (T,) per round
        self.expansion_s = 0.0

    def sample(self) -> Rollout:
        """The forest: ``pipeline`` if it may, else ``begin``, L ``expand``, ``finish``."""
        if pipelined(self.shape):
            self.pipeline()
            return self.finish()
        self.begin()
        by_difficulty = self.shape.expansion.budget == "difficulty"
        for _ in range(self.shape.l):
            self.expand(self.difficulty_counts() if by_difficulty else None)
        return self.finish()

    def begin(self) -> None:
        """The prompt is computed once and shared by its M trees; then the initial chains."""
        self._until_done(self._chains())

    def pipeline(self) -> None:
        """``begin`` and the L rounds in one run of steps, each tree's next round starting once its
        own episodes end, so the engine holds more rows per step. ``pipelined`` shapes only: each
        tree's picks, streams and branches are those of ``begin`` and ``expand`` (not node ids)."""
        episodes = self._chains()
        rounds = np.full(self.forest.n_trees, self.shape.l)  # (T,) rounds each tree has left
        while episodes:
            episodes = self._advance(episodes)
            live = np.bincount(
                [int(self.forest.tree_id[e.parent]) for e in episodes],
                minlength=self.forest.n_trees,
            )  # (T,)
            ready = np.flatnonzero((live == 0) & (rounds > 0))
            if ready.size:
                episodes += self._branches(ready.tolist(), self.shape.n)
                rounds[ready] -= 1
        self.counts += list(np.full((self.shape.l, self.forest.n_trees), self.shape.n, np.int64))

    def _branches(
        self, trees: Sequence[int], n: int, counts: Sequence[int] | None = None, note: bool = False
    ) -> list[_Episode]:
        """The next expansions of ``trees`` as episodes: the rule picks n nodes per tree, tree t
        keeping the first counts[t] (None: all n; ``note``: its reasons say so). The other trees
        draw from a stand-in generator, so their own streams are left as they were. For every
        rule the first k of n draws are distributed exactly as k draws: the draws are independent
        (uniform, no-root, informed) or each depends only on the earlier ones (entropy)."""
        t0 = time.perf_counter()
        rule, mine, stand_in = self.shape.expansion, set(trees), np.random.default_rng(0)
        rngs = [g if i in mine else stand_in for i, g in enumerate(self.rngs)]
        stats = self._node_stats()
        choice = choose(rule.rule, self.forest, n, rngs, stats, **rule.params())  # (T, n)
        out = []
        for t in trees:
            k = n if counts is None else int(counts[t])
            why = f"; difficulty budget {k} (N={self.shape.n})" if note else ""
            picks = zip(choice.nodes[t, :k].tolist(), choice.reasons[t][:k], strict=True)
            out += [self._branch(t, node, reason + why) for node, reason in picks]
        self.expansion_s += time.perf_counter() - t0
        return out

    def _branch(self, t: int, node: int, reason: str) -> _Episode:
        """Tree t's next branch from ``node`` (``reason`` kept): an episode with its own stream."""
        ctx, token = self.resume[node]
        episode = _Episode(node, ctx, [token], (*self.tree_keys[t], self.branches[t]))
        self.branches[t] += 1
        self.expansions.append(node)
        self.reasons.append(reason)
        return episode

    def _chains(self) -> list[_Episode]:
        """Prefill the prompts (each once, for its M trees) and start the trees' chain episodes."""
        prompts, spend = self.prompt_ids, self.spend
        shared, cost = self.engine.prefill(
            [self.engine.root()] * len(prompts), [p[:-1] for p in prompts]
        )
        episodes = []
        for pid, (prompt, ctx) in enumerate(zip(prompts, shared, strict=True)):
            spend.add(pid, processed=cost[pid])
            for j in range(self.shape.m):
                root = self.forest.add_tree(pid)
                self.resume[root] = (ctx, prompt[-1])
                self.tree_keys.append((self.seed, self.keys[pid], j))
                episodes.append(_Episode(root, ctx, [prompt[-1]], (*self.tree_keys[-1], 0)))
        self.rngs = [np.random.default_rng(list(k)) for k in self.tree_keys]
        self.branches = [1] * len(self.tree_keys)
        return episodes

    def outcomes(self) -> TreeOutcomes:
        """Each tree's successes and scored leaves so far (the new leaves are scored now)."""
        t0 = time.perf_counter()
        rewards = self._scored()  # (N,)
        f, threshold = self.forest, self.shape.expansion.threshold
        success = f.is_leaf & (np.nan_to_num(rewards, nan=-np.inf) >= threshold)  # (N,)
        scored = f.is_leaf & ~np.isnan(rewards)  # (N,)
        out = TreeOutcomes(
            np.array([self.keys[p] for p in f.prompt_id[f.roots].tolist()], dtype=np.int64),
            np.bincount(f.tree_id[success], minlength=f.n_trees).astype(np.int64),
            np.bincount(f.tree_id[scored], minlength=f.n_trees).astype(np.int64),
        )
        self.expansion_s += time.perf_counter() - t0
        return out

    def difficulty_counts(self) -> npt.NDArray[np.int64]:
        """(T,) this round's expansions per tree under a difficulty budget over these trees."""
        outcomes = self.outcomes()
        t0 = time.perf_counter()
        counts = share_by_difficulty(outcomes, self.shape)
        self.expansion_s += time.perf_counter() - t0
        return counts

    def expand(self, counts: npt.NDArray[np.int64] | None = None, n_max: int | None = None) -> None:
        """One expansion round: ``counts`` (T,) expansions per tree (None: N each). The rule picks
        ``n_max`` nodes per tree (default: the most of ``counts``), tree t keeping counts[t]; each
        part of a split batch passes the batch's n_max, so a tree draws alike on any split."""
        f, given = self.forest, counts is not None
        if counts is None:
            counts = np.full(f.n_trees, self.shape.n, dtype=np.int64)
        counts = np.asarray(counts, dtype=np.int64)  # (T,)
        if counts.shape != (f.n_trees,) or (counts < 0).any():
            raise ValueError(f"counts must be (T,) = ({f.n_trees},) non-negative integers")
        n = int(counts.max(initial=0)) if n_max is None else n_max
        if n < counts.max(initial=0):
            raise ValueError(f"n_max {n} is below the largest count {counts.max()}")
        branches = self._branches(range(f.n_trees), n, counts.tolist(), note=given)
        self.counts.append(counts)
        self._until_done(branches)

    def finish(self) -> Rollout:
        """Keep K leaves per tree at random (each tree's own generator) and book the leaves."""
        kept = self.forest.sample_leaves(self.shape.k, self.rngs)
        for leaf in self.forest.leaves():
            self.spend.add(int(self.forest.prompt_id[leaf]), leaves=1)
        starts = np.array(self.expansions, dtype=np.int64)  # (E,)
        counts = np.stack(self.counts) if self.counts else np.zeros((0, self.forest.n_trees))
        return Rollout(
            self.forest,
            self.prompt_ids,
            self.steps,
            kept,
            self.spend,
            starts,
            self.reasons,
            counts.astype(np.int64),  # (L, T)
            self.expansion_s,
        )

    def _node_stats(self) -> NodeStats:
        """What the rule reads: log-probs (``entropy``), leaves' rewards (``informed``)."""
        rule = self.shape.expansion.rule
        logprobs = None
        if rule == "entropy":
            payload = self.forest.payload.tolist()
            logprobs = [self.steps[p].action_logprobs if p >= 0 else [] for p in payload]
        return NodeStats(logprobs, self._scored() if rule == "informed" else None)

    def _scored(self) -> npt.NDArray[np.float64]:
        """(N,) each leaf's reward, NaN on the other nodes; the leaves not scored yet are
        scored now (``self.rewards`` keeps them)."""
        assert self.score is not None  # checked on construction
        new = [int(v) for v in self.forest.leaves() if int(v) not in self.rewards]
        if new:
            so_far = Rollout(
                self.forest, self.prompt_ids, self.steps, np.zeros(0, np.int64), self.spend
            )
            got = np.asarray(self.score(so_far, new), dtype=np.float64)
            if got.shape != (len(new),):
                raise ValueError(f"score returned {got.shape} rewards for {len(new)} leaves")
            self.rewards.update(zip(new, got.tolist(), strict=True))
        by_node = np.full(self.forest.n_nodes, np.nan)  # (N,)
        by_node[list(self.rewards)] = list(self.rewards.values())
        return by_node

    def _until_done(self, episodes: list[_Episode]) -> None:
        """Run episodes step by step, all live ones in one engine call per step."""
        while episodes:
            episodes = self._advance(episodes)

    def _advance(self, episodes: list[_Episode]) -> list[_Episode]:
        """One step of every episode, in one engine call; the episodes that go on."""
        cap = self.limits.max_context
        requests = [
            StepRequest(
                e.context,
                e.pending,
                max(0, min(self.sampling.max_new_tokens, cap - e.context.length - len(e.pending))),
                _stream_seed(*e.stream, int(self.forest.depth[e.parent]) + 1),
            )
            for e in episodes
        ]
        results = self.engine.step(requests, self.sampling)
        actions = [self.protocol.parse(r.tokens) for r in results]
        finals = [int(self.forest.depth[e.parent]) + 1 > self.limits.max_turns for e in episodes]
        by_tool: dict[str, list[int]] = {}  # tool → the episodes that call it, in order
        for i, (a, r) in enumerate(zip(actions, results, strict=True)):
            if a.kind in self.tools and not finals[i] and r.tokens:
                by_tool.setdefault(a.kind, []).append(i)
        outcomes: dict[int, Outcome] = {}
        for name, idx in by_tool.items():
            calls = [(actions[i].text, self._history(episodes[i].parent)) for i in idx]
            outcomes.update(zip(idx, self.tools.run(name, calls), strict=True))

        nxt = []
        for i, (e, r, a) in enumerate(zip(episodes, results, actions, strict=True)):
            # The context right after e.parent is r.fork + e.pending[-1]: remember it once.
            self.resume.setdefault(e.parent, (r.fork, e.pending[-1]))
            pid = int(self.forest.prompt_id[e.parent])
            done = not r.tokens or a.kind == "answer" or finals[i]
            out = outcomes.get(i)
            obs: list[int] = []
            if not done:
                proto = self.protocol
                obs = proto.invalid_ids() if out is None else proto.text_ids(out.text)
                # No room to feed the observation and sample one more token: a length leaf.
                done = r.end.length + 1 + len(obs) >= cap
                obs = [] if done else obs
            record = StepRecord(
                r.tokens,
                r.logprobs,
                obs,
                a,
                r.finish,
                final=finals[i],
                tool=a.kind if out is not None else "",
                tool_status=out.status if out is not None else "",
                argument=out.argument if out is not None else None,
                result=out.result if out is not None else None,
                processed=r.processed,
                reused=r.reused,
            )
            node = self.forest.add_node(e.parent, payload=len(self.steps), leaf=done)
            self.steps.append(record)
            self.spend.add(
                pid, generated=len(r.tokens), processed=r.processed, tool_calls=int(out is not None)
            )
            if not done:
                nxt.append(_Episode(node, r.end, [r.tokens[-1], *obs], e.stream))
        return nxt

    def _history(self, node: int) -> tuple[PastCall, ...]:
        """The tool calls on the path from the root to ``node``, oldest first."""
        calls = (
            self.steps[int(self.forest.payload[v])].past_call() for v in self.forest.path(node)
        )
        return tuple(c for c in calls if c is not None)


def toolbox(tool: SearchTool | Toolbox, topk: int = 3) -> Toolbox:
    """``tool`` as a toolbox: a retriever becomes Search-R1's ``search`` (``topk`` passages)."""
    return tool if isinstance(tool, Toolbox) else Toolbox.search_r1(tool, topk)


def agent_protocol(
    tokenizer: Any, tool: SearchTool | Toolbox, max_obs_tokens: int = 500
) -> ToolProtocol:
    """The protocol that offers ``tool``'s tools (a retriever: Search-R1's, ``search`` alone)."""
    return ToolProtocol(tokenizer, max_obs_tokens, toolbox(tool))


def _stream_seed(*key: int) -> int:
    """A 63-bit seed for the stream named by ``key`` (seed, prompt key, tree, branch, depth)."""
    return int(
        np.random.SeedSequence([k % 2**63 for k in key]).generate_state(1, np.uint64)[0] >> 1
    )
