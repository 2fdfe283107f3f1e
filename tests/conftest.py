"""Fixtures shared by the whole suite."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from websockets.asyncio.client import connect

from ipc.dispatch import Dispatcher
from ipc.server import TransportLimits
from tests.support.client import RpcClient
from tests.support.inproc import TOKEN, InProcServer, build_test_registry, inproc_server
from tests.support.wire import SessionWire, SocketWire, Wire


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


@pytest.fixture(params=["session", "websocket"])
async def wire(request: pytest.FixtureRequest) -> AsyncIterator[Wire]:
    """The same protocol suite, in memory and over a real socket."""
    if request.param == "session":
        limits = TransportLimits()
        memory = SessionWire(Dispatcher(build_test_registry(limits, [])), limits)
        yield memory
        await memory.close()
        return
    async with inproc_server() as running:
        ws = await connect(running.url, additional_headers={"Authorization": f"Bearer {TOKEN}"},
                           compression=None)
        socket = SocketWire(ws)
        yield socket
        await socket.close()
