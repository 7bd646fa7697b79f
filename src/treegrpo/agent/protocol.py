"""One agent step of the protocol: parse the action, build the observation tokens.

A step is the model's text up to and including the first closing tag of a tool or of the
answer (``StepStopper``; ``ToolProtocol.stop_tags``). Its action is ``answer`` (the last
``<answer>…</answer>``; the episode ends), a tool's name (the last ``<name>…</name>``'s
non-empty argument; the result comes back between ``\\n\\n<information>`` and
``</information>\\n\\n``) or ``invalid`` (a fixed feedback text; the episode goes on). With
``search`` alone (``SearchProtocol``) this is Search-R1's protocol, token for token.
Observation tokens are context, not actions: their mask is 0 (docs/algorithm.md §1).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from treegrpo.agent.prompt import ToolLine, render_prompt
from treegrpo.retrieval.base import format_passages
from treegrpo.tools.registry import FAILED_SEARCH, Described, RetrieverTool

__all__ = ["FAILED_SEARCH", "format_passages"]  # re-exported: the search observation's texts

ActionKind = str
"""A tool's name, ``"answer"`` or ``"invalid"``."""

INVALID_FEEDBACK = (
    "\nThat step had no valid action. To look something up, write a query between <search> and "
    "</search>. To finish, write the final answer between <answer> and </answer>.\n"
)
OPEN_INFO, CLOSE_INFO = "\n\n<information>", "</information>\n\n"


def invalid_feedback(tools: Sequence[ToolLine]) -> str:
    """The feedback after a step without a valid action; with ``search`` alone, Search-R1's
    (``INVALID_FEEDBACK``); otherwise it names every tool the prompt offers."""
    if [t.name for t in tools] == ["search"]:
        return INVALID_FEEDBACK
    calls = ", ".join(f"<{t.name}> {t.usage} </{t.name}>" for t in tools)
    return (
        f"\nThat step had no valid action. To use a tool, write its input between its tags: "
        f"{calls}. To finish, write the final answer between <answer> and </answer>.\n"
    )


@dataclass(frozen=True)
class Action:
    kind: ActionKind
    text: str = ""  # a tool's argument text, or the answer


@functools.lru_cache(maxsize=64)
def _span(tag: str) -> re.Pattern[str]:
    """The last ``<tag>…</tag>`` without another ``<tag>`` inside."""
    t = re.escape(tag)
    return re.compile(rf"<{t}>((?:(?!<{t}>).)*?)</{t}>", re.DOTALL)


def parse_action(step_text: str, tools: Sequence[str] = ("search",)) -> Action:
    """The action of one step's text (the text ends at the first step-end tag, if any);
    ``tools``: the names the prompt offers."""
    # Only the first closing tag counts: the stopper cuts there, and text after it is not an action.
    found = [(step_text.find(f"</{t}>"), t) for t in (*tools, "answer")]
    hits = [(at, t) for at, t in found if at >= 0]
    if not hits:
        return Action("invalid")
    at, tag = min(hits)
    spans = _span(tag).findall(step_text[: at + len(tag) + 3])
    text = spans[-1].strip() if spans else ""
    if tag == "answer":
        return Action("answer", text) if spans else Action("invalid")
    return Action(tag, text) if text else Action("invalid")


_PASSAGE = re.compile(
    r'Doc (\d+)\(Title: "(.*?)"\) (.*?)(?=\nDoc \d+\(Title: "|</information>|$)', re.S
)


def parse_passages(text: str) -> list[tuple[int, str, str]]:
    """(k, title, passage text) of every ``Doc k`` that ``format_passages`` wrote in ``text``
    (an observation, or a whole response), in order. Titles are quoted, as Search-R1 corpora
    write them (``"Title"\ntext``); a title may hold parentheses: it ends at ``") ``."""
    return [(int(m[1]), m[2], m[3]) for m in _PASSAGE.finditer(text)]


SEARCH_TOOL = ToolLine(RetrieverTool.name, RetrieverTool.usage, RetrieverTool.description)
"""Search-R1's one tool (``tools.registry.RetrieverTool`` registers the same line)."""


class ToolProtocol:
    """Token-level helpers for one tokenizer and the tools the prompt offers: prompt, observation
    and feedback ids, step parsing, the tags that end a step. ``max_obs_tokens`` bounds an
    observation, cut so the closing ``</information>`` survives; ``tools``: a ``Toolbox`` or any
    list of named tools with usage and description (default: Search-R1's ``search`` alone)."""

    def __init__(
        self, tokenizer: Any, max_obs_tokens: int = 500, tools: Iterable[Described] = (SEARCH_TOOL,)
    ) -> None:
        self.tokenizer = tokenizer
        self.max_obs_tokens = max_obs_tokens
        self.tools = tuple(ToolLine(t.name, t.usage, t.description) for t in tools)
        self.names = tuple(t.name for t in self.tools)
        if not self.names or len(set(self.names)) < len(self.names):
            raise ValueError(f"the protocol needs one or more tools, each named once: {self.names}")
        self._open = self._encode(OPEN_INFO)
        self._close = self._encode(CLOSE_INFO)
        self._invalid = self._encode(invalid_feedback(self.tools))
        if len(self._open) + len(self._close) >= max_obs_tokens:
            raise ValueError(
                f"max_obs_tokens={max_obs_tokens} leaves no room for an observation between the "
                f"{len(self._open) + len(self._close)} tokens of the information tags"
            )

    @property
    def search_only(self) -> bool:
        """Whether this is Search-R1's protocol (``search`` is the only tool)."""
        return self.names == ("search",)

    @property
    def stop_tags(self) -> tuple[str, ...]:
        """The closing tags that end a step (``agent.stops.StepStopper``'s tags)."""
        return (*(f"</{n}>" for n in self.names), "</answer>")

    def _encode(self, text: str) -> list[int]:
        return list(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    def decode(self, ids: Sequence[int]) -> str:
        return str(self.tokenizer.decode(list(ids), skip_special_tokens=False))

    def parse(self, action_ids: Sequence[int]) -> Action:
        return parse_action(self.decode(action_ids), self.names)

    def prompt_ids(self, question: str) -> list[int]:
        """Token ids of the prompt for ``question``: Search-R1's instruction with ``search``
        alone, else the instruction that lists the tools (``agent.prompt``)."""
        tools = None if self.search_only else self.tools
        return render_prompt(self.tokenizer, question, tools=tools)

    def text_ids(self, text: str) -> list[int]:
        """Token ids of an observation whose body is ``text``, at most ``max_obs_tokens``."""
        body = self._encode(text.strip())
        room = self.max_obs_tokens - len(self._open) - len(self._close)
        return self._open + body[:room] + self._close

    def observation_ids(self, contents: Sequence[str]) -> list[int]:
        """Token ids of the observation for the retrieved passages, at most ``max_obs_tokens``."""
        return self.text_ids(format_passages(contents))

    def invalid_ids(self) -> list[int]:
        """Token ids of the feedback after a step without a valid action."""
        return list(self._invalid)


SearchProtocol = ToolProtocol
"""Search-R1's protocol: ``ToolProtocol`` with its default tools, ``search`` alone."""
