"""The one error every dataset reader raises: readers are strict, since a broken row would train
or evaluate silently wrong, and it names the file, 0-based row, 1-based line (text files) and
field (dotted for nested columns: ``reward_model.ground_truth.target``).
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
        self.path, self.row, self.line, self.field = str(path), row, line, field


def type_name(value: Any) -> str:
    """How an error message names the type of a JSON value: "null", "str", "list", …"""
    return "null" if value is None else type(value).__name__
