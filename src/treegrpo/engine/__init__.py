"""Generation backends. ``HFEngine`` runs any transformers causal LM with per-sequence stopping
and a prefix KV cache that turns and tree expansions reuse."""
