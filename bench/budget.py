"""Budget-matched Tree-GRPO vs chain GRPO on the embedded synthetic world, or with ``--config``
on the questions, corpus and model of a ``treegrpo train`` config.

A thin entry point: the logic is ``treegrpo.jobs.budget.run`` and the flags are those of
``treegrpo bench-budget`` (``--help`` lists them).

    .venv/bin/python bench/budget.py --quick     # a few minutes: the pipeline runs
    .venv/bin/python bench/budget.py             # 50 runs, about 80 min on 2 CPU cores
    .venv/bin/python bench/budget.py --quick --config configs/real-smollm2-wiki.yaml

writes ``bench/results/budget.json`` (quick: ``budget-quick.json``; with --config
``budget-data.json``, ``budget-data-quick.json``), the table beside it (``.md``, also printed)
and the plots ``bench/results/<stem>_*.png``.
"""

from __future__ import annotations

import sys

from treegrpo.cli import main

if __name__ == "__main__":
    main(["bench-budget", *sys.argv[1:]])
