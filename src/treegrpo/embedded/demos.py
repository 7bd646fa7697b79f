"""Scripted demonstrations for the warm start: oracle traces with decision flaws (``Flaws``;
``WebFlawedAgent`` adds ``skip``), played through ``oracle.run_episode`` with the real search
tool and observation tokens; reading is always right. A demonstration's loss mask is 1 on the
agent's step tokens, 0 on prompt and observations (docs/algorithm.md §1). The flaws and their
rates: docs/embedded.md, "The warm start".
"""

from __future__ import annotations

import random
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Protocol

from treegrpo.agent.protocol import ToolProtocol
from treegrpo.data.types import Question
from treegrpo.embedded.names import NAME_POOL
from treegrpo.embedded.oracle import (
    Episode,
    answer_step,
    plan_text,
    run_episode,
    tool_step,
)
from treegrpo.embedded.relations import fact_title, find_object
from treegrpo.embedded.synthetic import Plan, World
from treegrpo.retrieval.base import SearchTool
from treegrpo.tools.registry import Toolbox

Tool = SearchTool | Toolbox


@dataclass(frozen=True)
class Flaws:
    """How often each flaw is drawn (see the module docstring)."""

    early: float = 0.15
    """Answer a guess at the first step, without searching."""
    stop: float = 0.65
    """After the first search, with relations left: answer the entity in hand."""
    stop_later: float | None = None
    """After a later search, with relations left: answer the entity in hand (None: ``stop``)."""
    vague: float = 0.05
    """After a search with relations left: search the start entity, not the one just read."""

    def __post_init__(self) -> None:
        if not all(0 <= p <= 1 for p in (self.early, self.stop, self.later, self.vague)):
            raise ValueError(f"flaw probabilities must lie in [0, 1]: {self}")
        if max(self.stop, self.later) + self.vague > 1:
            raise ValueError(f"stop (or stop_later) plus vague must be at most 1: {self}")

    @property
    def later(self) -> float:
        """The stop probability after a later search."""
        return self.stop if self.stop_later is None else self.stop_later


@dataclass
class Demo:
    """One demonstration. Shapes (T,)."""

    ids: list[int]
    mask: list[int]  # 1 on action tokens (trained), 0 on prompt and observations
    prompt_len: int
    flaws: tuple[str, ...]  # the flaws drawn in this episode, in order (empty: none)
    hops: int
    reward: float  # the demonstration's own Search-R1 reward (for the mix statistics)


class FlawedAgent:
    """The oracle with ``Flaws``' decision flaws, drawn with ``rng`` (recorded in ``flaws``);
    with none it is the oracle: right queries, each bridge entity read from its observation."""

    def __init__(self, plan: Plan, flaws: Flaws, rng: random.Random, counted: bool = False) -> None:
        self.plan, self.p, self.rng, self.counted = plan, flaws, rng, counted
        self.current: str | None = plan.start  # the entity in hand
        self.rest = plan.relations  # relations still to follow
        self.searched = plan.start  # the entity of the last search
        self.flaws: list[str] = []

    def __call__(self, observations: Sequence[str]) -> str:
        if observations and self._reads():  # the fact about the entity that was searched
            self.current = find_object(observations[-1], self.rest[0], self.searched)
            self.rest = self.rest[1:]
        if self.current is None:
            return answer_step("the fact is missing", "unknown")
        think = plan_text(self.current, self.rest, self.counted)
        if not observations and self.rng.random() < self.p.early:
            self.flaws.append("early")
            return answer_step(think, self.rng.choice(NAME_POOL))
        if (step := self._after_search(think, self.current)) is not None:
            return step
        if not self.rest:
            return answer_step(think, self.current)
        read = len(self.plan.relations) - len(self.rest)  # facts read so far
        if read:
            draw, stop = self.rng.random(), self.p.stop if read == 1 else self.p.later
            if draw < stop:
                self.flaws.append("stop")
                return answer_step(think, self.current)
            if draw < stop + self.p.vague and self.current != self.plan.start:
                self.flaws.append("vague")
                return self._search(think, self.plan.start)
        return self._search(think, self.current)

    def _reads(self) -> bool:
        """Whether the last observation holds the fact to read: here every one, a search's."""
        return True

    def _after_search(self, think: str, current: str) -> str | None:
        """The step between a search and reading its fact: none here."""
        return None

    def _search(self, think: str, entity: str) -> str:
        self.searched = entity
        return tool_step(think, "search", fact_title(entity, self.rest[0]))


class WebFlawedAgent(FlawedAgent):
    """``FlawedAgent`` in the web variant: a hop is ``search`` (the fact's title), then ``visit
    1`` (read as the passage is); ``Flaws`` after each page read, and after each search
    ``skip``: answer the entity in hand without visiting."""

    def __init__(
        self, plan: Plan, flaws: Flaws, skip: float, rng: random.Random, counted: bool = False
    ) -> None:
        super().__init__(plan, flaws, rng, counted)
        self.skip = skip
        self.last = ""  # the tool the last step called

    def _reads(self) -> bool:
        return self.last == "visit"

    def _after_search(self, think: str, current: str) -> str | None:
        if self.last != "search":
            return None
        if self.rng.random() < self.skip:
            self.flaws.append("skip")
            return answer_step(think, current)
        self.last = "visit"
        return tool_step(think, "visit", "1")

    def _search(self, think: str, entity: str) -> str:
        self.last = "search"
        return super()._search(think, entity)


class DemoSettings(Protocol):
    """The demonstration fields of ``warmstart.tiny.WarmStartConfig`` (documented there)."""

    @property
    def n_demos(self) -> int: ...
    @property
    def flaws(self) -> Flaws: ...
    @property
    def seed(self) -> int: ...
    @property
    def max_turns(self) -> int: ...
    @property
    def topk(self) -> int: ...
    @property
    def web(self) -> bool: ...
    @property
    def skip(self) -> float: ...
    @property
    def counted(self) -> bool: ...
    @property
    def query_drills(self) -> int: ...


def build_demos(
    worlds: Sequence[tuple[World, Tool]], protocol: ToolProtocol, cfg: DemoSettings
) -> list[Demo]:
    """``cfg.n_demos`` demonstrations over the questions of ``worlds`` (each with its search
    tool, or toolbox when ``cfg.web``), in a seeded order, cycled."""
    rng = random.Random(f"treegrpo-demos:{cfg.seed}")
    demos = []
    for world, tool, q in _drawn(worlds, cfg.n_demos, rng):
        plan = world.plans[q.uid]
        agent = (
            WebFlawedAgent(plan, cfg.flaws, cfg.skip, rng, cfg.counted)
            if cfg.web
            else FlawedAgent(plan, cfg.flaws, rng, cfg.counted)
        )
        episode = run_episode(agent, protocol, tool, cfg.max_turns, cfg.topk)
        demos.append(demo_from_episode(q, episode, protocol, tuple(agent.flaws)))
    return demos


def _drawn(
    worlds: Sequence[tuple[World, Tool]], n: int, rng: random.Random, min_hops: int = 0
) -> Iterator[tuple[World, Tool, Question]]:
    """``n`` questions of ``worlds`` with ``min_hops`` hops or more, with world and tool; each
    pass a fresh seeded shuffle."""
    pool = [(w, t, q) for w, t in worlds for q in w.questions if q.hops >= min_hops]
    order: list[tuple[World, Tool, Question]] = []
    for _ in range(n):
        if not order:
            order = rng.sample(pool, len(pool))
        yield order.pop()


NO_LOSS = -1
"""Mask value of a token that is neither trained nor context (``query_drills``)."""
DRILL_DEPTH = 3
"""The first search whose query ``query_drills`` trains."""


def query_drills(
    worlds: Sequence[tuple[World, SearchTool]], protocol: ToolProtocol, cfg: DemoSettings
) -> list[Demo]:
    """``cfg.query_drills`` oracle episodes of ``DRILL_DEPTH``+-hop questions (seeded, cycled),
    trained only on their ``DRILL_DEPTH``-th and later queries (other tokens: ``NO_LOSS``)."""
    rng = random.Random(f"treegrpo-drills:{cfg.seed}")
    opening = protocol.tokenizer.convert_tokens_to_ids("<search>")
    drills = []
    for world, tool, q in _drawn(worlds, cfg.query_drills, rng, DRILL_DEPTH):
        oracle = FlawedAgent(world.plans[q.uid], Flaws(0, 0, None, 0), rng)
        episode = run_episode(oracle, protocol, tool, cfg.max_turns, cfg.topk)
        demo = demo_from_episode(q, episode, protocol)
        mask, searches, t = [NO_LOSS] * len(demo.ids), 0, demo.prompt_len
        for turn in episode.turns:
            if opening in turn.action_ids:
                searches += 1
                start = t + turn.action_ids.index(opening) + 1  # the query and its closing tag
                end = t + len(turn.action_ids)
                if searches >= DRILL_DEPTH:
                    mask[start:end] = [1] * (end - start)
            t += len(turn.action_ids) + len(turn.obs_ids)
        drills.append(Demo(demo.ids, mask, demo.prompt_len, (), q.hops, demo.reward))
    return drills


def demo_from_episode(
    q: Question, episode: Episode, protocol: ToolProtocol, flaws: tuple[str, ...] = ()
) -> Demo:
    """The demonstration of ``episode`` on ``q``: the protocol's prompt, then every turn."""
    prompt = protocol.prompt_ids(q.question)
    ids, mask = list(prompt), [0] * len(prompt)
    for turn in episode.turns:
        ids += turn.action_ids + turn.obs_ids
        mask += [1] * len(turn.action_ids) + [0] * len(turn.obs_ids)
    reward = episode.score(protocol, q.golds)["reward"]
    return Demo(ids, mask, len(prompt), flaws, q.hops, reward)
