"""How much a text shares with a reader's question, weighing each shared word by its rarity in the book.

Words are :func:`services.sources.relevance.features` (English words, Chinese character bigrams). A
word on every page ("the", "的") says nothing about where an answer lies; a name seen on two pages
says a lot, so each word weighs its inverse document frequency over the book's paragraphs. The
weights rank only the window's own paragraphs and summaries: nothing of a later page reaches the
prompt through them.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Sequence

from services.sources.relevance import features

# A shared word must be at least this rare to count as a match on its own: this share of the weight
# of a word found in a single paragraph (in a 3,000-paragraph book, one in about 7 % of them).
STRONG = 0.35


class Words:
    def __init__(self, paragraphs: Sequence[frozenset[str]]) -> None:
        self.paragraphs = tuple(paragraphs)
        found: Counter[str] = Counter()
        for words in self.paragraphs:
            found.update(words)
        n = len(self.paragraphs)
        self._weights = {word: math.log((n + 1) / (count + 0.5)) for word, count in found.items()}
        self._floor = STRONG * math.log((n + 1) / 1.5)

    @classmethod
    def of(cls, texts: Iterable[str]) -> Words:
        return cls([features(t) for t in texts])

    def weight(self, word: str) -> float:
        """The word's rarity in the book; 0 for a word the book never uses (it can match nothing)."""
        return max(self._weights.get(word, 0.0), 0.0)

    def overlap(self, question: frozenset[str], words: frozenset[str]) -> float:
        """The share of the question's weight (of the words the book uses) that ``words`` hold, 0..1;
        0 unless what they share weighs at least as much as one fairly rare word."""
        total = sum(self.weight(w) for w in question)
        shared = sum(self.weight(w) for w in question & words)
        if total <= 0 or shared < self._floor:
            return 0.0
        return shared / total
