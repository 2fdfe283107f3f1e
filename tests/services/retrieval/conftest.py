"""Fixtures shared by the retrieval service's tests."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from services.retrieval import Standalone, build_retrieval


@pytest.fixture
async def standalone(tmp_path: Path) -> AsyncIterator[Standalone]:
    """A retrieval service of its own over a fresh data folder, closed after the test."""
    opened = build_retrieval(tmp_path / "data")
    try:
        yield opened
    finally:
        await opened.close()
