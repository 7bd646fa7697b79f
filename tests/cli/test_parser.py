"""The parser of `treegrpo`: every `train` flag carries its section, and help and flag errors
come back without loading the command bodies (torch, transformers, peft, datasets)."""

from __future__ import annotations

import subprocess
import sys
import warnings
from pathlib import Path

import pytest
import tyro

from treegrpo import cli
from treegrpo.train.config import checks_deferred

HEAVY = ("torch", "transformers", "peft", "datasets")


def test_help_and_flag_errors_load_no_heavy_module() -> None:
    code = (
        "import contextlib, io, sys\n"
        "from treegrpo import cli\n"
        "for args in (['--help'], ['train', '--help'], ['train', '--run.stepz', '3']):\n"
        "    sink = io.StringIO()\n"
        "    with contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink):\n"
        "        try:\n"
        "            cli.main(args)\n"
        "        except SystemExit:\n"
        "            pass\n"
        f"print(','.join(m for m in {HEAVY!r} if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


@pytest.mark.parametrize("flag", ["--lr", "--steps", "--out-dir", "--m", "--lora-rank"])
def test_flags_without_their_section_are_refused(
    flag: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as err:
        cli.main(["train", "--dry-run", flag, "4"])
    assert err.value.code == 2
    assert flag in capsys.readouterr().err


FLAGS_FILE = Path(__file__).with_name("flags.txt")


def _parser_flags() -> list[str]:
    """One line per command: its name, then every flag and positional argument it takes."""
    lines = []
    for name, options in cli.OPTIONS.items():
        with checks_deferred(), warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)  # get_parser: still the way in
            parser = tyro.extras.get_parser(options)
        names = [o for a in parser._actions for o in a.option_strings]
        names += [f"<{a.dest}>" for a in parser._actions if not a.option_strings]
        lines.append(" ".join([name, *sorted(names)]))
    return lines


def test_every_command_keeps_its_flags() -> None:
    """The flags of every command, against the list in flags.txt: a flag that goes or changes
    its name breaks users' scripts, so the list changes only on purpose (regenerate it with
    ``python tests/cli/test_parser.py``)."""
    assert _parser_flags() == FLAGS_FILE.read_text().splitlines()


if __name__ == "__main__":
    FLAGS_FILE.write_text("\n".join(_parser_flags()) + "\n")
