"""A copy drill that gives a tiny model induction heads before it imitates the agent.

Every skill of the search agent rests on copying names it has never seen: from the question
into the query, from a passage into the next query and the answer. A freshly initialized tiny
transformer does not copy; learning it from the demonstrations alone takes far longer than the
warm start's budget (the loss on name tokens stays at chance, log 56 per syllable, for
thousands of updates). On a plain repeat task the ability appears within a few hundred short
updates (the "induction head" phase change), so the warm start first runs this drill: a random
list of invented names, a separator, the same list again, with the loss on the repeat only.
The names are random syllable strings spelled like the world's names, so the drill teaches
copying, not any world's facts.
"""

from __future__ import annotations

import random

from treegrpo.data.names import CODAS, SYLLABLES
from treegrpo.models.sft import SFTExample


def random_name(rng: random.Random) -> str:
    """A name spelled like the world's (one or two words of 2–3 syllables and a coda)."""
    words = [
        ("".join(rng.choice(SYLLABLES) for _ in range(rng.choice((2, 3)))) + rng.choice(CODAS))
        for _ in range(rng.choice((1, 2)))
    ]
    return " ".join(w.capitalize() for w in words)


def copy_drill(tokenizer: object, n: int, names: int = 8, seed: int = 0) -> list[SFTExample]:
    """``n`` drill sequences of ``names`` random names, repeated; mask 1 on the repeat."""
    rng = random.Random(f"treegrpo-copy-drill:{seed}")
    encode = tokenizer  # a transformers tokenizer: text → {"input_ids": …}
    out = []
    for _ in range(n):
        text = " " + " ".join(random_name(rng) for _ in range(names))
        first = list(encode(text + " |", add_special_tokens=False)["input_ids"])  # type: ignore[operator]
        again = list(encode(text, add_special_tokens=False)["input_ids"])  # type: ignore[operator]
        out.append(SFTExample(first + again, [0] * len(first) + [1] * len(again)))
    return out
