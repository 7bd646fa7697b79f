"""Every built-in name the data-driven job resolves (``jobs.data``: question sets, corpora,
models) is documented where users look: ``DataConfig``'s docstring, which `treegrpo train
--help` shows, and docs/data.md; and every built-in name they document is one it resolves."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from treegrpo import cli
from treegrpo.jobs.data import BUILTIN_CORPORA, BUILTIN_MODELS, BUILTIN_QUESTIONS
from treegrpo.jobs.presets import DataConfig

DATA_MD = Path(__file__).resolve().parents[2] / "docs" / "data.md"
RESOLVED = (*BUILTIN_QUESTIONS, *BUILTIN_CORPORA, *BUILTIN_MODELS)
WITH_COLON = re.compile(r"[a-z0-9-]+(?::[a-z-]+)+")  # "wiki-qa:val", "wiki-web:test:link"


def test_data_config_names_every_built_in_name_and_no_other() -> None:
    doc = DataConfig.__doc__ or ""
    assert [n for n in RESOLVED if f'"{n}"' not in doc] == []
    quoted = set(re.findall(rf'"({WITH_COLON.pattern})"', doc))
    assert quoted == {n for n in RESOLVED if ":" in n}


def test_train_help_lists_every_built_in_name(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "120")
    with pytest.raises(SystemExit) as done:
        cli.main(["train", "--help"])
    assert done.value.code == 0
    shown = capsys.readouterr().out
    assert [n for n in RESOLVED if f'"{n}"' not in shown] == []


def test_docs_data_md_lists_every_built_in_name_and_no_other() -> None:
    text = DATA_MD.read_text()
    assert [n for n in RESOLVED if f"`{n}`" not in text] == []
    quoted = set(re.findall(rf"`({WITH_COLON.pattern})`", text))
    assert quoted == {n for n in RESOLVED if ":" in n}
