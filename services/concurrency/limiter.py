"""At most N assemblies per document at once, a short bounded queue, then backpressure.

Different documents never wait on each other: each key has its own slots.
A request that would queue past the bound, or wait past the deadline, is
refused at once with ``CONTEXT_BACKPRESSURE`` and a ``retryAfterMs`` hint.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import AsyncIterator, Hashable
from contextlib import asynccontextmanager
from dataclasses import dataclass

from services.errors import Backpressure


@dataclass
class _Slots:
    semaphore: asyncio.Semaphore
    holders: int = 0  # running plus queued, counted synchronously so a burst sees itself


class KeyedLimiter:
    def __init__(self, per_key: int = 4, queue: int = 8, max_wait: float = 2.0,
                 typical_ms: float = 50.0) -> None:
        self.per_key = per_key
        self.queue = queue
        self.max_wait = max_wait
        self.typical_ms = typical_ms
        self._slots: dict[Hashable, _Slots] = {}

    def _retry_after(self, slots: _Slots) -> int:
        queued = max(slots.holders - self.per_key, 0)
        return int(math.ceil((queued + 1) / self.per_key) * self.typical_ms)

    @asynccontextmanager
    async def slot(self, key: Hashable) -> AsyncIterator[None]:
        slots = self._slots.setdefault(key, _Slots(asyncio.Semaphore(self.per_key)))
        if slots.holders >= self.per_key + self.queue:
            raise Backpressure(retryAfterMs=self._retry_after(slots), limit=self.per_key, queue=self.queue)
        slots.holders += 1
        try:
            try:
                # Not wait_for: on 3.11 it runs acquire in another task and, when cancelled just as
                # the slot is handed over, returns anyway, so a cancelled waiter would run.
                async with asyncio.timeout(self.max_wait):
                    await slots.semaphore.acquire()
            except TimeoutError:
                raise Backpressure(retryAfterMs=self._retry_after(slots), limit=self.per_key,
                                   queue=self.queue) from None
            try:
                yield
            finally:
                slots.semaphore.release()
        finally:
            slots.holders -= 1
            if slots.holders == 0:
                self._slots.pop(key, None)
