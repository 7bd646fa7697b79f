"""Small dataset files for the reader tests: FlashRAG jsonl rows and Search-R1 parquet rows."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

# Search-R1's own "base" template (its data_process scripts), to check we read their files as-is.
SEARCH_R1_TEMPLATE = (
    "Answer the given question. You must conduct reasoning inside <think> and </think> first "
    "every time you get new information. After reasoning, if you find you lack some knowledge, "
    "you can call a search engine by <search> query </search> and it will return the top "
    "searched results between <information> and </information>. You can search as many times "
    "as your want. If you find no further external knowledge needed, you can directly provide "
    "the answer inside <answer> and </answer>, without detailed illustrations. For example, "
    "<answer> Beijing </answer>. Question: {question}\n"
)


def flashrag_row(i: int, question: str, golds: list[str], **extra: Any) -> dict[str, Any]:
    return {"id": f"test_{i}", "question": question, "golden_answers": golds, **extra}


def write_jsonl(path: Path, rows: list[Any], blank_after: int | None = None) -> Path:
    """One JSON value a line (a str is written verbatim); a blank line after row
    ``blank_after``, so rows and lines differ."""
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = [r if isinstance(r, str) else json.dumps(r) for r in rows]
    if blank_after is not None:
        lines.insert(blank_after + 1, "")
    path.write_text("".join(line + "\n" for line in lines))
    return path


def searchr1_row(
    source: str, index: int, question: str, target: Any, split: str = "test"
) -> dict[str, Any]:
    """A row exactly as Search-R1's data_process scripts write it."""
    return {
        "data_source": source,
        "prompt": [{"role": "user", "content": SEARCH_R1_TEMPLATE.format(question=question)}],
        "ability": "fact-reasoning",
        "reward_model": {"style": "rule", "ground_truth": {"target": target}},
        "extra_info": {"split": split, "index": index},
    }


def write_parquet(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(rows), path)
    return path
