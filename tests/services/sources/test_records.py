"""Shared reads for providers that need the same records."""

from __future__ import annotations

import asyncio

import pytest

from services.sources.records import shared


async def test_concurrent_calls_share_one_read() -> None:
    """Two concurrent calls for one project run the underlying fetch once; later calls read again."""
    calls: list[str] = []

    async def fetch(project_id: str) -> list[str]:
        calls.append(project_id)
        await asyncio.sleep(0.01)
        return [project_id]

    read = shared(fetch)
    first, second, other = await asyncio.gather(read("p"), read("p"), read("q"))
    assert first == second == ["p"]
    assert other == ["q"]
    assert sorted(calls) == ["p", "q"]
    await read("p")
    assert calls.count("p") == 2


async def test_a_timed_out_caller_does_not_cancel_the_other() -> None:
    """Cancelling one waiter leaves the shared read running for the rest."""
    release = asyncio.Event()

    async def fetch(project_id: str) -> list[str]:
        await release.wait()
        return ["ok"]

    read = shared(fetch)
    impatient = asyncio.ensure_future(read("p"))
    patient = asyncio.ensure_future(read("p"))
    await asyncio.sleep(0)
    impatient.cancel()
    release.set()
    assert await patient == ["ok"]
    with pytest.raises(asyncio.CancelledError):
        await impatient


async def test_errors_reach_every_caller() -> None:
    """A failing read fails each caller that shared it."""
    async def fetch(project_id: str) -> list[str]:
        raise OSError("disk")

    read = shared(fetch)
    results = await asyncio.gather(read("p"), read("p"), return_exceptions=True)
    assert all(isinstance(r, OSError) for r in results)
