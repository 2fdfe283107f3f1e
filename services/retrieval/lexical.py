"""Lexical search: terms for Chinese (jieba) and English, BM25 over a project's chunks (bm25s)."""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path
from typing import Any, NamedTuple


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


# Known terms of a run of words: ``known(run, make)`` gives the kept terms of ``run``, else ``make()``'s.
KnownTerms = Callable[[str, Callable[[], tuple[str, ...]]], tuple[str, ...]]

_CJK = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]+")
_WORD = re.compile(r"[^\W_]+", re.UNICODE)
_STOP_EN = _words("""a an and are as at be been but by did do does for from had has have he her hers him
his i if in into is it its me my no not of on or our she so than that the their them then there these they
this to too up us was we were what when where which who whom why will with would you your""")
_STOP_ZH = _words("""的 了 着 过 是 在 和 与 及 或 也 都 就 还 又 而 但 把 被 让 给 对
从 向 往 到 于 以 为 之 其 这 那 这个 那个 这些 那些 一个 一些 有 没有
不 没 很 太 更 最 吗 呢 吧 啊 呀 哦 嗯 我 你 他 她 它 我们 你们 他们
她们 自己 什么 怎么 哪里 哪儿 为什么 如何 已经 然后 因为 所以 如果 虽然
可是 但是 只是 一 上 下 里 中 说 道 地 得""")


class Terms:
    """Splits text into search terms; jieba's dictionary loads once, on first use, in the compact
    form of :mod:`services.retrieval.segmenter` (the same words), built once and kept in
    ``cache_dir`` when one is given (nothing is written without it)."""

    def __init__(self, cache_dir: Path | None = None) -> None:
        self._cache_dir = cache_dir
        self._jieba: Any = None
        self._lock = threading.Lock()

    @property
    def ready(self) -> bool:
        """Whether Chinese text splits without loading the dictionary first (about a second of CPU
        to build it, a few milliseconds to read it back from the cache folder)."""
        return self._jieba is not None

    def load(self) -> None:
        """Load the dictionary now, if not yet (for a worker thread: it holds the GIL throughout)."""
        self._segmenter()

    def _segmenter(self) -> Any:
        with self._lock:
            if self._jieba is None:
                from services.retrieval.segmenter import CompactTokenizer

                segmenter = CompactTokenizer(self._cache_dir)
                segmenter.initialize()
                self._jieba = segmenter
            return self._jieba

    def __call__(self, text: str, known: KnownTerms | None = None) -> list[str]:
        """The terms of ``text``; a Chinese run's segmentation (the costly part) is looked up in
        ``known`` first, when given: queries of neighbouring cursors share most of their runs."""
        terms: list[str] = []
        for word in _WORD.findall(text.lower()):
            if _CJK.search(word):
                found = self._chinese(word) if known is None else known(word, partial(self._chinese, word))
                terms.extend(found)
            elif word not in _STOP_EN and (len(word) > 1 or word.isdigit()):
                terms.append(_stem(word))
        return terms

    def _chinese(self, run: str) -> tuple[str, ...]:
        out: list[str] = []
        for part in re.split(r"([\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]+)", run):
            if not part:
                continue
            if _CJK.fullmatch(part):
                out.extend(w for w in self._segmenter().cut_for_search(part) if w not in _STOP_ZH)
            elif part not in _STOP_EN:
                out.append(_stem(part))
        return tuple(out)


def needs_segmenter(text: str) -> bool:
    """Whether splitting ``text`` into terms uses jieba's dictionary (it holds Chinese)."""
    return _CJK.search(text) is not None


def _stem(word: str) -> str:
    """A light English stemmer: plural and verb endings, enough for keys/key, hid/hides to meet."""
    for suffix, keep in (("ies", "y"), ("sses", "ss"), ("ing", ""), ("ed", ""), ("es", ""), ("s", "")):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3 and not word.endswith("ss"):
            return word[: len(word) - len(suffix)] + keep
    return word


class LexicalRanking(NamedTuple):
    """Chunk positions by BM25 score, best first, and their scores (all above 0)."""

    positions: Any  # int64 array
    scores: Any  # float64 array

    @classmethod
    def of(cls, found: Sequence[tuple[int, float]]) -> LexicalRanking:
        """From ``(position, score)`` pairs in rank order."""
        import numpy as np

        return cls(np.fromiter((p for p, _ in found), np.int64, len(found)),
                   np.fromiter((s for _, s in found), np.float64, len(found)))


class Bm25:
    """An immutable BM25 index over a list of term lists; search returns (position, score).

    bm25s builds the index: each term's column of precomputed scores, one entry per document that
    holds the term. A query's score of a document is the sum of its terms' entries, each term
    counted as often as the query repeats it. bm25s adds the columns one term at a time in float32
    (``np.add.at`` per term: most of a search's time, for a query of hundreds of terms); here the
    query's entries are summed in float64 per document (``np.bincount``), term after term in term
    order, then rounded to float32: the same sums, a little more precisely, in a fixed order, so the
    same index and terms always give the same scores (a test checks them against bm25s's)."""

    def __init__(self, documents: Sequence[Sequence[str]]) -> None:
        import bm25s
        import numpy as np

        self.size = len(documents)
        self._index: Any = None
        if documents:
            index = bm25s.BM25()
            index.index([list(d) or [""] for d in documents], show_progress=False)
            self._index = index
            columns = index.scores
            starts = columns["indptr"]
            # Per entry, in the column layout: its score as float64, its document and its term, as
            # the arrays the sums take (np.bincount would convert them on every search otherwise).
            self._entries = (columns["data"].astype(np.float64), columns["indices"].astype(np.intp),
                             np.repeat(np.arange(len(starts) - 1, dtype=np.intp), np.diff(starts)))

    def search(self, terms: Sequence[str], limit: int) -> list[tuple[int, float]]:
        """The ``limit`` best ``(position, score)`` pairs, best first (of equal scores, the first
        position), leaving out the documents that hold no term."""
        positions, scores = self.top(terms, limit)
        return list(zip(positions.tolist(), scores.tolist(), strict=True))

    def top(self, terms: Sequence[str], limit: int) -> LexicalRanking:
        """What :meth:`search` finds, as a ranking of arrays: positions (int64) and scores (float64,
        each the float32 sum exactly)."""
        import numpy as np  # loaded with bm25s by then; kept out of the server's start

        vocabulary = self._index.vocab_dict if self._index is not None else {}
        known = [vocabulary[t] for t in terms if t in vocabulary]
        if not known or limit <= 0:
            return LexicalRanking(np.zeros(0, np.int64), np.zeros(0, np.float64))
        scores = self._scores(known)
        top = best(scores, limit)
        found = scores[top].astype(np.float64)
        held = found > 0
        return LexicalRanking(top[held].astype(np.int64, copy=False), found[held])

    def _scores(self, term_ids: Sequence[int], *, every: bool | None = None) -> Any:
        """Each document's score. A query's terms often hold most of the index's entries (common
        words): then every entry is weighted, by 0 for the terms not asked, which adds nothing to a
        sum of positive scores; else only the query terms' entries are gathered. ``every`` forces
        one way (the tests hold them to each other)."""
        import numpy as np

        index = self._index
        columns = index.scores
        weight, documents, term_of = self._entries
        starts = columns["indptr"]
        repeats = np.bincount(np.asarray(term_ids, dtype=np.intp), minlength=len(starts) - 1)
        terms = np.flatnonzero(repeats)
        first, lengths = starts[terms], starts[terms + 1] - starts[terms]
        total = int(lengths.sum())
        if (2 * total >= len(weight)) if every is None else every:
            weights = weight * repeats.astype(np.float64)[term_of]
            held = documents
        else:
            # The positions of every entry of every query term, term after term, in one array.
            offsets = np.cumsum(lengths) - lengths
            entries = np.repeat(first - offsets, lengths) + np.arange(total)
            weights = weight[entries] * np.repeat(repeats[terms].astype(np.float64), lengths)
            held = documents[entries]
        # bm25s's default (Lucene) scoring gives a document nothing for a term it lacks, so the sum
        # over the entries is the whole score; bincount adds them in entry order: term order.
        scores = np.bincount(held, weights=weights, minlength=columns["num_docs"])
        return scores.astype(np.dtype(index.dtype))


def best(scores: Any, limit: int) -> Any:
    """The positions of the ``limit`` highest scores, highest first, equal scores in position
    order: the head of a stable sort, without sorting the rest."""
    import numpy as np

    if limit >= len(scores):
        return np.argsort(-scores, kind="stable")
    least = -np.partition(-scores, limit - 1)[limit - 1]  # the limit-th highest score
    above = np.flatnonzero(scores > least)
    chosen = np.concatenate((above, np.flatnonzero(scores == least)[: limit - len(above)]))
    chosen.sort()
    return chosen[np.argsort(-scores[chosen], kind="stable")]
