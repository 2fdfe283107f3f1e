"""One interface over two transports: a Session in memory, or a real websocket.

End-to-end protocol tests take a ``Wire`` and run unchanged on both.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any, Protocol

from websockets.asyncio.client import ClientConnection

from ipc.dispatch import Dispatcher
from ipc.server import TransportLimits
from ipc.session import Session


class Wire(Protocol):
    async def send(self, text: str) -> None: ...

    async def recv(self, timeout: float = 10) -> Any: ...

    async def close(self) -> None: ...


class SessionWire:
    """Frames go straight into a Session; replies come back through a queue."""

    def __init__(self, dispatcher: Dispatcher, limits: TransportLimits) -> None:
        self.replies: asyncio.Queue[str] = asyncio.Queue()
        self.session = Session(dispatcher, self.replies.put, connection_id="mem",
                               limits=limits.session, debug=True)

    async def send(self, text: str) -> None:
        await self.session.receive(text)

    async def recv(self, timeout: float = 10) -> Any:
        return json.loads(await asyncio.wait_for(self.replies.get(), timeout))

    async def close(self) -> None:
        await self.session.close()


class SocketWire:
    """Frames go over a real websocket connection."""

    def __init__(self, ws: ClientConnection) -> None:
        self.ws = ws

    async def send(self, text: str) -> None:
        await self.ws.send(text)

    async def recv(self, timeout: float = 10) -> Any:
        return json.loads(await asyncio.wait_for(self.ws.recv(), timeout))

    async def close(self) -> None:
        await self.ws.close()


async def expect_no_reply(wire: Wire) -> None:
    """Prove nothing was queued for the client: a marker call's reply comes next."""
    await wire.send('{"jsonrpc":"2.0","method":"get_data","id":"marker"}')
    reply = await wire.recv()
    assert reply == {"jsonrpc": "2.0", "result": ["hello", 5], "id": "marker"}
