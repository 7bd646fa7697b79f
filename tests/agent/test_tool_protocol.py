"""The protocol with tools besides ``search``: parsing any registered tag, the stop tags, the
feedback and prompt that name the tools, the format check over them; and Search-R1's protocol
left exactly as it was."""

from __future__ import annotations

import pytest

from treegrpo.agent.prompt import INSTRUCTION, ToolLine, instruction_text, render_prompt
from treegrpo.agent.protocol import (
    INVALID_FEEDBACK,
    Action,
    SearchProtocol,
    ToolProtocol,
    parse_action,
)
from treegrpo.core.rewards import is_valid_format, search_r1_reward

WEB = (
    ToolLine("search", "query", "results with a number, title, URL and snippet"),
    ToolLine("visit", "URL or result number", "the page's text"),
    ToolLine("calculate", "expression", "its value"),
)
NAMES = tuple(t.name for t in WEB)


@pytest.mark.parametrize(
    ("text", "action"),
    [
        ("<think>x</think><visit> 2 </visit>", Action("visit", "2")),
        ("<visit>a</visit><search>b</search>", Action("visit", "a")),  # the first close wins
        ("<search>a</search><visit>b</visit>", Action("search", "a")),
        ("<calculate>1+1</calculate><answer>2</answer>", Action("calculate", "1+1")),
        ("<answer>2</answer><calculate>1+1</calculate>", Action("answer", "2")),
        ("<visit> </visit>", Action("invalid")),  # empty argument
        ("<visit>x</search>", Action("invalid")),  # closes a tag it never opened
        ("<find>x</find>", Action("invalid")),  # not offered
        ("<visit>old <visit>new</visit>", Action("visit", "new")),
    ],
)
def test_parse_action_reads_every_offered_tool(text: str, action: Action) -> None:
    assert parse_action(text, NAMES) == action


def test_search_r1_parsing_ignores_tags_it_does_not_offer() -> None:
    assert parse_action("<visit>x</visit><search>q</search>") == Action("search", "q")
    assert parse_action("<visit>x</visit>") == Action("invalid")


def test_the_tool_protocol_stops_prompts_and_feeds_back_with_its_tools(split_tokenizer) -> None:  # type: ignore[no-untyped-def]
    proto = ToolProtocol(split_tokenizer, 200, WEB)
    assert proto.names == NAMES and not proto.search_only
    assert proto.stop_tags == ("</search>", "</visit>", "</calculate>", "</answer>")
    feedback = proto.decode(proto.invalid_ids())
    assert "<visit> URL or result number </visit>" in feedback
    assert all(f"<{n}>" in feedback for n in NAMES) and "<answer>" in feedback
    text = instruction_text("who wrote hamlet", WEB)
    assert "<visit> URL or result number </visit>: the page's text" in text
    assert text.endswith("Question: who wrote hamlet?\n")
    assert proto.prompt_ids("who wrote hamlet") == render_prompt(
        split_tokenizer, "who wrote hamlet", tools=WEB
    )
    assert proto.parse(split_tokenizer("<visit>3</visit>")["input_ids"]) == Action("visit", "3")


def test_search_r1_protocol_is_unchanged(split_tokenizer) -> None:  # type: ignore[no-untyped-def]
    proto = SearchProtocol(split_tokenizer, 200)
    assert proto.search_only and proto.stop_tags == ("</search>", "</answer>")
    assert proto.decode(proto.invalid_ids()) == INVALID_FEEDBACK
    assert instruction_text("q") == INSTRUCTION.format(question="q?")
    assert proto.prompt_ids("q") == render_prompt(split_tokenizer, "q")


def test_the_protocol_refuses_no_tools_or_a_name_twice(split_tokenizer) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ValueError, match="each named once"):
        ToolProtocol(split_tokenizer, 200, ())
    with pytest.raises(ValueError, match="each named once"):
        ToolProtocol(split_tokenizer, 200, (WEB[0], WEB[0]))


def test_the_format_accepts_each_offered_tool_and_only_those() -> None:
    obs = "<information>x</information>"
    web = f"<think>a</think><search>q</search>{obs}<think>b</think><visit>1</visit>{obs}"
    web += "<think>c</think><answer>Paris</answer>"
    assert is_valid_format(web, NAMES)
    assert not is_valid_format(web)  # Search-R1's grammar has no <visit>
    assert not is_valid_format(web, ("search",))
    two = (
        "<think>a</think><visit>1</visit><visit>2</visit>"
        + obs
        + "<think>b</think><answer>x</answer>"
    )
    assert not is_valid_format(two, NAMES)  # a call is followed by its observation
    assert search_r1_reward(web, ["paris"], tools=NAMES) == 1.0
    assert search_r1_reward(web, ["paris"]) == 0.8  # right answer, invalid format
