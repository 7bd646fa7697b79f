"""Invented, pronounceable entity names built from syllables, reproducible from a seed.

Names are a few consonant-vowel syllables plus an optional final consonant ("Kalomir",
"Tevu"), so a byte-level BPE trained on the syllable inventory (``syllable_words``) splits every
name, from any seed, into tokens that occur in every other world's names too: a model trained on
one world can copy names of another world token by token, while the worlds share no name.

A "twin" of a name differs in exactly one syllable ("Kalomir" / "Kalumir"): the confusable
distractors of the synthetic world.
"""

from __future__ import annotations

import random
from collections.abc import Iterable

CONSONANTS = "bdfgklmnprstvz"
VOWELS = "aiou"  # no final "e": the Snowball stemmer would drop it and merge two names
CODAS = ("", "", "n", "r", "l", "m", "k")  # "" twice: half the names end in a vowel
SYLLABLES = tuple(c + v for c in CONSONANTS for v in VOWELS)  # 56


def syllable_words() -> list[str]:
    """Every syllable and syllable + coda, lower case and capitalized: the tokenizer's view of
    names (a name is a capitalized first syllable, more syllables, an optional coda)."""
    words = set()
    for s in SYLLABLES:
        for coda in CODAS:
            words.update({s + coda, (s + coda).capitalize()})
    return sorted(words)


class NameMaker:
    """Draws names that are unique within one world and avoid a given set of words.

    ``avoid``: lower-cased words no name may use (another world's names, to keep train and eval
    worlds disjoint). Every name drawn is added to the set of used words.
    """

    def __init__(self, seed: int, avoid: Iterable[str] = ()) -> None:
        self.rng = random.Random(f"treegrpo-names:{seed}")
        self.used: set[str] = {w.lower() for w in avoid}

    def _fresh(self, candidate: str) -> bool:
        return candidate.lower() not in self.used

    def word(self, syllables: int = 2) -> str:
        """A new single-word name of ``syllables`` syllables plus an optional coda."""
        for _ in range(10_000):
            parts = [self.rng.choice(SYLLABLES) for _ in range(syllables)]
            name = ("".join(parts) + self.rng.choice(CODAS)).capitalize()
            if self._fresh(name):
                self.used.add(name.lower())
                return name
        raise RuntimeError(f"name space of {syllables} syllables exhausted")

    def twin(self, name: str) -> str | None:
        """A new name equal to ``name`` except for one syllable (None if every variant is taken).
        Multi-word names change in their last word."""
        head, _, last = name.rpartition(" ")
        body = last.lower()
        n = len(body) // 2 * 2  # the syllable part (a coda is one trailing consonant)
        sylls, coda = [body[i : i + 2] for i in range(0, n, 2)], body[n:]
        for _ in range(200):
            i = self.rng.randrange(len(sylls))
            alt = self.rng.choice(SYLLABLES)
            if alt == sylls[i]:
                continue
            word = ("".join([*sylls[:i], alt, *sylls[i + 1 :]]) + coda).capitalize()
            if self._fresh(word):
                self.used.add(word.lower())
                return f"{head} {word}" if head else word
        return None
