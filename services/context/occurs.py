"""What a window can knock out or name, known once per document text.

Screening asks at every assembly whether each candidate of a part deduplicated against the window
stands in it (a few hundred texts), and ordering whether each entity's names do
(:func:`services.context.screening.window_knocks`, :func:`services.context.reduce.mentioned`). A
window is cut from its document, so a text that stands nowhere in the document stands in none of
its windows, and most candidates (passages of other chapters, sheets of characters not in this one)
stand nowhere in it. For one document text and one candidate set, :class:`Near` lists the few that
do and the spans that could overlap; a window then needs a search for those few only.

Neighbouring assemblies cut their windows from the very same text: a writer moving through a
chapter, the requests of a burst to one document. A writer typing makes a new text at every
keystroke, and searching the whole document for every candidate would cost more than searching the
window; so a document text is only indexed from the second assembly that cuts a window from it
(:meth:`Documents.occurs`), and the first searches the window as before.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass

from services.caches import SizedLru
from services.context.models import Item

# Per document text: the texts and names looked up in it (each a bool), past which both are
# forgotten and looked up again; and the candidate sets whose Near is kept.
MAX_NEEDLES = 4096
NEAR_SETS = 4


def norm(text: str) -> str:
    """``text`` without whitespace (as screening compares texts)."""
    return "".join(text.split())


@dataclass(frozen=True, slots=True)
class Near:
    """For one document text and one candidate set: what a window cut from the text could knock
    out or name. ``spans``: (position, start, end) of each deduplicated candidate with a span;
    ``texts``: (position, whitespace-free text) of each deduplicated candidate whose text stands in
    the document; ``names``: (item id, its names that stand in the document) of each candidate ranked
    ``mentioned_first`` with any."""

    spans: tuple[tuple[int, int, int], ...]
    texts: tuple[tuple[int, str], ...]
    names: tuple[tuple[str, tuple[str, ...]], ...]

    def knocks(self, before: str, after: str, start: int, end: int) -> frozenset[int]:
        """The positions a window of ``before`` + ``after`` at ``start``..``end`` knocks out."""
        knocked = {n for n, first, last in self.spans if first < end and start < last}
        if self.texts:
            window = norm(before + after)
            knocked.update(n for n, text in self.texts if n not in knocked and text in window)
        return frozenset(knocked)

    def named(self, before: str, after: str) -> frozenset[str]:
        """The ids of the candidates one of whose names stands in the window."""
        if not self.names:
            return frozenset()
        contains = (before + after).__contains__
        return frozenset(item_id for item_id, names in self.names if any(map(contains, names)))


class Occurs:
    """Which texts stand anywhere in one document text, looked up once each, and the :class:`Near`
    of the last few candidate sets."""

    __slots__ = ("_compact", "_lock", "_names", "_near", "_texts", "text")

    def __init__(self, text: str) -> None:
        self.text = text
        self._compact: str | None = None
        self._texts: dict[str, bool] = {}
        self._names: dict[str, bool] = {}
        self._near: OrderedDict[Hashable, tuple[object, Near]] = OrderedDict()
        self._lock = threading.Lock()

    def has_text(self, compact: str) -> bool:
        """Whether the whitespace-free ``compact`` stands in the document, whitespace aside."""
        found = self._texts.get(compact)
        if found is None:
            if self._compact is None:
                self._compact = norm(self.text)
            if len(self._texts) >= MAX_NEEDLES:
                self._texts.clear()
            found = self._texts[compact] = compact in self._compact
        return found

    def has_name(self, name: str) -> bool:
        """Whether ``name`` stands in the document as it is."""
        found = self._names.get(name)
        if found is None:
            if len(self._names) >= MAX_NEEDLES:
                self._names.clear()
            found = self._names[name] = name in self.text
        return found

    def looked_up(self) -> tuple[int, int]:
        """How many texts and names it holds an answer for now (at most :data:`MAX_NEEDLES` each)."""
        return len(self._texts), len(self._names)

    def near(self, key: Hashable, held: object, make: Callable[[], Near]) -> Near:
        """``make()``, kept under ``key`` (which names ``held``'s objects by identity: the entry
        holds them) for the last :data:`NEAR_SETS` candidate sets."""
        with self._lock:
            kept = self._near.get(key)
            if kept is not None:
                self._near.move_to_end(key)
                return kept[1]
        value = make()
        with self._lock:
            self._near[key] = (held, value)
            while len(self._near) > NEAR_SETS:
                self._near.popitem(last=False)
        return value


class Documents:
    """The :class:`Occurs` of a project's most recently used document texts, at most
    ``max_documents`` and ``max_chars`` characters of document text; and the length and hash of the
    last ``max_documents`` texts seen once, which hold no text. Its owner locks."""

    def __init__(self, max_documents: int, max_chars: int) -> None:
        self._lru: SizedLru[str, Occurs] = SizedLru(max_documents, max_chars)
        self._seen: OrderedDict[tuple[int, int], None] = OrderedDict()
        self._max_seen = max_documents

    def occurs(self, text: str) -> Occurs | None:
        """The text's :class:`Occurs`, or None the first time the text is seen: a text seen once is
        likely a keystroke's, never seen again, and only its length and hash are kept to know it the
        second time. (Two texts of one length and hash would only index the second early: an
        :class:`Occurs` is kept under its very text.)"""
        found = self._lru.get(text)
        if found is not None:
            return found[0]
        mark = (len(text), hash(text))
        if self._seen.pop(mark, 0) is None:  # seen once before: index it now
            occurs = Occurs(text)
            # Sized twice the text: the whitespace-free copy made once it is searched.
            self._lru.put(text, occurs, 2 * len(text))
            return occurs
        self._seen[mark] = None
        while len(self._seen) > self._max_seen:
            self._seen.popitem(last=False)
        return None

    def __len__(self) -> int:
        """How many document texts it indexes now."""
        return len(self._lru)


def make_near(plan_deduped: frozenset[tuple[str, str]], plan_mentioned: frozenset[tuple[str, str]],
              items: Sequence[Item], occurs: Occurs, compact_of: Callable[[str], str]) -> Near:
    """:class:`Near` of ``items`` in ``occurs``' document, for a plan whose parts ``plan_deduped``
    are deduplicated against the window and ``plan_mentioned`` ranked by names near the cursor."""
    spans: list[tuple[int, int, int]] = []
    texts: list[tuple[int, str]] = []
    names: list[tuple[str, tuple[str, ...]]] = []
    for n, item in enumerate(items):
        where = (item.layer, item.section)
        if where in plan_deduped and item.text:
            if item.span is not None:
                spans.append((n, item.span[0], item.span[1]))
            text = compact_of(item.text)
            if text and occurs.has_text(text):
                texts.append((n, text))
        if item.names and where in plan_mentioned:
            standing = tuple(name for name in item.names if name and occurs.has_name(name))
            if standing:
                names.append((item.id, standing))
    return Near(tuple(spans), tuple(texts), tuple(names))


__all__ = ["Documents", "Near", "Occurs", "make_near", "norm"]
