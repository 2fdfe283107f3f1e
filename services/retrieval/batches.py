"""Embed an index pass's batches on the spare core too, while nobody asks the server for anything.

An index pass embeds its new sentences in fixed batches on its own thread, one engine thread each:
a first index of a novel with e5 takes minutes, and while the writer works the other core belongs
to the event loop. When no assembly has run for a while (``spare_core``: the composition root asks
the assemblies' gate, main/stores.py), that core is idle, so a helper thread takes batches from the
end of the pass while the pass's thread goes on from the start.
Each batch is the very batch the pass alone would embed (the Universal Sentence Encoder's vectors
depend on what else is in a batch, in the last bits), and the vectors come back in batch order,
so the index is the same whichever thread embedded what. The helper asks for the spare core before
each batch it takes: once an assembly comes, at most the batch it is on runs beside it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Generator, Sequence
from typing import Any, TypeVar

Batch = TypeVar("Batch")

# How long the pass's thread waits at a time for a batch the helper took (it checks ``stop`` between).
_POLL_S = 0.5


class Stopped(Exception):
    """``stop`` was set between batches."""


class _Shared:
    """What the two threads share, under ``lock``: the batches not yet taken are ``front`` to
    ``back`` (the pass's thread takes from the front, the helper from the back)."""

    def __init__(self, count: int) -> None:
        self.lock = threading.Condition()
        self.front = 0
        self.back = count
        self.done: dict[int, Any] = {}
        self.failed: dict[int, BaseException] = {}
        self.helped = 0
        self.quit = False


def embed_batches(embed: Callable[[Batch], Any], batches: Sequence[Batch], *,
                  spare_core: Callable[[], bool] | None, stop: threading.Event,
                  on_helped: Callable[[int], None] | None = None) -> Generator[Any, None, None]:
    """``embed(batch)`` of each batch, yielded in batch order. With ``spare_core`` and two batches
    or more, a helper thread embeds batches from the end while ``spare_core()`` says yes before
    each. Raises :class:`Stopped` when ``stop`` is set before a batch, and whatever ``embed``
    raised, at that batch's turn. ``on_helped(n)``: the helper embedded ``n`` batches (called
    once it has ended, if it started)."""
    if spare_core is None or len(batches) < 2 or not _asked(spare_core):
        yield from _alone(embed, batches, stop)
        return
    shared = _Shared(len(batches))
    shared.front = 1  # the pass's thread embeds the first batch whatever the helper does
    helper = threading.Thread(target=_help, args=(embed, batches, shared, spare_core, stop),
                              name="strata-index-helper", daemon=True)
    try:
        helper.start()
    except RuntimeError:  # no thread to be had now: the pass goes on alone
        yield from _alone(embed, batches, stop)
        return
    try:
        for index, batch in enumerate(batches):
            if stop.is_set():
                raise Stopped
            with shared.lock:
                mine = index < shared.back
                if mine:
                    shared.front = index + 1
            if mine:
                yield embed(batch)
            else:
                yield _wait_for(shared, index, stop)
    finally:
        with shared.lock:
            shared.quit = True
        helper.join()
        if on_helped is not None:
            on_helped(shared.helped)


def _alone(embed: Callable[[Batch], Any], batches: Sequence[Batch],
           stop: threading.Event) -> Generator[Any, None, None]:
    for batch in batches:
        if stop.is_set():
            raise Stopped
        yield embed(batch)


def _asked(spare_core: Callable[[], bool]) -> bool:
    """``spare_core()``, taken as no if it fails: the core is only ever lent, never needed."""
    try:
        return bool(spare_core())
    except Exception:
        return False


def _wait_for(shared: _Shared, index: int, stop: threading.Event) -> Any:
    with shared.lock:
        while index not in shared.done and index not in shared.failed:
            if stop.is_set():
                raise Stopped
            shared.lock.wait(_POLL_S)
        if index in shared.failed:
            raise shared.failed[index]
        return shared.done.pop(index)


def _help(embed: Callable[[Any], Any], batches: Sequence[Any], shared: _Shared,
          spare_core: Callable[[], bool], stop: threading.Event) -> None:
    while True:
        with shared.lock:
            if shared.quit or shared.back <= shared.front or stop.is_set():
                return
            index = shared.back - 1
        if not _asked(spare_core):  # asked outside the lock: it may take the GIL's turn
            return
        with shared.lock:
            if shared.quit or index != shared.back - 1 or index < shared.front:
                return
            shared.back = index
        try:
            vectors = embed(batches[index])
        except BaseException as exc:  # handed to the pass's thread at this batch's turn
            with shared.lock:
                shared.failed[index] = exc
                shared.lock.notify_all()
            return
        with shared.lock:
            shared.done[index] = vectors
            shared.helped += 1
            shared.lock.notify_all()
