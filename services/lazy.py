"""Heavy parts (the vector store, the encoder) loaded once, on first need, on a thread of their own.

The server announces itself without them: a :class:`Lazy` starts loading when
something first asks for it, and whoever needs it waits for that load only.
Code on the event loop awaits :meth:`Lazy.wait` (no worker thread is held
while it waits); code already on a worker thread calls :meth:`Lazy.get`.
A load that fails is tried again by the next caller that needs it.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any, Generic, TypeVar

import structlog

_log = structlog.get_logger("lazy")

T = TypeVar("T")


class Lazy(Generic[T]):
    """A value made by ``load`` (blocking), made once, when first asked for."""

    def __init__(self, name: str, load: Callable[[], T]) -> None:
        self.name = name
        self._load = load
        self._lock = threading.Lock()
        self._future: Future[T] | None = None

    def start(self) -> Future[T]:
        """Start loading if nothing loads or has loaded (a failed load starts again); its future."""
        with self._lock:
            future = self._future
            if future is None or (future.done() and future.exception() is not None):
                future = self._future = Future()
                future.set_running_or_notify_cancel()  # running: a waiter that gives up cancels nothing
                threading.Thread(target=self._run, args=(future,), name=f"strata-load-{self.name}",
                                 daemon=True).start()
            return future

    def _run(self, future: Future[T]) -> None:
        started = time.perf_counter()
        try:
            value = self._load()
        except BaseException as exc:  # kept for every waiter; the next start() tries again
            _log.warning("lazy.load_failed", part=self.name, exc_type=type(exc).__name__)
            future.set_exception(exc)
        else:
            _log.info("lazy.loaded", part=self.name, ms=round(1000 * (time.perf_counter() - started)))
            future.set_result(value)

    def get(self) -> T:
        """The value, loading it first if need be (blocks: for worker threads)."""
        return self.start().result()

    async def wait(self) -> T:
        """The value, loading it first if need be, without holding a thread while it loads."""
        return await asyncio.wrap_future(self.start())

    @property
    def loaded(self) -> bool:
        future = self._future
        return future is not None and future.done() and future.exception() is None

    def value(self) -> T | None:
        """The value if it has loaded, else None (never starts a load)."""
        future = self._future
        return future.result() if future is not None and future.done() and future.exception() is None \
            else None

    async def settled(self) -> T | None:
        """The value once a load in progress ends; None if nothing loads or the load failed (never
        starts one)."""
        future = self._future
        if future is None:
            return None
        try:
            return await asyncio.wrap_future(future)
        except Exception:
            return None

    def close(self, closer: Callable[[T], None], timeout: float = 30.0) -> None:
        """Wait for a load in progress (at most ``timeout`` s), then ``closer(value)`` if it loaded."""
        future = self._future
        if future is None:
            return
        try:
            value = future.result(timeout=timeout)
        except Exception:  # never loaded (failed, or still loading after the timeout): nothing to close
            return
        closer(value)


class Deferred:
    """Stands for a :class:`Lazy`'s value in code that runs on worker threads (a Chroma client, an
    embedding function): each attribute and call waits for the value, then passes through."""

    def __init__(self, lazy: Lazy[Any]) -> None:
        self._lazy = lazy

    def __getattr__(self, name: str) -> Any:
        return getattr(self._lazy.get(), name)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._lazy.get()(*args, **kwargs)
