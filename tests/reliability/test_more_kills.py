"""Twenty more kills of `treegrpo train`, drawn with seed 1 (a file of its own, so that the two
long kill tests run on different workers; the harness: tests/reliability/kills.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.reliability.kills import kill_and_resume


@pytest.mark.slow
def test_twenty_more_kills(model_dir: Path, files: dict[str, Path], tmp_path: Path) -> None:
    kill_and_resume(model_dir, files, tmp_path, n=20, seed=1)
