"""Shared by the character tests: a real Chroma client on the test's tmp folder."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from services.retrieval.vectors import close_vector_store, open_vector_store


@pytest.fixture
def chroma(tmp_path: Path) -> Iterator[Any]:
    client = open_vector_store(path=tmp_path / "chroma")
    try:
        yield client
    finally:
        close_vector_store(client)
