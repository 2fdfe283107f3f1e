"""The process's heap: few allocator arenas, and freed memory given back to the system.

glibc gives each thread that allocates its own arena (up to eight per core), and memory freed in
one arena cannot serve another; the server's worker threads left about 8 MiB of RSS in arenas of
their own (docs/performance.md, "Start and footprint"). Two arenas serve two cores' worth of
threads that mostly wait for the GIL anyway. Elsewhere (not glibc) both calls do nothing.
"""

from __future__ import annotations

import contextlib
import ctypes
import gc
import threading

_M_ARENA_MAX = -8  # glibc's mallopt parameter number
MAX_ARENAS = 2


def _glibc() -> ctypes.CDLL | None:
    try:
        libc = ctypes.CDLL("libc.so.6")
    except OSError:
        return None
    return libc if hasattr(libc, "mallopt") and hasattr(libc, "malloc_trim") else None


def limit_arenas(arenas: int = MAX_ARENAS) -> bool:
    """Cap the allocator's arenas (call before threads start allocating); True when it took."""
    libc = _glibc()
    return libc is not None and libc.mallopt(_M_ARENA_MAX, arenas) == 1


def return_freed_memory() -> None:
    """Collect garbage and give the freed heap back to the system, on a thread of its own (after
    projects' indexes left memory: glibc keeps it otherwise)."""
    threading.Thread(target=collect_and_trim, name="strata-trim", daemon=True).start()


def collect_and_trim() -> None:
    gc.collect()
    libc = _glibc()
    if libc is not None:
        with contextlib.suppress(OSError):
            libc.malloc_trim(0)
