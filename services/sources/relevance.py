"""Cheap lexical relevance that works for Chinese and English alike."""

from __future__ import annotations

import functools
import re
from collections.abc import Set as AbstractSet

_WORD = re.compile(r"[A-Za-z0-9]+|[^\sA-Za-z0-9\W]", re.UNICODE)


@functools.lru_cache(maxsize=4096)
def features(text: str) -> frozenset[str]:
    """Lower-cased words plus character bigrams of CJK runs (cached: record texts repeat).

    A bigram joins two characters only when they are adjacent in the text, so none
    spans punctuation or a space, and single-letter English words make none.
    """
    words: set[str] = set()
    grams: set[str] = set()
    last, last_end = "", -1  # the previous single CJK character, and where it ended
    for match in _WORD.finditer(text):
        token = match.group().lower()
        if len(token) > 1:
            words.add(token)
        elif not token.isascii():
            if match.start() == last_end:
                grams.add(last + token)
            last, last_end = token, match.end()
    return frozenset(words | grams)


def similarity(a: AbstractSet[str], b: AbstractSet[str]) -> float:
    """Share of ``a``'s features found in ``b`` (0..1)."""
    if not a or not b:
        return 0.0
    return len(a & b) / len(a)
