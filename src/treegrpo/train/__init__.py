"""The RL loop: losses (pure torch functions), log-probs, the step and the trainer, and the
supervised fine-tuning loop (``sft``) that warm starts use. Nothing here knows about jobs,
evaluation or the embedded world."""
