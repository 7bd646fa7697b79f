"""The synthetic worlds' shared name pool: invented names, one token each, so a name carries no
fact from one world to the next. Two consonant-vowel syllables, none ending in "e" or "s", so
BM25's Snowball stemmer leaves each whole (docs/embedded.md, "The warm start").
"""

from __future__ import annotations

import random

CONSONANTS = "bdfgklmnprtvz"
VOWELS = "aiou"
POOL_SIZE = 160
"""Names in the pool; a world uses ``WorldConfig.n_people`` of them."""


def _pool() -> tuple[str, ...]:
    syllables = [c + v for c in CONSONANTS for v in VOWELS]
    rng = random.Random("treegrpo-name-pool")
    words = sorted({(a + b).capitalize() for a in syllables for b in syllables})
    return tuple(sorted(rng.sample(words, POOL_SIZE)))


NAME_POOL: tuple[str, ...] = _pool()
"""The fixed pool, sorted; the same on every machine and in every release of this format."""
