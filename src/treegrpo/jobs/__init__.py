"""Jobs: what ``treegrpo train`` and ``treegrpo bench-budget`` run, on top of ``train`` and
``eval``. ``runner`` is the one job (evaluate the starting model, train, evaluate the final
checkpoint, plot, summary, report); ``embedded`` feeds it the generated world and its warm start,
``data`` your questions, model and search tool; ``presets`` holds the default settings and the
sections of a run config file; ``budget`` is the budget-matched benchmark over many such jobs."""
