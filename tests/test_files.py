"""The cache helper: an entry is built once, atomically, with ordinary permissions."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from treegrpo.files import cached_dir, write_atomic


def test_built_once_atomically_with_the_permissions_of_a_new_directory(tmp_path: Path) -> None:
    calls = []

    def build(tmp: Path) -> None:
        calls.append(tmp)
        (tmp / "index.bin").write_bytes(b"x")

    entry = tmp_path / "cache" / "abc"
    assert cached_dir(entry, build, {"k": 1}) is False
    assert cached_dir(entry, build, {"k": 1}) is True
    assert len(calls) == 1 and (entry / "index.bin").read_bytes() == b"x"
    assert (entry / "meta.json").is_file() and not calls[0].exists()
    umask = os.umask(0)
    os.umask(umask)
    assert stat.S_IMODE(entry.stat().st_mode) == 0o777 & ~umask  # not mkdtemp's 0700


def test_a_failed_build_leaves_nothing(tmp_path: Path) -> None:
    def build(tmp: Path) -> None:
        (tmp / "half").write_text("…")
        raise RuntimeError("killed")

    entry = tmp_path / "abc"
    with pytest.raises(RuntimeError):
        cached_dir(entry, build, {})
    assert not entry.exists() and list(tmp_path.iterdir()) == []


def test_a_build_finished_elsewhere_first_is_kept(tmp_path: Path) -> None:
    """Two processes build the same entry: the one that finishes second keeps the first one's
    complete copy (a reader may already use its files) and raises nothing."""
    entry = tmp_path / "index" / "key"

    def build(tmp: Path) -> None:
        (tmp / "data").write_text("mine")
        entry.mkdir(parents=True)  # the other process renames its finished copy in meanwhile
        (entry / "data").write_text("theirs")
        (entry / "meta.json").write_text("{}")

    assert cached_dir(entry, build, {"k": 1}) is False
    assert (entry / "data").read_text() == "theirs"
    assert sorted(p.name for p in entry.parent.iterdir()) == ["key"]  # no temporary left


def test_two_writers_of_one_file_at_once_do_not_collide(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A second write of the same file starts while the first is between its write and its
    rename (another process, or thread): each has its own temporary, both renames succeed, and
    the file holds one writer's whole text."""
    path = tmp_path / "summary.json"
    fsync = os.fsync
    started = []

    def other_writer_meanwhile(fd: int) -> None:
        fsync(fd)
        if not started:
            started.append(True)
            write_atomic(path, "second")

    monkeypatch.setattr(os, "fsync", other_writer_meanwhile)
    write_atomic(path, "first")
    assert path.read_text() == "first" and started  # the first rename came last
    assert [p.name for p in tmp_path.iterdir()] == ["summary.json"]  # no temporary left
    umask = os.umask(0)
    os.umask(umask)
    assert stat.S_IMODE(path.stat().st_mode) == 0o666 & ~umask  # not mkstemp's 0600
