"""The process's heap: few allocator arenas, large blocks mapped apart, freed memory given back, and
the collector's full passes spaced out.

glibc gives each thread that allocates its own arena (up to eight per core), and memory freed in
one arena cannot serve another; the server's worker threads left about 8 MiB of RSS in arenas of
their own (docs/performance.md, "Start and footprint"). Two arenas serve two cores' worth of
threads that mostly wait for the GIL anyway.

glibc also raises its mmap threshold each time a mapped block is freed (up to 32 MiB), so after
the encoder's first batch its working arrays come from the heap, and whether they can be given
back depends on what was allocated around them (runs of the same footprint benchmark differed by
10 MiB). A fixed threshold keeps blocks of MMAP_THRESHOLD and more mapped on their own, returned
whole when freed. Elsewhere (not glibc) these calls do nothing.
"""

from __future__ import annotations

import contextlib
import ctypes
import gc

# The collector's thresholds: CPython's for the young generations, and a full pass only after a
# hundred collections of the middle one (CPython: ten, once a quarter more objects have survived
# into the oldest since the last full pass). The server's caches hold a few hundred thousand objects
# there (search results, items, the engine's memo): a full pass over them stalls the request that
# triggers it for 100 to 300 ms, about once per burst of 500 or every few hundred keystrokes. The
# server's objects are rarely cyclic (refcounting frees them), so cycles that live long enough to
# reach the oldest generation wait longer, and nothing else does.
COLLECTOR_THRESHOLDS = (700, 10, 100)

_M_ARENA_MAX = -8  # glibc's mallopt parameter numbers
_M_MMAP_THRESHOLD = -3
MAX_ARENAS = 2
MMAP_THRESHOLD = 4 * 1024 * 1024


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


def fix_mmap_threshold(size: int = MMAP_THRESHOLD) -> bool:
    """Map blocks of ``size`` bytes and more apart, at a threshold that no longer moves; True when
    it took."""
    libc = _glibc()
    return libc is not None and libc.mallopt(_M_MMAP_THRESHOLD, size) == 1


def space_full_collections(thresholds: tuple[int, int, int] = COLLECTOR_THRESHOLDS) -> None:
    """Set the collector's thresholds (:data:`COLLECTOR_THRESHOLDS`)."""
    gc.set_threshold(*thresholds)


def collect_and_trim() -> None:
    """Collect garbage and give the freed heap back to the system (blocking: call it off the event
    loop). glibc keeps freed memory otherwise: projects' indexes that left, an encoder's arrays."""
    gc.collect()
    libc = _glibc()
    if libc is not None:
        with contextlib.suppress(OSError):
            libc.malloc_trim(0)
