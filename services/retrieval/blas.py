"""One BLAS thread for the whole process.

On a two-core machine a second BLAS thread spin-waits for a core that the server's own threads
are using: a Universal Sentence Encoder query took 130 ms instead of 2 ms, and exact dense search
with numpy's default of a thread per core doubled the server's CPU per assembly under load
(docs/performance.md). Parallelism comes from Strata's own threads instead. The limit applies to
the BLAS libraries loaded when it is set, so it is set after numpy is imported, once.
"""

from __future__ import annotations

import threading

_lock = threading.Lock()
_limited: list[bool] = []


def one_blas_thread() -> None:
    """Limit every loaded BLAS library to one thread (once per process; later calls return)."""
    with _lock:
        if _limited:
            return
        import numpy  # noqa: F401  (loads the BLAS library numpy uses, so that the limit reaches it)
        from threadpoolctl import threadpool_limits

        threadpool_limits(limits=1, user_api="blas")
        _limited.append(True)
