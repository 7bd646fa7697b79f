"""The fallback template: a lead sentence with a name or number blanked (cloze-name, -number)."""

from __future__ import annotations

import re

from treegrpo.core.rewards import is_span, normalize_answer
from treegrpo.data.lead_questions.facts import Fact
from treegrpo.data.lead_questions.patterns import _NAME_RE, _NUMBER
from treegrpo.data.lead_questions.text import number_golds, sentences
from treegrpo.data.title_questions import FUNCTION_WORDS, base_title, leaks
from treegrpo.data.wiki import Article, stable_hash

CLOZE_WORDS = (8, 40)  # a cloze sentence's length in words: enough context, not a paragraph


def cloze_fact(article: Article) -> Fact | None:
    """A lead sentence with a name (not its first word, none of the title's) or number blanked
    out, or None; a hash of the title picks among those found once in sentences of
    ``CLOZE_WORDS`` words, so the choice is fixed."""
    title = base_title(article.title)
    candidates: list[tuple[str, str, str]] = []  # (kind, sentence with a blank, gold)
    for sentence in sentences(article.extract):
        if not CLOZE_WORDS[0] <= len(sentence.split()) <= CLOZE_WORDS[1] or "_" in sentence:
            continue
        spans = [("cloze-name", m) for m in _NAME_RE.finditer(sentence) if m.start() > 0]
        spans += [
            ("cloze-number", m)
            for m in _NUMBER.finditer(sentence)
            if sentence[m.start() - 1 : m.start()] != "("
        ]
        for kind, m in spans:
            gold = re.sub(r"['’]s$", "", m[0]).rstrip(".") if kind == "cloze-name" else m[0]
            norm = normalize_answer(gold)
            rest = sentence[: m.start()] + " " + sentence[m.start() + len(gold) :]
            if (
                len(norm) < 2
                or norm in FUNCTION_WORDS
                or leaks(gold, title)
                or is_span(gold, rest)
                or (kind == "cloze-name" and sentence[m.start() - 1] not in ' "“(')
            ):
                continue
            blanked = sentence[: m.start()] + "___" + sentence[m.start() + len(gold) :]
            candidates.append((kind, blanked, gold))
    if not candidates:
        return None
    kind, blanked, gold = candidates[stable_hash(article.title) % len(candidates)]
    golds = number_golds(gold) if kind == "cloze-number" else (gold,)
    return Fact(kind, article.index, f"Fill in the blank about {{s}}: {blanked}", title, golds)
