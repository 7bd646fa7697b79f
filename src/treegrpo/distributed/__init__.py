"""Scaling out: rollout workers on Ray (``rollout``)."""
