"""Generation backends behind one interface (``engine.base.Engine``): ``HFEngine`` runs any
transformers causal LM with per-sequence stopping and a prefix KV cache that turns and tree
expansions reuse; ``VLLMEngine`` runs vLLM in the same process (optional: ``make setup-vllm``);
``engine.build.build_engine`` picks one by name."""
