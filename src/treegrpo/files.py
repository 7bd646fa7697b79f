"""Files on disk for every layer: cache directories (``default_cache_root``, ``cache_key``,
``cache_entry``, ``cached_dir``: indexes, warm starts, converted models) and atomic writes
(``atomic_path``, ``write_atomic``: run files, evaluations, checkpoints' JSON, question files).

A cached build is a pure function of its inputs and settings, so its directory is named by a hash
of both: a changed corpus or setting misses and rebuilds, nothing is ever invalidated by hand.
Builds write into a temporary sibling renamed into place, so a crash or two processes building at
once never leave a half-written build behind.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import secrets
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

CACHE_ENV = "TREEGRPO_CACHE_DIR"


def default_cache_root() -> Path:
    """``$TREEGRPO_CACHE_DIR`` if set, else ``$XDG_CACHE_HOME/treegrpo`` (``~/.cache/treegrpo``)."""
    if env := os.environ.get(CACHE_ENV):
        return Path(env)
    xdg = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(xdg) / "treegrpo"


def cache_key(**parts: Any) -> str:
    """A short stable hash of JSON-serializable parts (corpus digest, model, settings)."""
    blob = json.dumps(parts, sort_keys=True, ensure_ascii=True, default=str)
    return hashlib.sha256(blob.encode("ascii")).hexdigest()[:24]


def cache_entry(cache_dir: str | Path | None, kind: str, /, **parts: Any) -> Path:
    """``<root>/<kind>/<cache_key(**parts)>``, root ``cache_dir`` or ``default_cache_root()``:
    where the build of ``kind`` ("bm25", "warmstart", …) from ``parts`` lives, built or not."""
    root = Path(cache_dir) if cache_dir is not None else default_cache_root()
    return root / kind / cache_key(**parts)


def cached_dir(entry: Path, build: Callable[[Path], object], meta: dict[str, Any]) -> bool:
    """Make sure ``entry`` holds a complete index; True when it was already there. ``build(tmp)``
    writes into an empty temporary directory, renamed to ``entry`` with ``meta.json`` (the key's
    parts) on success; a directory without ``meta.json`` was interrupted and is rebuilt."""
    if (entry / "meta.json").is_file():
        return True
    entry.parent.mkdir(parents=True, exist_ok=True)
    # a random name keeps concurrent builds apart; mkdir (not mkdtemp, which makes it 0700) gives
    # the cache entry the permissions of any new directory
    tmp = entry.parent / f".{entry.name}.{secrets.token_hex(6)}"
    tmp.mkdir()
    try:
        build(tmp)
        (tmp / "meta.json").write_text(json.dumps(meta, indent=2, default=str) + "\n")
        if entry.exists() and not (entry / "meta.json").is_file():  # an interrupted build's
            shutil.rmtree(entry, ignore_errors=True)  # (a finished one stays: readers use it)
        try:
            tmp.rename(entry)
        except OSError:
            # Another process finished the same build first; its copy is just as good.
            if not (entry / "meta.json").is_file():
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return False


@contextlib.contextmanager
def atomic_path(path: str | Path) -> Iterator[Path]:
    """A temporary sibling of ``path`` to write, renamed to ``path`` when the block ends, removed if
    it fails: readers see the old file or the new; concurrent writers never collide (last wins)."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(6)}.tmp")
    try:
        yield tmp
        os.replace(tmp, path)
    finally:
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)


def write_atomic(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` through ``atomic_path``, flushed to disk before the rename (a
    run resumed after a kill finds the old file or the new one)."""
    with atomic_path(path) as tmp, open(tmp, "x", encoding="utf-8") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
