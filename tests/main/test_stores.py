"""The stores the composition root opens, and what they share with the services built on them."""

from __future__ import annotations

import asyncio
from pathlib import Path

from main.config import Config, StdinWatch
from main.stores import open_services


async def test_index_passes_ask_the_assemblies_gate_whether_the_spare_core_is_idle(tmp_path: Path) -> None:
    """Retrieval's index passes get the services' gate as their spare-core signal, so that they
    embed on the second core only while no assembly holds or waits for a turn."""
    config = Config(data_dir=tmp_path / "data", watch_stdin=StdinWatch.OFF)
    services = await asyncio.to_thread(open_services, config)
    try:
        retrieval = await services.retrieval.ready()
        spare_core = retrieval._indexer.spare_core
        assert spare_core == services.gate.idle
        assert spare_core is not None
        assert spare_core()
        services.gate.working += 1  # as an assembly holding its turn
        assert not spare_core()
        services.gate.working -= 1
    finally:
        await services.aclose()
