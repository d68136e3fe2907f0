"""Keep the server's resident memory flat across re-indexes (glibc only; a no-op elsewhere).

Every re-index allocates the next generation's chunk lists and BM25 matrices on a worker
thread and frees the previous ones. glibc gives each thread its own malloc arena and keeps
freed pages, so with the SDK's many worker threads RSS climbed by ~500 MB during a one-minute
load test (bench/load_bench.py) before levelling off. Two arenas, and handing free pages back
after each re-index, keep it within a few per cent of the loaded size.
"""

from __future__ import annotations

import ctypes
import ctypes.util
from functools import lru_cache

__all__ = ["limit_arenas", "trim"]

_M_ARENA_MAX = -8  # from glibc's malloc.h


@lru_cache(maxsize=1)
def _libc() -> ctypes.CDLL | None:
    name = ctypes.util.find_library("c")
    if name is None:
        return None
    try:
        libc = ctypes.CDLL(name)
        libc.mallopt  # noqa: B018 - only glibc has both
        libc.malloc_trim  # noqa: B018
    except (OSError, AttributeError):
        return None
    return libc


def limit_arenas(arenas: int = 2) -> None:
    """Cap malloc arenas for threads created from now on (call before starting worker threads)."""
    libc = _libc()
    if libc is not None:
        libc.mallopt(_M_ARENA_MAX, arenas)


def trim() -> None:
    """Return freed heap pages to the operating system."""
    libc = _libc()
    if libc is not None:
        libc.malloc_trim(0)
