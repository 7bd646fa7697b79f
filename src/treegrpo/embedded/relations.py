"""Relations of the synthetic world: how a fact is written ("Kalo's mentor is Tevu.", in a
passage titled "Kalo's mentor"), asked about in search order ("Who is Kalo's mentor's friend?"),
searched for by title ("Kalo's mentor") and read back from text (``find_object``: the oracle
takes bridge entities from what it retrieved, never from the world's tables). Every person has one
of each relation to another person of the same world.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from functools import cache

RELATIONS: tuple[str, ...] = ("boss", "mentor", "friend", "rival")
"""Relation words (each one token and one BM25 term), in the cycle that a question's relations
follow ("Kalo's friend's rival's boss"): the next relation needs no lookup in the question, and
a chain of up to four hops never repeats one."""


def path(first: str, hops: int) -> tuple[str, ...]:
    """``hops`` relations of the cycle from ``first``: friend, rival, boss for ("friend", 3)."""
    i = RELATIONS.index(first)
    return tuple(RELATIONS[(i + k) % len(RELATIONS)] for k in range(hops))


_NAME = r"[A-Z][a-z]+"


def fact_sentence(subject: str, relation: str, obj: str) -> str:
    """The sentence that states a fact in a passage."""
    return f"{subject}'s {relation} is {obj}."


def question_text(start: str, relations: Sequence[str]) -> str:
    """``question_text("Kalo", ["mentor", "boss"])`` is "Who is Kalo's mentor's boss?"."""
    return f"Who is {start}'s " + "'s ".join(relations) + "?"


def fact_title(subject: str, relation: str) -> str:
    """The title of the passage that states one fact ("Kalo's boss"), and the right search for
    that hop: BM25 ranks the fact first (the title repeats both words)."""
    return f"{subject}'s {relation}"


@cache
def _pattern(relation: str, subject: str) -> re.Pattern[str]:
    return re.compile(
        r"(?<![\w])" + re.escape(subject) + "'s " + re.escape(relation) + r" is (" + _NAME + r")\."
    )


def find_object(text: str, relation: str, subject: str) -> str | None:
    """The object of the first sentence in ``text`` stating ``relation`` of ``subject``."""
    m = _pattern(relation, subject).search(text)
    return m.group(1) if m else None
