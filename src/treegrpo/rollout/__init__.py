"""Tree and chain samplers: drive the engine, the agent protocol and the search tool for a batch
of prompts and return a finished rollout forest."""
