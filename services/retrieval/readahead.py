"""Reading ahead: the searches the writer's next sentence end will ask for, made while nobody waits.

Keystrokes inside one sentence ask retrieval the same query (the text before the
cursor up to its last whole sentence: :func:`services.retrieval.query.settled`)
and share its kept result; the keystroke that passes the next sentence end asks
a new one and waits for its search, about half of that keystroke's time. When
the text after the cursor is already written (a writer moving through a
chapter, revising it), that query is known before the cursor gets there:
:func:`next_queries` finds where it changes, and :class:`ReadAhead` runs the
search once no assembly holds or waits for a turn, so the keystroke finds it
kept. The result is the one that keystroke would have made itself (the same
key, the same index snapshot), so reading ahead changes no prompt.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Hashable

import structlog

from services.retrieval.query import last_sentence_end

READ_AHEAD_CHARS = 400  # how far after the cursor the next sentence end is looked for
MOST_AHEAD = 3  # queries read ahead at most ("。」" changes the query twice)
QUIET_WAIT = 2.0  # seconds a read-ahead waits for the assemblies to be done before it is dropped

# The last character of every sentence end (chunking's marks, closers, a line break). Only where
# the text's last or second-to-last character is one of these can adding a character change where
# the last sentence ends: every end ends with one, and only "." and its kin look past themselves
# (an end at the very end of the text, which a following letter undoes).
_MARKS = frozenset("。！？；….!?\n\"'”’)]」』）")

_log = structlog.get_logger("retrieval.readahead")


def next_queries(text: str, start: int, cursor: int, *, reach: int = READ_AHEAD_CHARS,
                 most: int = MOST_AHEAD) -> list[int]:
    """The cursors after ``cursor`` at which the query of a window starting at ``start`` changes to
    one that ends at another sentence end (``last_sentence_end(text, start, c)``), up to and through
    the first sentence end within ``reach`` characters; at most ``most`` of them, nearest first.
    Where no sentence ends before the cursor the query is all of it, new at every keystroke, and
    not read ahead."""
    current = last_sentence_end(text, start, cursor)
    found: list[int] = []
    stop = min(len(text), cursor + reach)
    position = cursor
    while position < stop and len(found) < most:
        position += 1
        last = text[position - 1]
        if last not in _MARKS and (position - 2 < start or text[position - 2] not in _MARKS):
            if found:
                break  # past the sentence end's run of marks
            continue
        end = last_sentence_end(text, start, position)
        if end is not None and end != current:
            found.append(position)
            current = end
        elif found and last not in _MARKS:
            break  # past the sentence end's run of marks
    return found


class Steps:
    """When a search's steps that hold the event loop may run: at once for a search somebody waits
    for; for one read ahead (``pause`` given), once ``pause`` says so, or at once from the moment a
    caller that waits joins it (``want``). ``pause`` answering False gives the search up."""

    def __init__(self, pause: Callable[[], Awaitable[bool]] | None = None) -> None:
        self._pause = pause
        self._wanted = asyncio.Event()
        if pause is None:
            self._wanted.set()

    @property
    def wanted(self) -> bool:
        """Whether a caller waits for the result."""
        return self._wanted.is_set()

    def want(self) -> None:
        """A caller waits for the result: no more pauses."""
        self._wanted.set()

    async def go_on(self) -> bool:
        """Wait until the next step may run; False when it is given up."""
        if self._pause is None or self._wanted.is_set():
            return True
        pause = asyncio.ensure_future(self._pause())
        wanted = asyncio.ensure_future(self._wanted.wait())
        try:
            await asyncio.wait((pause, wanted), return_when=asyncio.FIRST_COMPLETED)
        finally:
            pause.cancel()
            wanted.cancel()
        if self._wanted.is_set():
            return True
        return pause.done() and not pause.cancelled() and pause.exception() is None and bool(pause.result())


class ReadAhead:
    """One piece of speculative work at a time, run once ``quiet`` returns (no assembly holds or
    waits for a turn). A piece is known by its key: scheduled again while it waits, runs or after
    it ran, it is left alone (every keystroke inside a sentence reads ahead the same queries); a
    piece with another key replaces it. A piece that could not go on within ``wait`` seconds is
    dropped. Its failure is logged and goes no further: nobody waits for it."""

    def __init__(self, quiet: Callable[[], Awaitable[None]], *, wait: float = QUIET_WAIT) -> None:
        self._quiet = quiet
        self._wait = wait
        self._task: asyncio.Task[None] | None = None
        self._key: Hashable = None

    def schedule(self, key: Hashable, work: Callable[[], Awaitable[object]]) -> None:
        """Run ``work`` when quiet, instead of what was scheduled before, unless that was ``key``."""
        if key == self._key:
            return
        if self._task is not None:
            self._task.cancel()
        self._key = key
        self._task = asyncio.get_running_loop().create_task(self._run(work))

    async def pause(self) -> bool:
        """Between two steps of the work: wait until quiet again, so that a keystroke that came
        meanwhile waits for one step at most; False when that took longer than ``wait`` (drop the
        rest)."""
        try:
            async with asyncio.timeout(self._wait):
                await self._quiet()
        except TimeoutError:
            return False
        return True

    async def _run(self, work: Callable[[], Awaitable[object]]) -> None:
        done = False
        try:
            done = await self.pause() and await work() is not False
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # speculative: the keystroke that needs it does the work again
            _log.warning("retrieval.read_ahead_failed", exc_type=type(exc).__name__)
        finally:
            if not done and self._task is asyncio.current_task():
                self._key = None  # dropped or failed: the next keystroke may schedule it again

    async def aclose(self) -> None:
        """Cancel what is scheduled or running, and wait for it to end."""
        task, self._task, self._key = self._task, None, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task


__all__ = ["MOST_AHEAD", "READ_AHEAD_CHARS", "ReadAhead", "Steps", "next_queries"]
