"""Lexical tokenization for BM25: lowercase, bm25s's word regex and English stopwords, stemming
with PyStemmer's Snowball where installed. The same object tokenizes the corpus and every query
(its ``settings`` go into the index cache key), or query terms would silently stop matching.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any, Literal

from bm25s.stopwords import STOPWORDS_EN

StemmerChoice = Literal["auto", "english", "none"]

_WORD = re.compile(r"(?u)\b\w\w+\b")


def _load_stemmer(choice: StemmerChoice) -> Any | None:
    if choice == "none":
        return None
    try:
        import Stemmer  # PyStemmer
    except ImportError:
        if choice == "english":
            raise ImportError(
                "stemmer='english' needs PyStemmer (pip install PyStemmer); "
                "use stemmer='none' or 'auto' to go without"
            ) from None
        return None
    return Stemmer.Stemmer("english")


class Tokenizer:
    """Text → list of terms. ``settings`` describes it completely (for cache keys)."""

    def __init__(self, stemmer: StemmerChoice = "auto", stopwords: bool = True) -> None:
        self._stemmer = _load_stemmer(stemmer)
        self._stopwords = frozenset(STOPWORDS_EN) if stopwords else frozenset()
        self.settings = {
            "pattern": _WORD.pattern,
            "lowercase": True,
            "stopwords": "nltk-en" if stopwords else None,
            "stemmer": "snowball-english" if self._stemmer is not None else None,
        }

    def __getstate__(self) -> dict[str, Any]:
        """Picklable (a retriever goes to other processes, e.g. a Ray actor): PyStemmer's
        stemmer is a C object, so it travels as its setting and is made again on arrival."""
        return {k: v for k, v in vars(self).items() if k != "_stemmer"}

    def __setstate__(self, state: dict[str, Any]) -> None:
        vars(self).update(state)
        stem = state["settings"]["stemmer"] is not None
        self._stemmer = _load_stemmer("english" if stem else "none")

    def __call__(self, text: str) -> list[str]:
        words = [w for w in _WORD.findall(text.lower()) if w not in self._stopwords]
        if self._stemmer is not None and words:
            words = self._stemmer.stemWords(words)
        return words

    def to_ids(
        self, texts: Iterable[str], vocab: dict[str, int], grow: bool = False
    ) -> list[list[int]]:
        """Tokenize and map terms to ids; unknown terms are added when ``grow``, else dropped."""
        if grow:
            return [[vocab.setdefault(t, len(vocab)) for t in self(text)] for text in texts]
        return [[i for t in self(text) if (i := vocab.get(t)) is not None] for text in texts]
