"""Tiny causal LMs and BPE tokenizers built in-process (no hub, no downloads).

Used by the tests and the CPU default: a small Qwen2 configuration with random weights and a
byte-level BPE tokenizer trained in seconds on the text it will see.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM

PAD, EOS = "<|pad|>", "<|endoftext|>"


def train_bpe_tokenizer(
    texts: Iterable[str],
    vocab_size: int = 512,
    special_tokens: Sequence[str] = (),
) -> PreTrainedTokenizerFast:
    """Byte-level BPE trained on ``texts``. ``special_tokens`` become single, unsplittable ids
    (after the pad and end-of-text tokens, which are always ids 0 and 1)."""
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    specials = [PAD, EOS, *special_tokens]
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=specials,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(texts, trainer=trainer)
    return PreTrainedTokenizerFast(
        tokenizer_object=tok, pad_token=PAD, eos_token=EOS, clean_up_tokenization_spaces=False
    )


def tiny_qwen2(
    vocab_size: int,
    hidden: int = 64,
    layers: int = 2,
    heads: int = 4,
    kv_heads: int = 2,
    head_dim: int | None = None,
    rope_theta: float = 10_000.0,
    seed: int = 0,
    eos_token_id: int = 1,
    pad_token_id: int = 0,
) -> Qwen2ForCausalLM:
    """A randomly initialized Qwen2 causal LM with a few hundred thousand parameters.
    ``head_dim`` defaults to hidden / heads; ``rope_theta`` is the rotary base.

    Many arguments: the shape and special ids, one keyword per ``Qwen2Config`` field it sets,
    and the seed, as the tests and benchmarks name them."""
    config = Qwen2Config(
        vocab_size=vocab_size,
        hidden_size=hidden,
        intermediate_size=hidden * 4,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=kv_heads,
        rope_parameters={"rope_type": "default", "rope_theta": rope_theta},
        max_position_embeddings=4096,
        tie_word_embeddings=True,
        eos_token_id=eos_token_id,
        pad_token_id=pad_token_id,
        bos_token_id=None,
    )
    config.head_dim = head_dim or hidden // heads  # read by the attention layers
    torch.manual_seed(seed)
    model = Qwen2ForCausalLM(config)
    model.eval()
    return model
