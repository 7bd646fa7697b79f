"""The learning curve's held-out points: before at step 0, periodic ones, after at the end."""

from __future__ import annotations

import json
from pathlib import Path

from treegrpo.viz.curves import held_out_points, plot_learning_curve

ROWS = [
    {"step": 1, "reward/mean": 0.1, "reward/em": 0.1},
    {"step": 2, "reward/mean": 0.2, "reward/em": 0.2, "eval/em": 0.25},
    {"step": 3, "reward/mean": 0.3, "reward/em": 0.3},
]


def test_before_and_after_frame_the_periodic_evaluations() -> None:
    assert held_out_points(ROWS, before=0.3, after=0.4) == [(0, 0.3), (2, 0.25), (3, 0.4)]
    assert held_out_points(ROWS) == [(2, 0.25)]
    # a periodic evaluation at the last step is not drawn twice
    ending = [*ROWS[:2], {**ROWS[2], "eval/em": 0.4}]
    assert held_out_points(ending, before=0.3, after=0.4) == [(0, 0.3), (2, 0.25), (3, 0.4)]


def test_the_curve_is_written(tmp_path: Path) -> None:
    (tmp_path / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in ROWS))
    out = plot_learning_curve(tmp_path, before=0.3, after=0.4)
    assert out == tmp_path / "learning_curve.png" and out.read_bytes()[:4] == b"\x89PNG"
