"""The one error every dataset reader raises.

A broken row would otherwise train or evaluate silently wrong, so readers are strict, and the
message says where to look: the file, the 0-based row, the 1-based line for text files, and the
field (dotted for nested parquet columns, e.g. ``reward_model.ground_truth.target``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any


class DataError(ValueError):
    """A dataset file, or one of its rows, that is not valid input."""

    def __init__(
        self,
        path: str | Path,
        problem: str,
        *,
        row: int | None = None,
        line: int | None = None,
        field: str | None = None,
    ) -> None:
        where = f"{path}:{line}" if line is not None else str(path)
        if row is not None:
            where += f": row {row}"
        what = f"field {field!r}: " if field else ""
        super().__init__(f"{where}: {what}{problem}")
        self.path = str(path)
        self.row = row
        self.line = line
        self.field = field


def type_name(value: Any) -> str:
    """How an error message names the type of a JSON value: "null", "str", "list", …"""
    return "null" if value is None else type(value).__name__
