"""Token counts with a bounded cache keyed by content, safe across threads."""

from __future__ import annotations

import threading
from collections import OrderedDict

from services.tokenizer import Tokenizer, TokenizerInfo


class CountCache:
    """Counts text with ``tokenizer``, remembering recent answers by content.

    Assemblies of the same document at different cursors share most of their
    text (rules, settings, retrieved chunks), so most counts are cache hits.
    """

    def __init__(self, tokenizer: Tokenizer, max_entries: int = 8192) -> None:
        self.tokenizer = tokenizer
        self._max = max_entries
        self._cache: OrderedDict[str, int] = OrderedDict()
        self._lock = threading.Lock()

    @property
    def info(self) -> TokenizerInfo:
        return self.tokenizer.info

    def count(self, text: str) -> int:
        if not text:
            return 0
        with self._lock:
            hit = self._cache.get(text)
            if hit is not None:
                self._cache.move_to_end(text)
                return hit
        value = self.tokenizer.count(text)
        with self._lock:
            self._cache[text] = value
            if len(self._cache) > self._max:
                self._cache.popitem(last=False)
        return value
