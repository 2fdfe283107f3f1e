"""Fixtures shared by the whole suite."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from tests.support.client import RpcClient
from tests.support.inproc import TOKEN, InProcServer, inproc_server


@pytest.fixture
async def server() -> AsyncIterator[InProcServer]:
    async with inproc_server() as running:
        yield running


@pytest.fixture
async def client(server: InProcServer) -> AsyncIterator[RpcClient]:
    rpc = await RpcClient.open(server.url, TOKEN)
    try:
        yield rpc
    finally:
        await rpc.close()
