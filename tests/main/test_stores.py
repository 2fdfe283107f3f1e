"""The stores the composition root opens, and what they share with the services built on them."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from main.config import Config, StdinWatch
from main.stores import SPARE_CORE_REST_S, open_services

WAIT_S = 30.0  # a bound on waiting for the rest to pass, far above it


async def test_index_passes_use_the_spare_core_only_once_assemblies_have_rested(tmp_path: Path) -> None:
    """Retrieval's index passes ask the services' gate for the spare core: yes on a fresh server,
    no while an assembly holds its turn and for a while after it, yes again once that has passed."""
    config = Config(data_dir=tmp_path / "data", watch_stdin=StdinWatch.OFF)
    services = await asyncio.to_thread(open_services, config)
    try:
        retrieval = await services.retrieval.ready()
        spare_core = retrieval._indexer.spare_core
        assert spare_core is not None
        assert spare_core()
        async with services.gate.turn():
            assert not spare_core()
            ended = time.monotonic()  # the turn is given back after this
        assert not spare_core()
        while not spare_core():
            assert time.monotonic() - ended < WAIT_S
            await asyncio.sleep(0.05)
        assert time.monotonic() - ended >= SPARE_CORE_REST_S
    finally:
        await services.aclose()
