"""One connection's protocol state, driven with a list for a socket."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from ipc.dispatch import Dispatcher
from ipc.server import TransportLimits
from ipc.session import Session, SessionLimits
from tests.support.inproc import build_test_registry


def _session(seen: list[str], sent: list[str], max_in_flight: int = 4,
             congested: bool = False) -> Session:
    async def send(text: str) -> None:
        sent.append(text)

    return Session(Dispatcher(build_test_registry(TransportLimits(), seen)), send,
                   connection_id="t", limits=SessionLimits(max_in_flight=max_in_flight),
                   congested=lambda: congested)


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
