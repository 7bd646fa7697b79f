"""The embedded synthetic multi-hop search world (docs/embedded.md, "The world"): people, who
relates to whom, one Search-R1 passage per fact ('"Kalo's boss"\nKalo's boss is Tevu.'), and
questions of 1 to 4 hops along a chain of distinct people, so an answer a hop early is wrong.
Worlds share the name pool and redraw the facts from their seed, so a policy evaluated on
another world succeeds only by searching.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from treegrpo.data.types import Question
from treegrpo.embedded.names import NAME_POOL
from treegrpo.embedded.relations import RELATIONS, fact_sentence, fact_title, path, question_text
from treegrpo.retrieval.base import Passage
from treegrpo.retrieval.corpus import make_contents

SOURCE = "synthetic"
MAX_HOPS = 4


@dataclass(frozen=True)
class WorldConfig:
    """Sizes of a synthetic world (``make_world(seed, **dataclasses.asdict(cfg))``)."""

    n_people: int = 100
    """People in the world, drawn from the name pool (one passage per fact, four each)."""
    n_questions: int = 400
    """Questions, split evenly over 1, 2, 3 and 4 hops."""


@dataclass(frozen=True)
class Fact:
    subject: str
    relation: str
    object: str


@dataclass(frozen=True)
class Plan:
    """What a question asks: follow ``relations`` from ``start``."""

    start: str
    relations: tuple[str, ...]


@dataclass
class World:
    seed: int
    people: list[str]
    facts: list[Fact]
    passages: list[Passage]
    questions: list[Question]
    plans: dict[str, Plan]  # question uid → its plan
    _table: dict[tuple[str, str], str] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        self._table = {(f.subject, f.relation): f.object for f in self.facts}

    def chain(self, plan: Plan) -> list[str]:
        """The start and every person a plan passes through, the answer last."""
        out = [plan.start]
        for rel in plan.relations:
            out.append(self._table[(out[-1], rel)])
        return out


def make_world(seed: int, n_people: int = 100, n_questions: int = 400) -> World:
    """Generate a world; the same arguments always give the same world."""
    if not len(RELATIONS) + 1 < n_people <= len(NAME_POOL):
        raise ValueError(
            f"n_people must be in ({len(RELATIONS) + 1}, {len(NAME_POOL)}], got {n_people}"
        )
    rng = random.Random(f"treegrpo-synthetic:{seed}")
    people = rng.sample(NAME_POOL, n_people)
    facts = [
        Fact(p, rel, rng.choice([o for o in people if o != p])) for p in people for rel in RELATIONS
    ]
    passages = []
    for i, f in enumerate(facts):
        title = fact_title(f.subject, f.relation)
        text = fact_sentence(f.subject, f.relation, f.object)
        passages.append(Passage(f"syn{seed}-{i}", make_contents(title, text)))
    world = World(seed, people, facts, passages, [], {})
    world.questions, world.plans = _questions(rng, seed, world, n_questions)
    return world


def train_eval_worlds(seed: int = 0, **sizes: int) -> tuple[World, World]:
    """A train world (seed ``2·seed``) and an eval world (``2·seed + 1``); ``sizes``: both's."""
    return make_world(2 * seed, **sizes), make_world(2 * seed + 1, **sizes)


SYNTHETIC_EVAL = "synthetic-eval"
"""The name ``treegrpo eval --data`` knows the embedded job's held-out world by."""


def synthetic_eval(world_seed: int = 0) -> tuple[list[Question], list[Passage]]:
    """The held-out world of the embedded job (default sizes): its questions and its corpus."""
    world = train_eval_worlds(world_seed)[1]
    return list(world.questions), list(world.passages)


def _questions(
    rng: random.Random, seed: int, world: World, n: int
) -> tuple[list[Question], dict[str, Plan]]:
    """``n`` distinct questions by hop count, ``n / MAX_HOPS`` of each (the remainder to the
    longest), each a chain of distinct people."""
    questions: list[Question] = []
    plans: dict[str, Plan] = {}
    seen: set[Plan] = set()
    for hops in range(1, MAX_HOPS + 1):
        want = n // MAX_HOPS + (n % MAX_HOPS if hops == MAX_HOPS else 0)
        for _ in range(want):
            for _ in range(10_000):
                plan = Plan(rng.choice(world.people), path(rng.choice(RELATIONS), hops))
                if plan not in seen and len(set(world.chain(plan))) == hops + 1:
                    break
            else:
                raise RuntimeError(f"world {seed}: too few distinct {hops}-hop questions")
            seen.add(plan)
            uid = f"{SOURCE}-{seed}-{len(questions)}"
            text = question_text(plan.start, plan.relations)
            questions.append(Question(uid, text, (world.chain(plan)[-1],), SOURCE, hops))
            plans[uid] = plan
    return questions, plans
