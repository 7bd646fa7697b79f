"""YAML run configs: one section per frozen config dataclass, checked against its fields.

    algo: {algo: chain, m: 4}
    optim: {lr: 3.0e-4, mini_batch_prompts: 8}
    model: {lora_rank: 16, grad_checkpointing: true}

Each section updates the caller's defaults (a preset); the command line then overrides the file
(``treegrpo train`` hands the result to tyro as defaults). Loading is strict on purpose: a typo
in a key would otherwise train with the default and show up only as a strange learning curve.
Every error names the file and the dotted key.
"""

from __future__ import annotations

import dataclasses
import difflib
import types
from collections.abc import Mapping
from pathlib import Path, PurePath
from typing import Any, Literal, Union, get_args, get_origin, get_type_hints

import yaml


class ConfigError(ValueError):
    """A config file that does not fit the config dataclasses."""


def load_config(path: str | Path, defaults: Mapping[str, Any]) -> dict[str, Any]:
    """Read ``path`` and return ``defaults`` (section name → dataclass instance) with the file's
    values applied; sections the file leaves out keep their defaults."""
    try:
        text = Path(path).read_text()
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read config file ({exc.strerror})") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{path}:{mark.line + 1}" if mark is not None else str(path)
        raise ConfigError(f"{where}: invalid YAML ({getattr(exc, 'problem', exc)})") from None
    return apply_config(data, defaults, str(path))


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
            where = f"{source}: {section}.{key}"
            if key not in fields:
                raise ConfigError(f"{source}: unknown key '{section}.{key}'{_hint(key, fields)}")
            changes[key] = _coerce(value, hints[key], where)
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
    """``value`` as type ``tp``, or a ConfigError that says what was expected."""
    origin = get_origin(tp)
    if origin is Literal:
        for choice in get_args(tp):
            if value == choice and type(value) is type(choice):
                return choice
    elif origin in (Union, types.UnionType):
        for arm in get_args(tp):
            try:
                return _coerce(value, arm, where)
            except ConfigError:
                continue
    elif origin is tuple:
        args = get_args(tp)
        if isinstance(value, list | tuple):
            if len(args) == 2 and args[1] is Ellipsis:
                return tuple(_coerce(v, args[0], f"{where}[{i}]") for i, v in enumerate(value))
            if len(value) == len(args):
                return tuple(
                    _coerce(v, t, f"{where}[{i}]")
                    for i, (v, t) in enumerate(zip(value, args, strict=True))
                )
    elif tp is type(None):
        if value is None:
            return None
    elif tp is bool:
        if isinstance(value, bool):
            return value
    elif tp is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    elif tp is float:
        if isinstance(value, int | float) and not isinstance(value, bool):
            return float(value)
        if isinstance(value, str):  # YAML 1.1 reads 3e-4 (no dot) as a string
            try:
                return float(value)
            except ValueError:
                pass
    elif tp is str:
        if isinstance(value, str):
            return value
    elif isinstance(tp, type) and issubclass(tp, PurePath):
        if isinstance(value, str):
            return tp(value)
    else:
        raise TypeError(f"{where}: config field type {tp!r} is not supported by the YAML loader")
    raise ConfigError(f"{where}: expected {_describe(tp)}, got {value!r} ({_kind(value)})")


def _describe(tp: Any) -> str:
    origin = get_origin(tp)
    if origin is Literal:
        return "one of " + ", ".join(repr(c) for c in get_args(tp))
    if origin in (Union, types.UnionType):
        return " or ".join(_describe(a) for a in get_args(tp))
    if origin is tuple:
        return "a list (" + ", ".join(_describe(a) for a in get_args(tp) if a is not ...) + ")"
    if tp is type(None):
        return "null"
    return str(getattr(tp, "__name__", tp))


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
