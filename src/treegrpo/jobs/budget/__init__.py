"""The budget-matched benchmark (``treegrpo bench-budget``): ``plan`` (settings, the runs of the
ladder, their run configs, the reuse check), ``run`` (the starting model's report, runs in
pinned worker processes, the result) and ``report`` (records, aggregates, paired intervals, the
markdown table)."""
