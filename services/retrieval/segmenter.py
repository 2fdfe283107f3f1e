"""jieba's segmentation over a compact dictionary: the same words, a fraction of the memory.

jieba keeps its 349k-word dictionary as one Python dict holding every word and every prefix of
every word, about 80 MiB once loaded. Here the words live in a marisa trie and their frequencies
in an array, a few MiB between them. A word's DAG edges are the trie's keys that begin the text
there, which are exactly the words jieba's prefix walk finds, and the same frequencies and total
give the same routes, so the terms (and the BM25 index built from them) are unchanged.

Building the trie from jieba's text file takes about a second of CPU, a quarter of it one call that
holds the GIL. Given a cache folder (the server's data dir), the built trie and frequencies are
written there once, checked by their SHA-256 when read back, and read in a few milliseconds at the
next start; a file that does not check out is built again and replaced.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import tempfile
import threading
from array import array
from math import log
from pathlib import Path
from typing import Any

import jieba
import marisa_trie
import structlog

_log = structlog.get_logger("retrieval.segmenter")
CACHE_FORMAT = 1
_MAGIC = b"strata-jieba-compact\n"
Dictionary = tuple[marisa_trie.Trie, "array[int]", int, int]


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


def load_dictionary(lines: Any) -> Dictionary:
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


def _dictionary_path() -> Path:
    return Path(str(jieba.__file__)).parent / str(jieba.DEFAULT_DICT_NAME)


def cache_file(cache_dir: Path) -> Path:
    """Where the built dictionary of this jieba, its dictionary file and this format are kept."""
    stat = _dictionary_path().stat()
    key = f"{CACHE_FORMAT}:{jieba.__version__}:{stat.st_size}:{stat.st_mtime_ns}:{sys.byteorder}"
    return cache_dir / f"jieba-compact-{hashlib.sha256(key.encode()).hexdigest()[:16]}.bin"


def read_cached(path: Path) -> Dictionary | None:
    """The dictionary written by :func:`write_cached`, or None if the file is missing or does not
    check out (its SHA-256, its layout)."""
    try:
        data = path.read_bytes()
        if not data.startswith(_MAGIC):
            return None
        header_end = data.index(b"\n", len(_MAGIC)) + 1
        header = json.loads(data[len(_MAGIC):header_end])
        body = memoryview(data)[header_end:]
        sized = len(body) == header["trie"] + header["freq"]
        if not sized or hashlib.sha256(body).hexdigest() != header["sha256"]:
            return None
        words = marisa_trie.Trie().frombytes(bytes(body[:header["trie"]]))
        frequencies = array("q")
        frequencies.frombytes(body[header["trie"]:])
        if len(frequencies) != len(words):
            return None
        return words, frequencies, int(header["total"]), int(header["longest"])
    except (OSError, ValueError, KeyError, TypeError):  # missing, unreadable or not this layout
        return None


def write_cached(path: Path, dictionary: Dictionary) -> None:
    """Write ``dictionary`` to ``path`` whole or not at all (a temporary file renamed over it)."""
    words, frequencies, total, longest = dictionary
    trie, freq = words.tobytes(), frequencies.tobytes()
    header = {"sha256": hashlib.sha256(trie + freq).hexdigest(), "trie": len(trie), "freq": len(freq),
              "total": total, "longest": longest}
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=".jieba-", suffix=".tmp")
    try:
        with os.fdopen(handle, "wb") as out:
            out.write(_MAGIC + json.dumps(header).encode() + b"\n" + trie + freq)
            out.flush()
            os.fsync(out.fileno())
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    for stale in path.parent.glob("jieba-compact-*.bin"):  # another jieba's or format's
        if stale != path:
            stale.unlink(missing_ok=True)


class CompactTokenizer(jieba.Tokenizer):  # type: ignore[misc]
    """A ``jieba.Tokenizer`` for the default dictionary whose words live in :class:`Frequencies`.

    Only the read side is supported (``cut``, ``cut_for_search``, ``lcut``); adding or deleting
    words would write into ``FREQ`` and fails.
    """

    def __init__(self, cache_dir: Path | None = None) -> None:
        """``cache_dir``: where the built dictionary is kept between starts (none: nothing written)."""
        super().__init__()
        self._cache_dir = cache_dir
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
            words, frequencies, total, longest = self._dictionary()
            self.FREQ = Frequencies(words, frequencies)
            self.total = total
            self._prefixes, self._lookup = words.prefixes, words.get
            self._frequencies, self._longest = frequencies, longest
            self.initialized = True

    def _dictionary(self) -> Dictionary:
        path = cache_file(self._cache_dir) if self._cache_dir is not None else None
        found = read_cached(path) if path is not None else None
        if found is not None:
            return found
        built = load_dictionary(self.get_dict_file())
        if path is not None:
            try:
                write_cached(path, built)
            except OSError as exc:  # a full or read-only disk: built again at the next start
                _log.warning("retrieval.dictionary_not_cached", exc_type=type(exc).__name__)
        return built

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
