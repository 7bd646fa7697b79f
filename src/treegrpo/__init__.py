"""treegrpo: Tree-GRPO and chain GRPO for tool-using LLM agents.

Kept import-light on purpose: ``import treegrpo`` loads nothing heavy; import the layer you
need (``treegrpo.core`` is pure numpy + stdlib).
"""

__version__ = "0.1.0"
