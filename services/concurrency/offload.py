"""CPU work off the event loop, unless it is too small to be worth a thread.

A hop to a worker thread and back costs about a tenth of a millisecond and a
GIL handoff, more than counting a few hundred short texts; and Python running
on a worker thread does not run beside the loop, it takes turns with it for the
GIL, each turn a handoff. So work on less than :data:`INLINE_CHARS` characters
of text to count runs on the loop itself (it holds the loop a millisecond or
two at most); anything larger goes to a thread, so a 60k-token instruction or
a long chapter never blocks other clients.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import ParamSpec, TypeVar

INLINE_CHARS = 16_384

P = ParamSpec("P")
T = TypeVar("T")


async def off_loop(size: int, fn: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> T:
    """``fn(*args, **kwargs)``: in a worker thread, or here if ``size`` (characters of text the
    work reads) is below :data:`INLINE_CHARS`."""
    if size < INLINE_CHARS:
        await asyncio.sleep(0)  # frames that came meanwhile are read before the loop is held
        return fn(*args, **kwargs)
    return await asyncio.to_thread(fn, *args, **kwargs)
