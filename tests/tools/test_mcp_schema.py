"""What the model sees of an MCP tool and how what it writes is read, without a server: the
usage line of a schema, argument parsing and checking, names, descriptions, result texts."""

from __future__ import annotations

from typing import Any

import mcp_types
import pytest

from treegrpo.tools.mcp.client import McpServer, _error_text, first_sentence, result_text, tool_name
from treegrpo.tools.mcp.schema import MAX_USAGE_CHARS, ArgumentParser, render_usage
from treegrpo.tools.registry import NAME, BadArgument

SEARCH = {
    "type": "object",
    "properties": {
        "query": {"type": "string"},
        "topk": {"type": "integer", "minimum": 1, "maximum": 10, "default": 3},
    },
    "required": ["query"],
}


def test_usage_shows_names_types_and_optional_arguments() -> None:
    assert render_usage(SEARCH) == '{"query": str, "topk"?: int}'
    assert render_usage({"type": "object"}) == "{}"
    schema: dict[str, Any] = {
        "type": "object",
        "$defs": {"Row": {"type": "object", "properties": {"id": {"type": "integer"}}}},
        "properties": {
            "rows": {"type": "array", "items": {"$ref": "#/$defs/Row"}},
            "mode": {"enum": ["fast", "exact"]},
            "note": {"anyOf": [{"type": "string"}, {"type": "null"}]},
            "flags": {"type": ["boolean", "number"]},
            "meta": {"type": "object", "properties": {"deep": {"type": "object", "properties":
                     {"x": {"type": "string"}}}}},
        },
        "required": ["rows"],
    }  # fmt: skip
    assert render_usage(schema) == (
        '{"rows": list[{"id"?: int}], "mode"?: "fast"|"exact", "note"?: str|null, '
        '"flags"?: bool|float, "meta"?: {"deep"?: object}}'
    )


def test_a_long_schema_is_drawn_shallower_then_cut() -> None:
    nested = {"type": "object", "properties": {f"field_{i}": {"type": "string"} for i in range(9)}}
    wide = {"type": "object", "properties": {"a": nested, "b": nested}}
    assert render_usage(wide) == '{"a"?: object, "b"?: object}'
    many = {
        "type": "object",
        "properties": {f"argument_{i}": {"type": "string"} for i in range(40)},
    }
    text = render_usage(many)
    assert len(text) <= MAX_USAGE_CHARS and text.endswith("str, …}")


def test_arguments_are_json_objects_or_one_bare_string() -> None:
    parse = ArgumentParser("search", SEARCH)
    assert parse('{"query": "Paris", "topk": 2}') == {"query": "Paris", "topk": 2}
    assert parse("capital of France") == {"query": "capital of France"}
    assert parse('"capital of France"') == {"query": "capital of France"}
    assert parse("42") == {"query": "42"}
    assert parse("[1] the list") == {"query": "[1] the list"}
    with pytest.raises(BadArgument, match=r"invalid JSON \(Expecting .*write \{\"query\""):
        parse('{"query": "Paris"')
    with pytest.raises(BadArgument, match='argument "topk": 11 is greater than the maximum of 10'):
        parse('{"query": "Paris", "topk": 11}')
    two = ArgumentParser("add", {"type": "object", "required": ["a", "b"], "properties": {
        "a": {"type": "number"}, "b": {"type": "number"}}})  # fmt: skip
    assert two.bare is None and two('{"a": 1, "b": 2.5}') == {"a": 1, "b": 2.5}
    with pytest.raises(BadArgument, match="invalid JSON"):
        two("one and two")
    with pytest.raises(BadArgument, match=r"expected a JSON object: \{\"a\": float"):
        two("[1, 2]")
    with pytest.raises(BadArgument, match="'b' is a required property"):
        two('{"a": 1}')


def test_a_broken_schema_leaves_arguments_unchecked() -> None:
    parse = ArgumentParser("odd", {"type": "object", "properties": {"x": {"type": 5}}})
    assert parse.validator is None and parse('{"x": 1}') == {"x": 1}


def test_long_refusals_are_cut() -> None:
    parse = ArgumentParser("t", {"type": "object", "properties": {"x": {"type": "integer"}}})
    with pytest.raises(BadArgument) as err:
        parse('{"x": "' + "y" * 500 + '"}')
    assert len(str(err.value)) <= 200 and str(err.value).endswith("…")


@pytest.mark.parametrize(
    ("prefix", "name", "expected"),
    [
        ("", "wiki_search", "wiki_search"),
        ("wiki.", "search", "wiki.search"),
        ("", "get weather/now", "get_weather_now"),
        ("", "2fa code", "_2fa_code"),
        ("", "x" * 80, "x" * 64),
    ],
)
def test_tool_names_fit_a_tag(prefix: str, name: str, expected: str) -> None:
    assert tool_name(prefix, name) == expected and NAME.fullmatch(expected)


def test_descriptions_and_result_texts() -> None:
    assert first_sentence("\n  Searches the web. Returns pages.\nMore.") == "Searches the web."
    assert first_sentence("Version 2.0 of the search") == "Version 2.0 of the search"
    assert first_sentence(None) == ""
    result = mcp_types.CallToolResult(
        content=[
            mcp_types.TextContent(type="text", text="first"),
            mcp_types.ImageContent(type="image", data="", mime_type="image/png"),
            mcp_types.EmbeddedResource(
                type="resource",
                resource=mcp_types.TextResourceContents(uri="file:///a.txt", text="second"),
            ),
        ]
    )
    assert result_text(result) == "first\n[image]\nsecond"
    structured = mcp_types.CallToolResult(content=[], structured_content={"value": 4})
    assert result_text(structured) == '{"value": 4}'
    error = mcp_types.CallToolResult(
        content=[mcp_types.TextContent(type="text", text="Error executing tool t: no page")],
        is_error=True,
    )
    assert _error_text(error) == "no page"


def test_server_configs_are_checked() -> None:
    with pytest.raises(ValueError, match="either command"):
        McpServer("both", command="x", url="http://127.0.0.1:1/mcp")
    with pytest.raises(ValueError, match="timeouts"):
        McpServer("slow", url="http://127.0.0.1:1/mcp", timeout_s=0)
