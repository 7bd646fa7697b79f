"""Datasets: questions with gold answers, and the embedded synthetic multi-hop search world.

Light on purpose: importing a submodule here never loads torch (the synthetic world is stdlib
only), so a data tool can run without the training stack.
"""
