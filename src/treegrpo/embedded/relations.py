"""Relations of the synthetic world: how a fact is written, asked about, searched for and read.

Every person of a world has one of each relation to another person of the same world. A fact is
always written the same way ("Kalo's mentor is Tevu."), in a passage of its own titled "Kalo's
mentor"; a question follows relations in the order they are searched ("Who is Kalo's mentor's
friend?"), and the right search for one hop is the entity in hand and the relation ("Kalo's
mentor"). ``find_object`` reads a fact back from text: the oracle agent takes bridge entities
from the passages it retrieved, never from the world's tables.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from functools import cache

RELATIONS: tuple[str, ...] = ("boss", "mentor", "friend", "rival")
"""Relation words, in the cycle that questions follow (each one token of the tiny agent's
tokenizer and one BM25 term): a question's relations are consecutive in this cycle ("Kalo's
friend's rival's boss"), so the relation after the one just resolved never needs a lookup in
the question, and a chain of up to four hops never repeats a relation."""


def path(first: str, hops: int) -> tuple[str, ...]:
    """``hops`` relations of the cycle starting at ``first``: ``path("friend", 3)`` is
    ("friend", "rival", "boss")."""
    i = RELATIONS.index(first)
    return tuple(RELATIONS[(i + k) % len(RELATIONS)] for k in range(hops))


_NAME = r"[A-Z][a-z]+"


def fact_sentence(subject: str, relation: str, obj: str) -> str:
    """The sentence that states a fact in a passage."""
    return f"{subject}'s {relation} is {obj}."


def question_text(start: str, relations: Sequence[str]) -> str:
    """The question that follows ``relations`` from ``start``, in search order:
    ``question_text("Kalo", ["mentor", "boss"])`` is "Who is Kalo's mentor's boss?"."""
    return f"Who is {start}'s " + "'s ".join(relations) + "?"


def fact_title(subject: str, relation: str) -> str:
    """The title of the passage that states one fact ("Kalo's boss")."""
    return f"{subject}'s {relation}"


def query(subject: str, relation: str) -> str:
    """The well-formed search for one hop: the fact's title ("Kalo's boss"), which BM25 ranks
    first, since the title repeats both words."""
    return fact_title(subject, relation)


@cache
def _pattern(relation: str, subject: str) -> re.Pattern[str]:
    return re.compile(
        r"(?<![\w])" + re.escape(subject) + "'s " + re.escape(relation) + r" is (" + _NAME + r")\."
    )


def find_object(text: str, relation: str, subject: str) -> str | None:
    """The object of the first sentence in ``text`` stating ``relation`` of ``subject``."""
    m = _pattern(relation, subject).search(text)
    return m.group(1) if m else None
