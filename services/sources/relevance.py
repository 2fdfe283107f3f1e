"""Cheap lexical relevance that works for Chinese and English alike."""

from __future__ import annotations

import itertools
import re

_WORD = re.compile(r"[A-Za-z0-9]+|[^\sA-Za-z0-9\W]", re.UNICODE)


def features(text: str) -> set[str]:
    """Lower-cased words plus character bigrams of CJK runs."""
    tokens = [t.lower() for t in _WORD.findall(text)]
    grams = {a + b for a, b in itertools.pairwise(tokens) if len(a) == 1 and len(b) == 1}
    return {t for t in tokens if len(t) > 1} | grams


def similarity(a: set[str], b: set[str]) -> float:
    """Share of ``a``'s features found in ``b`` (0..1)."""
    if not a or not b:
        return 0.0
    return len(a & b) / len(a)
