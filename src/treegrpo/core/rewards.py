"""Outcome rewards for the search agent, compatible with Search-R1 (docs/algorithm.md §5).

- ``normalize_answer``, ``exact_match``, ``f1_score``: SQuAD answer normalization (lowercase,
  drop ASCII punctuation, drop the articles a/an/the, collapse whitespace), EM and token F1 as a
  maximum over gold answers. Text is first put in Unicode NFC form, so the composed and
  decomposed spellings of "café" compare equal; nothing else departs from SQuAD.
- ``extract_answer``: the last ``<answer>…</answer>`` of the *response* (not the prompt, whose
  instruction example would otherwise count).
- ``is_valid_format``: the tag grammar of the protocol, read from the response text alone, so it
  works with any chat template (the authors' check looked for Qwen's ``<|im_start|>assistant``);
  an agent with other tools than ``search`` names them (``tools``), each a tag like ``search``.
- ``search_r1_reward``: Search-R1's EM-with-format schedule 1.0 / 0.8 / 0.2 / 0.1 / 0.
- ``search_r1_f1_reward``: the same schedule with F1 in place of EM, interpolated so that it
  equals the EM schedule when F1 is 0 or 1 and never goes below 0.
"""

from __future__ import annotations

import functools
import re
import string
import unicodedata
from collections import Counter
from collections.abc import Sequence

Golds = str | Sequence[str]

_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCT = set(string.punctuation)
_ANSWER = re.compile(r"<answer>((?:(?!<answer>).)*?)</answer>", re.DOTALL)
TAG_NAMES = ("think", "search", "information", "answer")
# The eight protocol tags, opening and closing (Search-R1's; kept identical for interoperability).
PROTOCOL_TAGS = tuple(f"<{c}{n}>" for n in TAG_NAMES for c in ("", "/"))


@functools.lru_cache(maxsize=64)
def _tag(tools: tuple[str, ...]) -> re.Pattern[str]:
    """Opening and closing protocol tags, with ``tools`` as the action tags besides answer."""
    names = "|".join(re.escape(n) for n in ("think", "information", "answer", *tools))
    return re.compile(rf"<(/?)({names})>")


def normalize_answer(text: str) -> str:
    """SQuAD normalization: lowercase, no punctuation, no articles, single spaces."""
    text = unicodedata.normalize("NFC", text).lower()
    text = "".join(ch for ch in text if ch not in _PUNCT)
    text = _ARTICLES.sub(" ", text)
    # Dropping punctuation can leave a base letter next to a combining mark ("e.\u0301"): compose
    # again, so that the result is NFC and normalizing it once more changes nothing.
    return unicodedata.normalize("NFC", " ".join(text.split()))


def is_span(gold: str, text: str) -> bool:
    """Whether ``gold`` is a run of whole tokens of ``text`` after SQuAD normalization."""
    g = normalize_answer(gold)
    return bool(g) and f" {g} " in f" {normalize_answer(text)} "


def _golds(golds: Golds) -> list[str]:
    if isinstance(golds, str):
        return [golds]
    out = list(golds)
    for g in out:
        if not isinstance(g, str):
            raise TypeError(f"gold answers must be strings, got {type(g).__name__}: {g!r}")
    return out


def exact_match(pred: str | None, golds: Golds) -> float:
    """1.0 if ``pred`` equals any gold answer after normalization, else 0.0 (None → 0.0)."""
    if pred is None:
        return 0.0
    p = normalize_answer(pred)
    return float(any(p == normalize_answer(g) for g in _golds(golds)))


def _f1(pred_tokens: list[str], gold_tokens: list[str]) -> float:
    if not pred_tokens or not gold_tokens:
        # SQuAD v2 convention: both empty is a match, one empty is not.
        return float(pred_tokens == gold_tokens)
    common = Counter(pred_tokens) & Counter(gold_tokens)
    same = sum(common.values())
    if same == 0:
        return 0.0
    precision = same / len(pred_tokens)
    recall = same / len(gold_tokens)
    return 2 * precision * recall / (precision + recall)


def f1_score(pred: str | None, golds: Golds) -> float:
    """Token-overlap F1 between ``pred`` and the best gold answer (None → 0.0)."""
    if pred is None:
        return 0.0
    p = normalize_answer(pred).split()
    return max((_f1(p, normalize_answer(g).split()) for g in _golds(golds)), default=0.0)


def extract_answer(response: str) -> str | None:
    """Text of the last complete ``<answer>…</answer>`` in ``response``, stripped, or None; with
    nested opening tags the innermost span counts (``<answer>a <answer>b</answer>``: "b")."""
    spans = _ANSWER.findall(response)
    return spans[-1].strip() if spans else None


def is_valid_format(response: str, tools: Sequence[str] = ("search",)) -> bool:
    """Whether ``response`` (the model's steps and the observations, no prompt) is exactly

        <think>…</think> ( <search>…</search> <information>…</information> <think>…</think> )*
        <answer>…</answer>

    with only whitespace between tags and no protocol tag inside a tag's content; any action tag of
    ``tools`` (Search-R1: ``search`` alone) may stand where ``search`` stands."""
    tools = tuple(tools)
    # Allowed successor of each tag, a small automaton over the tag sequence.
    nxt: dict[str, set[str]] = {
        "start": {"think"},
        "think": {*tools, "answer"},
        "information": {"think"},
        "answer": set(),
    }
    nxt |= {t: {"information"} for t in tools}
    seq = _tag_sequence(response, tools)
    if seq is None or not seq or seq[-1] != "answer":
        return False
    return all(b in nxt[a] for a, b in zip(("start", *seq[:-1]), seq, strict=True))


def is_well_formed_step(step: str, tools: Sequence[str] = ("search",)) -> bool:
    """Whether one agent step (the model's own text) is exactly ``<think>…</think>`` and one action,
    ``<tool>…</tool>`` for a tool of ``tools`` or ``<answer>…</answer>``, with only whitespace
    between tags and no protocol tag inside a tag's content; a step that is not is a broken turn."""
    tools = tuple(tools)
    seq = _tag_sequence(step, tools)
    return seq is not None and len(seq) == 2 and seq[0] == "think" and seq[1] in (*tools, "answer")


def _tag_sequence(text: str, tools: tuple[str, ...]) -> list[str] | None:
    """The protocol tags of ``text`` in order, each opened and closed before the next opens,
    with only whitespace outside them; None when ``text`` is not made of such blocks."""
    seq: list[str] = []
    pos = 0
    open_tag: str | None = None
    for m in _tag(tools).finditer(text):
        between = text[pos : m.start()]
        closing, name = m.group(1) == "/", m.group(2)
        if open_tag is None:
            if closing or between.strip():
                return None
            open_tag = name
        else:
            if not closing or name != open_tag:
                return None  # a tag inside another tag's content, or a mismatched close
            seq.append(name)
            open_tag = None
        pos = m.end()
    if open_tag is not None or text[pos:].strip():
        return None
    return seq


def search_r1_reward(
    response: str,
    golds: Golds,
    *,
    model_text: str | None = None,
    format_score: float = 0.2,
    final_format_score: float = 0.1,
    score: float = 1.0,
    tools: Sequence[str] = ("search",),
    f1: bool = False,
) -> float:
    """Search-R1's EM reward with format bonus (docs/algorithm.md §5):

    ====================  ==============  ================
    answer                valid format    invalid format
    ====================  ==============  ================
    correct (EM)          1.0             0.8 (1.0 − 0.2)
    wrong                 0.2             0.1
    none                  0.2             0
    ====================  ==============  ================

    A valid response always has an answer. ``model_text``: the model's own tokens only; when
    given, the answer is read from it (a tag in a retrieved passage or in feedback never counts),
    the format still from ``response``. ``tools``: the action tags (``is_valid_format``); ``f1``:
    ``search_r1_f1_reward``'s schedule instead of EM."""
    answer = extract_answer(response if model_text is None else model_text)
    valid = is_valid_format(response, tools)
    if answer is None:
        return format_score if valid else 0.0
    if f1:
        f = f1_score(answer, golds)
        if valid:
            return format_score + (score - format_score) * f
        return max(0.0, final_format_score + (score - format_score - final_format_score) * f)
    if exact_match(answer, golds):
        return score if valid else score - format_score
    return format_score if valid else final_format_score


search_r1_f1_reward = functools.partial(search_r1_reward, f1=True)
search_r1_f1_reward.__doc__ = """F1 variant of ``search_r1_reward`` that is never negative.

valid format:   format_score + (score − format_score) · F1                 ∈ [0.2, 1.0]
invalid format: final_format_score
                + (score − format_score − final_format_score) · F1           ∈ [0.1, 0.8]
no answer:      format_score if valid else 0

At F1 ∈ {0, 1} it equals the EM schedule. The authors' F1 variant subtracted the format
penalty from F1 and could go below 0 (docs/algorithm.md §8). ``model_text`` and ``tools`` as in
``search_r1_reward``."""
