"""An MCP tool's JSON input schema as the model meets it (docs/mcp.md, "What the model sees"):
a usage line for the prompt with argument names and types and nothing else, since every prompt
token is paid on every rollout; and the parse of what the model wrote between the tool's tags (a
JSON object, or a bare string for a tool of one required string argument), checked with
``jsonschema``, refusals short enough for the model to act on.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from typing import Any

import jsonschema
from jsonschema.exceptions import SchemaError, best_match

from treegrpo.tools.registry import BadArgument

log = logging.getLogger(__name__)

MAX_USAGE_CHARS = 160
"""Longest usage line before it is drawn shallower (then cut with ``…``)."""

MAX_MESSAGE_CHARS = 200
"""Longest refusal message the model reads."""

SCALARS = {"string": "str", "integer": "int", "number": "float", "boolean": "bool", "null": "null"}


def render_usage(schema: Mapping[str, Any]) -> str:
    """The usage line of an input schema: ``{"name": type, "opt"?: type}``, nested objects
    drawn two levels deep (a list's items on the list's level), or one when that is too long,
    or cut at the last argument that fits (``…``); ``{}`` for a tool without arguments."""
    if not schema.get("properties"):
        return "{}"
    for depth in (2, 1):
        text = _render(schema, depth, schema)
        if len(text) <= MAX_USAGE_CHARS:
            return text
    cut = text.rfind(", ", 0, MAX_USAGE_CHARS - 2)
    return text[: cut if cut > 0 else MAX_USAGE_CHARS - 2] + ", …}"


def _render(schema: Any, depth: int, root: Mapping[str, Any]) -> str:
    schema = _resolve(schema, root)
    if not isinstance(schema, Mapping):
        return "any"
    if "enum" in schema and isinstance(schema["enum"], list):
        return "|".join(json.dumps(v, ensure_ascii=False) for v in schema["enum"][:6])
    if "const" in schema:
        return json.dumps(schema["const"], ensure_ascii=False)
    for key in ("anyOf", "oneOf"):
        if isinstance(schema.get(key), list):
            return "|".join(dict.fromkeys(_render(s, depth, root) for s in schema[key]))
    kind = schema.get("type")
    if isinstance(kind, list):
        return "|".join(_render({**schema, "type": k}, depth, root) for k in kind)
    if kind == "array":  # a list takes no level: list[{"id": int}] reads as one
        return f"list[{_render(schema.get('items'), depth, root)}]"
    if kind == "object" or (kind is None and "properties" in schema):
        props = schema.get("properties")
        if not isinstance(props, Mapping) or not props or depth <= 0:
            return "object"
        required = set(schema.get("required") or ())
        parts = [
            f"{json.dumps(name)}{'' if name in required else '?'}: {_render(sub, depth - 1, root)}"
            for name, sub in props.items()
        ]
        return "{" + ", ".join(parts) + "}"
    return SCALARS.get(kind, "any") if isinstance(kind, str) else "any"


def _resolve(schema: Any, root: Mapping[str, Any]) -> Any:
    """``{"$ref": "#/$defs/Place"}`` → its schema in ``root`` (local refs; a few hops, no cycle)."""
    for _ in range(8):
        if not isinstance(schema, Mapping) or not isinstance(schema.get("$ref"), str):
            return schema
        target: Any = root
        for part in schema["$ref"].removeprefix("#/").split("/"):
            target = target.get(part) if isinstance(target, Mapping) else None
        schema = target
    return schema


class ArgumentParser:
    """Text between a tool's tags → the arguments object, checked against ``schema``."""

    def __init__(self, tool: str, schema: Mapping[str, Any]) -> None:
        self.tool = tool
        self.schema = dict(schema)
        self.usage = render_usage(self.schema)
        # the argument a bare string fills: the one required property, when it is a string
        required = list(self.schema.get("required") or ())
        props = self.schema.get("properties") or {}
        only = props.get(required[0]) if len(required) == 1 else None
        string = isinstance(only, Mapping) and only.get("type") == "string"
        self.bare = str(required[0]) if string else None
        cls = jsonschema.validators.validator_for(
            self.schema, default=jsonschema.Draft202012Validator
        )
        try:
            cls.check_schema(self.schema)
            self.validator: Any = cls(self.schema)
        except SchemaError as exc:  # the server's schema is broken: send arguments unchecked
            log.warning("tool %s: invalid input schema, arguments go unchecked: %s", tool, exc)
            self.validator = None

    def __reduce__(self) -> tuple[type[ArgumentParser], tuple[str, dict[str, Any]]]:
        """Pickled as its schema (jsonschema's validators do not pickle)."""
        return (ArgumentParser, (self.tool, self.schema))

    def __call__(self, text: str) -> dict[str, Any]:
        """The arguments in ``text``; ``BadArgument`` saying what to fix otherwise."""
        text = text.strip()
        value: Any
        if self.bare is not None and not text.startswith("{"):
            value = {self.bare: _string(text)}
        else:
            try:
                value = json.loads(text)
            except json.JSONDecodeError as exc:
                raise BadArgument(
                    f"invalid JSON ({exc.msg} at column {exc.colno}); write {self.usage}"
                ) from None
        if not isinstance(value, dict):
            raise BadArgument(f"expected a JSON object: {self.usage}")
        if self.validator is not None:
            error = best_match(self.validator.iter_errors(value))
            if error is not None:
                raise BadArgument(_describe(error))
        return value


def _string(text: str) -> str:
    """A bare string as written, or the string a JSON string literal holds (``"Paris"``)."""
    if text.startswith('"'):
        try:
            value = json.loads(text)
        except json.JSONDecodeError:
            return text
        if isinstance(value, str):
            return value
    return text


def _describe(error: jsonschema.ValidationError) -> str:
    """``argument "topk": 0 is less than the minimum of 1`` (a missing or unexpected argument is
    named by jsonschema's own message), cut to ``MAX_MESSAGE_CHARS``."""
    path = ".".join(str(p) for p in error.absolute_path)
    text = f'argument "{path}": {error.message}' if path else error.message
    return text if len(text) <= MAX_MESSAGE_CHARS else text[: MAX_MESSAGE_CHARS - 1] + "…"
