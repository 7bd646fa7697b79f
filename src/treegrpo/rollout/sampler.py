"""Tree sampling ("initialize-then-expand", ALGORITHM.md §2), with chains as its L = 0 case.

Per prompt, with shape (M, N, L, K):

1. initialize: M independent chains (each the backbone of a tree), run step by step, all
   episodes of the whole batch in one engine call per step;
2. expand, L times: pick N nodes per tree uniformly with replacement among the root and the
   non-leaf steps; from each, sample a complete continuation; all expansions of the round,
   across the batch, run together;
3. keep K leaves per tree at random (all by default).

An episode's turn limit follows Search-R1: steps 1..max_turns may search; step max_turns + 1 is
the final one, where a search is not executed. A step whose context leaves no room for another
token ends the episode as well (a length leaf).

Every expansion resumes from its node's context, which the engine has cached (``HFEngine`` forks
the prefix's KV, ``VLLMEngine`` finds its blocks in vLLM's prefix cache), so a branch only pays
for the tokens it adds.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from treegrpo.agent.protocol import Action, SearchProtocol
from treegrpo.core.budget import SpendAccountant, TreeShape
from treegrpo.core.tree import Forest
from treegrpo.engine.base import Engine, StepRequest
from treegrpo.engine.sampling import SamplingParams
from treegrpo.engine.segments import Segment
from treegrpo.rollout.records import Rollout, StepRecord
from treegrpo.tools.base import SearchTool


@dataclass
class _Episode:
    parent: int  # forest node the next step hangs under
    context: Segment  # cached context before ``pending``
    pending: list[int]  # tokens to feed before sampling the step


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
) -> Rollout:
    """Sample one forest for a batch of prompts (token ids). The forest's prompt id of a tree is
    the index of its prompt in ``prompts``; map it to your dataset's group ids yourself."""
    if any(len(p) == 0 for p in prompts):
        raise ValueError("every prompt needs at least one token")
    rng = np.random.default_rng(seed)
    gen = torch.Generator(device=engine.device).manual_seed(seed)
    forest = Forest()
    steps: list[StepRecord] = []
    spend = SpendAccountant()
    # Where an expansion from a node resumes: (cached context, the one token still to feed).
    resume: dict[int, tuple[Segment, int]] = {}

    # The prompt is computed once and shared by its M trees.
    shared, cost = engine.prefill([engine.root()] * len(prompts), [list(p[:-1]) for p in prompts])
    episodes = []
    for pid, (prompt, ctx) in enumerate(zip(prompts, shared, strict=True)):
        spend.add(pid, processed=cost[pid])
        for _ in range(shape.m):
            root = forest.add_tree(pid)
            resume[root] = (ctx, prompt[-1])
            episodes.append(_Episode(root, ctx, [prompt[-1]]))
    run = _Runner(engine, protocol, tool, sampling, limits, forest, steps, spend, resume, gen)
    run.until_done(episodes)

    expansions = []
    for _ in range(shape.l):
        picks = forest.choose_expansions(shape.n, rng)  # (T, N)
        expansions.append(picks.ravel())
        run.until_done(
            [_Episode(int(x), resume[int(x)][0], [resume[int(x)][1]]) for x in picks.ravel()]
        )
    kept = forest.sample_leaves(shape.k, rng)
    for leaf in forest.leaves():
        spend.add(int(forest.prompt_id[leaf]), leaves=1)
    starts = np.concatenate(expansions) if expansions else np.zeros(0, np.int64)
    return Rollout(forest, [list(p) for p in prompts], steps, kept, spend, starts)


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
    gen: torch.Generator

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
            )
            for e in episodes
        ]
        results = self.engine.step(requests, self.sampling, self.gen)
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
        found = self.tool.search([actions[i].text for i in searching], self.limits.topk)
        passages = dict(zip(searching, ([p.contents for p in hits] for hits in found), strict=True))

        nxt = []
        for i, (e, r, a) in enumerate(zip(episodes, results, actions, strict=True)):
            pid = int(self.forest.prompt_id[e.parent])
            done = not r.tokens or a.kind == "answer" or finals[i]
            obs: list[int] = []
            if not done:
                obs = (
                    self.protocol.observation_ids(passages[i])
                    if i in passages
                    else self.protocol.invalid_ids()
                )
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
                nxt.append(_Episode(node, r.end, [r.tokens[-1], *obs]))
        return nxt
