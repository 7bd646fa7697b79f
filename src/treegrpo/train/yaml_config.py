"""YAML run configs (docs/configuration.md, "Config files"): one section per frozen config
dataclass, each updating the caller's defaults (a preset); strict, every error names the file and
the dotted key.
"""

from __future__ import annotations

import dataclasses
import difflib
import functools
import re
from collections.abc import Mapping
from pathlib import Path, PurePath
from typing import Any, get_type_hints

import pydantic
import yaml


class _Loader(yaml.SafeLoader):  # type: ignore[misc]
    """Safe YAML that also reads ``3e-4`` (an exponent without a dot) as a float, as YAML 1.2
    does; YAML 1.1, which PyYAML follows, reads it as a string."""


_Loader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"^[-+]?[0-9][0-9_]*(?:\.[0-9_]*)?[eE][-+]?[0-9]+$"),
    list("-+0123456789"),
)


class ConfigError(ValueError):
    """A config file that does not fit the config dataclasses."""


def load_config(path: str | Path, defaults: Mapping[str, Any]) -> dict[str, Any]:
    """Read ``path`` and return ``defaults`` (section name → dataclass instance) with the file's
    values applied; sections the file leaves out keep their defaults."""
    return apply_config(read_config(path), defaults, str(path))


def read_config(path: str | Path) -> Any:
    """The YAML of ``path`` as parsed (``apply_config`` checks it), or a ConfigError."""
    try:
        text = Path(path).read_text()
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read config file ({exc.strerror})") from None
    try:
        data = yaml.load(text, Loader=_Loader)  # a SafeLoader
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{path}:{mark.line + 1}" if mark is not None else str(path)
        raise ConfigError(f"{where}: invalid YAML ({getattr(exc, 'problem', exc)})") from None
    return data


def apply_config(data: Any, defaults: Mapping[str, Any], source: str) -> dict[str, Any]:
    """Apply parsed YAML ``data`` to ``defaults``; ``source`` names the file in errors."""
    if data is None:  # an empty file
        data = {}
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: expected a mapping of sections, got {_kind(data)}")
    out = dict(defaults)
    for section, values in data.items():
        if section not in defaults:
            raise ConfigError(f"{source}: unknown section {section!r}{_hint(section, defaults)}")
        if values is None:
            continue
        if not isinstance(values, dict):
            raise ConfigError(
                f"{source}: section {section!r} must be a mapping, got {_kind(values)}"
            )
        base = defaults[section]
        hints = get_type_hints(type(base))
        fields = [f.name for f in dataclasses.fields(base)]
        changes = {}
        for key, value in values.items():
            if key not in fields:
                raise ConfigError(f"{source}: unknown key '{section}.{key}'{_hint(key, fields)}")
            changes[key] = _coerce(value, hints[key], f"{source}: {section}.{key}")
        try:
            out[section] = dataclasses.replace(base, **changes)
        except ValueError as exc:  # the dataclass's own validation
            raise ConfigError(f"{source}: section {section!r}: {exc}") from None
    return out


def dump_config(sections: Mapping[str, Any]) -> str:
    """YAML text of ``sections`` that ``load_config`` reads back to the same values."""
    plain = {name: _plain(dataclasses.asdict(obj)) for name, obj in sections.items()}
    text: str = yaml.safe_dump(plain, sort_keys=False)
    return text


def _coerce(value: Any, tp: Any, where: str) -> Any:
    """``value`` validated as ``tp`` by pydantic in strict mode (no "5" for an int, no 1
    for a bool; YAML lists count as tuples, and an int as a float), or a ConfigError that names
    ``where`` (file and dotted key, with the list index where one item is wrong)."""
    try:
        return _adapter(tp).validate_python(_tuples(value), strict=True)
    except pydantic.ValidationError as exc:
        err = exc.errors()[0]
        inner = "".join(f"[{part}]" if isinstance(part, int) else "" for part in err["loc"])
        if err["type"] == "missing":  # a tuple given too few items
            raise ConfigError(f"{where}{inner}: missing, got {value!r} (too short)") from None
        got = err["input"]
        raise ConfigError(f"{where}{inner}: {err['msg']}, got {got!r} ({_kind(got)})") from None


@functools.cache
def _adapter(tp: Any) -> pydantic.TypeAdapter[Any]:
    return pydantic.TypeAdapter(tp)


def _tuples(value: Any) -> Any:
    """YAML's lists as tuples, which is what the config dataclasses hold."""
    return tuple(_tuples(v) for v in value) if isinstance(value, list) else value


def _kind(value: Any) -> str:
    return "null" if value is None else type(value).__name__


def _hint(key: Any, known: Any) -> str:
    names = [str(k) for k in known]
    close = difflib.get_close_matches(str(key), names, n=1)
    maybe = f"; did you mean {close[0]!r}?" if close else ""
    return f" (known: {', '.join(names)}){maybe}"


def _plain(value: Any) -> Any:
    """Tuples as lists and paths as strings, which safe YAML can write."""
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, PurePath):
        return str(value)
    return value
