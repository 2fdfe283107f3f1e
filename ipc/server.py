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
import time
import uuid
import weakref
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from http import HTTPStatus
from typing import Any

import structlog
from websockets.asyncio.server import Server, ServerConnection, serve
from websockets.datastructures import Headers
from websockets.exceptions import ConnectionClosed
from websockets.http11 import Request, Response

from ipc.auth import HandshakePolicy, host_allowed, judge_handshake
from ipc.context import Role
from ipc.dispatch import Dispatcher, code_locations
from ipc.errors import InternalError, ParseError
from ipc.protocol import error_reply
from ipc.session import Session, SessionLimits
from ipc.static import inspector_response, is_inspector_path


@dataclass(frozen=True, slots=True)
class TransportLimits:
    max_frame_bytes: int = 4 * 2**20
    max_connections: int = 32
    ping_interval: float | None = 20.0
    ping_timeout: float | None = 20.0
    close_timeout: float = 5.0
    hard_buffer_bytes: int = 16 * 2**20
    stall_timeout: float = 30.0
    watch_interval: float = 1.0
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
        # Weak: a handshake that never becomes a websocket must not hold its slot.
        self._roles: weakref.WeakKeyDictionary[ServerConnection, Role] = weakref.WeakKeyDictionary()
        self._sessions: set[Session] = set()
        self._notifying: set[asyncio.Future[None]] = set()
        self._ids = itertools.count(1)
        self._log = structlog.get_logger("ipc.server")
        self._refusals = _RefusalLog(self._log_refusals)
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

    def publish(self, topic: str, method: str, params: dict[str, Any]) -> None:
        """Send a notification to every connection subscribed to ``topic`` (``system:subscribe``),
        without waiting; a lagging client's is dropped."""
        for session in [s for s in self._sessions if topic in s.topics]:
            task = asyncio.ensure_future(session.notify(method, params))
            self._notifying.add(task)
            task.add_done_callback(self._notifying.discard)

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
            max_queue=2,
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
        assert self._server is not None
        headers = _single_valued(request.headers)
        if headers is None:
            return self._refuse(connection, HTTPStatus.BAD_REQUEST, "repeated header")
        if self._debug and is_inspector_path(request.path):  # the inspector page: plain HTTP, no token
            if not host_allowed(headers.get("Host"), self._policy.port):
                return self._refuse(connection, HTTPStatus.FORBIDDEN, "forbidden host")
            return inspector_response(request.path)
        verdict = judge_handshake(self._policy, headers, request.path)
        if verdict.role is None:
            assert verdict.status is not None
            return self._refuse(connection, verdict.status, verdict.reason)
        if len(self._server.all_connections) >= self._limits.max_connections:
            return self._refuse(connection, HTTPStatus.SERVICE_UNAVAILABLE, "too many connections")
        self._roles[connection] = verdict.role
        return None

    def _refuse(self, connection: ServerConnection, status: HTTPStatus, reason: str) -> Response:
        self._refusals.add(int(status), reason)
        return connection.respond(status, reason + "\n")

    def _log_refusals(self, counts: dict[tuple[int, str], int]) -> None:
        for (status, reason), count in counts.items():
            self._log.info("ws.refused", status=status, reason=reason, count=count)

    async def _handle(self, ws: ServerConnection) -> None:
        role = self._roles.pop(ws, Role.CLIENT)
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
        watchdog = asyncio.ensure_future(self._watch(ws, connection_id))
        try:
            async for message in ws:
                await self._receive(session, message, send)
        except ConnectionClosed:
            pass
        finally:
            watchdog.cancel()
            await session.close()
            self._sessions.discard(session)
            self._log.info("ws.close", conn=connection_id, code=ws.close_code)

    async def _receive(self, session: Session, message: str | bytes,
                       send: Callable[[str], Awaitable[None]]) -> None:
        if isinstance(message, bytes):
            await send(error_reply(None, ParseError("Parse error: binary frames are not accepted")))
            return
        try:
            await session.receive(message)
        except Exception as exc:  # one bad frame must not end the connection
            error_id = uuid.uuid4().hex[:16]
            self._log.error("rpc.internal_error", error_id=error_id, exc_type=type(exc).__name__,
                            where=code_locations(exc))
            await send(error_reply(None, InternalError(errorId=error_id)))

    async def _watch(self, ws: ServerConnection, connection_id: str) -> None:
        """Drop a client whose unread replies pile up: over the hard cap, or over the limit too long."""
        limits = self._limits
        stalled_since: float | None = None
        while True:
            await asyncio.sleep(limits.watch_interval)
            size = ws.transport.get_write_buffer_size()
            now = time.monotonic()
            stalled_since = (stalled_since or now) if size > limits.write_buffer_bytes else None
            if size > limits.hard_buffer_bytes or (
                    stalled_since is not None and now - stalled_since > limits.stall_timeout):
                self._log.warning("ws.dropped_slow_reader", conn=connection_id, buffered=size)
                ws.transport.abort()
                return

    async def shutdown(self, grace: float) -> None:
        """Refuse new calls, let running ones finish for ``grace`` s, close with 1001."""
        if self._server is None:
            return
        self._server.server.close()  # stop accepting; open connections stay
        await asyncio.gather(*(s.drain(grace) for s in list(self._sessions)))
        self._server.close(close_connections=True)
        try:
            await asyncio.wait_for(self._server.wait_closed(), self._limits.close_timeout + 1)
        except TimeoutError:
            # A client that stopped reading cannot take a close frame: cut it off.
            for connection in list(self._server.all_connections):
                connection.transport.abort()
            await asyncio.wait_for(self._server.wait_closed(), self._limits.close_timeout + 1)
        self._log.info("ws.stopped")


def _single_valued(headers: Headers) -> dict[str, str] | None:
    """The handshake headers we judge, or None if any of them is repeated."""
    picked: dict[str, str] = {}
    for name in ("Host", "Origin", "Authorization"):
        values = headers.get_all(name)
        if len(values) > 1:
            return None
        if values:
            picked[name] = values[0]
    return picked


class _RefusalLog:
    """Logs refused handshakes at most once a second, with counts, so a page cannot flood the log."""

    def __init__(self, emit: Callable[[dict[tuple[int, str], int]], None], every: float = 1.0) -> None:
        self._emit = emit
        self._every = every
        self._counts: dict[tuple[int, str], int] = {}
        self._last = 0.0

    def add(self, status: int, reason: str) -> None:
        key = (status, reason)
        self._counts[key] = self._counts.get(key, 0) + 1
        now = time.monotonic()
        if now - self._last >= self._every:
            self._emit(self._counts)
            self._counts = {}
            self._last = now
