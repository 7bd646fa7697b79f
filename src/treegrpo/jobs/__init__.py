"""Jobs: what ``treegrpo train`` and ``treegrpo bench-budget`` run. ``runner`` is the one job
(evaluate, train, evaluate, report); ``embedded`` feeds it the generated world and its warm start,
``data`` your questions, model and search tool; ``presets`` holds the default settings and a run
config file's sections; ``budget`` is the budget-matched benchmark over many such jobs."""
