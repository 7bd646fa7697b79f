"""The budget benchmark on a tiny setting with two worker processes, as a script for the kill
test: ``python budget_job.py OUT`` writes OUT/budget.json and the runs under OUT/runs."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parents[1]))  # tests/: agent_fixtures

from agent_fixtures import TINY_WARM
from treegrpo.jobs.budget.plan import bench_settings
from treegrpo.jobs.budget.run import run_benchmark

if __name__ == "__main__":
    out = Path(sys.argv[1])
    settings = bench_settings(
        quick=True,
        seeds=(0,),
        steps=1,
        prompts_per_step=2,
        eval_questions=4,
        workers=2,
        out=out / "budget.json",
        runs_dir=out / "runs",
    )
    run_benchmark(settings, warm=TINY_WARM, command="tiny")
