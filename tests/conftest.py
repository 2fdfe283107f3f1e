"""Fixtures shared by the whole suite."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator

import pytest
from websockets.asyncio.client import connect

from ipc.dispatch import Dispatcher
from ipc.server import TransportLimits
from tests.support.client import RpcClient
from tests.support.inproc import TOKEN, InProcServer, build_test_registry, inproc_server
from tests.support.wire import SessionWire, SocketWire, Wire

# The suite indexes with the bundled Universal Sentence Encoder, not the default e5: e5 embeds about
# 20 times fewer sentences a second, and on CI's two shared cores the tests that index whole chapters
# (fuzz, golden, scenarios) would take minutes more. Config reads this variable, and so do the
# servers the end-to-end tests start. The tests that pin e5 itself ask for it by name
# (tests/services/retrieval/test_e5.py, tests/e2e/test_retrieval.py) or unset this (tests/main/
# test_default_embedder.py); STRATA_EMBEDDING=multilingual-e5-small runs the whole suite on e5.
os.environ.setdefault("STRATA_EMBEDDING", "use-multilingual")


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
