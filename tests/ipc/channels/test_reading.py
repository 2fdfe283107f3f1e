"""reading:* through a registry: every method and error it declares is documented."""

from __future__ import annotations

from ipc.channels.reading import register_reading
from ipc.registry import Registry
from services.context.counting import CountCache
from services.reading.service import ReadingService
from services.reading.store import SummaryStore
from tests.ipc.channels.conftest import assert_documented


async def _none(*_args: str) -> list[str]:
    return []


async def _counter(_project_id: str) -> CountCache:
    raise AssertionError("not called")


def test_methods_and_their_errors_are_documented() -> None:
    """docs/protocol.md has a row for every reading:* method and every error code they declare."""
    registry = Registry()
    reading = ReadingService(documents=_none, read=_none, counter=_counter,  # type: ignore[arg-type]
                             summaries=SummaryStore(None))  # type: ignore[arg-type]
    register_reading(registry, reading)
    assert {m.name for m in registry} == {"reading:layout", "reading:summaries:pending",
                                          "reading:summaries:put", "reading:validate"}
    assert_documented(registry, ("reading:",))
