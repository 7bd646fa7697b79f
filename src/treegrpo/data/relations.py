"""Relations of the synthetic world: how each fact is written, asked about and searched for.

Every relation has 2–3 paraphrase templates; each one contains the relation's ``keyword``, so the
query "<subject> <keyword>" always matches the sentence that states the fact, whichever paraphrase
a passage uses. ``find_object`` reads a fact back from text by the same templates: the oracle
agent uses it to take bridge entities from the passages it retrieved, never from the world's
tables.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache

KINDS = ("person", "city", "country", "company", "university", "band")

# A name as it appears in text: one capitalized word, two for people.
_NAME = {kind: r"[A-Z][a-z]+" for kind in KINDS} | {"person": r"[A-Z][a-z]+ [A-Z][a-z]+"}


@dataclass(frozen=True)
class Relation:
    name: str
    subject: str  # entity kind
    object: str  # entity kind
    keyword: str  # the search word; in every template
    templates: tuple[str, ...]  # fact sentences with {s} and {o}
    questions: tuple[str, ...]  # one-hop questions with {s}
    statement: str  # a canonical sentence of the fact (in the tokenizer's training text)

    def sentence(self, subject: str, obj: str, variant: int) -> str:
        return self.templates[variant % len(self.templates)].format(s=subject, o=obj)

    def query(self, subject: str) -> str:
        """The well-formed search for this fact."""
        return f"{subject} {self.keyword}"


RELATIONS: dict[str, Relation] = {
    r.name: r
    for r in (
        Relation(
            "born_in",
            "person",
            "city",
            "born",
            (
                "{s} was born in {o}.",
                "{s} was born in the city of {o}.",
                "The city of {o} is where {s} was born.",
            ),
            ("Where was {s} born?", "In which city was {s} born?"),
            "{s} was born in {o}",
        ),
        Relation(
            "studied_at",
            "person",
            "university",
            "studied",
            (
                "{s} studied at {o}.",
                "{s} studied at the university of {o}.",
                "At {o} university, {s} studied.",
            ),
            ("Where did {s} study?", "At which university did {s} study?"),
            "{s} studied at {o}",
        ),
        Relation(
            "founded",
            "person",
            "company",
            "founded",
            (
                "{s} founded {o}.",
                "{s} founded the company {o}.",
                "{o} was founded by {s}.",
            ),
            ("Which company did {s} found?", "What company was founded by {s}?"),
            "{s} founded {o}",
        ),
        Relation(
            "member_of",
            "person",
            "band",
            "band",
            (
                "{s} is a member of the band {o}.",
                "{s} plays in the band {o}.",
                "The band {o} counts {s} among its members.",
            ),
            ("Which band is {s} a member of?", "In which band does {s} play?"),
            "{s} plays in {o}",
        ),
        Relation(
            "headquartered_in",
            "company",
            "city",
            "headquartered",
            (
                "{s} is headquartered in {o}.",
                "{s} is a company headquartered in {o}.",
                "{o} is where {s} is headquartered.",
            ),
            ("Where is {s} headquartered?", "In which city is the company {s} headquartered?"),
            "{s} is headquartered in {o}",
        ),
        Relation(
            "campus_in",
            "university",
            "city",
            "located",
            (
                "{s} university is located in {o}.",
                "The university {s} is located in {o}.",
                "{s} is located in the city of {o}.",
            ),
            (
                "In which city is the university {s} located?",
                "Where is the university {s} located?",
            ),
            "{s} is located in {o}",
        ),
        Relation(
            "formed_in",
            "band",
            "city",
            "formed",
            (
                "{s} was formed in {o}.",
                "The band {s} was formed in {o}.",
                "{s} is a band formed in the city of {o}.",
            ),
            ("In which city was the band {s} formed?", "Where was the band {s} formed?"),
            "{s} was formed in {o}",
        ),
        Relation(
            "city_in",
            "city",
            "country",
            "country",
            (
                "{s} is a city in the country of {o}.",
                "{s} lies in the country {o}.",
                "The country {o} includes the city of {s}.",
            ),
            ("In which country is {s}?", "Which country is the city {s} in?"),
            "{s} is in {o}",
        ),
        Relation(
            "capital",
            "country",
            "city",
            "capital",
            (
                "The capital of {s} is {o}.",
                "{o} is the capital of {s}.",
                "{s} is a country whose capital is {o}.",
            ),
            ("What is the capital of {s}?", "Which city is the capital of {s}?"),
            "the capital of {s} is {o}",
        ),
    )
}

# Multi-hop questions: a chain of relations from a start entity, each object the next subject.
PATHS: dict[tuple[str, ...], tuple[str, ...]] = {
    ("born_in", "city_in"): ("In which country was {s} born?",),
    ("founded", "headquartered_in"): (
        "In which city is the company founded by {s} headquartered?",
    ),
    ("studied_at", "campus_in"): ("In which city is the university where {s} studied located?",),
    ("member_of", "formed_in"): ("In which city was the band of {s} formed?",),
    ("headquartered_in", "city_in"): ("In which country is the company {s} headquartered?",),
    ("campus_in", "city_in"): ("In which country is the university {s} located?",),
    ("formed_in", "city_in"): ("In which country was the band {s} formed?",),
    ("founded", "headquartered_in", "city_in"): (
        "In which country is the company founded by {s} headquartered?",
    ),
    ("studied_at", "campus_in", "city_in"): (
        "In which country is the university where {s} studied located?",
    ),
    ("member_of", "formed_in", "city_in"): ("In which country was the band of {s} formed?",),
    ("born_in", "city_in", "capital"): ("What is the capital of the country where {s} was born?",),
}
PATHS |= {(name,): r.questions for name, r in RELATIONS.items()}


@cache
def _patterns(relation: str, subject: str) -> tuple[re.Pattern[str], ...]:
    rel = RELATIONS[relation]
    subj = r"(?<![\w])" + re.escape(subject) + r"(?![\w])"
    obj = r"(?<![\w])(?P<o>" + _NAME[rel.object] + r")(?![\w])"
    out = []
    for t in rel.templates:
        literal = re.escape(t).replace(r"\{s\}", "{s}").replace(r"\{o\}", "{o}")
        out.append(re.compile(literal.replace("{s}", subj).replace("{o}", obj)))
    return tuple(out)


def find_fact(text: str, relation: str, subject: str) -> tuple[str, str] | None:
    """(object, sentence) of the first sentence in ``text`` that states ``relation`` of
    ``subject`` in any of the relation's paraphrases, or None. Sentences about other subjects
    never match. ``sentence`` is the passage's own wording, from its first word to the period."""
    best: tuple[int, str, str] | None = None
    for pat in _patterns(relation, subject):
        m = pat.search(text)
        if m and (best is None or m.start() < best[0]):
            best = (m.start(), m.group("o"), m.group(0))
    return (best[1], best[2]) if best else None


def find_object(text: str, relation: str, subject: str) -> str | None:
    """The object of ``find_fact``, or None."""
    found = find_fact(text, relation, subject)
    return found[0] if found else None


def find_any(text: str, relation: str) -> tuple[str, str, str] | None:
    """(subject, object, sentence) of the first sentence stating ``relation`` about anyone: what
    a careless reader takes from passages about the wrong entity."""
    rel = RELATIONS[relation]
    subj = r"(?<![\w])(?P<s>" + _NAME[rel.subject] + r")(?![\w])"
    obj = r"(?<![\w])(?P<o>" + _NAME[rel.object] + r")(?![\w])"
    best: tuple[int, str, str, str] | None = None
    for t in rel.templates:
        literal = re.escape(t).replace(r"\{s\}", "{s}").replace(r"\{o\}", "{o}")
        m = re.search(literal.replace("{s}", subj).replace("{o}", obj), text)
        if m and (best is None or m.start() < best[0]):
            best = (m.start(), m.group("s"), m.group("o"), m.group(0))
    return (best[1], best[2], best[3]) if best else None
