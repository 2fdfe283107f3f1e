"""At most N pieces of work at once across all keys; the rest wait their turn in arrival order.

The gate also knows how long its work takes lately (a running average of the
time from getting a turn to giving it back) and so how long a request
arriving now would take to be done: its turn comes after the work waiting
ahead of it, ``width`` at a time. And it tells when it is quiet (no work
holding or waiting for a turn), and for how long, for work that may only use time nobody asked for.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

# Weight of the newest duration in the running average.
_SMOOTHING = 0.2
# Assemblies of all documents doing work at once; the rest wait their turn, in order, before any of
# their work (and any provider deadline) starts. The work is CPU-bound and mostly holds the GIL, so
# more at once only interleaves them: each takes longer and queued thread jobs pass the deadlines.
ASSEMBLY_CONCURRENCY = 4


class Gate:
    def __init__(self, width: int, typical: float = 0.05, *,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.width = width
        self.recent = typical  # seconds of work per turn, running average of turns that finished
        self._clock = clock
        self._semaphore = asyncio.Semaphore(width)
        self.waiting = 0
        self.working = 0
        self._quiet = asyncio.Event()
        self._quiet.set()
        self._busy_at = -math.inf  # when work last held or waited for a turn (clock time)

    def expected(self) -> float:
        """Seconds until a request arriving now would be done: the turns waiting ahead of it,
        ``width`` at a time, then its own."""
        return (self.waiting / self.width + 1) * self.recent

    def idle(self) -> bool:
        """Whether no work holds a turn or waits for one now. Safe to ask from any thread: it reads
        what the event loop sets, and an answer a moment old costs a little speed, never a result."""
        return not (self.working or self.waiting)

    def rested(self, seconds: float) -> bool:
        """Whether no work has held or waited for a turn for ``seconds`` (none does now). Safe to ask
        from any thread, as :meth:`idle`."""
        return self.idle() and self._clock() - self._busy_at >= seconds

    async def quiet(self) -> None:
        """Return once no work holds a turn or waits for one (at once if none does)."""
        while self.working or self.waiting:
            await self._quiet.wait()

    def _settle(self) -> None:
        # Set exactly when quiet.
        self._busy_at = self._clock()
        if self.working or self.waiting:
            self._quiet.clear()
        else:
            self._quiet.set()

    @asynccontextmanager
    async def turn(self) -> AsyncIterator[None]:
        """Wait for a turn (in arrival order), hold it for the body, then pass it on.

        A body that raises or is cancelled gives the turn back but does not count in the
        average: a request refused in a millisecond says nothing about how long work takes.
        """
        self.waiting += 1
        self._settle()
        try:
            await self._semaphore.acquire()
        except BaseException:  # cancelled while waiting: it may have been the last
            self.waiting -= 1
            self._settle()
            raise
        self.waiting -= 1
        self.working += 1
        started = self._clock()
        finished = False
        try:
            yield
            finished = True
        finally:
            self.working -= 1
            self._semaphore.release()
            self._settle()
            if finished:
                self.recent += _SMOOTHING * (self._clock() - started - self.recent)
