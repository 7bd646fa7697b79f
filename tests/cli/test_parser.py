"""The parser of `treegrpo`: every `train` flag carries its section, and help and flag errors
come back without loading the command bodies (torch, transformers, peft, datasets)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from treegrpo import cli

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
