"""The composition root: what the services it builds share."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from main import wiring
from main.config import Config, StdinWatch
from main.stores import open_services
from services.assembly.service import ContextService


async def test_assemblies_take_their_turns_at_the_gate_index_passes_ask(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The context service gets the stores' gate, the one retrieval's index passes ask whether the
    spare core has rested: an assembly's turn is what keeps a pass's helper off the core."""
    built: list[dict[str, Any]] = []

    class Recording(ContextService):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            built.append(kwargs)
            super().__init__(*args, **kwargs)

    monkeypatch.setattr(wiring, "ContextService", Recording)
    config = Config(data_dir=tmp_path / "data", watch_stdin=StdinWatch.OFF)
    services = await asyncio.to_thread(open_services, config)
    try:
        wiring.build_registry(config, services, lambda: 0)
        assert len(built) == 1
        assert built[0]["gate"] is services.gate
    finally:
        await services.aclose()
