"""Sizes a reader can hold in view (docs/design.md, "House style"): no module in src/ over 550
lines; no function over 80 lines or 8 parameters unless its docstring says why, in a sentence
that starts "Long:" or "Many arguments:" (for a constructor, in its class's docstring)."""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).parents[1] / "src" / "treegrpo"
MAX_MODULE_LINES = 550
MAX_FUNCTION_LINES = 80
MAX_PARAMETERS = 8


def _parameters(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    a = fn.args
    names = [*a.posonlyargs, *a.args, *a.kwonlyargs]
    count = len(names) + (a.vararg is not None) + (a.kwarg is not None)
    return count - (bool(names) and names[0].arg in ("self", "cls"))


def _functions(tree: ast.Module) -> list[tuple[ast.FunctionDef | ast.AsyncFunctionDef, str]]:
    """Every function with the docstring that may say why it is large: its own, or for
    ``__init__`` its class's as well."""
    found = []
    for node in ast.walk(tree):
        body = node.body if isinstance(node, ast.ClassDef) else []
        for child in body:
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                why = (ast.get_docstring(child) or "") + (ast.get_docstring(node) or "")
                found.append((child, why))
    methods = {id(fn) for fn, _ in found}
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and id(node) not in methods:
            found.append((node, ast.get_docstring(node) or ""))
    return found


def test_modules_and_functions_stay_small_or_say_why() -> None:
    problems = []
    for path in sorted(SRC.rglob("*.py")):
        name = path.relative_to(SRC.parent)
        lines = path.read_text().count("\n")
        if lines > MAX_MODULE_LINES:
            problems.append(f"{name}: {lines} lines (at most {MAX_MODULE_LINES})")
        for fn, why in _functions(ast.parse(path.read_text())):
            length = (fn.end_lineno or fn.lineno) - fn.lineno + 1
            if length > MAX_FUNCTION_LINES and "Long:" not in why:
                problems.append(f"{name}:{fn.lineno} {fn.name}: {length} lines, no 'Long:'")
            n = _parameters(fn)
            if n > MAX_PARAMETERS and "Many arguments:" not in why:
                problems.append(
                    f"{name}:{fn.lineno} {fn.name}: {n} parameters, no 'Many arguments:'"
                )
    assert not problems, "\n".join(problems)


def test_the_check_sees_a_long_function_and_many_parameters() -> None:
    """The rule itself: a 9-parameter function and an 81-line one are found, and the same
    with the sentence that says why are not."""
    params = ", ".join(f"a{i}" for i in range(9))
    body = "\n".join("    x = 1" for _ in range(80))
    plain = ast.parse(f"def f({params}):\n    pass\n\ndef g():\n{body}\n")
    said = ast.parse(
        f'def f({params}):\n    """Many arguments: a reason."""\n\n'
        f'def g():\n    """Long: a reason."""\n{body}\n'
    )
    got = {fn.name: (_parameters(fn), fn.end_lineno - fn.lineno + 1, why)  # type: ignore[operator]
           for fn, why in _functions(plain)}  # fmt: skip
    assert got["f"][0] == 9 and got["g"][1] == 81 and not got["f"][2] and not got["g"][2]
    whys = {fn.name: why for fn, why in _functions(said)}
    assert "Many arguments:" in whys["f"] and "Long:" in whys["g"]
