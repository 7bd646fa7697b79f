"""Model and tokenizer construction: tiny in-process models for tests and the CPU default."""
