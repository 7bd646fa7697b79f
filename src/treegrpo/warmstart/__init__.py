"""Warm starts: supervised fine-tuning pipelines that turn a model into a policy that follows
the search protocol, built once per configuration and cached as a Hugging Face checkpoint:
``tiny`` (the embedded job's tiny Qwen2), ``protocol`` (a pretrained model on title-question
demonstrations), ``reader`` (reading demonstrations, ``closed_book`` answers among them) and
``web`` (a web agent's demonstrations). They sit above ``train`` (its SFT loop) and below
``jobs``; ``embedded`` and ``data`` stay free of training code.
"""
