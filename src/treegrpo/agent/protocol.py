"""One agent step of the Search-R1 protocol: parse the action, build the observation tokens.

A step is the model's text up to and including the first ``</search>`` or ``</answer>``
(``StepStopper`` cuts it there). Its action is

- ``answer``: the text of the last ``<answer>…</answer>``; the episode ends;
- ``search``: the non-empty query of the last ``<search>…</search>``; the tool runs and its
  passages come back as ``\\n\\n<information>Doc 1(Title: …) …\\n…</information>\\n\\n``;
- ``invalid``: anything else (no tag, an empty query, an unclosed tag, end of text or the token
  limit): a fixed feedback text tells the model how to act, and the episode goes on.

Observation tokens are context, not actions: their mask is 0 (ALGORITHM.md §1).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

ActionKind = Literal["search", "answer", "invalid"]

_LAST_SEARCH = re.compile(r"<search>((?:(?!<search>).)*?)</search>", re.DOTALL)
_LAST_ANSWER = re.compile(r"<answer>((?:(?!<answer>).)*?)</answer>", re.DOTALL)

INVALID_FEEDBACK = (
    "\nThat step had no valid action. To look something up, write a query between <search> and "
    "</search>. To finish, write the final answer between <answer> and </answer>.\n"
)
FAILED_SEARCH = "The search failed: the retriever did not answer, so no passages came back."
OPEN_INFO, CLOSE_INFO = "\n\n<information>", "</information>\n\n"


@dataclass(frozen=True)
class Action:
    kind: ActionKind
    text: str = ""  # the query for a search, the answer for an answer


def parse_action(step_text: str) -> Action:
    """The action of one step's text (the text ends at the first step-end tag, if any)."""
    a = step_text.find("</answer>")
    s = step_text.find("</search>")
    # Only the first closing tag counts: the stopper cuts there, and text after it is not an action.
    if a >= 0 and (s < 0 or a < s):
        spans = _LAST_ANSWER.findall(step_text[: a + len("</answer>")])
        return Action("answer", spans[-1].strip()) if spans else Action("invalid")
    if s >= 0:
        spans = _LAST_SEARCH.findall(step_text[: s + len("</search>")])
        query = spans[-1].strip() if spans else ""
        return Action("search", query) if query else Action("invalid")
    return Action("invalid")


def format_passages(contents: Sequence[str]) -> str:
    """``Doc i(Title: T) text`` lines from Search-R1 ``contents`` (``"Title"\\ntext``)."""
    lines = []
    for i, c in enumerate(contents, start=1):
        title, _, text = c.partition("\n")
        lines.append(f"Doc {i}(Title: {title}) {text}")
    return "\n".join(lines)


_PASSAGE = re.compile(
    r'Doc (\d+)\(Title: "(.*?)"\) (.*?)(?=\nDoc \d+\(Title: "|</information>|$)', re.S
)


def parse_passages(text: str) -> list[tuple[int, str, str]]:
    """(k, title, passage text) of every ``Doc k`` that ``format_passages`` wrote in ``text``
    (an observation, or a whole response), in order. Titles are quoted, as Search-R1 corpora
    write them (``"Title"\ntext``); a title may hold parentheses: it ends at ``") ``."""
    return [(int(m[1]), m[2], m[3]) for m in _PASSAGE.finditer(text)]


class SearchProtocol:
    """Token-level helpers for one tokenizer: observation and feedback ids, step parsing.

    ``max_obs_tokens`` bounds an observation (500 in the paper's runs); the passages are cut so
    that the closing ``</information>`` always survives.
    """

    def __init__(self, tokenizer: Any, max_obs_tokens: int = 500) -> None:
        self.tokenizer = tokenizer
        self.max_obs_tokens = max_obs_tokens
        self._open = self._encode(OPEN_INFO)
        self._close = self._encode(CLOSE_INFO)
        self._invalid = self._encode(INVALID_FEEDBACK)
        if len(self._open) + len(self._close) >= max_obs_tokens:
            raise ValueError(
                f"max_obs_tokens={max_obs_tokens} leaves no room for passages between the "
                f"{len(self._open) + len(self._close)} tokens of the information tags"
            )

    def _encode(self, text: str) -> list[int]:
        return list(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    def decode(self, ids: Sequence[int]) -> str:
        return str(self.tokenizer.decode(list(ids), skip_special_tokens=False))

    def parse(self, action_ids: Sequence[int]) -> Action:
        return parse_action(self.decode(action_ids))

    def observation_ids(self, contents: Sequence[str]) -> list[int]:
        """Token ids of the observation for the retrieved passages, at most ``max_obs_tokens``."""
        body = self._encode(format_passages(contents).strip())
        room = self.max_obs_tokens - len(self._open) - len(self._close)
        return self._open + body[:room] + self._close

    def failed_search_ids(self) -> list[int]:
        """Token ids of the observation after a search the retriever could not answer."""
        room = self.max_obs_tokens - len(self._open) - len(self._close)
        return self._open + self._encode(FAILED_SEARCH)[:room] + self._close

    def invalid_ids(self) -> list[int]:
        """Token ids of the feedback after a step without a valid action."""
        return list(self._invalid)
