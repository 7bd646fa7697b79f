"""The rows of a question file as it ships (JSON lines, a JSON list of objects, or CSV), each
with its 0-based row and, for jsonl and CSV, its 1-based line for errors. A row that is not an
object, or a file not in its extension's format, is a ``DataError`` at once.
"""

from __future__ import annotations

import ast
import csv
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from treegrpo.data.errors import DataError, type_name

SUFFIXES = (".jsonl", ".json", ".csv")


@dataclass(frozen=True)
class Row:
    """One row: its fields, 0-based number and 1-based line (None in a JSON list)."""

    fields: dict[str, Any]
    row: int
    line: int | None


class RowFields:
    """Field access on one row that fails with the file, row, line and field."""

    def __init__(self, path: str | Path, row: Row) -> None:
        self.path, self.row = path, row

    def fail(self, name: str | None, problem: str) -> DataError:
        return DataError(self.path, problem, row=self.row.row, line=self.row.line, field=name)

    def need(self, name: str) -> Any:
        """The field ``name``, which must be there."""
        if name not in self.row.fields:
            raise self.fail(name, "missing")
        return self.row.fields[name]

    def text(self, name: str, *, empty: bool = False) -> str:
        """A string field, stripped; a number is taken as its text (GAIA answers "17")."""
        value = self.need(name)
        if isinstance(value, int | float) and not isinstance(value, bool):
            value = str(value)
        value = self.string(name, value)
        if not empty and not value.strip():
            raise self.fail(name, "empty")
        return value.strip()

    def string(self, name: str, value: Any) -> str:
        """``value`` of field ``name`` (``"Field.key"`` in an object), which must be a string."""
        if not isinstance(value, str):
            raise self.fail(name, f"expected a string, got {type_name(value)}")
        return value

    def mapping(self, name: str) -> dict[str, Any]:
        """An object field ({} when absent or null), or a dict literal (SimpleQA's CSV's)."""
        value = self.row.fields.get(name)
        if value is None or value == "":
            return {}
        if isinstance(value, str):
            try:
                value = ast.literal_eval(value)
            except (ValueError, SyntaxError):
                raise self.fail(name, "expected an object or a dict literal") from None
        if not isinstance(value, dict):
            raise self.fail(name, f"expected an object, got {type_name(value)}")
        return value


def read_rows(path: str | Path) -> Iterator[Row]:
    """The rows of a ``.jsonl`` (blank lines skipped), ``.json`` or ``.csv`` file, in order."""
    path = Path(path)
    readers = {".jsonl": jsonl_rows, ".json": _json_list, ".csv": _csv}
    if path.suffix not in readers:
        raise DataError(path, f"unknown format {path.suffix!r}: expected one of {SUFFIXES}")
    yield from readers[path.suffix](path)


def first_row(path: str | Path) -> dict[str, Any] | None:
    """The first row's fields, or None when there is none or the file is unreadable (the
    caller then tries another format, which reports the problem)."""
    try:
        return next(read_rows(path)).fields
    except (DataError, StopIteration, OSError):
        return None


def jsonl_rows(path: Path) -> Iterator[Row]:
    """The rows of a JSON lines file, blank lines skipped."""
    with open(path, "rb") as f:
        row = 0
        for lineno, raw in enumerate(f, start=1):
            if not raw.strip():
                continue
            try:
                value = json.loads(raw.decode("utf-8"))
            except UnicodeDecodeError as exc:
                problem = f"unreadable JSON: not UTF-8 ({exc.reason})"
                raise DataError(path, problem, row=row, line=lineno) from None
            except json.JSONDecodeError as exc:
                problem = f"unreadable JSON ({exc.msg} at column {exc.colno})"
                raise DataError(path, problem, row=row, line=lineno) from None
            yield Row(_object(path, value, row, lineno), row, lineno)
            row += 1


def _json_list(path: Path) -> Iterator[Row]:
    try:
        value = json.loads(path.read_bytes().decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise DataError(path, f"not UTF-8 ({exc.reason})") from None
    except json.JSONDecodeError as exc:
        problem = f"unreadable JSON ({exc.msg} at line {exc.lineno} column {exc.colno})"
        raise DataError(path, problem) from None
    if not isinstance(value, list):
        raise DataError(path, f"expected a JSON list of objects, got {type_name(value)}")
    for row, item in enumerate(value):
        yield Row(_object(path, item, row, None), row, None)


def _csv(path: Path) -> Iterator[Row]:
    try:
        text = path.read_bytes().decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise DataError(path, f"not UTF-8 ({exc.reason})") from None
    reader = csv.DictReader(text.splitlines(keepends=True))
    if not reader.fieldnames:
        raise DataError(path, "no header line (a CSV file names its columns first)")
    line = reader.line_num + 1
    for row, record in enumerate(reader):
        if None in record:  # more cells than the header has names
            raise DataError(path, "more cells than the header has columns", row=row, line=line)
        yield Row(dict(record), row, line)
        line = reader.line_num + 1


def _object(path: Path, value: Any, row: int, line: int | None) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise DataError(path, f"expected a JSON object, got {type_name(value)}", row=row, line=line)
    return value
