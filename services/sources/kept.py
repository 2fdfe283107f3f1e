"""Items a record provider made, kept for the next assembly that would make the very same ones; and
what a provider derives from its records whatever the cursor (:func:`kept_value`), kept alike.

A provider's items depend on its records, where they go, the tokenizer that counts them and, for
the ones ranked by relevance, their keys: each record's similarity to the features of the text
around the cursor (:mod:`services.sources.ranked`), so those are kept under the keys, not the
features. Records are read from kept snapshots (:mod:`services.concurrency.snapshots`) that stay
the same objects until the next write, so they are compared by identity: a write brings new record
objects, and an entry holds its old ones, so their ids cannot be reused while it lives.
Neighbouring requests of a document (cursors a few characters apart) mostly give every record the
same key, and then share every item: the same objects, which the engine's memo knows again.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Hashable, Sequence
from typing import Any, Protocol, TypeVar, cast

from services.caches import Gathered
from services.concurrency.offload import off_loop
from services.context.models import Item


class Weighed(Protocol):
    def weight(self) -> int:
        """What it holds beyond its records, in the cache's units."""
        ...


W = TypeVar("W", bound=Weighed)


async def gathered(cache: Gathered, project_id: str, key: Hashable, records: Sequence[object],
                   make: Callable[[], Sequence[Item]], *, size: Callable[[], int],
                   weight: int = 0) -> list[Item]:
    """The items kept under ``key`` for these very ``records``, else ``make()`` (off the event loop
    when ``size()``, the characters of text it reads, is large: asked only then), kept for next time."""
    found = kept_items(cache, project_id, key, records)
    if found is not None:
        return found
    items = await off_loop(size(), make)
    return keep_items(cache, project_id, key, records, items, weight)


def kept_items(cache: Gathered, project_id: str, key: Hashable,
               records: Sequence[object]) -> list[Item] | None:
    """The items kept under ``key`` for these very ``records``, or None."""
    found = _kept(cache, project_id, key, records)
    return None if found is None else list(found)


def keep_items(cache: Gathered, project_id: str, key: Hashable, records: Sequence[object],
               items: Sequence[Item], weight: int = 0) -> list[Item]:
    """Keep ``items`` under ``key`` for these ``records`` and return them; ``weight`` is what the
    key holds beyond the items (features of the text around the cursor), for the cache's bound."""
    cache.put(project_id, key, (tuple(records), tuple(items), len(items) + weight + 1))
    return list(items)


async def kept_value(cache: Gathered, project_id: str, key: Hashable, records: Sequence[object],
                     make: Callable[[], W], *, size: Callable[[], int]) -> W:
    """The value kept under ``key`` for these very ``records``, else ``make()`` (off the event loop
    when ``size()``, the characters of text it reads, asked only then, is large), kept for next
    time: what a provider derives from its records alone, whatever the cursor."""
    found = _kept(cache, project_id, key, records)
    if found is not None:
        return cast(W, found[0])
    value = await off_loop(size(), make)
    cache.put(project_id, key, (tuple(records), (value,), len(records) + value.weight() + 1))
    return value


def _kept(cache: Gathered, project_id: str, key: Hashable,
          records: Sequence[object]) -> tuple[Any, ...] | None:
    found = cache.get(project_id, key)
    if found is None:
        return None
    kept_records, kept, _ = found
    if len(kept_records) != len(records) or not all(map(operator.is_, kept_records, records)):
        return None
    return kept
