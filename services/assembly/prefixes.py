"""The previous stable prefix per (project, document, skill), to report cache reuse."""

from __future__ import annotations

import threading
from collections import OrderedDict

Key = tuple[str, str, str]


class PrefixMemory:
    """Bounded LRU of the last stable prefix text seen for each key."""

    def __init__(self, max_entries: int = 1024) -> None:
        self._max = max_entries
        self._entries: OrderedDict[Key, tuple[str, str]] = OrderedDict()
        self._lock = threading.Lock()

    def previous(self, key: Key) -> tuple[str, str] | None:
        """(hash, prefix text) of the last assembly for ``key``, if any."""
        with self._lock:
            return self._entries.get(key)

    def remember(self, key: Key, prefix_hash: str, prefix: str) -> None:
        with self._lock:
            self._entries[key] = (prefix_hash, prefix)
            self._entries.move_to_end(key)
            if len(self._entries) > self._max:
                self._entries.popitem(last=False)
