"""Bounded caches scoped to a project, owned by the composition root.

A :class:`ProjectCache` keeps values by project id and key. Every project has
its own bounds (a number of entries and a total size, in whatever unit the
cache's ``size`` function measures, characters for texts), least recently
used first out, so one project filling its share never evicts another
project's entries. The number of projects kept is bounded too: past it, the
project used least recently goes as a whole. :meth:`ProjectCache.drop`
forgets one project at once.

Nothing here is module-level: the composition root makes the instances and
hands them to the objects that use them, and an object built without one gets
a private instance of its own.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class _Missing:
    pass


_MISSING = _Missing()


class SizedLru(Generic[K, V]):
    """Values by key with their sizes, least recently used first out past ``max_entries`` or a
    total size of ``max_size``. Not locked: its owner locks."""

    __slots__ = ("entries", "max_entries", "max_size", "size")

    def __init__(self, max_entries: int, max_size: int) -> None:
        self.entries: OrderedDict[K, tuple[V, int]] = OrderedDict()
        self.max_entries = max_entries
        self.max_size = max_size
        self.size = 0

    def __len__(self) -> int:
        return len(self.entries)

    def get(self, key: K) -> tuple[V, int] | None:
        """The kept ``(value, size)``, or None; a hit becomes the most recently used."""
        entry = self.entries.get(key)
        if entry is not None:
            self.entries.move_to_end(key)
        return entry

    def put(self, key: K, value: V, size: int) -> None:
        """Keep ``value`` (in place of any under ``key``), then drop the least recently used past the
        bounds."""
        old = self.entries.pop(key, None)
        if old is not None:
            self.size -= old[1]
        self.entries[key] = (value, size)
        self.size += size
        while len(self.entries) > self.max_entries or self.size > self.max_size:
            _, (_, dropped) = self.entries.popitem(last=False)
            self.size -= dropped


class ProjectCache(Generic[K, V]):
    """Values by (project id, key), bounded per project by entry count and total size.

    Thread-safe: providers fill it from worker threads. A value larger than
    ``max_size`` on its own is returned but not kept.
    """

    def __init__(self, *, max_entries: int, max_size: int, max_projects: int,
                 size: Callable[[V], int] = lambda _: 1) -> None:
        if min(max_entries, max_size, max_projects) < 1:
            raise ValueError("cache bounds must be positive")
        self.max_entries = max_entries
        self.max_size = max_size
        self.max_projects = max_projects
        self._size = size
        self._lock = threading.Lock()
        self._projects: OrderedDict[str, SizedLru[K, V]] = OrderedDict()

    def get(self, project_id: str, key: K) -> V | None:
        """The kept value, or None (and it becomes the project's most recently used)."""
        found = self._get(project_id, key)
        return None if isinstance(found, _Missing) else found

    def get_or_make(self, project_id: str, key: K, make: Callable[[], V]) -> V:
        """The kept value of ``key``, else ``make()`` (run outside the lock), kept for next time."""
        found = self._get(project_id, key)
        if not isinstance(found, _Missing):
            return found
        value = make()
        self.put(project_id, key, value)
        return value

    def put(self, project_id: str, key: K, value: V) -> None:
        """Keep ``value``, then drop the project's least recently used entries past its bounds."""
        size = self._size(value)
        if size > self.max_size:
            return
        with self._lock:
            partition = self._projects.get(project_id)
            if partition is None:
                partition = self._projects[project_id] = SizedLru(self.max_entries, self.max_size)
            self._projects.move_to_end(project_id)
            partition.put(key, value, size)
            while len(self._projects) > self.max_projects:
                self._projects.popitem(last=False)

    def drop(self, project_id: str) -> None:
        """Forget every entry of ``project_id``."""
        with self._lock:
            self._projects.pop(project_id, None)

    def clear(self) -> None:
        with self._lock:
            self._projects.clear()

    def entries(self, project_id: str) -> int:
        """How many entries ``project_id`` has kept."""
        with self._lock:
            partition = self._projects.get(project_id)
            return len(partition) if partition else 0

    def size(self, project_id: str) -> int:
        """The total size of ``project_id``'s kept entries."""
        with self._lock:
            partition = self._projects.get(project_id)
            return partition.size if partition else 0

    def projects(self) -> list[str]:
        """The projects with kept entries, least recently used first."""
        with self._lock:
            return list(self._projects)

    def _get(self, project_id: str, key: K) -> V | _Missing:
        with self._lock:
            partition = self._projects.get(project_id)
            if partition is None:
                return _MISSING
            entry = partition.get(key)
            if entry is None:
                return _MISSING
            self._projects.move_to_end(project_id)
            return entry[0]


# What the providers keep of a record: its text as the prompt shows it and its relevance features.
Rendered = tuple[str, frozenset[str]]

# Projects whose records are kept at once (a writer has a few open).
MAX_PROJECTS = 4
# Entity sheets of one project: a large knowledge graph's worth, each a short text.
ENTITY_SHEETS = 4096
ENTITY_SHEET_CHARS = 4_000_000
# Past interactions of one project: more than an assembly ranks (main.app.EPISODES_CONSIDERED), so
# a new one only pushes out the oldest. An output may be 200,000 characters: the size bound holds
# the whole, counting the record's texts in the key as well as the rendered text and its features.
EPISODE_TEXTS = 256
EPISODE_TEXT_CHARS = 16_000_000


def rendered_size(value: Rendered) -> int:
    """Characters a rendered record keeps: its text (about as long as the record's own texts, in the
    key, so counted twice) and its features."""
    text, own = value
    return 2 * len(text) + sum(map(len, own))


def entity_sheet_cache() -> ProjectCache[Hashable, Rendered]:
    return ProjectCache(max_entries=ENTITY_SHEETS, max_size=ENTITY_SHEET_CHARS, max_projects=MAX_PROJECTS,
                        size=rendered_size)


def episode_text_cache() -> ProjectCache[Hashable, Rendered]:
    return ProjectCache(max_entries=EPISODE_TEXTS, max_size=EPISODE_TEXT_CHARS, max_projects=MAX_PROJECTS,
                        size=rendered_size)


# Retrieval results of one project (services/retrieval/service.py), by index snapshot version and
# query: neighbouring keystrokes and requests for the same sentence share one. A result is at most
# MAX_RETRIEVED (200) hits whose passage texts are the index snapshot's own strings, not copies, so
# its size is counted as its hit objects (HIT_BYTES each) plus its key (KEY_BYTES: up to 2,000
# characters of lexical query and 600 of dense query, 4 bytes a character at most), in bytes.
SEARCH_RESULTS = 384
SEARCH_RESULT_BYTES = 16 * 2**20
HIT_BYTES = 256
KEY_BYTES = 4 * 2600

SearchResults = ProjectCache[Hashable, tuple[Any, ...]]


def search_result_size(hits: tuple[Any, ...]) -> int:
    """Bytes a kept result holds, about: its hit objects and its key."""
    return HIT_BYTES * len(hits) + KEY_BYTES


def search_result_cache() -> SearchResults:
    return ProjectCache(max_entries=SEARCH_RESULTS, max_size=SEARCH_RESULT_BYTES, max_projects=MAX_PROJECTS,
                        size=search_result_size)


# Search terms of the runs of words in retrieval queries (services/retrieval/lexical.py): a query is
# the last sentences before the cursor, so neighbouring ones share most runs, and jieba's segmentation
# of a run costs more than anything else in building a query. Sized in characters: the run (the key)
# and its terms, about as long again.
QUERY_RUNS = 16384
QUERY_RUN_CHARS = 1_000_000

QueryTerms = ProjectCache[str, tuple[str, ...]]


def query_terms_size(terms: tuple[str, ...]) -> int:
    """Characters a kept run holds, about: its terms and the run itself (the key)."""
    return 2 * sum(map(len, terms)) + 1


def query_terms_cache() -> QueryTerms:
    return ProjectCache(max_entries=QUERY_RUNS, max_size=QUERY_RUN_CHARS, max_projects=MAX_PROJECTS,
                        size=query_terms_size)


# Relevance features of the lines around the cursor (services/sources/relevance.py features_by_line):
# an assembly's window shares all but a line or two with the previous keystroke's. Sized in
# characters of features, about twice the line's length for Chinese bigrams, plus the line (the key).
LINE_FEATURES = 16384
LINE_FEATURE_CHARS = 4_000_000

LineFeatures = ProjectCache[str, frozenset[str]]


def line_features_size(value: frozenset[str]) -> int:
    """Characters a kept line holds, about: its features and the line itself (the key)."""
    chars = sum(map(len, value))
    return chars + chars // 2 + 1


def line_features_cache() -> LineFeatures:
    return ProjectCache(max_entries=LINE_FEATURES, max_size=LINE_FEATURE_CHARS, max_projects=MAX_PROJECTS,
                        size=line_features_size)


# The features of a window's whole lines, all but its first and last (services/sources/relevance.py
# features_by_line): the lines between its cut ends come back at a writer's next keystroke, and at a
# burst's other requests to the document. Sized in characters of the lines (the key) and features.
WINDOW_FEATURES = 512
WINDOW_FEATURE_CHARS = 8_000_000

WindowFeatures = ProjectCache[tuple[str, ...], tuple[frozenset[str], int]]


def window_features_cache() -> WindowFeatures:
    return ProjectCache(max_entries=WINDOW_FEATURES, max_size=WINDOW_FEATURE_CHARS, max_projects=MAX_PROJECTS,
                        size=lambda value: value[1])


# The dense query made from the sentences before the cursor (services/retrieval/provider.py): every
# keystroke inside a sentence asks the same one. Sized in characters of the text it depends on (the
# key's) and of its sentences.
DENSE_QUERIES = 256
DENSE_QUERY_CHARS = 1_000_000

DenseQueries = ProjectCache[Hashable, tuple[Any, int]]


def dense_query_cache() -> DenseQueries:
    return ProjectCache(max_entries=DENSE_QUERIES, max_size=DENSE_QUERY_CHARS, max_projects=MAX_PROJECTS,
                        size=lambda value: value[1])


# The Retrieved layer's items made from a kept search result (services/retrieval/provider.py): the
# neighbouring requests that share a result share its items too. Sized in items; the items' texts
# are the index snapshot's own strings, not copies. As many lists as a burst has documents: requests
# arrive in any order, and a document's neighbours may come a few hundred requests apart.
RETRIEVAL_ITEM_LISTS = 256
RETRIEVAL_ITEMS = 256 * 200

RetrievalItems = ProjectCache[Hashable, tuple[Any, Any, tuple[Any, ...]]]


def retrieval_items_cache() -> RetrievalItems:
    return ProjectCache(max_entries=RETRIEVAL_ITEM_LISTS, max_size=RETRIEVAL_ITEMS, max_projects=MAX_PROJECTS,
                        size=lambda value: len(value[2]) + 1)


# The items a record provider made for one assembly (services/sources/kept.py), kept by what they
# depend on: the records (the very objects read), the placement, the tokenizer and, for records ranked
# by relevance, each record's key. Neighbouring requests of a document share them; a burst's requests
# to 125 documents come in any order, so it keeps a few hundred. Sized in items plus the keys in the key.
GATHERED = 1024
GATHERED_SIZE = 512_000

Gathered = ProjectCache[Hashable, tuple[tuple[Any, ...], tuple[Any, ...], int]]


def gathered_cache() -> Gathered:
    return ProjectCache(max_entries=GATHERED, max_size=GATHERED_SIZE, max_projects=MAX_PROJECTS,
                        size=lambda value: value[2])


@dataclass(frozen=True)
class SourceCaches:
    """The per-project caches of the source providers, made once by the composition root."""

    entity_sheets: ProjectCache[Hashable, Rendered] = field(default_factory=entity_sheet_cache)
    episode_texts: ProjectCache[Hashable, Rendered] = field(default_factory=episode_text_cache)
    search_results: SearchResults = field(default_factory=search_result_cache)
    query_terms: QueryTerms = field(default_factory=query_terms_cache)
    line_features: LineFeatures = field(default_factory=line_features_cache)
    window_features: WindowFeatures = field(default_factory=window_features_cache)
    retrieval_items: RetrievalItems = field(default_factory=retrieval_items_cache)
    dense_queries: DenseQueries = field(default_factory=dense_query_cache)
    gathered: Gathered = field(default_factory=gathered_cache)

    def drop(self, project_id: str) -> None:
        """Forget everything kept for ``project_id``."""
        self.entity_sheets.drop(project_id)
        self.episode_texts.drop(project_id)
        self.search_results.drop(project_id)
        self.query_terms.drop(project_id)
        self.line_features.drop(project_id)
        self.window_features.drop(project_id)
        self.retrieval_items.drop(project_id)
        self.dense_queries.drop(project_id)
        self.gathered.drop(project_id)
