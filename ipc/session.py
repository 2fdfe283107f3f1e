"""One connection's protocol state: concurrency, bounds, cancellation.

A :class:`Session` consumes frame texts and produces reply texts through an
injected ``send`` coroutine, so it runs the same over a websocket and in a
test with a list for a socket. Requests run concurrently as tasks; replies
go out as each finishes. Every entry counts against ``max_in_flight`` until
its reply is handed to the transport, so a client that stops reading ends up
with its own requests refused rather than the server buffering for it.

Every reply is measured before it leaves (UTF-8 bytes, as the frame carries
it): one over ``max_reply_bytes`` (the server sets its frame limit there) is
never sent; the call answers ``RPC_RESULT_TOO_LARGE`` with the size instead.
A batch's replies are one frame, so they share that limit: each entry takes
its room when it finishes, and one that no longer fits answers
``RPC_RESULT_TOO_LARGE`` too (room for those errors is set aside when the
batch arrives, so the frame never passes the limit). Before it runs a frame's
calls the session awaits ``admit``: the server holds it there while this
connection's unsent output, or the whole server's, is over its bound, so a
client that does not read stops being read instead of having replies built
for it.

The server may ask the client too (:meth:`Session.request`, e.g.
``llm:complete``): the request goes out with a string id ``s<n>`` and the
client's :class:`~ipc.protocol.Response` resolves it. Responses are taken
as they arrive, in any frame, never answered and never counted against
``max_in_flight``. At most ``max_outbound`` such requests wait per
connection; closing or draining fails every one of them at once.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Awaitable, Callable, Coroutine, Hashable, Sequence
from dataclasses import dataclass
from typing import Annotated, Any, TypeVar

import structlog
from pydantic import StringConstraints

from ipc.context import CallContext, Peer, Role, Room, room_at_once
from ipc.dispatch import Dispatcher, bind_model
from ipc.errors import (
    BatchTooLarge,
    InternalError,
    InvalidParams,
    RequestCancelled,
    ResultTooLarge,
    RpcError,
    ShuttingDown,
    TooManyRequests,
)
from ipc.models import WireModel
from ipc.outbound import ClientBusy, ClientClosed, ClientRequestError, ClientTimeout
from ipc.protocol import (
    MAX_ID_CHARS,
    Call,
    Response,
    batch_reply,
    dumps,
    error_reply,
    parse_frame,
    success_reply,
    utf8_size,
)
from ipc.registry import wire_names

CANCEL_METHOD = "$/cancelRequest"

Send = Callable[[str], Awaitable[None]]
Admit = Callable[[], Awaitable[None]]
_T = TypeVar("_T")


class CancelParams(WireModel):
    """Params of ``$/cancelRequest``: the id of the request to cancel."""

    id: int | float | Annotated[str, StringConstraints(max_length=MAX_ID_CHARS)] | None


@dataclass(frozen=True, slots=True)
class SessionLimits:
    max_in_flight: int = 64
    max_batch: int = 64
    max_outbound: int = 8  # server-to-client requests awaiting an answer
    max_reply_bytes: int = 4 * 2**20  # one reply frame, UTF-8 bytes; the server sets its frame limit


# A size no reply reaches, for the widest RPC_RESULT_TOO_LARGE error an entry could need.
_WIDEST = 10**15
# A batch's replies share one frame: a reply well under the frame limit can still be refused.
_IN_BATCH = "The reply is larger than the room left for it in its batch's frame and was not sent"
_MAX_UTF8_BYTES = 4  # per code point: a reply this many times its length fits in any encoding of it


class _BatchRoom:
    """The room one batch's reply frame has left, taken by its entries as they finish.

    Each entry that will answer has the bytes of its widest refusal (its
    RPC_RESULT_TOO_LARGE error, and a comma) set aside up front, so whatever
    happens the frame holds every entry's answer; a reply takes what it needs
    beyond its reserve from what is free, or is refused.
    """

    def __init__(self, limit: int, entries: Sequence[Call | str]) -> None:
        self.limit = limit
        widest = ResultTooLarge(_IN_BATCH, size=_WIDEST, limit=limit, available=_WIDEST)
        self._widest = utf8_size(error_reply(None, widest)) - len("null")  # the id aside
        self._reserved = {id(e): self._reserve(e) for e in entries}
        self.free = limit - 2 - sum(self._reserved.values())  # 2: the brackets

    def _reserve(self, entry: Call | str) -> int:
        if isinstance(entry, str):
            return utf8_size(entry) + 1
        if entry.is_notification:
            return 0
        return self._widest + utf8_size(dumps(entry.id)) + 1

    def fit(self, call: Call, reply: str) -> str:
        """``reply`` if it fits, else its RPC_RESULT_TOO_LARGE error, which always does."""
        reserved = self._reserved.get(id(call), 0)
        size = utf8_size(reply)
        if size + 1 - reserved <= self.free:
            self.free -= size + 1 - reserved
            return reply
        available = max(self.free + reserved - 1, 0)
        refusal = error_reply(call.id, ResultTooLarge(_IN_BATCH, size=size, limit=self.limit,
                                                      available=available))
        self.free += reserved - utf8_size(refusal) - 1
        return refusal


def _id_key(request_id: Any) -> Hashable:
    return (isinstance(request_id, str), request_id)


def _always_free() -> bool:
    return False


async def _admit_at_once() -> None:
    return None


def _nothing() -> None:
    return None


def _task_reply(task: asyncio.Task[str | None]) -> str | None:
    """A batch entry's reply; an entry that died without one still gets an error."""
    if task.cancelled():
        return None
    if task.exception() is not None:
        return error_reply(None, InternalError())
    return task.result()


class Session:
    """The JSON-RPC state of one connection."""

    def __init__(
        self,
        dispatcher: Dispatcher,
        send: Send,
        *,
        connection_id: str,
        role: Role = Role.CLIENT,
        debug: bool = False,
        limits: SessionLimits | None = None,
        congested: Callable[[], bool] = _always_free,
        admit: Admit = _admit_at_once,
        room: Room = room_at_once,
    ) -> None:
        self._dispatcher = dispatcher
        self._send = send
        self._limits = limits or SessionLimits()
        self._congested = congested
        self._admit = admit
        self._debug = debug
        self._tasks: set[asyncio.Task[Any]] = set()
        self._by_id: dict[Hashable, set[asyncio.Task[Any]]] = {}
        self._client_cancelled: set[asyncio.Task[Any]] = set()
        self._running: set[asyncio.Task[Any]] = set()
        self._in_flight = 0
        self._draining = False
        self._idle = asyncio.Event()
        self._idle.set()
        self.dropped_notifications = 0
        self.topics: frozenset[str] = frozenset()  # server notifications this connection asked for
        self.capabilities: frozenset[str] = frozenset()  # what the client said it can do for the server
        self.unexpected_responses = 0
        self._outbound: dict[str, asyncio.Future[Response]] = {}
        self._outbound_ids = itertools.count(1)
        self._closed = False
        self._on_close: dict[int, Callable[[], None]] = {}
        self._on_close_ids = itertools.count()
        self.peer = Peer(connection_id=connection_id, role=role, notify=self.notify, cancel=self.cancel,
                         subscribe=self._subscribe, request=self.request, declare=self._declare,
                         on_close=self._add_on_close, room=room)
        self._log = structlog.get_logger("ipc.session").bind(conn=connection_id)

    @property
    def in_flight(self) -> int:
        return self._in_flight

    @property
    def outbound(self) -> int:
        """Server-to-client requests awaiting the client's answer."""
        return len(self._outbound)

    async def receive(self, text: str) -> None:
        """Take one frame: settle its responses, schedule its calls and send any immediate errors."""
        frame = parse_frame(text, self._limits.max_batch)
        entries: list[Call | str] = []
        for entry in frame.entries:
            if isinstance(entry, Response):
                self._settle(entry)
            else:
                entries.append(entry)
        if not entries:  # only responses: nothing to answer
            return
        if not frame.is_batch and isinstance(entries[0], Call) and entries[0].method == CANCEL_METHOD:
            await self._emit([self._cancel_now(entries[0])])
            return
        calls = [e for e in entries if isinstance(e, Call)]
        room = _BatchRoom(self._limits.max_reply_bytes, entries) if frame.is_batch else None
        if room is not None and room.free < 0:
            # Not even an error for each entry would fit one frame (ids that long, a frame that
            # small): refused whole, before any entry runs, so that none acts unanswered.
            too_large = BatchTooLarge("Invalid Request: the batch's answers cannot all fit one frame",
                                      maxFrameBytes=room.limit, needed=room.limit - room.free)
            await self._emit([error_reply(None, too_large)])
            return
        if calls:
            await self._admit()  # the server holds the frame here while output waits
        refusal = self._refusal(len(calls))
        if refusal is not None:
            self._log.info("rpc.refused", code=refusal.data_code, entries=len(calls))
            entries = [e if isinstance(e, str) else error_reply(e.id, refusal) for e in entries
                       if isinstance(e, str) or not e.is_notification]
        if refusal is not None or not calls:
            replies = [e for e in entries if isinstance(e, str)]
            await self._emit([batch_reply(replies)] if frame.is_batch else replies)
            return
        self._acquire(len(calls))
        # Every task and request id is registered before this returns, so a cancel
        # in the very next frame always finds its request.
        if room is not None:
            pending = [self._track(self._call(e, room), e) if isinstance(e, Call) else e for e in entries]
            collector = self._track(self._run_batch(pending))
        else:
            collector = self._track(self._run_single(calls[0]), calls[0])
        count = len(calls)
        collector.add_done_callback(lambda _: self._release(count))

    def _refusal(self, count: int) -> RpcError | None:
        if count == 0:
            return None
        if self._draining:
            return ShuttingDown()
        if self._in_flight + count > self._limits.max_in_flight:
            return TooManyRequests(limit=self._limits.max_in_flight, inFlight=self._in_flight)
        return None

    def _cancel_now(self, call: Call) -> str | None:
        """Handle a lone ``$/cancelRequest`` at once, ahead of every limit, its params bound as
        every method's are."""
        try:
            params = bind_model(CancelParams, wire_names(CancelParams), call.params)
        except InvalidParams as err:
            return None if call.is_notification else error_reply(call.id, err)
        found = self.cancel(params.id)
        return None if call.is_notification else success_reply(call.id, {"ok": found})

    def cancel(self, request_id: Any) -> bool:
        """Cancel every in-flight request with this id; False if none.

        A request still waiting to start is only marked (it answers -32800
        without running); a running one has its task cancelled.
        """
        tasks = self._by_id.get(_id_key(request_id), set())
        for task in tasks:
            self._client_cancelled.add(task)
            if task in self._running:
                task.cancel()
        return bool(tasks)

    def _subscribe(self, topics: frozenset[str]) -> None:
        self.topics = topics

    def _declare(self, capabilities: frozenset[str]) -> None:
        self.capabilities = capabilities

    def _add_on_close(self, callback: Callable[[], None]) -> Callable[[], None]:
        """Run ``callback`` once when the session closes (at once if it has); returns its remover."""
        if self._closed:
            self._run_callback(callback)
            return _nothing
        key = next(self._on_close_ids)
        self._on_close[key] = callback

        def remove() -> None:
            self._on_close.pop(key, None)

        return remove

    def _run_callback(self, callback: Callable[[], None]) -> None:
        try:
            callback()
        except Exception as exc:  # one listener's failure must not stop the others
            self._log.error("rpc.on_close_failed", exc_type=type(exc).__name__)

    async def request(self, method: str, params: dict[str, Any] | list[Any] | None,
                      timeout: float) -> Any:
        """Ask the client: send a request with id ``s<n>`` and return the result it answers.

        Raises :class:`~ipc.outbound.ClientBusy` at once, without sending, when
        ``max_outbound`` requests already wait or the client lags;
        :class:`~ipc.outbound.ClientClosed` when the session is closing or
        closes while waiting; :class:`~ipc.outbound.ClientTimeout` after
        ``timeout`` seconds (the client is then sent ``$/cancelRequest``);
        :class:`~ipc.outbound.ClientRequestError` with the client's error code.
        """
        if self._draining or self._closed:
            raise ClientClosed()
        if len(self._outbound) >= self._limits.max_outbound:
            self._log.info("rpc.outbound_refused", method=method, why="limit", waiting=len(self._outbound))
            raise ClientBusy("limit")
        if self._congested():
            self._log.info("rpc.outbound_refused", method=method, why="congested")
            raise ClientBusy("congested")
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": f"s{next(self._outbound_ids)}", "method": method}
        if params is not None:
            message["params"] = params
        text = dumps(message)  # a params value that is not JSON fails here, before anything waits
        request_id: str = message["id"]
        answer: asyncio.Future[Response] = asyncio.get_running_loop().create_future()
        self._outbound[request_id] = answer
        deadline = asyncio.timeout(timeout)
        try:
            async with deadline:
                await self._send(text)
                response = await answer
        except TimeoutError:
            if not deadline.expired():  # not our deadline: let it be what it is
                raise
            self._outbound.pop(request_id, None)
            self._log.info("rpc.outbound_timeout", method=method, id=request_id, timeout=timeout)
            await self._cancel_outbound(request_id)
            raise ClientTimeout(timeout) from None
        except asyncio.CancelledError:
            if self._outbound.pop(request_id, None) is not None:  # the caller gave up while waiting
                await asyncio.shield(self._cancel_outbound(request_id))
            raise
        finally:
            self._outbound.pop(request_id, None)
            if answer.done() and not answer.cancelled():
                answer.exception()  # retrieved, so an unawaited failure is not reported as lost
        if response.error is not None:
            code = response.error.get("code")
            valid = isinstance(code, int) and not isinstance(code, bool)
            raise ClientRequestError(code if valid else None)
        return response.result

    async def _cancel_outbound(self, request_id: str) -> None:
        """Tell the client to stop working on ``request_id``: best effort, never raises."""
        if self._draining or self._closed or self._congested():
            return
        try:
            await self._send(dumps({"jsonrpc": "2.0", "method": CANCEL_METHOD, "params": {"id": request_id}}))
        except Exception as exc:  # the request has already failed; this notice is a courtesy
            self._log.info("rpc.outbound_cancel_unsent", exc_type=type(exc).__name__)

    def _settle(self, response: Response) -> None:
        """Hand a response to the request that awaits it; ignore (and count) any other."""
        answer = self._outbound.get(response.id) if isinstance(response.id, str) else None
        if answer is None or answer.done():
            self.unexpected_responses += 1
            count = self.unexpected_responses
            if count & (count - 1) == 0:  # the 1st, 2nd, 4th, 8th...: a flood cannot flood the log
                self._log.info("rpc.unexpected_response", count=count)
            return
        answer.set_result(response)

    def _fail_outbound(self) -> None:
        """Fail every waiting server-to-client request with ClientClosed."""
        for answer in self._outbound.values():
            if not answer.done():
                answer.set_exception(ClientClosed())
        self._outbound.clear()

    async def notify(self, method: str, params: dict[str, Any]) -> None:
        """Send a server-to-client notification, dropped if the client lags."""
        if self._congested():
            self.dropped_notifications += 1
            self._log.info("rpc.notification_dropped", method=method, dropped=self.dropped_notifications)
            return
        await self._send(dumps({"jsonrpc": "2.0", "method": method, "params": params}))

    async def _run_single(self, call: Call) -> None:
        reply = await self._call(call, None)
        if reply is not None:
            await self._send(reply)

    async def _run_batch(self, pending: list[asyncio.Task[str | None] | str]) -> None:
        tasks = [p for p in pending if isinstance(p, asyncio.Task)]
        try:
            await asyncio.gather(*tasks, return_exceptions=True)
        except asyncio.CancelledError:
            for task in tasks:
                task.cancel()
            raise
        replies = [p if isinstance(p, str) else _task_reply(p) for p in pending]
        await self._emit([batch_reply([r for r in replies if r is not None])])

    def _bounded(self, reply: str, id_: Any = None) -> str:
        """``reply`` if it is within ``max_reply_bytes``, else the RPC_RESULT_TOO_LARGE error
        for ``id_`` (with a null id if even that would not fit)."""
        limit = self._limits.max_reply_bytes
        if len(reply) * _MAX_UTF8_BYTES <= limit:
            return reply  # fits however it encodes: no need to encode it to know
        size = utf8_size(reply)
        if size <= limit:
            return reply
        self._log.info("rpc.reply_too_large", bytes=size, limit=limit)
        refusal = error_reply(id_, ResultTooLarge(size=size, limit=limit))
        return refusal if utf8_size(refusal) <= limit else error_reply(None, ResultTooLarge(size=size,
                                                                                           limit=limit))

    def _track(self, coro: Coroutine[Any, Any, _T], call: Call | None = None) -> asyncio.Task[_T]:
        """Run ``coro`` as a task that close() can cancel, and $/cancelRequest if it is a request."""
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        if call is not None and not call.is_notification:
            key = _id_key(call.id)
            self._by_id.setdefault(key, set()).add(task)
            task.add_done_callback(lambda t: self._forget(key, t))
        return task

    async def _call(self, call: Call, room: _BatchRoom | None) -> str | None:
        """Run ``call``; its reply measured against the frame limit, or the room left in its batch."""
        reply = await self._answer(call)
        if reply is None:
            return None
        if room is None:
            return self._bounded(reply, call.id)
        fitted = room.fit(call, reply)
        if fitted is not reply:
            self._log.info("rpc.reply_too_large", bytes=utf8_size(reply), limit=room.limit, batch=True)
        return fitted

    async def _answer(self, call: Call) -> str | None:
        task = asyncio.current_task()
        assert task is not None
        if task in self._client_cancelled:  # cancelled before it started
            return None if call.is_notification else error_reply(call.id, RequestCancelled())
        ctx = CallContext(peer=self.peer, request_id=None if call.is_notification else call.id,
                          debug=self._debug)
        self._running.add(task)
        try:
            return await self._dispatcher.dispatch(call, ctx)
        except asyncio.CancelledError:
            if task not in self._client_cancelled:
                raise
            task.uncancel()
            return None if call.is_notification else error_reply(call.id, RequestCancelled())
        finally:
            self._running.discard(task)

    def _forget(self, key: Hashable, task: asyncio.Task[Any]) -> None:
        self._client_cancelled.discard(task)
        bucket = self._by_id.get(key)
        if bucket is not None:
            bucket.discard(task)
            if not bucket:
                del self._by_id[key]

    async def _emit(self, replies: Sequence[str | Call | None]) -> None:
        for reply in replies:
            if isinstance(reply, str):
                await self._send(self._bounded(reply))

    def _acquire(self, count: int) -> None:
        self._in_flight += count
        self._idle.clear()

    def _release(self, count: int) -> None:
        self._in_flight -= count
        if self._in_flight == 0:
            self._idle.set()

    async def drain(self, timeout: float) -> bool:
        """Refuse new calls, fail waiting requests to the client and wait for running calls;
        True if all finished."""
        self._draining = True
        self._fail_outbound()
        try:
            await asyncio.wait_for(self._idle.wait(), timeout)
        except TimeoutError:
            return False
        return True

    async def close(self) -> None:
        """Fail waiting requests to the client, tell close listeners, cancel whatever still runs and
        wait for it to unwind."""
        self._draining = True
        self._fail_outbound()
        if not self._closed:
            self._closed = True
            listeners = list(self._on_close.values())
            self._on_close.clear()
            for callback in listeners:
                self._run_callback(callback)
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
