"""Evaluation: greedy runs of a model with its search tool and their reports (``evaluate``),
and the inputs of ``treegrpo eval`` (``run``)."""
