"""Give freed heap memory back to the operating system between training steps. On Linux, glibc's
malloc keeps what torch frees on CPU in the process heap: as tensors of many sizes come and go,
the heap fragments and resident memory grows step after step although no tensor is kept (the
embedded job: 1.5 GB after the first RL step, 3.7 GB peak over 30). ``malloc_trim(0)`` returns
the free parts in milliseconds. (Large blocks forced onto ``mmap`` with ``mallopt`` also stop the
growth but made the job twice as slow, from page faults.)
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import sys
from typing import Any


@functools.cache
def _libc() -> Any | None:
    if not sys.platform.startswith("linux"):
        return None
    name = ctypes.util.find_library("c")
    try:
        lib = ctypes.CDLL(name or "libc.so.6")
    except OSError:
        return None
    return lib if hasattr(lib, "malloc_trim") else None  # glibc only (not musl)


def release_freed_memory() -> bool:
    """Give the heap's free memory back to the OS (glibc's ``malloc_trim``); False without glibc."""
    lib = _libc()
    if lib is None:
        return False
    lib.malloc_trim(0)
    return True
