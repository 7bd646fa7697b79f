"""The embedded synthetic multi-hop search world: entities, facts, a corpus and questions.

A world is generated from a seed: people, cities, countries, companies, universities and bands
with invented names (``treegrpo.data.names``), typed facts between them (``relations``), one
Search-R1 passage per entity stating its facts in paraphrases, confusable "twin" entities whose
names differ by one syllable (distractors), and 1-, 2- and 3-hop questions whose answers follow
from the passages alone. Two seeds give disjoint names, so a policy trained on one world and
evaluated on another can only succeed by searching, never by remembering.

Sizes default to a world of about 240 passages and 300 questions: BM25 over it is instant and a
whole train + eval cycle fits on two CPU cores.
"""

from __future__ import annotations

import random
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from treegrpo.data.names import NameMaker
from treegrpo.data.relations import PATHS, RELATIONS
from treegrpo.data.types import Question
from treegrpo.tools.base import Passage
from treegrpo.tools.corpus import make_contents, write_corpus

SOURCE = "synthetic"


@dataclass(frozen=True)
class WorldConfig:
    """Sizes of a synthetic world (``make_world(seed, **dataclasses.asdict(cfg))``)."""

    n_people: int = 80
    """People: each is born in a city and studied at a university; some found or join more."""
    n_countries: int = 8
    """Countries; each has ``cities_per_country`` cities, the first of them its capital."""
    cities_per_country: int = 4
    """Cities per country."""
    n_companies: int = 24
    """Companies, each founded by a different person."""
    n_universities: int = 12
    """Universities."""
    n_bands: int = 14
    """Bands, each with two or three members."""
    twin_share: float = 0.2
    """Share of entities that get a confusable twin (a distractor passage, one syllable apart)."""
    n_questions: int = 300
    """Questions, split evenly over 1, 2 and 3 hops where enough distinct ones exist."""


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
    kinds: dict[str, str]  # entity name → kind ("person", "city", …), twins included
    twins: dict[str, str]  # twin name → the entity it imitates
    facts: list[Fact]
    passages: list[Passage]
    questions: list[Question]
    plans: dict[str, Plan]  # question uid → its plan
    _table: dict[tuple[str, str], str] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        self._table = {(f.subject, f.relation): f.object for f in self.facts}

    def lookup(self, subject: str, relation: str) -> str | None:
        """The object of a fact, from the world's own tables (for tests and checks)."""
        return self._table.get((subject, relation))

    def follow(self, plan: Plan) -> str | None:
        """The answer a plan leads to by the world's tables."""
        node: str | None = plan.start
        for rel in plan.relations:
            node = None if node is None else self.lookup(node, rel)
        return node

    def name_words(self) -> frozenset[str]:
        """Every word of every entity name, lower-cased."""
        return frozenset(w.lower() for name in self.kinds for w in name.split())

    def of_kind(self, kind: str) -> list[str]:
        """Entities (twins excluded) of a kind, in creation order."""
        return [n for n, k in self.kinds.items() if k == kind and n not in self.twins]

    def write_corpus(self, path: str | Path) -> int:
        """Write the passages as a Search-R1 jsonl corpus; return the count."""
        return write_corpus(path, self.passages)


def make_world(
    seed: int,
    n_people: int = 80,
    n_countries: int = 8,
    cities_per_country: int = 4,
    n_companies: int = 24,
    n_universities: int = 12,
    n_bands: int = 14,
    twin_share: float = 0.2,
    n_questions: int = 300,
    avoid: frozenset[str] = frozenset(),
) -> World:
    """Generate a world; the same arguments always give the same world.

    ``avoid``: lower-cased name words this world must not use (``train_eval_worlds`` passes the
    train world's, so the two share no name).
    """
    if n_companies > n_people or 2 * n_bands > n_people:
        raise ValueError("need a founder per company and two members per band")
    rng = random.Random(f"treegrpo-synthetic:{seed}")
    names = NameMaker(seed, avoid)
    kinds: dict[str, str] = {}

    def new(kind: str, name: str) -> str:
        kinds[name] = kind
        return name

    countries = [new("country", names.word(3)) for _ in range(n_countries)]
    cities = [new("city", names.word(2)) for _ in range(n_countries * cities_per_country)]
    universities = [new("university", names.word(2)) for _ in range(n_universities)]
    companies = [new("company", names.word(2)) for _ in range(n_companies)]
    bands = [new("band", names.word(2)) for _ in range(n_bands)]
    first_names = [names.word(2) for _ in range(max(4, n_people // 5))]
    people = [new("person", f"{rng.choice(first_names)} {names.word(2)}") for _ in range(n_people)]

    facts: list[Fact] = []
    for i, country in enumerate(countries):
        own = cities[i * cities_per_country : (i + 1) * cities_per_country]
        facts += [Fact(c, "city_in", country) for c in own]
        facts.append(Fact(country, "capital", own[0]))
    facts += [Fact(u, "campus_in", rng.choice(cities)) for u in universities]
    facts += [Fact(c, "headquartered_in", rng.choice(cities)) for c in companies]
    facts += [Fact(b, "formed_in", rng.choice(cities)) for b in bands]
    for p in people:
        facts.append(Fact(p, "born_in", rng.choice(cities)))
        facts.append(Fact(p, "studied_at", rng.choice(universities)))
    order = rng.sample(people, len(people))
    facts += [Fact(p, "founded", c) for p, c in zip(order, companies, strict=False)]
    members = rng.sample(people, len(people))
    cursor = 0
    for b in bands:
        size = 3 if rng.random() < 0.5 and cursor + 3 <= len(members) - 2 * (n_bands - 1) else 2
        facts += [Fact(p, "member_of", b) for p in members[cursor : cursor + size]]
        cursor += size

    twins = _twins(rng, names, kinds, facts, twin_share, cities, universities)
    for t in twins:
        kinds[t] = kinds[twins[t]]
    twin_facts = _twin_facts(rng, twins, kinds, cities, universities, countries)
    all_facts = facts + twin_facts
    passages = _passages(rng, seed, kinds, all_facts)
    world = World(seed, kinds, twins, all_facts, passages, [], {})
    world.questions, world.plans = _questions(rng, seed, world, n_questions)
    return world


def disjoint_worlds(
    seeds: list[int], avoid: frozenset[str] = frozenset(), **sizes: int | float
) -> list[World]:
    """One world per seed, no two of them (nor any with ``avoid``) sharing a name word, so their
    corpora can be searched as one."""
    worlds: list[World] = []
    for s in seeds:
        worlds.append(make_world(s, avoid=avoid, **sizes))  # type: ignore[arg-type]
        avoid = avoid | worlds[-1].name_words()
    return worlds


def train_eval_worlds(seed: int = 0, **sizes: int | float) -> tuple[World, World]:
    """A train world (seed ``2·seed``) and an eval world (seed ``2·seed + 1``) with no entity name
    in common; ``sizes`` go to both (see ``WorldConfig``)."""
    train = make_world(2 * seed, **sizes)  # type: ignore[arg-type]
    evaluation = make_world(2 * seed + 1, avoid=train.name_words(), **sizes)  # type: ignore[arg-type]
    return train, evaluation


def _twins(
    rng: random.Random,
    names: NameMaker,
    kinds: dict[str, str],
    facts: list[Fact],
    share: float,
    cities: list[str],
    universities: list[str],
) -> dict[str, str]:
    """Pick entities to imitate and name their twins."""
    pool = [n for n, k in kinds.items() if k in ("person", "city", "company", "band", "university")]
    chosen = rng.sample(pool, round(share * len(pool)))
    out = {}
    for name in chosen:
        twin = names.twin(name)
        if twin is not None:
            out[twin] = name
    return out


def _twin_facts(
    rng: random.Random,
    twins: dict[str, str],
    kinds: dict[str, str],
    cities: list[str],
    universities: list[str],
    countries: list[str],
) -> list[Fact]:
    """A twin states facts of its own kind with different objects than its original's, so
    reading the twin's passage gives a wrong bridge entity."""
    by_kind = {"person": ("born_in", "studied_at"), "company": ("headquartered_in",)}
    by_kind |= {"band": ("formed_in",), "university": ("campus_in",), "city": ("city_in",)}
    targets = {"city": cities, "university": universities, "country": countries}
    out = []
    for twin in twins:
        for rel in by_kind[kinds[twin]]:
            out.append(Fact(twin, rel, rng.choice(targets[RELATIONS[rel].object])))
    return out


# Facts a passage states about other entities: the company names its founder, the band its
# members, the city whose capital it is. Keyed by relation → passage of the object.
_INVERSE_IN_PASSAGE = ("founded", "member_of", "capital")


def _passages(
    rng: random.Random, seed: int, kinds: dict[str, str], facts: list[Fact]
) -> list[Passage]:
    """One passage per entity: its facts (and a few about it), each in a paraphrase chosen by
    the seed, then a line or two of detail that no question asks about."""
    about: dict[str, list[Fact]] = defaultdict(list)
    for f in facts:
        about[f.subject].append(f)
        if f.relation in _INVERSE_IN_PASSAGE:
            about[f.object].append(f)
    out = []
    for i, name in enumerate(kinds):
        sentences = [
            RELATIONS[f.relation].sentence(f.subject, f.object, rng.randrange(3))
            for f in about[name]
        ]
        sentences += _detail(rng, name, kinds[name])
        out.append(Passage(f"syn{seed}-{i}", make_contents(name, " ".join(sentences))))
    return out


def _detail(rng: random.Random, name: str, kind: str) -> list[str]:
    year = rng.randrange(1820, 2010)
    match kind:
        case "person":  # people have the most facts already
            return []
        case "company" | "university":
            return [f"{name} was established in {year}."]
        case "band":
            return [f"{name} released its first album in {year}."]
        case "city":
            return [f"{name} has about {rng.randrange(20, 900)} thousand inhabitants."]
        case _:
            return [f"{name} has about {rng.randrange(2, 90)} million inhabitants."]


def _questions(
    rng: random.Random, seed: int, world: World, n: int
) -> tuple[list[Question], dict[str, Plan]]:
    """Distinct (start, path) questions, as even over hop counts as the world allows."""
    starts: dict[str, list[str]] = defaultdict(list)
    for f in world.facts:
        if f.subject not in world.twins:
            starts[f.relation].append(f.subject)
    by_hops: dict[int, list[Plan]] = defaultdict(list)
    for path in PATHS:
        for s in sorted(set(starts[path[0]]), key=list(world.kinds).index):
            plan = Plan(s, path)
            if world.follow(plan) is not None:
                by_hops[len(path)].append(plan)
    hop_counts = sorted(by_hops)
    chosen: list[Plan] = []
    for j, h in enumerate(hop_counts):
        want = (n - len(chosen)) // (len(hop_counts) - j)
        chosen += rng.sample(by_hops[h], min(want, len(by_hops[h])))
    questions, plans = [], {}
    for i, plan in enumerate(chosen):
        uid = f"{SOURCE}-{seed}-{i}"
        text = rng.choice(PATHS[plan.relations]).format(s=plan.start)
        answer = world.follow(plan)
        assert answer is not None
        questions.append(Question(uid, text, (answer,), SOURCE, len(plan.relations)))
        plans[uid] = plan
    return questions, plans
