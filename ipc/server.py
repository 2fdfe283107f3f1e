"""The websocket transport: checks handshakes and pumps frames to sessions.

All protocol logic lives in :mod:`ipc.session` and below; this module only
moves text between sockets and sessions and enforces transport bounds
(frame size, connection count, keepalive, write buffer).

Reply memory is bounded before it is spent. Each connection writes its
replies one at a time through an :class:`Outlet`: a reply is handed to the
socket only when it fits beside what the client has not read yet
(``max_unread_bytes``) and beside what every connection has not read
(``reply_memory_bytes``, one :class:`ReplyMemory` for the whole server);
until then it waits, and a connection whose own unread output keeps a reply
waiting for ``stall_timeout`` is aborted. A reply never passes the frame
limit (the session refuses it with ``RPC_RESULT_TOO_LARGE``), so an empty
socket always has room for one. While a connection's unsent output (unread
plus waiting) is over its cap, or the server's is over the ceiling, its
next frames are not read: no more replies are built for a client that does
not read.
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
from dataclasses import dataclass, field, replace
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
    stall_timeout: float = 30.0
    watch_interval: float = 1.0
    write_buffer_bytes: int = 2**20  # above it a connection counts as lagging: notifications dropped
    max_unread_bytes: int = 8 * 2**20  # per connection, written and not yet read by the client
    reply_memory_bytes: int = 64 * 2**20  # the whole server: unread, and unsent for admission
    pressure_grace: float = 1.0  # reply memory full: a client lagging this long is cut off for room
    poll_interval: float = 0.01  # how often a waiting reply or frame looks for room again
    session: SessionLimits = field(default_factory=SessionLimits)


# Header bytes of a server's frame (2, plus 8 for a length of 64k or more): counted with the payload.
_FRAME_HEADER = 10
# Frames whose calls may start, while calls run, before their replies are let in to be counted.
_BURST = 8


class ReplyMemory:
    """The ceiling on reply bytes the whole server holds for its sockets, shared by every connection.

    *Unread* bytes are in the sockets' write buffers (written, not yet taken
    by the client); *held* bytes are those plus the replies built and waiting
    for their turn to be written. A reply is written only while the unread
    total leaves room for it; a connection's frames are read only while the
    held total is within the ceiling. When a reply or a frame waits on the
    ceiling (and at every watchdog tick while it is passed), the client that
    has not read for ``pressure_grace`` and holds the most is cut off to make
    room, so clients that read do not wait for it to time out.

    Kept cheap for the common case: only connections whose socket may hold
    unread bytes are summed, and waiting bytes are counted as they change.
    """

    def __init__(self, ceiling: int, pressure_grace: float) -> None:
        self.ceiling = ceiling
        self.pressure_grace = pressure_grace
        self.outlets: set[Outlet] = set()
        self.backed_up: set[Outlet] = set()  # their sockets had unread bytes when last looked at
        self.waiting = 0

    def unread(self) -> int:
        total = 0
        for outlet in list(self.backed_up):
            unread = outlet.unread
            if not unread:
                self.backed_up.discard(outlet)
            total += unread
        return total

    def held(self) -> int:
        return self.unread() + self.waiting

    def remove(self, outlet: Outlet) -> None:
        self.outlets.discard(outlet)
        self.backed_up.discard(outlet)

    def relieve(self) -> None:
        """Over the ceiling, cut off the lagging client holding the most, if one has lagged for
        ``pressure_grace``."""
        if self.held() <= self.ceiling:
            return
        now = time.monotonic()
        lagging = [o for o in self.outlets if o.lagging_for(now) >= self.pressure_grace]
        if lagging:
            max(lagging, key=lambda o: o.held).drop("reply_memory_full")


class Outlet:
    """One connection's way out: replies written one at a time, each only when it fits.

    A write hands the whole frame to the socket; the library then waits until
    the client has read it down to a quarter of ``write_buffer_bytes`` before
    the next reply's turn. A client that stops reading stays over
    ``write_buffer_bytes``: the watchdog cuts it off after ``stall_timeout``.
    """

    def __init__(self, ws: ServerConnection, memory: ReplyMemory, limits: TransportLimits,
                 on_drop: Callable[[int, str], None]) -> None:
        self._ws = ws
        self._memory = memory
        self._limits = limits
        self._on_drop = on_drop
        self._turn = asyncio.Lock()
        self._lagging_since: float | None = None
        self.waiting = 0  # bytes of replies built and not yet written
        memory.outlets.add(self)

    @property
    def unread(self) -> int:
        """Bytes written to the socket and not yet taken by the client."""
        transport = self._ws.transport
        return 0 if transport.is_closing() else transport.get_write_buffer_size()

    @property
    def held(self) -> int:
        return self.unread + self.waiting

    @property
    def closed(self) -> bool:
        return self._ws.transport.is_closing()

    def lagging_for(self, now: float) -> float:
        """Seconds this client's unread output has been over ``write_buffer_bytes`` (as last seen)."""
        if self.closed or self.unread <= self._limits.write_buffer_bytes:
            self._lagging_since = None
            return 0.0
        if self._lagging_since is None:
            self._lagging_since = now
        return now - self._lagging_since

    def drop(self, why: str) -> None:
        """Abort the connection: what it held is freed, its waiting replies are dropped."""
        if not self.closed:
            self._on_drop(self.held, why)

    def close(self) -> None:
        self._memory.remove(self)

    def _hold(self, size: int) -> None:
        self.waiting += size
        self._memory.waiting += size

    async def send(self, text: str) -> None:
        """Write ``text`` when it fits; drop it if the connection closes (or is closed) meanwhile."""
        # Encoded here once: the frame's size is the encoding's, and the connection sends these bytes
        # as the text frame instead of encoding the text again (a long prompt takes ~40 us each time).
        data = text.encode("utf-8")
        size = len(data) + _FRAME_HEADER
        self._hold(size)
        queued = True
        try:
            async with self._turn:
                if not await self._room(size):
                    return
                self._hold(-size)
                queued = False
                self._memory.backed_up.add(self)  # what the client does not take at once stays counted
                with contextlib.suppress(ConnectionClosed):
                    await self._ws.send(data, text=True)
        finally:
            if queued:
                self._hold(-size)

    async def _room(self, size: int) -> bool:
        """Wait until ``size`` bytes fit beside this connection's unread output and the server's;
        False if the connection closed, or stalled over its cap for ``stall_timeout`` (then aborted)."""
        limits = self._limits
        stalled_since: float | None = None
        while not self.closed:
            own = self.unread
            if own == 0 or own + size <= limits.max_unread_bytes:
                stalled_since = None  # not this client's doing, if it waits now
                total = self._memory.unread()
                if total == 0 or total + size <= self._memory.ceiling:
                    return True
                self._memory.relieve()
            else:
                now = time.monotonic()
                stalled_since = stalled_since if stalled_since is not None else now
                if now - stalled_since >= limits.stall_timeout:
                    self.drop("stalled")
                    return False
            await asyncio.sleep(limits.poll_interval)
        return False

    async def reply_room(self) -> bool:
        """Return once this connection may hold one more reply: its held output within its cap,
        and the server's within the ceiling unless this connection holds nothing (a client that
        reads is not kept waiting for the others). Waiting sheds the worst lagging client.
        False once the connection is closed: the reply would only be dropped."""
        while not self.closed:
            held = self.held
            if held <= self._limits.max_unread_bytes:
                if held == 0 or self._memory.held() <= self._memory.ceiling:
                    return True
                self._memory.relieve()
            await asyncio.sleep(self._limits.poll_interval)
        return False

    async def admit(self) -> None:
        """Return once this connection may have more calls run: when it may hold one more reply
        (:meth:`reply_room`), or at once if it is closing (its frames are then refused or dropped)."""
        await self.reply_room()


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
        self._memory = ReplyMemory(self._limits.reply_memory_bytes, self._limits.pressure_grace)
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

    @property
    def reply_bytes_unread(self) -> int:
        """Reply bytes in the sockets' write buffers, every connection together."""
        return self._memory.unread()

    @property
    def reply_bytes_waiting(self) -> int:
        """Reply bytes built and waiting for room to be written, every connection together."""
        return self._memory.waiting

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
            return inspector_response(request.path, method=request.method)
        if request.method != "GET":  # a websocket handshake is a GET; nothing else is served here
            refusal = self._refuse(connection, HTTPStatus.METHOD_NOT_ALLOWED, "method not allowed")
            refusal.headers["Allow"] = "GET"
            return refusal
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

        def dropped(held: int, why: str) -> None:
            self._log.warning("ws.dropped_slow_reader", conn=connection_id, held=held, why=why)
            ws.transport.abort()

        outlet = Outlet(ws, self._memory, self._limits, dropped)
        send = outlet.send

        def congested() -> bool:
            return outlet.held > self._limits.write_buffer_bytes

        unchecked = 0  # frames whose calls were started without a yield to let them run

        async def admit() -> None:
            # Let the calls already running reach their replies before more are started, so their
            # replies count: at every frame once output backs up, else at every _BURST-th.
            nonlocal unchecked
            unchecked = unchecked + 1 if session.in_flight else 0
            if unchecked and (outlet.held or unchecked >= _BURST):
                unchecked = 0
                await asyncio.sleep(0)
            await outlet.admit()

        session = Session(
            self._dispatcher,
            send,
            connection_id=connection_id,
            role=role,
            debug=self._debug,
            # A reply is one frame: the session refuses any larger than the frame limit.
            limits=replace(self._limits.session, max_reply_bytes=self._limits.max_frame_bytes),
            congested=congested,
            admit=admit,
            room=outlet.reply_room,
        )
        self._sessions.add(session)
        self._log.info("ws.open", conn=connection_id, role=role.value)
        watchdog = asyncio.ensure_future(self._watch(outlet))
        try:
            async for message in ws:
                await self._receive(session, message, send)
        except ConnectionClosed:
            pass
        finally:
            watchdog.cancel()
            await session.close()
            self._sessions.discard(session)
            outlet.close()
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

    async def _watch(self, outlet: Outlet) -> None:
        """Drop a client whose unread replies stay over ``write_buffer_bytes`` for ``stall_timeout``,
        even with nothing more to send it (a reply that cannot be written is timed by its Outlet)."""
        while not outlet.closed:
            await asyncio.sleep(self._limits.watch_interval)
            if outlet.lagging_for(time.monotonic()) > self._limits.stall_timeout:
                outlet.drop("stalled")
                return
            self._memory.relieve()  # over the ceiling with nothing waiting on it: shed all the same

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
