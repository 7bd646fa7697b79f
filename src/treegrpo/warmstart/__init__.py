"""Warm starts: supervised fine-tuning pipelines that turn a model into a policy that follows
the search protocol, built once per configuration and cached as a Hugging Face checkpoint.

- ``tiny``: the embedded job's tiny Qwen2 on demonstrations of the generated world
  (``treegrpo.embedded``);
- ``protocol``: a pretrained model (SmolLM2 for the real presets) on scripted title-question
  demonstrations (``title_demos``);
- ``reader``: the same LoRA SFT on reading demonstrations (``reader_demos``), among them answers
  the base model gave closed-book (``closed_book``: the model it then tunes, loaded once).

They sit above ``train`` (they run its SFT loop, ``train.sft``) and below ``jobs``, which build
them before a run; ``embedded`` and ``data`` stay free of training code.
"""
