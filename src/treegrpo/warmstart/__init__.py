"""Warm starts: SFT pipelines that teach a model the search protocol, cached per configuration
as Hugging Face checkpoints: ``tiny`` (the embedded job's Qwen2), ``protocol`` (title
questions), ``reader`` (reading, ``closed_book`` answers among them) and ``web`` (a web agent).
Above ``train`` (its SFT loop), below ``jobs``; ``embedded`` and ``data`` stay free of training.
"""
