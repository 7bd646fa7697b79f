"""Detect the end of an agent step while decoding, in token ids.

A step ends at the first ``</search>`` or ``</answer>`` (docs/algorithm.md §1). A tag is usually
several tokens (``</``, ``answer``, ``>``), so the check decodes a short window of the newest
tokens; it runs only when the newest token can end a tag (its text contains ``>``), which a
per-vocabulary table answers in O(1). Generation stops at the token that completes the tag; that
token is kept whole (no re-tokenization), so characters it carries after ``>`` stay too.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cached_property
from typing import Any

import numpy as np

STEP_END_TAGS = ("</search>", "</answer>")


class StepStopper:
    """``hit(tokens)`` says whether the newest token of ``tokens`` completes a step-end tag."""

    def __init__(self, tokenizer: Any, tags: Sequence[str] = STEP_END_TAGS) -> None:
        self.tokenizer = tokenizer
        self.tags = tuple(tags)
        last_chars = {t[-1] for t in self.tags}
        vocab = len(tokenizer)
        pieces = tokenizer.convert_ids_to_tokens(list(range(vocab)))
        # (V,) True where the token's text may contain a tag's last character. Byte-level BPE
        # keeps printable ASCII as itself; byte-fallback pieces spell "<0x3E>" and also match.
        self._can_end = np.array(
            [p is not None and any(c in p for c in last_chars) for p in pieces], dtype=bool
        )
        # Enough tokens to spell the longest tag even one character per token, plus one.
        self._window = max(len(t) for t in self.tags) + 1

    @cached_property
    def end_token_ids(self) -> list[int]:
        """The ids that may complete a tag, where a backend that stops only at given ids (vLLM)
        stops and asks ``hit``: the token's text up to a tag's last character holds the whole tag or
        ends it (``>``, ``answer>``, ``</answer>``; not ``<think>``)."""
        ids = np.flatnonzero(self._can_end).tolist()
        pieces = self.tokenizer.convert_ids_to_tokens(ids)
        return [i for i, p in zip(ids, pieces, strict=True) if self._completes(p)]

    def _completes(self, piece: str) -> bool:
        if piece.startswith("<0x"):  # a byte-fallback piece: one character, whichever
            return True
        for j, ch in enumerate(piece):
            head = piece[: j + 1]
            if any(ch == t[-1] and (t in head or t.endswith(head)) for t in self.tags):
                return True
        return False

    def hit(self, tokens: Sequence[int]) -> bool:
        if not tokens:
            return False
        last = tokens[-1]
        if 0 <= last < len(self._can_end) and not self._can_end[last]:
            return False
        text = self.tokenizer.decode(list(tokens[-self._window :]), skip_special_tokens=False)
        return any(tag in text for tag in self.tags)
