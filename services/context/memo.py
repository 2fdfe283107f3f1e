"""Memos of the engine's pure per-text work, owned by whoever owns the engine's caches.

The same records come back at every assembly of a project, so their
whitespace-free texts (for duplicate screening) and their ids' natural order
are worth keeping, and so are the counts of sections that neighbouring
assemblies render with the very same items, and what screening and ordering
make of those items (services/context/candidates.py); the composition root
keeps one bounded memo per project, so nothing outlives a project or grows
without bound.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Any, Protocol, TypeVar

from services.caches import SizedLru
from services.context.occurs import Documents, Occurs, norm

NaturalId = tuple[str, int, str]
T = TypeVar("T")


class Memo(Protocol):
    def norm(self, text: str) -> str:
        """``text`` without whitespace."""
        ...

    def natural_id(self, item_id: str) -> NaturalId:
        """Ids in creation order: ``constraint:9`` before ``constraint:10``."""
        ...

    def count_of(self, key: Hashable, held: object, count: Callable[[], int],
                 chars: Callable[[], int]) -> int:
        """``count()``, a rendered section's, kept under ``key`` (which names ``held``'s objects by
        identity: the entry holds them, so their ids stay theirs); ``chars()`` is how many
        characters of text ``held`` holds, for the bound."""
        ...

    def kept(self, key: Hashable, held: object, make: Callable[[], T], chars: Callable[[], int]) -> T:
        """``make()``, an answer about sections as :meth:`count_of` keeps a count (the same entries
        and bound): a step's drop, which needs several counts, for the very same items."""
        ...

    def candidates(self, key: Hashable, held: object, make: Callable[[], T], chars: Callable[[], int]) -> T:
        """``make()``, an assembly's screened and ordered candidates (services/context/candidates.py),
        kept as :meth:`kept` keeps an answer but apart from the counts, fewer of them: each holds
        every candidate of an assembly."""
        ...

    def occurs(self, document: str) -> Occurs | None:
        """What stands in the document text ``document`` (services/context/occurs.py), or None
        when it is not indexed (yet): the window is searched instead."""
        ...


# Counts of rendered sections kept per project (services/context/reduce.py State.counted), and cap steps'
# drops (drops_needed) among them: each holds its items and part texts, and a request's reduction asks
# for a dozen or so. Their texts count towards the characters bound even when other caches hold them
# too: a profile whose items are made anew at each request (pages of a book) must not keep a thousand
# requests' worth.
SECTION_COUNTS = 1024
SECTION_COUNT_CHARS = 8_000_000
# Screened candidates kept per project: an assembly's neighbours (the next keystrokes, the other
# requests of a burst to the same document) gather the same items. Each entry names every candidate
# of an assembly, and is sized by all their texts even though the providers' caches hold them too
# (about 110,000 characters for the load benchmark's). A burst's requests to 125 documents come in
# any order, a document's neighbours a hundred requests or more apart: it keeps a few hundred.
SCREENINGS = 256
SCREENING_CHARS = 32_000_000
# Document texts whose windows' knock-outs and names are known (services/context/occurs.py): a burst's
# requests reach every document of a project, a writer moves through one. Sized by their text, twice.
DOCUMENTS = 256
DOCUMENT_CHARS = 8_000_000


def natural_id(item_id: str) -> NaturalId:
    prefix, _, suffix = item_id.rpartition(":")
    return (prefix, int(suffix), "") if suffix.isdigit() else (prefix, -1, suffix)


class NoMemo:
    """Computes every time (tests, one-off assemblies)."""

    def norm(self, text: str) -> str:
        return norm(text)

    def natural_id(self, item_id: str) -> NaturalId:
        return natural_id(item_id)

    def count_of(self, key: Hashable, held: object, count: Callable[[], int],
                 chars: Callable[[], int]) -> int:
        return count()

    def kept(self, key: Hashable, held: object, make: Callable[[], T], chars: Callable[[], int]) -> T:
        return make()

    def candidates(self, key: Hashable, held: object, make: Callable[[], T], chars: Callable[[], int]) -> T:
        return make()

    def occurs(self, document: str) -> Occurs | None:
        return None


class BoundedMemo:
    """Keeps answers, at most ``max_entries`` of each kind and ``max_chars`` characters of
    normalized text, the oldest going first, safe across the worker threads assemblies run in.

    A hit reads without the lock (one dict lookup, atomic in CPython): the same few hundred
    records are looked up at every assembly, so the hit path is the one to keep short. Kept
    section counts and cap steps' drops (at most ``max_counts`` together, holding
    ``max_count_chars`` characters of text), and apart from them screened candidates (at most
    ``max_screenings``, naming ``max_screening_chars``), go least recently used first, and take
    the lock; so do the document texts whose windows' knock-outs are known (at most
    ``max_documents``, ``max_document_chars`` characters counted twice).
    """

    def __init__(self, max_entries: int = 8192, max_chars: int = 2_000_000,
                 max_counts: int = SECTION_COUNTS, max_count_chars: int = SECTION_COUNT_CHARS,
                 max_screenings: int = SCREENINGS, max_screening_chars: int = SCREENING_CHARS,
                 max_documents: int = DOCUMENTS, max_document_chars: int = DOCUMENT_CHARS) -> None:
        self._max = max_entries
        self._max_chars = max_chars
        self._chars = 0
        self._norms: dict[str, str] = {}
        self._ids: dict[str, NaturalId] = {}
        # Kept section counts and drops: the items and texts they name, and the answer.
        self._counts: SizedLru[Hashable, tuple[object, Any]] = SizedLru(max_counts, max_count_chars)
        self._screenings: SizedLru[Hashable, tuple[object, Any]] = SizedLru(max_screenings,
                                                                            max_screening_chars)
        self._documents = Documents(max_documents, max_document_chars)
        self._lock = threading.Lock()

    def norm(self, text: str) -> str:
        hit = self._norms.get(text)
        if hit is not None:
            return hit
        value = norm(text)
        if len(text) + len(value) > self._max_chars // 4:
            return value  # one huge text would evict everything else
        with self._lock:
            if text not in self._norms:
                self._chars += len(text) + len(value)
            self._norms[text] = value
            while len(self._norms) > self._max or self._chars > self._max_chars:
                old = next(iter(self._norms))
                self._chars -= len(old) + len(self._norms.pop(old))
        return value

    def natural_id(self, item_id: str) -> NaturalId:
        hit = self._ids.get(item_id)
        if hit is None:
            hit = natural_id(item_id)
            with self._lock:
                if len(self._ids) >= self._max:
                    self._ids.clear()
                self._ids[item_id] = hit
        return hit

    def count_of(self, key: Hashable, held: object, count: Callable[[], int],
                 chars: Callable[[], int]) -> int:
        return self.kept(key, held, count, chars)

    def kept(self, key: Hashable, held: object, make: Callable[[], T], chars: Callable[[], int]) -> T:
        return self._keep(self._counts, key, held, make, chars)

    def candidates(self, key: Hashable, held: object, make: Callable[[], T], chars: Callable[[], int]) -> T:
        return self._keep(self._screenings, key, held, make, chars)

    def _keep(self, lru: SizedLru[Hashable, tuple[object, Any]], key: Hashable, held: object,
              make: Callable[[], T], chars: Callable[[], int]) -> T:
        with self._lock:
            found = lru.get(key)
        if found is not None:
            answer: T = found[0][1]
            return answer
        value = make()
        size = chars()
        if size <= lru.max_size // 4:  # one huge entry would evict every other
            with self._lock:
                lru.put(key, (held, value), size)
        return value

    def occurs(self, document: str) -> Occurs | None:
        with self._lock:
            return self._documents.occurs(document)

    def documents(self) -> int:
        """How many document texts :meth:`occurs` indexes now."""
        with self._lock:
            return len(self._documents)

    def counts(self) -> int:
        """How many section counts :meth:`count_of` keeps now."""
        with self._lock:
            return len(self._counts)

    def held_chars(self) -> int:
        """The characters of text the kept section counts hold."""
        with self._lock:
            return self._counts.size

    def screenings(self) -> tuple[int, int]:
        """How many screened candidates :meth:`candidates` keeps now, and the characters they name."""
        with self._lock:
            return len(self._screenings), self._screenings.size


class ProjectMemos:
    """One :class:`BoundedMemo` per project, for the ``max_projects`` most recently used."""

    def __init__(self, max_projects: int = 8) -> None:
        self._max = max_projects
        self._memos: OrderedDict[str, BoundedMemo] = OrderedDict()
        self._lock = threading.Lock()

    def for_project(self, project_id: str) -> BoundedMemo:
        with self._lock:
            memo = self._memos.get(project_id)
            if memo is None:
                memo = self._memos[project_id] = BoundedMemo()
                while len(self._memos) > self._max:
                    self._memos.popitem(last=False)
            else:
                self._memos.move_to_end(project_id)
            return memo

    def drop(self, project_id: str) -> None:
        with self._lock:
            self._memos.pop(project_id, None)
