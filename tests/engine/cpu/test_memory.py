"""Freed heap memory goes back to the OS (glibc's malloc_trim)."""

from __future__ import annotations

import sys

import pytest

from treegrpo.engine.cpu.memory import _libc, release_freed_memory


def _rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096


@pytest.mark.skipif(
    not sys.platform.startswith("linux") or _libc() is None, reason="needs glibc's malloc_trim"
)
def test_freed_heap_blocks_are_returned() -> None:
    # 64 KiB blocks live in the heap (under glibc's mmap threshold); the small objects allocated
    # between them stay alive, so the heap cannot simply shrink from the top when the blocks go
    big, small = [], []
    for _ in range(2000):
        big.append(bytearray(64 * 1024))
        small.append(bytearray(600))
    for b in big:
        b[::4096] = b"x" * len(b[::4096])  # touch every page
    del big
    before = _rss_bytes()
    assert release_freed_memory()
    after = _rss_bytes()
    assert before - after > 64 * 1024 * 1024  # most of the 125 MiB came back
    assert len(small) == 2000


def test_without_glibc_it_is_a_no_op(monkeypatch: pytest.MonkeyPatch) -> None:
    from treegrpo.engine.cpu import memory

    monkeypatch.setattr(memory, "_libc", lambda: None)
    assert memory.release_freed_memory() is False
