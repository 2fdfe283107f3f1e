"""Memos of the engine's pure per-text work, owned by whoever owns the engine's caches.

The same records come back at every assembly of a project, so their
whitespace-free texts (for duplicate screening) and their ids' natural order
are worth keeping, and so are what neighbouring assemblies make of the very
same items (their screening and order, their sections' counts); the
composition root keeps one bounded memo per project, so nothing outlives a
project or grows without bound.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Any, Protocol, TypeVar, cast

NaturalId = tuple[str, int, str]
T = TypeVar("T")


class Memo(Protocol):
    def norm(self, text: str) -> str:
        """``text`` without whitespace."""
        ...

    def natural_id(self, item_id: str) -> NaturalId:
        """Ids in creation order: ``constraint:9`` before ``constraint:10``."""
        ...

    def recall(self, key: Hashable, make: Callable[[], T]) -> T:
        """``make()``'s value, kept under ``key`` for the next assembly that asks the same."""
        ...

    def count_of(self, key: Hashable, held: object, count: Callable[[], int]) -> int:
        """``count()``, a rendered section's, kept under ``key`` (which names ``held``'s objects by
        identity: the entry holds them, so their ids stay theirs)."""
        ...


# Screenings and orderings kept per project (services/context/shared.py): each holds its items (a
# few hundred references) and what was made of them, a burst's worth of neighbouring requests.
RECALLED = 64
# Counts of rendered sections kept per project (services/context/reduce.py State.counted): each holds
# the references to its items (a few hundred), and a request's reduction asks for a dozen or so.
SECTION_COUNTS = 1024
_MISSING = object()


def norm(text: str) -> str:
    return "".join(text.split())


def natural_id(item_id: str) -> NaturalId:
    prefix, _, suffix = item_id.rpartition(":")
    return (prefix, int(suffix), "") if suffix.isdigit() else (prefix, -1, suffix)


class NoMemo:
    """Computes every time (tests, one-off assemblies)."""

    def norm(self, text: str) -> str:
        return norm(text)

    def natural_id(self, item_id: str) -> NaturalId:
        return natural_id(item_id)

    def recall(self, key: Hashable, make: Callable[[], T]) -> T:
        return make()

    def count_of(self, key: Hashable, held: object, count: Callable[[], int]) -> int:
        return count()


class BoundedMemo:
    """Keeps answers, at most ``max_entries`` of each kind and ``max_chars`` characters of
    normalized text, the oldest going first, safe across the worker threads assemblies run in.

    A hit reads without the lock (one dict lookup, atomic in CPython): the same few hundred
    records are looked up at every assembly, so the hit path is the one to keep short. Kept
    screenings (at most ``max_recalled``) and section counts (``max_counts``) go least recently
    used first, and take the lock (one lookup per assembly or per count).
    """

    def __init__(self, max_entries: int = 8192, max_chars: int = 2_000_000,
                 max_recalled: int = RECALLED, max_counts: int = SECTION_COUNTS) -> None:
        self._max = max_entries
        self._max_chars = max_chars
        self._chars = 0
        self._norms: dict[str, str] = {}
        self._ids: dict[str, NaturalId] = {}
        self._max_recalled = max_recalled
        self._recalled: OrderedDict[Hashable, Any] = OrderedDict()
        self._max_counts = max_counts
        self._counts: OrderedDict[Hashable, tuple[object, int]] = OrderedDict()
        self._lock = threading.Lock()

    def norm(self, text: str) -> str:
        hit = self._norms.get(text)
        if hit is not None:
            return hit
        value = norm(text)
        if len(text) + len(value) > self._max_chars // 4:
            return value  # one huge text would evict everything else
        with self._lock:
            if text not in self._norms:
                self._chars += len(text) + len(value)
            self._norms[text] = value
            while len(self._norms) > self._max or self._chars > self._max_chars:
                old = next(iter(self._norms))
                self._chars -= len(old) + len(self._norms.pop(old))
        return value

    def natural_id(self, item_id: str) -> NaturalId:
        hit = self._ids.get(item_id)
        if hit is None:
            hit = natural_id(item_id)
            with self._lock:
                if len(self._ids) >= self._max:
                    self._ids.clear()
                self._ids[item_id] = hit
        return hit

    def count_of(self, key: Hashable, held: object, count: Callable[[], int]) -> int:
        with self._lock:
            found = self._counts.get(key)
            if found is not None:
                self._counts.move_to_end(key)
                return found[1]
        value = count()
        with self._lock:
            self._counts[key] = (held, value)
            while len(self._counts) > self._max_counts:
                self._counts.popitem(last=False)
        return value

    def counts(self) -> int:
        """How many section counts :meth:`count_of` keeps now."""
        with self._lock:
            return len(self._counts)

    def recalled(self) -> int:
        """How many values :meth:`recall` keeps now."""
        with self._lock:
            return len(self._recalled)

    def recall(self, key: Hashable, make: Callable[[], T]) -> T:
        with self._lock:
            found = self._recalled.get(key, _MISSING)
            if found is not _MISSING:
                self._recalled.move_to_end(key)
                return cast(T, found)
        value = make()
        with self._lock:
            self._recalled[key] = value
            while len(self._recalled) > self._max_recalled:
                self._recalled.popitem(last=False)
        return value


class ProjectMemos:
    """One :class:`BoundedMemo` per project, for the ``max_projects`` most recently used."""

    def __init__(self, max_projects: int = 8) -> None:
        self._max = max_projects
        self._memos: OrderedDict[str, BoundedMemo] = OrderedDict()
        self._lock = threading.Lock()

    def for_project(self, project_id: str) -> BoundedMemo:
        with self._lock:
            memo = self._memos.get(project_id)
            if memo is None:
                memo = self._memos[project_id] = BoundedMemo()
                while len(self._memos) > self._max:
                    self._memos.popitem(last=False)
            else:
                self._memos.move_to_end(project_id)
            return memo

    def drop(self, project_id: str) -> None:
        with self._lock:
            self._memos.pop(project_id, None)
