"""Datasets (docs/data.md): question files read into ``types.Question`` (``load``; errors a
``DataError``), and 10k Wikipedia leads with questions over them (``wiki``, ``lead_questions``,
``web_questions``). No torch: a data tool runs without the training stack.
"""
