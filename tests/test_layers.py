"""The package layout is the architecture (docs/design.md, "Layers"): every module under
src/treegrpo is parsed with ``ast`` and

- imports only at module level, except the optional dependencies in ``LAZY_OK`` (loaded where
  they are used, so the code that does not need them runs without them);
- imports only the packages its own package may use (``ALLOWED``): imports flow downward, so no
  two packages import each other and no package reaches above itself;
- takes part in no import cycle between modules;
- imports a module by name (``importlib.import_module``) only where ``BY_NAME`` says.

A failure names the file, the line and the import.
"""

from __future__ import annotations

import ast
from graphlib import CycleError, TopologicalSorter
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "treegrpo"

ALLOWED: dict[str, set[str]] = {
    "core": set(),  # pure: numpy and the standard library
    "files": set(),  # cache directories and atomic writes, for every layer
    "retrieval": {"core"},  # the search interface, retrievers, their server and client
    "tools": {"core", "retrieval"},  # the agent's tools: a retriever is the search tool
    "website": {"core", "retrieval", "tools"},  # the offline website the web tools browse
    "agent": {"core", "tools", "retrieval"},  # the protocol speaks the tools' tags
    "viz": set(),
    "engine.cpu": {"core"},  # the opt-in CPU speed-ups, usable by engine, train and SFT
    "engine": {"core", "engine.cpu"},
    "models": set(),
    "data": {"core", "tools", "retrieval", "website"},
    "embedded": {"core", "agent", "tools", "retrieval", "website", "data", "models"},
    "rollout": {"core", "agent", "engine", "tools", "retrieval"},
    "train": {"core", "agent", "tools", "retrieval", "engine", "engine.cpu", "models", "rollout"},
    "eval": {
        "core",
        "agent",
        "tools",
        "retrieval",
        "engine",
        "models",
        "rollout",
        "data",
        "embedded",
    },
    "warmstart": {
        "core",
        "agent",
        "tools",
        "retrieval",
        "website",
        "data",
        "models",
        "embedded",
        "train",
        "engine.cpu",
    },
    "distributed": {
        "core",
        "agent",
        "tools",
        "retrieval",
        "engine",
        "engine.cpu",
        "models",
        "rollout",
        "train",
    },
}
for _package, _uses in ALLOWED.items():
    if _package not in ("core", "viz", "files"):
        _uses.add("files")  # the one helper module every layer may use
ALLOWED["jobs"] = set(ALLOWED) | {"engine.cpu"}
ALLOWED["cli"] = set(ALLOWED)
"""Package → the packages it may import (its own modules always)."""

LAZY_OK = (
    "faiss",
    "sentence_transformers",
    "fastapi",
    "uvicorn",
    "Stemmer",
    "torch.utils.tensorboard",
    "vllm",
    "ray",
)
"""Optional dependencies that may be imported inside a function, where they are needed."""

BY_NAME: dict[str, set[str]] = {"treegrpo.cli": {"treegrpo.cli.commands"}}
"""Module → the modules it imports by name, when called: the CLI builds its parser (``--help``,
flag errors) without the command bodies, which load torch, transformers and datasets."""


def package_of(module: str) -> str:
    """``treegrpo.engine.cpu.lean`` → ``engine.cpu``; ``treegrpo.cli`` → ``cli``."""
    parts = module.split(".")[1:]
    if parts[:2] == ["engine", "cpu"]:
        return "engine.cpu"
    return parts[0] if parts else ""


def module_name(path: Path) -> str:
    rel = path.relative_to(SRC.parent).with_suffix("")
    parts = list(rel.parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported(node: ast.Import | ast.ImportFrom, module: str, is_package: bool) -> list[str]:
    """The absolute names an import statement loads (relative imports resolved)."""
    if isinstance(node, ast.Import):
        return [a.name for a in node.names]
    base = node.module or ""
    if node.level:
        here = module.split(".") if is_package else module.split(".")[:-1]
        base = ".".join(here[: len(here) - node.level + 1] + ([base] if base else []))
    # `from treegrpo.jobs import data` imports the module treegrpo.jobs.data
    return [f"{base}.{a.name}" if _is_module(f"{base}.{a.name}") else base for a in node.names]


def _is_module(name: str) -> bool:
    if not name.startswith("treegrpo."):
        return False
    path = SRC.parent.joinpath(*name.split("."))
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def modules() -> dict[str, tuple[Path, ast.Module]]:
    out = {}
    for path in sorted(SRC.rglob("*.py")):
        out[module_name(path)] = (path, ast.parse(path.read_text(encoding="utf-8"), str(path)))
    return out


def function_imports(tree: ast.Module) -> list[ast.Import | ast.ImportFrom]:
    """Import statements inside a function or a class body."""
    found = []
    for scope in ast.walk(tree):
        if isinstance(scope, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            for node in ast.walk(scope):
                if isinstance(node, ast.Import | ast.ImportFrom):
                    found.append(node)
    return list({id(n): n for n in found}.values())


def module_imports(tree: ast.Module) -> list[ast.Import | ast.ImportFrom]:
    """Import statements that run when the module loads (under ``if``/``try`` too)."""
    nested = {id(n) for n in function_imports(tree)}
    return [
        n
        for n in ast.walk(tree)
        if isinstance(n, ast.Import | ast.ImportFrom) and id(n) not in nested
    ]


def _where(path: Path, node: ast.stmt) -> str:
    return f"{path.relative_to(SRC.parents[1])}:{node.lineno}: {ast.unparse(node)}"


def test_the_table_is_a_layering() -> None:
    """The allowed dependencies form no cycle themselves, and name only real packages."""
    TopologicalSorter(ALLOWED).static_order()  # raises CycleError
    packages = {package_of(m) for m in modules() if m != "treegrpo"}
    assert packages == set(ALLOWED), packages ^ set(ALLOWED)


@pytest.mark.slow
def test_no_imports_inside_functions() -> None:
    bad = []
    for name, (path, tree) in modules().items():
        for node in function_imports(tree):
            for target in imported(node, name, path.name == "__init__.py"):
                if not target.startswith(LAZY_OK) or target.startswith("treegrpo"):
                    bad.append(_where(path, node))
    assert not bad, "imports inside functions (move them to the top):\n" + "\n".join(bad)


@pytest.mark.slow
def test_packages_import_only_downward() -> None:
    bad = []
    for name, (path, tree) in modules().items():
        if name == "treegrpo":
            continue
        own = package_of(name)
        for node in module_imports(tree) + function_imports(tree):
            for target in imported(node, name, path.name == "__init__.py"):
                if not target.startswith("treegrpo.") or target == "treegrpo":
                    continue
                other = package_of(target)
                if other != own and other not in ALLOWED[own]:
                    bad.append(f"{_where(path, node)}  ({own} may not import {other})")
    assert not bad, "imports against the layering (tests/test_layers.py ALLOWED):\n" + "\n".join(
        bad
    )


def test_no_import_cycles_between_modules() -> None:
    graph: dict[str, set[str]] = {}
    for name, (path, tree) in modules().items():
        deps = graph.setdefault(name, set())
        for node in module_imports(tree):
            for target in imported(node, name, path.name == "__init__.py"):
                if target.startswith("treegrpo.") and target != name:
                    deps.add(target)
    try:
        TopologicalSorter(graph).static_order()
    except CycleError as exc:
        raise AssertionError(f"import cycle: {' -> '.join(exc.args[1])}") from None


def by_name_imports(tree: ast.Module) -> list[tuple[ast.Call, str | None]]:
    """Calls of ``importlib.import_module`` or ``__import__`` with the module name they load: a
    string, or a module-level constant holding one (None: neither)."""
    constants = {
        t.id: node.value.value
        for node in tree.body
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant)
        for t in node.targets
        if isinstance(t, ast.Name) and isinstance(node.value.value, str)
    }
    found: list[tuple[ast.Call, str | None]] = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call) or ast.unparse(node.func) not in (
            "importlib.import_module",
            "__import__",
        ):
            continue
        arg = node.args[0] if node.args else None
        name = None
        if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
            name = arg.value
        elif isinstance(arg, ast.Name):
            name = constants.get(arg.id)
        found.append((node, name))
    return found


@pytest.mark.slow
def test_imports_by_name_are_listed() -> None:
    bad = []
    for name, (path, tree) in modules().items():
        for node, target in by_name_imports(tree):
            if target not in BY_NAME.get(name, set()):
                bad.append(f"{path.relative_to(SRC.parents[1])}:{node.lineno}: {target}")
    assert not bad, "imports by name missing from BY_NAME:\n" + "\n".join(bad)
    for name, targets in BY_NAME.items():
        for target in targets:
            assert target in modules(), target
            own, other = package_of(name), package_of(target)
            assert other == own or other in ALLOWED[own], f"{own} may not import {other}"
