"""The RL loop: losses (pure torch functions) and the trainer."""
