"""The budget-matched benchmark (``treegrpo bench-budget``): ``plan`` (settings, runs, reuse),
``run`` (the runs and the result), ``records``, ``curves`` and ``verdict`` (what the runs show),
``report`` (the markdown table)."""
