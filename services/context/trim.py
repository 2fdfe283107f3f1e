"""Cut text to a token budget, keeping what is nearest the cursor.

Cuts land on a sentence boundary (。！？.!? and line ends, with any closing
quotes) when one is near, so the model never sees half a sentence at the far
edge of the window; :func:`keep_sentences` only ever cuts on one.
"""

from __future__ import annotations

from collections.abc import Callable

Count = Callable[[str], int]
# Where a cut of ``text`` to ``max_tokens`` probably falls (a start for a tail, an end for a
# head), from the text's own tokens; None when the whole text fits. Only a starting point: the
# cut is still found and checked with exact counts.
Locate = Callable[[str, int, bool], int | None]

_ENDS = frozenset("。！？!?.…\n")
_CLOSERS = frozenset("\"'”’」』）)】 \t")
# Look for a boundary only this far into the kept text, as a share of it.
_SNAP_SHARE = 0.35


def first_true(ok: Callable[[int], bool], lo: int, hi: int, guess: int | None) -> int:
    """The smallest ``k`` in ``lo + 1 .. hi`` with ``ok(k)``, where ``ok(lo)`` is false and
    ``ok(hi)`` true and ``ok`` is taken to be monotone (shared by trimming and budget fitting).

    Without a guess this bisects; with one it gallops out from it first, so a guess that
    is right or one off costs two calls instead of one per halving.
    """
    if guess is not None and lo < guess <= hi:
        step = 1
        if ok(guess):
            hi = guess
            while hi - step > lo:
                if not ok(hi - step):
                    lo = hi - step
                    break
                hi -= step
                step *= 2
        else:
            lo = guess
            while lo + step < hi:
                if ok(lo + step):
                    hi = lo + step
                    break
                lo += step
                step *= 2
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if ok(mid):
            hi = mid
        else:
            lo = mid
    return hi


def _first_start(text: str, max_tokens: int, count: Count, guess: int | None = None) -> int:
    """Smallest start index whose suffix fits ``max_tokens``, given that the whole text does not."""
    if guess is not None:
        # The suffix from len(text) (empty) always fits; the one from 0 (all of it) does not.
        return first_true(lambda start: count(text[start:]) <= max_tokens, 0, len(text), guess)
    lo, hi = 0, len(text)  # binary search; the suffix from hi (empty) always fits
    while lo < hi:
        mid = (lo + hi) // 2
        if count(text[mid:]) <= max_tokens:
            hi = mid
        else:
            lo = mid + 1
    return lo


def _snap_forward(text: str, start: int) -> int:
    """Move ``start`` just past the next sentence end, if one is near.

    A cut that already follows a sentence end (and its closers) stays where it is.
    """
    back = start
    while back > 0 and text[back - 1] in _CLOSERS:
        back -= 1
    if back > 0 and text[back - 1] in _ENDS:
        end: int | None = back - 1
    else:
        limit = start + int((len(text) - start) * _SNAP_SHARE)
        end = next((i for i in range(start, min(limit, len(text))) if text[i] in _ENDS), None)
    if end is None:
        return start
    j = end + 1
    while j < len(text) and text[j] in _CLOSERS:
        j += 1
    return j


def keep_tail(text: str, max_tokens: int, count: Count, locate: Locate | None = None) -> str:
    """The longest suffix of ``text`` within ``max_tokens``, starting a sentence if possible.

    ``locate`` (optional) guesses where the cut falls, which saves most of the counting.
    """
    if max_tokens <= 0 or not text:
        return ""
    if count(text) <= max_tokens:
        return text
    start = _first_start(text, max_tokens, count, None if locate is None else locate(text, max_tokens, True))
    snapped = text[_snap_forward(text, start):]
    # Token counts are not monotonic in length: a shorter suffix can cost more.
    return snapped if count(snapped) <= max_tokens else text[start:]


def keep_head(text: str, max_tokens: int, count: Count, locate: Locate | None = None) -> str:
    """The longest prefix of ``text`` within ``max_tokens``, ending a sentence if possible.

    ``locate`` (optional) guesses where the cut falls, which saves most of the counting.
    """
    if max_tokens <= 0 or not text:
        return ""
    if count(text) <= max_tokens:
        return text
    guess = None if locate is None else locate(text, max_tokens, False)
    if guess is None:
        lo, hi = 0, len(text)  # prefix of length lo always fits
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if count(text[:mid]) <= max_tokens:
                lo = mid
            else:
                hi = mid - 1
        end = lo
    else:
        # The first length that does not fit, less one; the empty prefix fits, the whole does not.
        end = first_true(lambda length: count(text[:length]) > max_tokens, 0, len(text), guess + 1) - 1
    floor = int(end * (1 - _SNAP_SHARE))
    for i in range(end - 1, floor - 1, -1):
        if text[i] in _ENDS:
            j = i + 1  # keep the sentence's closing quotes, not the whitespace after it
            while j < end and text[j] in _CLOSERS and not text[j].isspace():
                j += 1
            snapped = text[:j]
            # Token counts are not monotonic in length: a shorter prefix can cost more.
            return snapped if count(snapped) <= max_tokens else text[:end]
    return text[:end]


def keep_sentences(text: str, max_tokens: int, count: Count) -> str:
    """The longest prefix of ``text`` within ``max_tokens`` that ends a sentence (with its closing
    quotes), however far back that end is: ``""`` when not even the first sentence fits."""
    if max_tokens <= 0 or not text:
        return ""
    if count(text) <= max_tokens:
        return text
    ends = []
    for i, char in enumerate(text):
        if char in _ENDS:
            j = i + 1
            while j < len(text) and text[j] in _CLOSERS and not text[j].isspace():
                j += 1
            ends.append(j)
    # Counts grow with the prefix (near enough: a prefix is kept only once counted within budget).
    lo, hi = 0, len(ends)  # the prefix to the lo-th end fits (none: the empty one)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if count(text[:ends[mid - 1]]) <= max_tokens:
            lo = mid
        else:
            hi = mid - 1
    return text[:ends[lo - 1]] if lo else ""
