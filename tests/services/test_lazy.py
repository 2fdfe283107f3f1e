"""services/lazy.py: a heavy part loads once, when first asked for, on a thread of its own; a failed
load is tried again by the next caller; nothing that only looks at it starts a load."""

from __future__ import annotations

import asyncio
import threading

import pytest

from services.lazy import Deferred, Lazy


async def test_loads_once_for_every_waiter_and_only_when_asked() -> None:
    """Nothing loads until asked; concurrent awaiting callers and a blocking thread all get the one
    value made by a single load."""
    calls: list[int] = []
    release = threading.Event()

    def load() -> dict[str, int]:
        release.wait(30)
        calls.append(1)
        return {"value": 7}

    lazy = Lazy("part", load)
    assert await lazy.settled() is None  # looking starts nothing
    assert lazy.value() is None
    assert not lazy.loaded
    waiters = [asyncio.ensure_future(lazy.wait()) for _ in range(3)]
    from_thread = asyncio.ensure_future(asyncio.to_thread(lazy.get))
    await asyncio.sleep(0)
    assert not any(w.done() for w in waiters)
    release.set()
    results = [*(await asyncio.gather(*waiters)), await from_thread]
    assert all(r is results[0] for r in results)
    assert calls == [1]
    assert lazy.loaded
    assert Deferred(lazy).get("value") == 7  # attributes pass through to the loaded value


async def test_a_failed_load_is_tried_again_by_the_next_caller() -> None:
    """A load that raises gives its error to its waiters; the next caller starts a new load."""
    attempts: list[int] = []

    def load() -> str:
        attempts.append(1)
        if len(attempts) == 1:
            raise OSError("not yet")
        return "ready"

    lazy = Lazy("part", load)
    with pytest.raises(OSError, match="not yet"):
        await lazy.wait()
    assert await lazy.settled() is None
    assert not lazy.loaded
    assert await lazy.wait() == "ready"
    assert attempts == [1, 1]


async def test_a_waiter_that_gives_up_cancels_nothing() -> None:
    """Cancelling one caller's wait leaves the load running for the others."""
    release = threading.Event()
    lazy = Lazy("part", lambda: release.wait(30))
    first = asyncio.ensure_future(lazy.wait())
    await asyncio.sleep(0)
    first.cancel()
    second = asyncio.ensure_future(lazy.wait())
    release.set()
    assert await second is True
    closed: list[bool] = []
    lazy.close(closed.append)
    assert closed == [True]
