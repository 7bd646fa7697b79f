"""Evaluation runs and reports."""
