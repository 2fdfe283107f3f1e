"""The websocket transport: checks handshakes and pumps frames to sessions.

All protocol logic lives in :mod:`ipc.session` and below; this module only
moves text between sockets and sessions and enforces transport bounds
(frame size, connection count, keepalive, write buffer).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
from dataclasses import dataclass, field
from http import HTTPStatus

import structlog
from websockets.asyncio.server import Server, ServerConnection, serve
from websockets.exceptions import ConnectionClosed
from websockets.http11 import Request, Response

from ipc.auth import HandshakePolicy, judge_handshake
from ipc.context import Role
from ipc.dispatch import Dispatcher
from ipc.errors import ParseError
from ipc.protocol import error_reply
from ipc.session import Session, SessionLimits


@dataclass(frozen=True, slots=True)
class TransportLimits:
    max_frame_bytes: int = 8 * 2**20
    max_connections: int = 128
    ping_interval: float | None = 20.0
    ping_timeout: float | None = 20.0
    close_timeout: float = 5.0
    write_buffer_bytes: int = 2**20
    session: SessionLimits = field(default_factory=SessionLimits)


class WebSocketServer:
    """Serves one dispatcher to every authenticated websocket connection."""

    def __init__(
        self,
        dispatcher: Dispatcher,
        *,
        token: str,
        inspector_token: str | None = None,
        origin_patterns: tuple[str, ...],
        limits: TransportLimits | None = None,
        debug: bool = False,
    ) -> None:
        self._dispatcher = dispatcher
        self._token = token
        self._inspector_token = inspector_token
        self._origin_patterns = origin_patterns
        self._limits = limits or TransportLimits()
        self._debug = debug
        self._policy: HandshakePolicy | None = None
        self._server: Server | None = None
        self._roles: dict[object, Role] = {}
        self._sessions: set[Session] = set()
        self._ids = itertools.count(1)
        self._log = structlog.get_logger("ipc.server")
        # The library's own logger would print request lines; our handshake log is enough.
        logging.getLogger("websockets").setLevel(logging.WARNING)

    @property
    def port(self) -> int:
        if self._policy is None:
            raise RuntimeError("server not started")
        return self._policy.port

    @property
    def connection_count(self) -> int:
        return len(self._sessions)

    async def start(self, host: str, port: int) -> int:
        """Listen on ``host:port`` (0 picks a free port); return the bound port."""
        limits = self._limits
        self._server = await serve(
            self._handle,
            host,
            port,
            process_request=self._process_request,
            compression=None,
            max_size=limits.max_frame_bytes,
            max_queue=16,
            write_limit=limits.write_buffer_bytes,
            ping_interval=limits.ping_interval,
            ping_timeout=limits.ping_timeout,
            close_timeout=limits.close_timeout,
            server_header=None,
        )
        bound = self._server.sockets[0].getsockname()[1]
        self._policy = HandshakePolicy(
            token=self._token,
            port=bound,
            inspector_token=self._inspector_token if self._debug else None,
            origin_patterns=self._origin_patterns,
        )
        return int(bound)

    def _process_request(self, connection: ServerConnection, request: Request) -> Response | None:
        assert self._policy is not None
        verdict = judge_handshake(self._policy, request.headers, request.path)
        if verdict.role is None:
            assert verdict.status is not None
            self._log.info("ws.refused", status=int(verdict.status), reason=verdict.reason)
            return connection.respond(verdict.status, verdict.reason + "\n")
        if len(self._sessions) + len(self._roles) >= self._limits.max_connections:
            self._log.warning("ws.refused", status=503, reason="too many connections")
            return connection.respond(HTTPStatus.SERVICE_UNAVAILABLE, "too many connections\n")
        self._roles[connection.id] = verdict.role
        return None

    async def _handle(self, ws: ServerConnection) -> None:
        role = self._roles.pop(ws.id, Role.CLIENT)
        connection_id = f"c{next(self._ids)}"

        async def send(text: str) -> None:
            with contextlib.suppress(ConnectionClosed):
                await ws.send(text)

        def congested() -> bool:
            return ws.transport.get_write_buffer_size() > self._limits.write_buffer_bytes

        session = Session(
            self._dispatcher,
            send,
            connection_id=connection_id,
            role=role,
            debug=self._debug,
            limits=self._limits.session,
            congested=congested,
        )
        self._sessions.add(session)
        self._log.info("ws.open", conn=connection_id, role=role.value)
        try:
            async for message in ws:
                if isinstance(message, str):
                    await session.receive(message)
                else:
                    await send(error_reply(None, ParseError("Parse error: binary frames are not accepted")))
        except ConnectionClosed:
            pass
        finally:
            await session.close()
            self._sessions.discard(session)
            self._log.info("ws.close", conn=connection_id, code=ws.close_code)

    async def shutdown(self, grace: float) -> None:
        """Refuse new calls, let running ones finish for ``grace`` s, close with 1001."""
        if self._server is None:
            return
        self._server.server.close()  # stop accepting; open connections stay
        await asyncio.gather(*(s.drain(grace) for s in list(self._sessions)))
        self._server.close(close_connections=True)
        await self._server.wait_closed()
        self._log.info("ws.stopped")
