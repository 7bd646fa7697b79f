"""The budget benchmark killed with its workers resumes to the same numbers."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest


@pytest.mark.slow
def test_the_budget_benchmark_killed_with_its_workers_resumes_to_the_same_numbers(
    tmp_path: Path,
) -> None:
    """SIGKILL to the benchmark's whole process group (the driver and its two pinned workers)
    once a run has finished and others are in flight; the same command again reuses the
    finished runs, redoes the rest, and gives the numbers of an uninterrupted benchmark."""
    env = {**os.environ, "TREEGRPO_CACHE_DIR": str(tmp_path / "cache"), "PYTHONUNBUFFERED": "1"}
    script = [sys.executable, str(Path(__file__).with_name("budget_job.py"))]

    def run(out: Path, kill_after_done: int | None) -> str:
        proc = subprocess.Popen(
            [*script, str(out)],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )
        assert proc.stdout is not None
        lines, done = [], 0
        for line in proc.stdout:
            lines.append(line)
            done += "] done " in line
            if kill_after_done is not None and done == kill_after_done:
                os.killpg(proc.pid, signal.SIGKILL)
                break
        code = proc.wait(timeout=900)
        text = "".join(lines)
        assert code == (-signal.SIGKILL if kill_after_done else 0), text[-3000:]
        return text

    run(tmp_path / "straight", None)
    run(tmp_path / "killed", kill_after_done=1)
    time.sleep(0.5)
    # every process of the group is gone: nothing writes into the runs any more
    marks = {p: p.stat().st_mtime_ns for p in (tmp_path / "killed" / "runs").rglob("*")}
    time.sleep(1.0)
    assert marks == {p: p.stat().st_mtime_ns for p in (tmp_path / "killed" / "runs").rglob("*")}
    again = run(tmp_path / "killed", None)
    assert "reuse " in again  # the run finished before the kill is not trained again

    def numbers(out: Path) -> dict[str, dict[str, object]]:
        saved = json.loads((out / "budget.json").read_text())
        assert not saved["failed"]
        rows: dict[str, dict[str, object]] = {}
        for r in saved["runs"]:  # everything but wall times and a share of them
            row = {k: v for k, v in r.items() if not k.endswith("_s") and k != "selector_share"}
            row["held_out_curve"] = {
                k: v for k, v in row["held_out_curve"].items() if k != "seconds"
            }
            rows[r["name"]] = row
        return rows

    assert numbers(tmp_path / "killed") == numbers(tmp_path / "straight")
