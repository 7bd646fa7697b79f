"""``treegrpo eval``: a saved model, greedily, on a dataset and its search tool; the report goes
to ``eval.json`` (every number, every row) and ``eval.md`` (the table)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from treegrpo.embedded.synthetic import synthetic_eval
from treegrpo.engine.base import EngineKind
from treegrpo.eval.evaluate import AgentSettings, EvalItem, evaluate, write_report
from treegrpo.models.load import load_model, resolve_device
from treegrpo.retrieval.base import SearchTool
from treegrpo.retrieval.bm25 import BM25Retriever
from treegrpo.tools.registry import Toolbox


def synthetic_set(
    world_seed: int = 0, limit: int | None = None
) -> tuple[list[EvalItem], SearchTool]:
    """The embedded job's held-out world (``synthetic-eval``): its first ``limit`` questions and
    BM25 over its own corpus. Question files and built-in sets: ``jobs.data.eval_inputs``."""
    questions, passages = synthetic_eval(world_seed)
    return [EvalItem.of(q) for q in questions[:limit]], BM25Retriever(passages)


def model_directory(path: Path) -> Path:
    """``path``, a Hugging Face model directory, or a run checkpoint's (``step-N``) ``model/``."""
    if (path / "config.json").is_file():
        return path
    if (path / "model" / "config.json").is_file():
        return path / "model"
    raise FileNotFoundError(f"{path}: not a Hugging Face model directory (no config.json)")


def evaluate_checkpoint(
    model_dir: Path,
    items: list[EvalItem],
    tool: SearchTool | Toolbox,
    out: Path,
    agent: AgentSettings,
    batch_size: int,
    device: str = "auto",
    settings: dict[str, Any] | None = None,
    engine: EngineKind = "hf",
) -> dict[str, Any]:
    """Load ``model_dir`` with plain transformers, evaluate greedily under ``agent``'s limits,
    write the report (with ``settings``) to ``out`` and return it.

    Many arguments: the inputs of ``treegrpo eval``, each a flag of its own or made from them."""
    model_dir = model_directory(model_dir)
    model, tokenizer = load_model(model_dir)
    model.to(resolve_device(device))
    report = evaluate(model, tokenizer, tool, items, agent, batch_size, engine)
    report["config"] = {"model": str(model_dir), **(settings or {})}
    write_report(report, out, "eval")
    return report
