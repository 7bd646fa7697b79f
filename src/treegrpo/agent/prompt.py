"""The instruction prompt (docs/algorithm.md §1), our own wording with Search-R1's tags.

The tags are identical to Search-R1's so its data and checkpoints interoperate; the sentences are
ours. With a chat template the instruction is one user turn followed by the generation prompt;
without one it is plain text. An agent with other tools than ``search`` (``tools.registry``)
gets an instruction that lists each tool's tag, input and result (``TOOLS_INSTRUCTION``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

INSTRUCTION = (
    "Answer the question below. Whenever you receive new information, first reason about it "
    "inside <think> and </think>. If you lack some knowledge, call the search engine by writing "
    "<search> query </search>; its top results come back between <information> and "
    "</information>. You may search as many times as you need. When you are ready, write only "
    "the final answer inside <answer> and </answer>, with no explanation, for example "
    "<answer> Beijing </answer>. Question: {question}\n"
)

TOOLS_INSTRUCTION = (
    "Answer the question below. Whenever you receive new information, first reason about it "
    "inside <think> and </think>. If you lack some knowledge, use one tool per step by writing "
    "its tag around its input; its result comes back between <information> and "
    "</information>. The tools:\n{tools}\nYou may use them as many times as you need. When "
    "you are ready, write only the final answer inside <answer> and </answer>, with no "
    "explanation, for example <answer> Beijing </answer>. Question: {question}\n"
)


class ToolLine(NamedTuple):
    """A tool as the prompt shows it: ``<name> usage </name>: description``."""

    name: str
    usage: str
    description: str


def format_question(question: str) -> str:
    """The question as it goes into the prompt: stripped, with a trailing "?" when missing."""
    q = question.strip()
    return q if q.endswith("?") else q + "?"


def instruction_text(question: str, tools: Sequence[ToolLine] | None = None) -> str:
    """The user message for ``question``: Search-R1's instruction, or one listing ``tools``."""
    if tools is None:
        return INSTRUCTION.format(question=format_question(question))
    lines = "\n".join(f"<{t.name}> {t.usage} </{t.name}>: {t.description}" for t in tools)
    return TOOLS_INSTRUCTION.format(tools=lines, question=format_question(question))


def render_prompt(
    tokenizer: Any,
    question: str,
    use_chat_template: bool | None = None,
    tools: Sequence[ToolLine] | None = None,
) -> list[int]:
    """Token ids of the prompt for ``question`` (``tools``: see ``instruction_text``), with the
    tokenizer's chat template where it has one (``use_chat_template=None``); never re-derived."""
    text = instruction_text(question, tools)
    if use_chat_template is None:
        use_chat_template = bool(getattr(tokenizer, "chat_template", None))
    if use_chat_template:
        rendered = tokenizer.apply_chat_template(
            [{"role": "user", "content": text}], add_generation_prompt=True, tokenize=False
        )
        ids: list[int] = tokenizer(rendered, add_special_tokens=False)["input_ids"]
    else:
        ids = tokenizer(text, add_special_tokens=True)["input_ids"]
    return list(ids)
