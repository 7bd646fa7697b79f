"""Ten kills of `treegrpo train` at points drawn with seed 0, each resumed: the run ends as one
never interrupted (the harness: tests/reliability/kills.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.reliability.kills import kill_and_resume


@pytest.mark.slow
def test_ten_kills_anywhere_resume_to_the_uninterrupted_result(
    model_dir: Path, files: dict[str, Path], tmp_path: Path
) -> None:
    kill_and_resume(model_dir, files, tmp_path, n=10, seed=0)
