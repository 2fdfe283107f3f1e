"""Per-project snapshots of what a service read, current until its next write.

Every assembly reads the same records (constraints, entities, rules, recent
episodes, the budget profile) of its project, and they change far less often
than they are read. A service keeps the result of a read as an immutable value
(a tuple of frozen records) and answers the next read from it, as long as no
write to that table of that project has happened since the read began.

The services own every write to their tables, so each write ends by calling
:meth:`Snapshots.changed` in the worker thread that committed it, after the
commit and before the caller hears of it. A read records the table's
generation before it runs and its result is kept only if the generation is
still the same afterwards: a read that overlapped a write is used once and
never served again. So the next read after a write always sees it.

One :class:`Snapshots` belongs to one database (``Database.snapshots``, made
with it), so two service objects on the same database see each other's writes.
"""

from __future__ import annotations

import asyncio
import itertools
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import TypeVar, cast

T = TypeVar("T")

# Kept reads, all tables and projects together (least recently used dropped first).
MAX_SNAPSHOTS = 256

_Table = tuple[str, str]  # (table, project id)


class _Missing:
    pass


_MISSING = _Missing()


class Snapshots:
    """Read results by (table, project, query), each tagged with the generation it was read at."""

    def __init__(self, max_entries: int = MAX_SNAPSHOTS) -> None:
        self._max = max_entries
        self._lock = threading.Lock()
        # Never forgotten (one int per table and project written), so a generation never repeats.
        self._generations: dict[_Table, int] = {}
        self._entries: OrderedDict[tuple[str, str, Hashable], tuple[int, object]] = OrderedDict()
        self._clock = itertools.count(1)

    def generation(self, table: str, project_id: str) -> int:
        with self._lock:
            return self._generations.get((table, project_id), 0)

    def current(self, table: str, project_id: str, query: Hashable) -> object:
        """The kept result of ``query``, or ``_MISSING`` if there is none or a write came since."""
        key = (table, project_id, query)
        with self._lock:
            entry = self._entries.get(key)
            if entry is None or entry[0] != self._generations.get((table, project_id), 0):
                return _MISSING
            self._entries.move_to_end(key)
            return entry[1]

    def keep(self, table: str, project_id: str, query: Hashable, generation: int, value: object) -> None:
        """Keep ``value``, read from ``generation`` on, unless a write has happened since."""
        key = (table, project_id, query)
        with self._lock:
            if generation != self._generations.get((table, project_id), 0):
                return
            self._entries[key] = (generation, value)
            self._entries.move_to_end(key)
            while len(self._entries) > self._max:
                self._entries.popitem(last=False)

    def changed(self, table: str, project_id: str) -> None:
        """A write to ``table`` of ``project_id`` has committed (or failed): forget what was read."""
        with self._lock:
            self._generations[(table, project_id)] = next(self._clock)
            for key in [k for k in self._entries if k[0] == table and k[1] == project_id]:
                del self._entries[key]

    async def read(self, table: str, project_id: str, query: Hashable, load: Callable[[], T]) -> T:
        """The kept result of ``query``, else ``load()`` in a worker thread (kept for next time).

        ``load`` must return an immutable value: every later caller gets the same object.
        Errors are not kept.
        """
        found = self.current(table, project_id, query)
        if found is not _MISSING:
            return cast(T, found)
        generation = self.generation(table, project_id)
        value = await asyncio.to_thread(load)
        self.keep(table, project_id, query, generation, value)
        return value

    def write(self, table: str, project_id: str, apply: Callable[[], T]) -> T:
        """Run ``apply`` (a write that commits) and then mark the table changed, even if it failed.

        Call it in the worker thread that writes: if the awaiting task is cancelled, the
        thread still finishes the commit, and the mark must come after it.
        """
        try:
            return apply()
        finally:
            self.changed(table, project_id)

