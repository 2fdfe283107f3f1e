"""The previous stable prefix per (project, document, skill, profile), to report cache reuse."""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass

Key = tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Prefix:
    hash: str
    text: str
    ends: tuple[tuple[str, int], ...]  # each stable section's end, in UTF-8 bytes


class PrefixMemory:
    """Bounded LRU of the last stable prefix seen for each key."""

    def __init__(self, max_entries: int = 1024) -> None:
        self._max = max_entries
        self._entries: OrderedDict[Key, Prefix] = OrderedDict()
        self._lock = threading.Lock()

    def previous(self, key: Key) -> Prefix | None:
        with self._lock:
            return self._entries.get(key)

    def remember(self, key: Key, prefix: Prefix) -> None:
        with self._lock:
            self._entries[key] = prefix
            self._entries.move_to_end(key)
            if len(self._entries) > self._max:
                self._entries.popitem(last=False)
