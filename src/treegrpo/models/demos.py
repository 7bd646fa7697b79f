"""Scripted demonstrations for the warm start: oracle traces made deliberately imperfect.

Each demonstration plays one train-world question through ``treegrpo.data.oracle.run_episode``
with the real search tool and the real observation tokens, under one of four behaviours:

- ``perfect``: the oracle (right query every hop, bridge entities read from the passages);
- ``vague``: at one hop the query leaves out the entity ("born city"), so the wrong passages come
  back; the agent states whatever fact of that relation it finds first and answers wrongly;
- ``skip``: after a hop short of the last, it answers the bridge entity in hand or a guess
  (one-hop questions have nothing to skip and are played perfectly);
- ``early``: it answers a guess without searching.

The policy fitted to this mix uses the protocol and searches well for one hop, but it has seen
the flaws often enough to make them at the decision points of longer questions: a start that
solves part of the multi-hop questions and leaves the rest for reinforcement learning, which is
what the default run is meant to show. Guesses are names of the train world, so they are never
right on the eval world.

A demonstration is a token sequence with a loss mask: 1 on the agent's own step tokens, 0 on
the prompt and on observations (ALGORITHM.md §1), exactly the layout of a rollout leaf.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from treegrpo.agent.prompt import render_prompt
from treegrpo.agent.protocol import SearchProtocol
from treegrpo.data.oracle import (
    Episode,
    OracleAgent,
    answer_step,
    fact_text,
    plan_text,
    run_episode,
    search_step,
)
from treegrpo.data.relations import RELATIONS, find_any
from treegrpo.data.synthetic import Plan, World
from treegrpo.tools.base import SearchTool

Behaviour = Literal["perfect", "vague", "skip", "early"]
BEHAVIOURS: tuple[Behaviour, ...] = ("perfect", "vague", "skip", "early")


@dataclass
class Demo:
    """One demonstration. Shapes (T,)."""

    ids: list[int]
    mask: list[int]  # 1 on action tokens (trained), 0 on prompt and observations
    prompt_len: int
    behaviour: Behaviour
    hops: int
    reward: float  # the demonstration's own Search-R1 reward (for the mix statistics)


class FlawedAgent:
    """The oracle with one scripted flaw at hop ``at`` (see the module docstring)."""

    def __init__(
        self, plan: Plan, behaviour: Behaviour, rng: random.Random, guesses: Sequence[str]
    ) -> None:
        self.plan = plan
        self.oracle = OracleAgent(plan)
        self.behaviour = behaviour
        hops = len(plan.relations)
        # vague: any hop; skip: after 1..hops-1 facts (a one-hop question has no hop to skip,
        # so it is played perfectly: skipping is a flaw of multi-hop questions only).
        self.at = rng.randrange(hops) if behaviour == "vague" else rng.randrange(1, max(hops, 2))
        if behaviour == "skip" and hops == 1:
            self.behaviour = "perfect"
        self.guess = rng.choice(list(guesses))
        self.answer_bridge = rng.random() < 0.5  # skip: answer the entity in hand, or a guess

    def __call__(self, observations: Sequence[str]) -> str:
        hop, rels = len(observations), self.plan.relations
        if self.behaviour == "early":
            return answer_step(plan_text(self.plan.start, rels), self.guess)
        if self.behaviour == "skip" and hop == self.at:
            chain = self.oracle.entities(observations)
            prev, current = chain[-2], chain[-1]
            if prev is None or current is None:
                return answer_step("the fact is missing", self.guess)
            answer = current if self.answer_bridge else self.guess
            return answer_step(fact_text(observations[-1], rels[hop - 1], prev), answer)
        if self.behaviour == "vague" and hop == self.at:
            current = self.oracle.entities(observations)[-1] or self.plan.start
            rel = RELATIONS[rels[hop]]
            return search_step(plan_text(current, rels[hop:]), f"{rel.keyword} {rel.object}")
        if self.behaviour == "vague" and hop == self.at + 1:
            found = find_any(observations[-1], rels[hop - 1])
            if found is None:
                return answer_step("the fact is missing", self.guess)
            _, obj, sentence = found
            answer = obj if hop == len(rels) else self.guess
            return answer_step(sentence, answer)
        return self.oracle(observations)


def _guesses(world: World) -> dict[str, list[str]]:
    kinds = sorted(set(world.kinds.values()))
    return {k: world.of_kind(k) for k in kinds}


def build_demos(
    worlds: Sequence[tuple[World, SearchTool]],
    tokenizer: object,
    protocol: SearchProtocol,
    n: int,
    shares: dict[Behaviour, float],
    seed: int = 0,
    max_turns: int = 3,
    topk: int = 3,
) -> list[Demo]:
    """``n`` demonstrations over the questions of ``worlds`` (each with its own search tool),
    visited in a seeded order and cycled; behaviours drawn with probabilities ``shares``."""
    rng = random.Random(f"treegrpo-demos:{seed}")
    weights = [shares.get(b, 0.0) for b in BEHAVIOURS]
    if sum(weights) <= 0:
        raise ValueError("demo shares must have a positive sum")
    guesses = [_guesses(w) for w, _ in worlds]
    pool = [(k, q) for k, (w, _) in enumerate(worlds) for q in range(len(w.questions))]
    order: list[tuple[int, int]] = []
    demos = []
    for _ in range(n):
        if not order:
            order = rng.sample(pool, len(pool))
        k, qi = order.pop()
        world, tool = worlds[k]
        q = world.questions[qi]
        plan = world.plans[q.uid]
        behaviour = rng.choices(BEHAVIOURS, weights)[0]
        answer_kind = RELATIONS[plan.relations[-1]].object
        agent = FlawedAgent(plan, behaviour, rng, guesses[k][answer_kind])
        episode = run_episode(agent, protocol, tool, max_turns, topk)
        prompt = render_prompt(tokenizer, q.question)
        demos.append(demo_from_episode(prompt, episode, behaviour, q.hops, protocol, q.golds))
    return demos


def demo_from_episode(
    prompt: list[int],
    episode: Episode,
    behaviour: Behaviour,
    hops: int,
    protocol: SearchProtocol,
    golds: Sequence[str],
) -> Demo:
    ids, mask = list(prompt), [0] * len(prompt)
    for turn in episode.turns:
        ids += turn.action_ids + turn.obs_ids
        mask += [1] * len(turn.action_ids) + [0] * len(turn.obs_ids)
    reward = episode.score(protocol, golds)["reward"]
    return Demo(ids, mask, len(prompt), behaviour, hops, reward)
