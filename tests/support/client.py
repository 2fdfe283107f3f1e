"""A small JSON-RPC client over a real websocket, for tests and benchmarks."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
from collections.abc import AsyncIterator
from typing import Any

from websockets.asyncio.client import ClientConnection, connect


class RpcClient:
    """Calls by id, collects notifications, and can send raw frames."""

    def __init__(self, ws: ClientConnection) -> None:
        self.ws = ws
        self._ids = itertools.count(1)
        self._pending: dict[Any, asyncio.Future[dict[str, Any]]] = {}
        self.notifications: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        self.unmatched: asyncio.Queue[Any] = asyncio.Queue()
        self.requests: asyncio.Queue[dict[str, Any]] = asyncio.Queue()  # server-to-client requests
        self._reader = asyncio.ensure_future(self._read())

    @classmethod
    async def open(cls, url: str, token: str | None, **kwargs: Any) -> RpcClient:
        headers = {"Authorization": f"Bearer {token}"} if token else None
        ws = await connect(url, additional_headers=headers, compression=None, **kwargs)
        return cls(ws)

    async def _read(self) -> None:
        with contextlib.suppress(Exception):
            async for raw in self.ws:
                message = json.loads(raw)
                if isinstance(message, dict) and "method" in message and "id" not in message:
                    await self.notifications.put(message)
                elif isinstance(message, dict) and "method" in message:
                    await self.requests.put(message)
                elif isinstance(message, dict) and message.get("id") in self._pending:
                    self._pending.pop(message["id"]).set_result(message)
                else:
                    await self.unmatched.put(message)

    async def request(self, method: str, params: Any = None, id_: Any = None) -> dict[str, Any]:
        """Send a request and return the whole reply object."""
        id_ = next(self._ids) if id_ is None else id_
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._pending[id_] = future
        message: dict[str, Any] = {"jsonrpc": "2.0", "method": method, "id": id_}
        if params is not None:
            message["params"] = params
        await self.ws.send(json.dumps(message))
        return await future

    async def call(self, method: str, params: Any = None) -> Any:
        """Send a request; return its result or raise with its error."""
        reply = await self.request(method, params)
        if "error" in reply:
            raise RpcCallError(reply["error"])
        return reply["result"]

    async def notify(self, method: str, params: Any = None) -> None:
        message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            message["params"] = params
        await self.ws.send(json.dumps(message))

    async def next_request(self, timeout: float = 10) -> dict[str, Any]:
        """The next server-to-client request (e.g. ``llm:complete``)."""
        return await asyncio.wait_for(self.requests.get(), timeout)

    async def respond(self, id_: Any, result: Any) -> None:
        """Answer a server-to-client request."""
        await self.ws.send(json.dumps({"jsonrpc": "2.0", "result": result, "id": id_}))

    async def respond_error(self, id_: Any, code: int, message: str) -> None:
        error = {"code": code, "message": message}
        await self.ws.send(json.dumps({"jsonrpc": "2.0", "error": error, "id": id_}))

    async def send_raw(self, text: str) -> None:
        await self.ws.send(text)

    async def next_unmatched(self, timeout: float = 10) -> Any:
        return await asyncio.wait_for(self.unmatched.get(), timeout)

    async def close(self) -> None:
        await self.ws.close()
        self._reader.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._reader


@contextlib.asynccontextmanager
async def connected(url: str, token: str | None, **kwargs: Any) -> AsyncIterator[RpcClient]:
    """An :class:`RpcClient` for the length of an ``async with`` block, closed afterwards."""
    client = await RpcClient.open(url, token, **kwargs)
    try:
        yield client
    finally:
        await client.close()


class RpcCallError(Exception):
    def __init__(self, error: dict[str, Any]) -> None:
        super().__init__(error.get("message"))
        self.error = error

    @property
    def code(self) -> int:
        return int(self.error["code"])

    @property
    def data_code(self) -> str:
        return str(self.error.get("data", {}).get("code"))
