"""Tree sampling ("initialize-then-expand", ALGORITHM.md §2), with chains as its L = 0 case.

Per prompt, with shape (M, N, L, K):

1. initialize: M independent chains (each the backbone of a tree), run step by step, all
   episodes of the whole batch in one engine call per step;
2. expand, L times: pick N nodes per tree with the shape's expansion rule (``core.expansion``;
   by default uniformly with replacement among the root and the non-leaf steps, as the paper
   does); from each, sample a complete continuation; all expansions of the round, across the
   batch, run together. The rollout records each expansion's node and the rule's reason;
3. keep K leaves per tree at random (all by default).

An episode's turn limit follows Search-R1: steps 1..max_turns may search; step max_turns + 1 is
the final one, where a search is not executed. A step whose context leaves no room for another
token ends the episode as well (a length leaf).

Every expansion resumes from its node's context, which the engine has cached (``HFEngine`` forks
the prefix's KV, ``VLLMEngine`` finds its blocks in vLLM's prefix cache), so a branch only pays
for the tokens it adds.

A search the tool cannot answer (``SearchFailed``: the retriever is down, timed out after its
retries, or refused the request) becomes an observation that says so, and the episode goes on;
the step records it (``StepRecord.search_failed``) for the trainer's failure count. When the
tool answered some searches of the batch (``SearchFailed.results``), those get their passages
and only the others fail.

Randomness is per prompt: every step of every branch samples from a stream of its own, seeded
by (seed, prompt key, tree, branch, depth) (``StepRequest.seed``), and each tree draws its
expansion nodes and kept leaves from a generator seeded by (seed, prompt key, tree). A prompt's
trees therefore come out the same whatever other prompts share the batch, so a batch split over
workers (``prompt_keys``: each prompt's index in the whole batch) gives the forests of one
process.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from treegrpo.agent.protocol import Action, SearchProtocol
from treegrpo.core.budget import SpendAccountant, TreeShape
from treegrpo.core.expansion import Expansion, NodeStats, choose
from treegrpo.core.tree import Forest
from treegrpo.engine.base import Engine, StepRequest
from treegrpo.engine.sampling import SamplingParams
from treegrpo.engine.segments import Segment
from treegrpo.rollout.records import Rollout, StepRecord
from treegrpo.tools.base import Passage, SearchFailed, SearchTool

log = logging.getLogger(__name__)

LeafScorer = Callable[[Rollout, Sequence[int]], Sequence[float] | npt.NDArray[np.float64]]
"""``score(rollout, leaves) -> rewards``: one reward per leaf id, for the ``informed`` expansion
rule (``rollout.scoring.score_leaves(...).reward`` with the batch's golds, in training)."""


@dataclass
class _Episode:
    parent: int  # forest node the next step hangs under
    context: Segment  # cached context before ``pending``
    pending: list[int]  # tokens to feed before sampling the step
    stream: tuple[int, ...]  # (seed, prompt key, tree in prompt, branch): its steps' seeds


@dataclass(frozen=True)
class AgentLimits:
    """Episode limits of the search agent (the paper's QA values as defaults)."""

    max_turns: int = 3  # steps that may search; one final step follows
    topk: int = 3  # passages per search
    max_context: int = 4096  # prompt + all steps and observations, in tokens


def sample_forest(
    engine: Engine,
    protocol: SearchProtocol,
    tool: SearchTool,
    prompts: Sequence[list[int]],
    shape: TreeShape,
    sampling: SamplingParams,
    limits: AgentLimits = AgentLimits(),
    seed: int = 0,
    prompt_keys: Sequence[int] | None = None,
    score: LeafScorer | None = None,
) -> Rollout:
    """Sample one forest for a batch of prompts (token ids). The forest's prompt id of a tree is
    the index of its prompt in ``prompts``; map it to your dataset's group ids yourself.
    ``prompt_keys``: what seeds each prompt's randomness (default: its index here); a part of a
    larger batch passes the prompts' indices in that batch. ``score``: rewards the leaves seen so
    far before each expansion round; the ``informed`` rule needs it, the others ignore it."""
    if any(len(p) == 0 for p in prompts):
        raise ValueError("every prompt needs at least one token")
    rule = shape.expansion
    if rule.needs_rewards and shape.l > 0 and score is None:
        raise ValueError(
            f"the {rule.rule} expansion rule needs the leaves' rewards: pass score= (a "
            "function of the rollout and leaf ids that returns their rewards)"
        )
    keys = list(range(len(prompts))) if prompt_keys is None else [int(k) for k in prompt_keys]
    if len(keys) != len(prompts):
        raise ValueError(f"{len(keys)} prompt keys for {len(prompts)} prompts")
    forest = Forest()
    steps: list[StepRecord] = []
    spend = SpendAccountant()
    # Where an expansion from a node resumes: (cached context, the one token still to feed).
    resume: dict[int, tuple[Segment, int]] = {}

    # The prompt is computed once and shared by its M trees.
    shared, cost = engine.prefill([engine.root()] * len(prompts), [list(p[:-1]) for p in prompts])
    episodes = []
    tree_keys: list[tuple[int, int, int]] = []  # (seed, prompt key, tree in prompt) per tree
    for pid, (prompt, ctx) in enumerate(zip(prompts, shared, strict=True)):
        spend.add(pid, processed=cost[pid])
        for j in range(shape.m):
            root = forest.add_tree(pid)
            resume[root] = (ctx, prompt[-1])
            tree_keys.append((seed, keys[pid], j))
            episodes.append(_Episode(root, ctx, [prompt[-1]], (*tree_keys[-1], 0)))
    # each tree's own generator: expansion picks, then kept leaves
    rngs = [np.random.default_rng(list(k)) for k in tree_keys]
    run = _Runner(engine, protocol, tool, sampling, limits, forest, steps, spend, resume)
    run.until_done(episodes)

    expansions, reasons = [], []
    rewards: dict[int, float] = {}  # leaf → reward, scored once each
    for r in range(shape.l):
        stats = _node_stats(rule, forest, prompts, steps, spend, score, rewards)
        choice = choose(rule.rule, forest, shape.n, rngs, stats, **rule.params())
        picks = choice.nodes  # (T, N)
        expansions.append(picks.ravel())
        reasons += [why for row in choice.reasons for why in row]
        branches = []
        for t, row in enumerate(picks.tolist()):
            for b, node in enumerate(row, start=1 + r * shape.n):  # branch 0: the initial chain
                ctx, token = resume[node]
                branches.append(_Episode(node, ctx, [token], (*tree_keys[t], b)))
        run.until_done(branches)
    kept = forest.sample_leaves(shape.k, rngs)
    for leaf in forest.leaves():
        spend.add(int(forest.prompt_id[leaf]), leaves=1)
    starts = np.concatenate(expansions) if expansions else np.zeros(0, np.int64)
    return Rollout(forest, [list(p) for p in prompts], steps, kept, spend, starts, reasons)


def _node_stats(
    rule: Expansion,
    forest: Forest,
    prompts: Sequence[list[int]],
    steps: list[StepRecord],
    spend: SpendAccountant,
    score: LeafScorer | None,
    rewards: dict[int, float],
) -> NodeStats | None:
    """What ``rule`` reads: each node's sampled log-probs (``entropy``), each leaf's reward
    (``informed``: the leaves not scored yet are scored now, ``rewards`` keeps them)."""
    payload = forest.payload.tolist()
    logprobs = None
    if rule.needs_logprobs:
        logprobs = [steps[p].action_logprobs if p >= 0 else [] for p in payload]
    by_node = None
    if rule.needs_rewards and score is not None:
        new = [int(v) for v in forest.leaves() if int(v) not in rewards]
        if new:
            so_far = Rollout(
                forest, [list(p) for p in prompts], steps, np.zeros(0, np.int64), spend
            )
            got = np.asarray(score(so_far, new), dtype=np.float64)
            if got.shape != (len(new),):
                raise ValueError(f"score returned {got.shape} rewards for {len(new)} leaves")
            rewards.update(zip(new, got.tolist(), strict=True))
        by_node = np.full(forest.n_nodes, np.nan)  # (N,)
        by_node[list(rewards)] = list(rewards.values())
    if logprobs is None and by_node is None:
        return None
    return NodeStats(logprobs, by_node)


@dataclass
class _Runner:
    engine: Engine
    protocol: SearchProtocol
    tool: SearchTool
    sampling: SamplingParams
    limits: AgentLimits
    forest: Forest
    steps: list[StepRecord]
    spend: SpendAccountant
    resume: dict[int, tuple[Segment, int]]

    def until_done(self, episodes: list[_Episode]) -> None:
        """Run episodes step by step, all live ones in one engine call per step."""
        while episodes:
            episodes = self._advance(episodes)

    def _advance(self, episodes: list[_Episode]) -> list[_Episode]:
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
        actions: list[Action] = []
        for e, r in zip(episodes, results, strict=True):
            # The context right after e.parent is r.fork + e.pending[-1]: remember it once.
            self.resume.setdefault(e.parent, (r.fork, e.pending[-1]))
            actions.append(self.protocol.parse(r.tokens))
        finals = [int(self.forest.depth[e.parent]) + 1 > self.limits.max_turns for e in episodes]
        searching = [
            i
            for i, (a, r) in enumerate(zip(actions, results, strict=True))
            if a.kind == "search" and not finals[i] and r.tokens
        ]
        found: list[list[Passage]] = []
        failed: set[int] = set()  # episodes whose search could not be answered
        try:
            if searching:
                found = self.tool.search([actions[i].text for i in searching], self.limits.topk)
        except SearchFailed as exc:  # the retriever is down or refused: the episodes go on
            # exc.results: each search's passages, None where it failed (None: all of them)
            answers = exc.results or [None] * len(searching)
            found = [hits or [] for hits in answers]
            failed = {i for i, hits in zip(searching, answers, strict=True) if hits is None}
            log.warning("%d of %d searches failed: %s", len(failed), len(searching), exc)
        passages = dict(zip(searching, ([p.contents for p in hits] for hits in found), strict=True))

        nxt = []
        for i, (e, r, a) in enumerate(zip(episodes, results, actions, strict=True)):
            pid = int(self.forest.prompt_id[e.parent])
            done = not r.tokens or a.kind == "answer" or finals[i]
            obs: list[int] = []
            if not done:
                if i not in passages:
                    obs = self.protocol.invalid_ids()
                elif i in failed:
                    obs = self.protocol.failed_search_ids()
                else:
                    obs = self.protocol.observation_ids(passages[i])
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
                searched=i in passages,
                search_failed=i in failed,
                passages=passages.get(i, []),
                processed=r.processed,
                reused=r.reused,
            )
            node = self.forest.add_node(e.parent, payload=len(self.steps), leaf=done)
            self.steps.append(record)
            self.spend.add(
                pid, generated=len(r.tokens), processed=r.processed, tool_calls=int(i in passages)
            )
            if not done:
                nxt.append(_Episode(node, r.end, [r.tokens[-1], *obs], e.stream))
        return nxt


def _stream_seed(*key: int) -> int:
    """A 63-bit seed for the stream named by ``key`` (seed, prompt key, tree, branch, depth)."""
    return int(
        np.random.SeedSequence([k % 2**63 for k in key]).generate_state(1, np.uint64)[0] >> 1
    )
