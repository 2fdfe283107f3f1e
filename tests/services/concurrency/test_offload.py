"""off_loop: small work on the event loop, after the tasks already waiting; large work on a thread."""

from __future__ import annotations

import asyncio
import threading

from services.concurrency.offload import INLINE_CHARS, off_loop


async def test_small_work_runs_on_the_loop_after_the_tasks_already_waiting() -> None:
    """Work under INLINE_CHARS runs on the loop's thread, but only once the tasks that were ready
    before it (a frame's reader, another request reaching its limiter) have had their turn."""
    order: list[str] = []

    async def waiting() -> None:
        order.append("waiting")

    def work() -> int:
        order.append("work")
        return threading.get_ident()

    task = asyncio.ensure_future(waiting())
    thread = await off_loop(INLINE_CHARS - 1, work)
    await task
    assert order == ["waiting", "work"]
    assert thread == threading.get_ident()


async def test_large_work_runs_on_a_worker_thread() -> None:
    """Work of INLINE_CHARS characters or more runs on a worker thread, never on the loop."""
    thread = await off_loop(INLINE_CHARS, threading.get_ident)
    assert thread != threading.get_ident()
