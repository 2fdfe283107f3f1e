r"""Token counts with a bounded cache keyed by content, safe across threads.

With cl100k_base, a long text is counted line by line. The encoding first cuts
text into pieces with :data:`CL100K_PATTERN` and then encodes each piece on its
own, so a count is the sum of its pieces' counts. The alternatives that can
take a line break (``[\r\n]*+`` after punctuation, ``\s*[\r\n]``, ``\s++$``,
``\s+(?!\S)``, ``\s``) go on past it only through more whitespace, and the
pattern never looks behind. So where a line break is followed by a character
that is not whitespace, the piece holding the break ends there and the next
one starts there, with or without the text before: the text's count is the
sum of the counts of the two sides. Texts are cut there only before a letter,
a digit or one of :data:`LINE_STARTS` (none of them whitespace by any
definition); ``tests/services/context/test_counting.py`` checks the sums
against the tokenizer on adversarial text.

Prompts of one project share most of their lines (rules, settings, past
interactions, the paragraphs around the cursor), so an assembly tokenizes only
the lines it has not seen, not the whole prompt again for every count it
needs. Other tokenizers count whole texts.
"""

from __future__ import annotations

import threading
from collections import OrderedDict

from services.tokenizer import Tokenizer, TokenizerInfo

# The pre-tokenizer pattern the line rule above was proven for; any other pattern counts whole.
CL100K_PATTERN = (r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++"""
                  r"""[\r\n]*+|\s++$|\s*[\r\n]|\s+(?!\S)|\s""")
# Besides letters and digits, the marks a line may start with and still be counted on its own.
LINE_STARTS = frozenset("[-#*“\"'「『（(【《—…")
# Texts shorter than this are counted whole; so is a line shorter than this together with the
# next one (a decision made by content alone, so the same lines split the same way every time).
SPLIT_FROM = 256
MIN_LINE = 24
# Longer texts counted by line are not kept whole (their lines are).
KEEP_WHOLE = 4096


def counts_by_line(tokenizer: Tokenizer) -> bool:
    """Whether ``tokenizer`` is cl100k_base with the pattern the line rule holds for (for a
    tokenizer built on first use, the one it builds)."""
    resolved = getattr(tokenizer, "resolved", None)
    if callable(resolved):
        tokenizer = resolved()
    encoding = getattr(tokenizer, "_encoding", None)
    return (tokenizer.info.encoding == "cl100k_base" and tokenizer.info.exact
            and getattr(encoding, "_pat_str", None) == CL100K_PATTERN)


def split_lines(text: str) -> list[str]:
    """``text`` cut after line breaks that are followed by a letter, a digit or a line start
    mark, and only where the last non-empty line before holds at least :data:`MIN_LINE`
    characters (so short lines go with the next one)."""
    lines = text.split("\n")
    parts: list[str] = []
    first = 0
    previous = len(lines[0])  # length of the last non-empty line so far
    for k in range(1, len(lines)):
        line = lines[k]
        if not line:
            continue
        if previous >= MIN_LINE and (line[0].isalnum() or line[0] in LINE_STARTS):
            parts.append("\n".join(lines[first:k]) + "\n")
            first = k
        previous = len(line)
    parts.append("\n".join(lines[first:]))
    return parts


class CountCache:
    """Counts text with ``tokenizer``, remembering recent answers by content.

    Assemblies of the same document at different cursors share most of their
    text (rules, settings, retrieved chunks), so most counts are cache hits.
    """

    def __init__(self, tokenizer: Tokenizer, max_entries: int = 32768,
                 max_chars: int = 8_000_000) -> None:
        self.tokenizer = tokenizer
        self._max = max_entries
        self._max_chars = max_chars  # characters of the texts kept, which bounds the memory
        self._chars = 0
        self._cache: OrderedDict[str, int] = OrderedDict()
        self._lock = threading.Lock()
        # Settled on the first count of a long text: asking sooner would build a tokenizer that is
        # built on first use (services/tokenizer/deferred.py) before anything counts.
        self._by_line: bool | None = None

    @property
    def info(self) -> TokenizerInfo:
        return self.tokenizer.info

    @property
    def ready(self) -> bool:
        """Whether counting builds nothing first (a tokenizer built on first use is built already):
        callers on the event loop build it with :meth:`prepare` on a worker thread otherwise."""
        return bool(getattr(self.tokenizer, "built", True))

    def prepare(self) -> None:
        """Build the tokenizer now if it is built on first use (about 0.3 s for an encoding)."""
        self._lines()

    def count(self, text: str) -> int:
        if not text:
            return 0
        hit = self._hit(text)
        if hit is not None:
            return hit
        if len(text) >= SPLIT_FROM and self._lines():
            parts = split_lines(text)
            if len(parts) > 1:
                value = self._sum(parts)
                # Kept whole too unless long: a record's text is counted by every assembly, while
                # a layer or a prompt rarely comes back whole and would crowd out its lines.
                if len(text) <= KEEP_WHOLE:
                    self._keep(text, value)
                return value
        return self._whole(text)

    def _lines(self) -> bool:
        """Whether long texts are counted line by line (see the module's docstring)."""
        by_line = self._by_line
        if by_line is None:
            by_line = self._by_line = counts_by_line(self.tokenizer)
        return by_line

    def _hit(self, text: str) -> int | None:
        with self._lock:
            hit = self._cache.get(text)
            if hit is not None:
                self._cache.move_to_end(text)
            return hit

    def _keep(self, text: str, value: int) -> None:
        with self._lock:
            if text not in self._cache:
                self._chars += len(text)
            self._cache[text] = value
            while len(self._cache) > self._max or self._chars > self._max_chars:
                old, _ = self._cache.popitem(last=False)
                self._chars -= len(old)

    def _sum(self, parts: list[str]) -> int:
        """The sum of the parts' counts: hits under one lock, then the misses counted."""
        total = 0
        missing: list[str] = []
        with self._lock:
            cache = self._cache
            for part in parts:
                hit = cache.get(part)
                if hit is None:
                    missing.append(part)
                else:
                    total += hit
                    cache.move_to_end(part)
        for part in missing:
            total += self._whole(part)
        return total

    def _whole(self, text: str) -> int:
        hit = self._hit(text)
        if hit is not None:
            return hit
        value = self.tokenizer.count(text)
        self._keep(text, value)
        return value

    def locate(self, text: str, max_tokens: int, tail: bool) -> int | None:
        """Where cutting ``text`` to ``max_tokens`` tokens probably falls, or None if it fits.

        For a tail, the start of the text the last ``max_tokens`` tokens decode to; for a
        head, the end of the first ``max_tokens``. A search for the exact cut
        (``services.context.trim``) starts next to it instead of halving the text a dozen
        times. Counted by line, only the line the cut falls in is encoded; otherwise the
        whole text is. A token that splits a character decodes to a replacement
        character, so the guess may be a character or two off.
        """
        if max_tokens <= 0 or self.count(text) <= max_tokens:
            return None
        parts = split_lines(text) if len(text) >= SPLIT_FROM and self._lines() else [text]
        offset = len(text) if tail else 0
        left = max_tokens  # tokens still to place, from the cut's side of the text
        for part in reversed(parts) if tail else parts:
            size = self._whole(part) if len(parts) > 1 else left + 1
            if size <= left:
                left -= size
                offset += -len(part) if tail else len(part)
                continue
            if left <= 0:
                return offset
            tokens = self.tokenizer.encode(part)
            if len(tokens) <= left:
                return None  # counts and encodings disagree (an estimate): no guess
            if tail:
                return max(offset - len(self.tokenizer.decode(tokens[-left:])), 0)
            return min(offset + len(self.tokenizer.decode(tokens[:left])), len(text))
        return None
