"""jieba's segmentation over a compact dictionary: the same words, a fraction of the memory.

jieba keeps its 349k-word dictionary as one Python dict holding every word and every prefix of
every word, about 80 MiB once loaded. Here the words live in a marisa trie and their frequencies
in an array, a few MiB between them. A word's DAG edges are the trie's keys that begin the text
there, which are exactly the words jieba's prefix walk finds, and the same frequencies and total
give the same routes, so the terms (and the BM25 index built from them) are unchanged.
"""

from __future__ import annotations

import threading
from array import array
from math import log
from typing import Any

import jieba
import marisa_trie


class Frequencies:
    """Read-only ``word -> frequency`` as jieba's ``FREQ`` is read: ``get`` is falsy for non-words."""

    def __init__(self, words: marisa_trie.Trie, frequencies: array[int]) -> None:
        self._words = words
        self._frequencies = frequencies

    def get(self, word: str, default: int | None = None) -> int | None:
        index = self._words.get(word)
        return default if index is None else self._frequencies[index]

    def __contains__(self, word: object) -> bool:
        return word in self._words

    def __getitem__(self, word: str) -> int:
        return self._frequencies[int(self._words[word])]


def load_dictionary(lines: Any) -> tuple[marisa_trie.Trie, array[int], int, int]:
    """The trie, frequencies (by key id), total and longest word of a jieba dictionary file.

    As jieba reads it: ``word freq [tag]`` a line, the last line of a repeated word wins, and the
    total counts every line. A word of frequency 0 is left out: jieba treats it as a mere prefix.
    """
    words: list[str] = []
    counts: list[int] = []
    total = 0
    with lines:
        for number, raw in enumerate(lines, 1):
            line = raw.strip().decode("utf-8")
            try:
                word, count_text = line.split(" ")[:2]
                count = int(count_text)
            except ValueError:
                raise ValueError(f"invalid dictionary entry at line {number}") from None
            total += count
            words.append(word)
            counts.append(count)
    trie = marisa_trie.Trie([word for word, count in zip(words, counts, strict=True) if count])
    frequencies = array("q", bytes(8 * len(trie)))
    for word, count in zip(words, counts, strict=True):
        if count:
            frequencies[trie[word]] = count
    return trie, frequencies, total, max(map(len, words), default=1)


class CompactTokenizer(jieba.Tokenizer):  # type: ignore[misc]
    """A ``jieba.Tokenizer`` for the default dictionary whose words live in :class:`Frequencies`.

    Only the read side is supported (``cut``, ``cut_for_search``, ``lcut``); adding or deleting
    words would write into ``FREQ`` and fails.
    """

    def __init__(self) -> None:
        super().__init__()
        self.initialized: bool = False
        self._load_lock = threading.Lock()
        self._prefixes: Any = None
        self._lookup: Any = None
        self._frequencies: array[int] = array("q")
        self._longest = 1

    def initialize(self, dictionary: str | None = None) -> None:
        if dictionary is not None:
            raise ValueError("CompactTokenizer reads jieba's default dictionary only")
        with self._load_lock:
            if self.initialized:
                return
            words, frequencies, total, longest = load_dictionary(self.get_dict_file())
            self.FREQ = Frequencies(words, frequencies)
            self.total = total
            self._prefixes, self._lookup = words.prefixes, words.get
            self._frequencies, self._longest = frequencies, longest
            self.initialized = True

    def get_DAG(self, sentence: str) -> dict[int, list[int]]:
        self.check_initialized()
        prefixes, longest = self._prefixes, self._longest
        dag: dict[int, list[int]] = {}
        for start in range(len(sentence)):
            found = prefixes(sentence[start:start + longest])
            dag[start] = [start + len(word) - 1 for word in found] if found else [start]
        return dag

    def calc(self, sentence: str, DAG: dict[int, list[int]], route: dict[int, tuple[float, int]]) -> None:
        # jieba's own expression, term for term, so that ties and rounding fall the same way; a word
        # of the trie has a positive frequency, and anything else counts as 1 (jieba's ``or 1``).
        lookup, frequencies = self._lookup, self._frequencies
        count = len(sentence)
        route[count] = (0, 0)
        logtotal = log(self.total)
        for idx in range(count - 1, -1, -1):
            route[idx] = max((log(frequencies[key] if (key := lookup(sentence[idx:x + 1])) is not None else 1)
                              - logtotal + route[x + 1][0], x) for x in DAG[idx])
