"""Cheap lexical relevance that works for Chinese and English alike."""

from __future__ import annotations

import operator
import re
from collections.abc import Callable, Sequence
from collections.abc import Set as AbstractSet

_ASCII_WORD = re.compile(r"[A-Za-z0-9]{2,}")
# Runs of word characters outside ASCII (CJK, accented letters, full-width digits); not "_".
_RUN = re.compile(r"[^\W_A-Za-z0-9]+")
_CAPITAL_SIGMA = "\u03a3"  # the one character whose lower case depends on its neighbours


def features(text: str) -> frozenset[str]:
    """Lower-cased ASCII words of two or more characters, plus the bigrams of non-ASCII runs.

    A bigram joins two characters only when they are adjacent in the text, so none
    spans punctuation, a space, an ASCII letter or digit, or an underscore.
    """
    found = set(map(str.lower, _ASCII_WORD.findall(text)))
    for run in _RUN.findall(text):
        lower = run.lower()
        if len(lower) == len(run) and _CAPITAL_SIGMA not in run:
            found.update(map(operator.add, lower[:-1], lower[1:]))
        else:
            _add_char_by_char(run, found)
    return frozenset(found)


def features_by_line(text: str, known: Callable[[str], frozenset[str]],
                     between: Callable[[tuple[str, ...]], frozenset[str]] | None = None) -> frozenset[str]:
    """``features(text)`` as the union of its lines' features, each line's from ``known`` (which
    may keep them): no feature spans a line break (a word or a run of letters stops at one), so
    the union is exact, and a text that shares most lines with the last one costs only the new ones.

    ``between`` (which may keep them) gives the union for the lines between the first and the last:
    a window is cut mid-line at both ends, which move at every keystroke, while the lines between
    come back whole, and one union of them costs less than the union of each line's features.
    """
    lines = text.split("\n")
    if between is None or len(lines) < 3:
        return union_by_line(lines, known)
    middle = between(tuple(lines[1:-1]))
    first, last = known(lines[0]), known(lines[-1])
    if first <= middle and last <= middle:
        return middle
    return middle.union(first, last)


def union_by_line(lines: Sequence[str], known: Callable[[str], frozenset[str]]) -> frozenset[str]:
    """The union of ``lines``' features, each line's from ``known``."""
    return frozenset().union(*map(known, lines))


def _add_char_by_char(run: str, found: set[str]) -> None:
    """Each character lower-cased alone; one that lower-cases to several characters
    (such as "İ") is a word of its own and joins no bigram."""
    last = ""
    for char in run:
        lower = char.lower()
        if len(lower) > 1:
            found.add(lower)
            last = ""
            continue
        if last:
            found.add(last + lower)
        last = lower


def similarity(a: AbstractSet[str], b: AbstractSet[str]) -> float:
    """Share of ``a``'s features found in ``b`` (0..1)."""
    if not a or not b:
        return 0.0
    return len(a & b) / len(a)


# The most bytes of bits Overlaps keeps (records x vocabulary / 8): past it, a large knowledge graph
# keeps its records' feature sets and intersects them, as similarity() does.
MAX_MASK_BYTES = 1 << 20


class Overlaps:
    """:func:`similarity` of many fixed feature sets to one changing set, as bit counts.

    Each fixed set (a record's features) becomes the bits of its features in one vocabulary, once;
    the changing set (the features around the cursor) is looked up in that vocabulary once per
    assembly, and each record's share is then one AND and one bit count instead of a set
    intersection. The counts are the same integers, so the shares are the same floats. Past
    :data:`MAX_MASK_BYTES` of bits the sets are kept as they are and intersected.
    """

    __slots__ = ("_index", "_masks", "_owns", "_sizes")

    def __init__(self, owns: Sequence[AbstractSet[str]]) -> None:
        index: dict[str, int] = {}
        positions = [[index.setdefault(f, len(index)) for f in own] for own in owns]
        self._sizes = [len(own) for own in owns]
        self._index = index
        dense = len(index) * len(owns) // 8 <= MAX_MASK_BYTES
        self._masks = [_mask(found, len(index)) for found in positions] if dense else []
        self._owns: list[AbstractSet[str]] = [] if dense else list(owns)

    def __len__(self) -> int:
        return len(self._sizes)

    def vocabulary(self) -> int:
        """How many distinct features the fixed sets hold."""
        return len(self._index)

    def weight(self) -> int:
        """What it holds, in 8-byte words of bits or features kept, for a cache's bound."""
        return sum(self._sizes) if self._owns else len(self._sizes) * (len(self._index) // 64 + 1)

    def shares(self, near: AbstractSet[str]) -> list[float]:
        """``similarity(own, near)`` for each fixed set ``own``, in order."""
        if not near:
            return [0.0] * len(self._sizes)
        if self._owns:
            return [similarity(own, near) for own in self._owns]
        index = self._index
        # The features near the cursor that some record holds, found by one set operation in C
        # rather than a Python loop over each feature (a window has a few thousand).
        wanted = _mask(list(map(index.__getitem__, index.keys() & near)), len(index))
        return [(mask & wanted).bit_count() / size if size else 0.0
                for mask, size in zip(self._masks, self._sizes, strict=True)]


def _mask(positions: Sequence[int], width: int) -> int:
    """The integer whose bits at ``positions`` (of ``width``) are set."""
    found = bytearray((width + 7) // 8)
    for p in positions:
        found[p >> 3] |= 1 << (p & 7)
    return int.from_bytes(found, "little")
