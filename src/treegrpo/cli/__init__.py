"""The ``treegrpo`` command line: each command's options are one dataclass of
``treegrpo.cli.options``, handed to the function of the same name in ``treegrpo.cli.commands``
(imported only then). Every section is checked on the way (``train.config.Checked``: one line
naming the flag, exit status 2; docs/configuration.md, "Checked values").
``treegrpo bench budget`` is another spelling of ``treegrpo bench-budget``.
"""

from __future__ import annotations

import functools
import importlib
import re
import sys
from collections.abc import Sequence
from dataclasses import fields
from typing import NoReturn

import tyro

from treegrpo.cli.options import OPTIONS, TrainOptions
from treegrpo.jobs.presets import TRAIN_SECTIONS
from treegrpo.train.config import Checked, ConfigValueError, checks_deferred
from treegrpo.train.yaml_config import ConfigError, apply_config, read_config

COMMANDS = "treegrpo.cli.commands"
"""The module of every command's work (``commands.train``, …), imported by name when one runs
(its docstring says why): the package's one import by name (tests/test_layers.py, ``BY_NAME``)."""


def main(args: Sequence[str] | None = None) -> None:
    """Entry point of the ``treegrpo`` script (``args``: instead of sys.argv[1:], for tests)."""
    argv = list(sys.argv[1:] if args is None else args)
    commands = dict(OPTIONS)
    if argv[:1] == ["bench"] and len(argv) > 1:  # `treegrpo bench budget` = `bench-budget`
        argv = [f"bench-{argv[1]}", *argv[2:]]
    path = _config_path(argv)
    if path is not None:
        # The file's values become train's defaults, so flags given win; it is read here only,
        # the command learns which sections it sets (a data section picks the data job).
        try:
            parsed = read_config(path)
            sections = apply_config(parsed, TRAIN_SECTIONS, path)  # checks every value
        except ConfigError as exc:
            _usage_error("train", str(exc))
        commands["train"] = functools.partial(
            TrainOptions, config_sections=tuple(parsed or {}), **sections
        )
    with checks_deferred():  # checked below, where a failed check can name its flag
        options = tyro.extras.subcommand_cli_from_dict(
            commands,
            description="Tree-GRPO: reinforcement learning for tool-using LLM agents over "
            "tree-structured rollouts.",
            args=argv,
        )
    for field in fields(options):
        section, value = field.name, getattr(options, field.name)
        if isinstance(value, Checked):
            try:
                value.check()
            except ConfigValueError as exc:
                flag = f"--{section}.{exc.field.replace('_', '-')}"
                _usage_error(argv[0], f"{flag}: {exc.problem} (got {exc.value!r})")
    getattr(importlib.import_module(COMMANDS), _function_name(type(options)))(options)


def _function_name(options: type) -> str:
    """The ``COMMANDS`` function of ``options``' command: ``ServeMcpOptions`` → ``serve_mcp``."""
    return re.sub(r"(?<!^)([A-Z])", r"_\1", options.__name__.removesuffix("Options")).lower()


def _usage_error(command: str, message: str) -> NoReturn:
    """Stop ``treegrpo COMMAND`` as a bad flag does: one line on stderr, exit status 2. The
    SystemExit carries the line as well (``str(exc)``), for callers of ``main``."""
    line = f"treegrpo {command}: {message}"
    print(line, file=sys.stderr)
    stop = SystemExit(line)
    stop.code = 2  # a string code would exit 1
    raise stop


def _config_path(argv: list[str]) -> str | None:
    """The value of ``train --config PATH`` (or ``--config=PATH``), if given."""
    if not argv or argv[0] != "train":
        return None
    for i, arg in enumerate(argv):
        if arg == "--config" and i + 1 < len(argv):
            return argv[i + 1]
        if arg.startswith("--config="):
            return arg.split("=", 1)[1]
    return None
