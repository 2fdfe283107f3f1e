"""One connection's protocol state, driven with a list for a socket."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from structlog.testing import capture_logs

from ipc.context import CallContext
from ipc.dispatch import Dispatcher
from ipc.models import WireModel
from ipc.outbound import ClientBusy, ClientClosed, ClientRequestError, ClientTimeout, OutboundError
from ipc.server import TransportLimits
from ipc.session import Session, SessionLimits
from tests.support.inproc import build_test_registry


def _session(seen: list[str], sent: list[str], max_in_flight: int = 4,
             congested: bool = False, max_reply_bytes: int = 4 * 2**20) -> Session:
    async def send(text: str) -> None:
        sent.append(text)

    limits = SessionLimits(max_in_flight=max_in_flight, max_reply_bytes=max_reply_bytes)
    return Session(Dispatcher(build_test_registry(TransportLimits(), seen)), send,
                   connection_id="t", limits=limits, congested=lambda: congested)


def _request(method: str, params: Any, id_: Any) -> str:
    return json.dumps({"jsonrpc": "2.0", "method": method, "params": params or {}, "id": id_})


async def _until(predicate: Any) -> None:
    for _ in range(500):
        if predicate():
            return
        await asyncio.sleep(0.01)
    raise AssertionError("condition not reached")


async def test_in_flight_counts_until_the_reply_is_sent() -> None:
    """Entries count against the limit while they run and are released after replying."""
    seen: list[str] = []
    sent: list[str] = []
    session = _session(seen, sent)
    await session.receive(_request("test:sleep", {"seconds": 0.2}, 1))
    await session.receive(json.dumps([json.loads(_request("test:sleep", {"seconds": 0.2}, i))
                                      for i in (2, 3)]))
    assert session.in_flight == 3
    await session.receive(json.dumps([json.loads(_request("get_data", None, i)) for i in (4, 5)]))
    refused = [json.loads(t) for t in sent]
    assert [r["error"]["data"]["code"] for r in refused[0]] == ["RPC_TOO_MANY_REQUESTS"] * 2
    await _until(lambda: session.in_flight == 0)
    assert len(sent) == 3


async def test_drain_refuses_new_calls_and_waits() -> None:
    """While draining, new calls get SERVER_SHUTTING_DOWN and running ones finish."""
    seen: list[str] = []
    sent: list[str] = []
    session = _session(seen, sent)
    await session.receive(_request("test:sleep", {"seconds": 0.1, "label": "a"}, 1))
    drained = asyncio.ensure_future(session.drain(5))
    await asyncio.sleep(0)
    await session.receive(_request("get_data", None, 2))
    assert await drained is True
    replies = {r["id"]: r for r in map(json.loads, sent)}
    assert replies[2]["error"]["data"]["code"] == "SERVER_SHUTTING_DOWN"
    assert replies[1]["result"] == {"label": "a"}


async def test_drain_times_out_then_close_cancels() -> None:
    """A call that outlives the grace period is cancelled by close, without a reply."""
    seen: list[str] = []
    sent: list[str] = []
    session = _session(seen, sent)
    await session.receive(_request("test:sleep", {"seconds": 30, "label": "long"}, 1))
    assert await session.drain(0.05) is False
    await session.close()
    assert "sleep-cancelled:long" in seen
    assert sent == []


async def test_cancel_bypasses_the_in_flight_limit() -> None:
    """A cancel notification works even when the connection is at its limit."""
    seen: list[str] = []
    sent: list[str] = []
    session = _session(seen, sent, max_in_flight=1)
    await session.receive(_request("test:sleep", {"seconds": 30, "label": "x"}, "k"))
    await _until(lambda: "sleep-start:x" in seen)
    await session.receive('{"jsonrpc":"2.0","method":"$/cancelRequest","params":{"id":"k"}}')
    await _until(lambda: len(sent) == 1)
    assert json.loads(sent[0])["error"]["data"]["code"] == "REQUEST_CANCELLED"
    assert session.in_flight == 0


async def test_cancel_as_a_request_reports_whether_it_found_one() -> None:
    """$/cancelRequest sent with an id answers ok=false when nothing matched."""
    sent: list[str] = []
    session = _session([], sent)
    await session.receive(_request("$/cancelRequest", {"id": 77}, 1))
    await _until(lambda: len(sent) == 1)
    assert json.loads(sent[0])["result"] == {"ok": False}


async def test_cancel_params_are_bound_as_strictly_as_every_methods() -> None:
    """A lone $/cancelRequest with an id whose params break the wire rules (true for an id, a lone
    surrogate in a key, an unknown name, an id longer than any request's) answers INVALID_PARAMS;
    ``true`` does not cancel request 1."""
    seen: list[str] = []
    sent: list[str] = []
    session = _session(seen, sent)
    await session.receive(_request("test:sleep", {"seconds": 30, "label": "one"}, 1))
    await _until(lambda: "sleep-start:one" in seen)
    long_id = "x" * 257
    frames = ['{"id": true}', '{"id": 1, "\\ud800": 1}', '{"id": 1, "extra": 2}', f'{{"id": "{long_id}"}}']
    for n, params in enumerate(frames, start=10):
        await session.receive(f'{{"jsonrpc":"2.0","method":"$/cancelRequest","params":{params},"id":{n}}}')
    await _until(lambda: len(sent) == len(frames))
    assert [json.loads(r)["error"]["data"]["code"] for r in sent] == ["INVALID_PARAMS"] * len(frames)
    assert session.in_flight == 1
    await session.close()


async def test_a_batch_whose_answers_cannot_fit_one_frame_is_refused_before_it_runs() -> None:
    """When not even an error for each entry would fit the reply frame (long ids, a small frame),
    the batch answers one RPC_BATCH_TOO_LARGE with the numbers, and none of its entries runs; a
    batch just small enough runs and answers every entry."""
    seen: list[str] = []
    sent: list[str] = []
    session = _session(seen, sent, max_in_flight=64, max_reply_bytes=8_000)
    batch = [{"jsonrpc": "2.0", "method": "test:sleep", "params": {"seconds": 0, "label": f"b{n}"},
              "id": "i" * 250 + str(n)} for n in range(20)]
    await session.receive(json.dumps(batch))
    await _until(lambda: len(sent) == 1)
    refused = json.loads(sent[0])
    assert (refused["id"], refused["error"]["data"]["code"]) == (None, "RPC_BATCH_TOO_LARGE")
    assert refused["error"]["data"]["maxFrameBytes"] == 8_000 < refused["error"]["data"]["needed"]
    assert not [event for event in seen if event.startswith("sleep-start")]
    await session.receive(json.dumps(batch[:5]))
    await _until(lambda: len(sent) == 2)
    assert sorted(r["id"][-1] for r in json.loads(sent[1])) == list("01234")


async def test_notifications_are_dropped_when_the_client_lags() -> None:
    """Server notifications are skipped, and counted, while the write buffer is full."""
    sent: list[str] = []
    session = _session([], sent, congested=True)
    await session.notify("$/progress", {"done": 1})
    assert sent == []
    assert session.dropped_notifications == 1


async def test_close_cancels_batch_entries_too() -> None:
    """Closing a connection stops every running entry of its batches, not only the batch."""
    seen: list[str] = []
    sent: list[str] = []
    session = _session(seen, sent)
    await session.receive(json.dumps([json.loads(_request("test:sleep", {"seconds": 30, "label": f"e{i}"}, i))
                                      for i in (1, 2)]))
    await _until(lambda: "sleep-start:e2" in seen)
    await session.close()
    assert {"sleep-cancelled:e1", "sleep-cancelled:e2"} <= set(seen)
    assert session.in_flight == 0


async def test_cancel_before_the_request_starts() -> None:
    """A cancel handled before its request ever ran still answers -32800 and frees the slot."""
    seen: list[str] = []
    sent: list[str] = []
    session = _session(seen, sent, max_in_flight=1)
    await session.receive(_request("test:sleep", {"seconds": 30, "label": "never"}, 9))
    await session.receive('{"jsonrpc":"2.0","method":"$/cancelRequest","params":{"id":9}}')
    await _until(lambda: len(sent) == 1)
    assert json.loads(sent[0])["error"]["data"]["code"] == "REQUEST_CANCELLED"
    assert "sleep-start:never" not in seen
    await _until(lambda: session.in_flight == 0)


async def test_cancel_a_batch_entry_before_it_starts() -> None:
    """Cancelling a batch entry right after the batch arrives answers that entry with -32800."""
    seen: list[str] = []
    sent: list[str] = []
    session = _session(seen, sent)
    batch = [json.loads(_request("test:sleep", {"seconds": 30, "label": "x"}, "a")),
             json.loads(_request("test:sleep", {"seconds": 0, "label": "y"}, "b"))]
    await session.receive(json.dumps(batch))
    await session.receive('{"jsonrpc":"2.0","method":"$/cancelRequest","params":["a"]}')
    await _until(lambda: len(sent) == 1)
    replies = {r["id"]: r for r in json.loads(sent[0])}
    assert replies["a"]["error"]["data"]["code"] == "REQUEST_CANCELLED"
    assert replies["b"]["result"] == {"label": "y"}
    await _until(lambda: session.in_flight == 0)


async def test_cancel_as_a_request_bypasses_the_limit() -> None:
    """A cancel sent with an id is answered even when the connection is full."""
    seen: list[str] = []
    sent: list[str] = []
    session = _session(seen, sent, max_in_flight=1)
    await session.receive(_request("test:sleep", {"seconds": 30, "label": "k"}, 1))
    await _until(lambda: "sleep-start:k" in seen)
    await session.receive(_request("$/cancelRequest", {"id": 1}, 2))
    await _until(lambda: len(sent) == 2)
    by_id = {r["id"]: r for r in map(json.loads, sent)}
    assert by_id[2]["result"] == {"ok": True}
    assert by_id[1]["error"]["data"]["code"] == "REQUEST_CANCELLED"


async def test_out_of_range_numbers_are_parse_errors() -> None:
    """1e400 cannot be answered (it is infinite), so the frame is a parse error, not a lost reply."""
    sent: list[str] = []
    session = _session([], sent)
    await session.receive('{"jsonrpc":"2.0","method":"get_data","id":1e400}')
    await session.receive('[{"jsonrpc":"2.0","method":"get_data","id":1},{"x":1e400}]')
    replies = [json.loads(t) for t in sent]
    assert [r["error"]["code"] for r in replies] == [-32700, -32700]
    assert session.in_flight == 0


# --- server-to-client requests ------------------------------------------------


def _outbound_session(sent: list[str], *, max_outbound: int = 8, max_in_flight: int = 4,
                      congested: list[bool] | None = None) -> Session:
    """A session whose registry also has test:ask, a handler that asks the client and returns
    its answer (or the name of the exception it got)."""
    lagging = congested if congested is not None else [False]
    registry = build_test_registry(TransportLimits(), [])

    @registry.method("test:ask", params=AskParams, result=AskResult, summary="Ask the client.")
    async def ask(params: AskParams, ctx: CallContext) -> AskResult:
        try:
            answer = await ctx.peer.request("llm:complete", {"purpose": params.purpose}, params.timeout)
        except OutboundError as exc:
            return AskResult(outcome=type(exc).__name__)
        return AskResult(outcome=json.dumps(answer))

    async def send(text: str) -> None:
        sent.append(text)

    return Session(Dispatcher(registry), send, connection_id="t",
                   limits=SessionLimits(max_in_flight=max_in_flight, max_outbound=max_outbound),
                   congested=lambda: lagging[0])


class AskParams(WireModel):
    purpose: str = "test"
    timeout: float = 10.0


class AskResult(WireModel):
    outcome: str


def _sent_requests(sent: list[str]) -> list[dict[str, Any]]:
    """The server-to-client requests among what the session sent (objects with a method and an id)."""
    return [m for m in map(json.loads, sent) if isinstance(m, dict) and "method" in m and "id" in m]


def _answer(id_: Any, result: Any) -> str:
    return json.dumps({"jsonrpc": "2.0", "id": id_, "result": result})


async def test_request_sends_prefixed_ids_and_returns_the_result() -> None:
    """request() sends a JSON-RPC request with a string id s<n> and returns the result the client
    answers; ids are never reused, and a response gets no reply of its own."""
    sent: list[str] = []
    session = _outbound_session(sent)
    first = asyncio.ensure_future(session.request("llm:complete", {"purpose": "p"}, 5))
    second = asyncio.ensure_future(session.request("other", None, 5))
    await _until(lambda: len(sent) == 2)
    requests = _sent_requests(sent)
    assert requests == [{"jsonrpc": "2.0", "id": "s1", "method": "llm:complete", "params": {"purpose": "p"}},
                        {"jsonrpc": "2.0", "id": "s2", "method": "other"}]
    assert session.outbound == 2
    await session.receive(_answer("s2", None))
    await session.receive(_answer("s1", {"content": "text"}))
    assert await first == {"content": "text"}
    assert await second is None
    assert len(sent) == 2
    assert session.outbound == 0


async def test_an_error_answer_raises_with_the_code_only() -> None:
    """A client's error answer raises ClientRequestError carrying its integer code; the message and
    data never travel on; a code that is not an integer becomes None."""
    sent: list[str] = []
    session = _outbound_session(sent)
    for error, code in (({"code": -32601, "message": "秘密 secret text", "data": {"x": 1}}, -32601),
                        ({"code": "bad", "message": "secret"}, None), ({"code": True}, None)):
        pending = asyncio.ensure_future(session.request("llm:complete", {}, 5))
        await _until(lambda: session.outbound == 1)
        await session.receive(json.dumps({"jsonrpc": "2.0", "id": _sent_requests(sent)[-1]["id"],
                                          "error": error}))
        with pytest.raises(ClientRequestError) as raised:
            await pending
        assert raised.value.code == code
        assert raised.value.reason == "error"
        assert "secret" not in str(raised.value)


async def test_timeout_raises_and_tells_the_client_to_stop() -> None:
    """No answer within the timeout raises ClientTimeout (a TimeoutError) and sends the client
    $/cancelRequest for that id; an answer that comes later is ignored without a reply."""
    sent: list[str] = []
    session = _outbound_session(sent)
    with pytest.raises(TimeoutError) as raised:
        await session.request("llm:complete", {}, 0.05)
    assert isinstance(raised.value, ClientTimeout)
    assert raised.value.reason == "timeout"
    assert [json.loads(t) for t in sent[1:]] == [
        {"jsonrpc": "2.0", "method": "$/cancelRequest", "params": {"id": "s1"}}]
    await session.receive(_answer("s1", "late"))
    assert session.unexpected_responses == 1
    assert len(sent) == 2
    assert session.outbound == 0


async def test_a_caller_that_gives_up_cancels_on_the_client() -> None:
    """Cancelling the task awaiting request() forgets the request and sends $/cancelRequest."""
    sent: list[str] = []
    session = _outbound_session(sent)
    pending = asyncio.ensure_future(session.request("llm:complete", {}, 30))
    await _until(lambda: session.outbound == 1)
    pending.cancel()
    with pytest.raises(asyncio.CancelledError):
        await pending
    assert session.outbound == 0
    assert json.loads(sent[-1]) == {"jsonrpc": "2.0", "method": "$/cancelRequest", "params": {"id": "s1"}}


@pytest.mark.parametrize("ending", ["close", "drain"])
async def test_closing_fails_every_waiting_request_at_once(ending: str) -> None:
    """close() and drain() fail every waiting request with ClientClosed at once (long timeouts
    notwithstanding), send no cancels, and later requests are refused as closed without sending."""
    sent: list[str] = []
    session = _outbound_session(sent)
    pending = [asyncio.ensure_future(session.request("llm:complete", {"n": i}, 60)) for i in range(3)]
    await _until(lambda: session.outbound == 3)
    if ending == "close":
        await session.close()
    else:
        assert await session.drain(5) is True
    outcomes = await asyncio.wait_for(asyncio.gather(*pending, return_exceptions=True), 5)
    assert all(isinstance(o, ClientClosed) and o.reason == "closed" for o in outcomes)
    with pytest.raises(ClientClosed):
        await session.request("llm:complete", {}, 60)
    assert len(sent) == 3


async def test_waiting_requests_are_bounded() -> None:
    """Past max_outbound waiting requests, request() is refused at once as busy, and nothing is sent."""
    sent: list[str] = []
    session = _outbound_session(sent, max_outbound=2)
    pending = [asyncio.ensure_future(session.request("llm:complete", {}, 60)) for _ in range(2)]
    await _until(lambda: session.outbound == 2)
    with pytest.raises(ClientBusy) as raised:
        await session.request("llm:complete", {}, 60)
    assert (raised.value.reason, raised.value.why) == ("busy", "limit")
    assert len(sent) == 2
    await session.receive(_answer("s1", 1))
    assert await pending[0] == 1
    third = asyncio.ensure_future(session.request("llm:complete", {}, 60))
    await _until(lambda: len(sent) == 3)
    assert _sent_requests(sent)[-1]["id"] == "s3"
    await session.close()
    await asyncio.gather(pending[1], third, return_exceptions=True)


async def test_a_lagging_client_is_not_asked() -> None:
    """While the connection is congested, request() is refused at once as busy, without sending."""
    sent: list[str] = []
    session = _outbound_session(sent, congested=[True])
    with pytest.raises(ClientBusy) as raised:
        await session.request("llm:complete", {}, 60)
    assert raised.value.why == "congested"
    assert sent == []
    assert session.outbound == 0


async def test_unknown_responses_are_ignored_and_logged_without_content() -> None:
    """A response to no waiting request (unknown id, a number, one already answered) gets no reply,
    changes nothing and is logged as rpc.unexpected_response without its content."""
    sent: list[str] = []
    session = _outbound_session(sent)
    pending = asyncio.ensure_future(session.request("llm:complete", {}, 5))
    await _until(lambda: session.outbound == 1)
    with capture_logs() as logs:
        await session.receive(_answer("s99", "secret-one"))
        await session.receive(_answer(1, "secret-two"))
        await session.receive(json.dumps({"jsonrpc": "2.0", "id": "s1", "error": {"code": 1,
                                                                                  "message": "secret"}}))
        await session.receive(_answer("s1", "secret-three"))
    with pytest.raises(ClientRequestError):
        await pending
    assert session.unexpected_responses == 3
    assert len(sent) == 1
    events = [e for e in logs if e["event"] == "rpc.unexpected_response"]
    assert [e["count"] for e in events] == [1, 2]  # the 1st, 2nd, 4th...: a flood does not flood the log
    assert "secret" not in repr(logs)
    assert "s99" not in repr(logs)


async def test_responses_bypass_the_in_flight_limit_and_mix_with_calls() -> None:
    """A handler asks the client while its call holds the connection's only slot: the response
    still gets through (not counted, not answered), and a batch mixing a response with calls
    answers the calls only."""
    sent: list[str] = []
    session = _outbound_session(sent, max_in_flight=1)
    await session.receive(_request("test:ask", {"purpose": "summary"}, "call-1"))
    await _until(lambda: len(_sent_requests(sent)) == 1)
    asked = _sent_requests(sent)[0]
    assert (asked["method"], asked["params"]) == ("llm:complete", {"purpose": "summary"})
    assert session.in_flight == 1
    await session.receive(_answer(asked["id"], {"content": "done"}))
    await _until(lambda: session.in_flight == 0)
    reply = json.loads(sent[-1])
    assert reply == {"jsonrpc": "2.0", "id": "call-1", "result": {"outcome": '{"content": "done"}'}}

    sent.clear()
    session = _outbound_session(sent, max_in_flight=2)
    await session.receive(_request("test:ask", {}, "call-2"))
    await _until(lambda: len(_sent_requests(sent)) == 1)
    asked_id = _sent_requests(sent)[0]["id"]
    await session.receive(json.dumps([json.loads(_answer(asked_id, "two")),
                                      {"jsonrpc": "2.0", "method": "test:echo", "params": {"text": "e"},
                                       "id": "e"}]))
    await _until(lambda: session.in_flight == 0 and len(sent) == 3)
    replies = [json.loads(t) for t in sent[1:]]
    by_id = {r["id"]: r for r in replies if isinstance(r, dict)}
    assert by_id["call-2"]["result"] == {"outcome": '"two"'}
    batch = next(r for r in replies if isinstance(r, list))
    assert batch == [{"jsonrpc": "2.0", "id": "e", "result": {"text": "e"}}]


async def test_a_batch_of_responses_only_gets_no_reply() -> None:
    """A batch holding nothing but responses settles them all and is not answered."""
    sent: list[str] = []
    session = _outbound_session(sent)
    pending = [asyncio.ensure_future(session.request("m", {}, 5)) for _ in range(2)]
    await _until(lambda: session.outbound == 2)
    await session.receive(json.dumps([json.loads(_answer("s2", "b")), json.loads(_answer("s1", "a"))]))
    assert await asyncio.gather(*pending) == ["a", "b"]
    assert len(sent) == 2


async def test_close_listeners_run_once() -> None:
    """on_close callbacks run once when the session closes, a removed one not at all, and one
    registered after the close runs at once; a failing one does not stop the others."""
    session = _outbound_session([])
    calls: list[str] = []

    def failing() -> None:
        calls.append("failing")
        raise RuntimeError("listener bug")

    session.peer.on_close(failing)
    session.peer.on_close(lambda: calls.append("a"))
    remove = session.peer.on_close(lambda: calls.append("removed"))
    remove()
    await session.close()
    await session.close()
    assert calls == ["failing", "a"]
    session.peer.on_close(lambda: calls.append("late"))
    assert calls == ["failing", "a", "late"]


async def test_declare_records_the_capabilities() -> None:
    """peer.declare replaces what the session records as the client's capabilities."""
    session = _outbound_session([])
    session.peer.declare(frozenset({"completions"}))
    assert session.capabilities == {"completions"}
    session.peer.declare(frozenset())
    assert session.capabilities == frozenset()
