"""At most N assemblies per document at once, a short bounded queue, then backpressure.

Different documents never wait on each other: each key has its own slots.
A request that finds its key's slots taken may queue, but only if the queue
has room and its wait is expected to end within the deadline; otherwise it is
refused at once with ``CONTEXT_BACKPRESSURE`` and a ``retryAfterMs`` hint, the
time its wait was expected to take. A queued request whose wait runs past the
deadline all the same is refused then.

The expected wait comes from the slots' holders: each holder, when it got its
slot, was expected to hold it for ``pace()`` seconds (by default the recent
average hold; the assembly service passes how long the work already waiting
for the global gate will take). A request with ``p`` requests queued ahead of
it waits for the ``p % per_key``-th earliest expected end among the holders,
plus ``p // per_key`` more holds.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import AsyncIterator, Callable, Hashable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

from services.errors import Backpressure

# Weight of the newest hold in the running average of hold times.
_SMOOTHING = 0.2
# A holder past its expected end is taken to need this share of a typical hold more.
_OVERDUE_SHARE = 0.5


@dataclass
class _Slots:
    semaphore: asyncio.Semaphore
    holders: int = 0  # running plus queued, counted synchronously so a burst sees itself
    ends: list[float] = field(default_factory=list)  # expected end of each running holder

    @property
    def queued(self) -> int:
        return self.holders - len(self.ends)


class KeyedLimiter:
    def __init__(self, per_key: int = 4, queue: int = 8, max_wait: float = 2.0,
                 typical_ms: float = 50.0, *, pace: Callable[[], float] | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.per_key = per_key
        self.queue = queue
        self.max_wait = max_wait
        self.typical_ms = typical_ms
        self.recent_hold = typical_ms / 1000  # seconds, running average of finished holds
        self._pace = pace or (lambda: self.recent_hold)
        self._clock = clock
        self._slots: dict[Hashable, _Slots] = {}

    def _wait(self, slots: _Slots, ahead: int) -> float:
        """Seconds until a slot would be free for a request with ``ahead`` queued before it."""
        now = self._clock()
        hold = max(self._pace(), 0.0)
        remaining = [end - now if end > now else _OVERDUE_SHARE * hold for end in slots.ends]
        # A slot released to a queued request that has not resumed yet is a hold starting now,
        # and that request is no longer ahead in the queue.
        handed = max(min(self.per_key - len(remaining), slots.queued), 0)
        remaining += [hold] * handed
        remaining.sort()
        remaining[:0] = [0.0] * (self.per_key - len(remaining))  # slots free now
        rounds, rank = divmod(max(ahead - handed, 0), self.per_key)
        return remaining[rank] + rounds * hold

    def _refuse(self, slots: _Slots, position: int) -> Backpressure:
        hint = max(math.ceil(round(self._wait(slots, position) * 1000, 3)), 1)
        return Backpressure(retryAfterMs=hint, limit=self.per_key, queue=self.queue)

    @asynccontextmanager
    async def slot(self, key: Hashable) -> AsyncIterator[None]:
        slots = self._slots.setdefault(key, _Slots(asyncio.Semaphore(self.per_key)))
        ahead = slots.queued
        if slots.holders >= self.per_key + self.queue:
            raise self._refuse(slots, ahead)
        if slots.holders >= self.per_key and self._wait(slots, ahead) > self.max_wait:
            raise self._refuse(slots, ahead)
        slots.holders += 1
        try:
            try:
                # Not wait_for: on 3.11 it runs acquire in another task and, when cancelled just as
                # the slot is handed over, returns anyway, so a cancelled waiter would run.
                async with asyncio.timeout(self.max_wait):
                    await slots.semaphore.acquire()
            except TimeoutError:
                raise self._refuse(slots, max(slots.queued - 1, 0)) from None
            started = self._clock()
            end = started + max(self._pace(), 0.0)
            slots.ends.append(end)
            finished = False
            try:
                yield
                finished = True
            finally:
                slots.ends.remove(end)
                slots.semaphore.release()
                if finished:
                    held = self._clock() - started
                    self.recent_hold += _SMOOTHING * (held - self.recent_hold)
        finally:
            slots.holders -= 1
            if slots.holders == 0:
                self._slots.pop(key, None)
