"""Calls over a real socket: concurrency, cancellation, notifications, errors."""

from __future__ import annotations

import asyncio
import json

import pytest
from structlog.testing import capture_logs

from tests.support.client import RpcCallError, RpcClient
from tests.support.inproc import InProcServer


async def started(server: InProcServer, label: str) -> None:
    for _ in range(500):
        if f"sleep-start:{label}" in server.seen:
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"{label} never started")


async def test_requests_run_concurrently_and_reply_out_of_order(
        client: RpcClient, server: InProcServer) -> None:
    """A slow request does not hold back a fast one sent after it on the same connection."""
    slow = asyncio.ensure_future(client.call("test:sleep", {"seconds": 1.0, "label": "slow"}))
    await asyncio.sleep(0.05)
    fast = await client.call("test:sleep", {"seconds": 0, "label": "fast"})
    assert fast == {"label": "fast"}
    assert not slow.done()
    assert await slow == {"label": "slow"}
    assert server.seen.index("sleep-end:fast") < server.seen.index("sleep-end:slow")


async def test_cancel_a_running_request(client: RpcClient, server: InProcServer) -> None:
    """$/cancelRequest stops a running request, which answers -32800 REQUEST_CANCELLED."""
    pending = asyncio.ensure_future(client.request("test:sleep", {"seconds": 30, "label": "c"},
                                                   id_=41))
    await started(server, "c")
    await client.notify("$/cancelRequest", {"id": 41})
    reply = await asyncio.wait_for(pending, 5)
    assert reply["id"] == 41
    assert reply["error"]["code"] == -32800
    assert reply["error"]["data"]["code"] == "REQUEST_CANCELLED"
    assert "sleep-cancelled:c" in server.seen


async def test_cancel_inside_a_batch(client: RpcClient, server: InProcServer) -> None:
    """A cancelled entry of a batch answers -32800 while its siblings complete."""
    await client.send_raw(json.dumps([
        {"jsonrpc": "2.0", "method": "test:sleep", "params": {"seconds": 30, "label": "b1"}, "id": "b1"},
        {"jsonrpc": "2.0", "method": "test:sleep", "params": {"seconds": 0.1, "label": "b2"}, "id": "b2"},
    ]))
    await started(server, "b1")
    await client.notify("$/cancelRequest", ["b1"])
    batch = await client.next_unmatched()
    by_id = {r["id"]: r for r in batch}
    assert by_id["b1"]["error"]["data"]["code"] == "REQUEST_CANCELLED"
    assert by_id["b2"]["result"] == {"label": "b2"}


async def test_cancel_of_unknown_id_is_harmless(client: RpcClient) -> None:
    """Cancelling a request that already finished changes nothing and gets no reply."""
    await client.notify("$/cancelRequest", {"id": 999})
    await client.notify("$/cancelRequest", {"wrong": "shape"})
    assert (await client.call("test:echo", {"text": "still here"})) == {"text": "still here"}


async def test_server_notifications_reach_the_client(client: RpcClient) -> None:
    """A handler's notifications arrive in order, before its reply."""
    assert await client.call("test:notify", {"times": 3}) == {"ok": True}
    received = [client.notifications.get_nowait() for _ in range(3)]
    assert [n["params"] for n in received] == [{"done": i, "total": 3} for i in (1, 2, 3)]
    assert {n["method"] for n in received} == {"$/progress"}
    assert all("id" not in n for n in received)


async def test_unexpected_failure_leaks_nothing(client: RpcClient) -> None:
    """An exception becomes -32603 INTERNAL with an error id; its text never reaches the client."""
    with capture_logs() as logs:
        reply = await client.request("test:fail", {"kind": "crash"})
    error = reply["error"]
    assert error["code"] == -32603
    assert error["data"]["code"] == "INTERNAL"
    error_id = error["data"]["errorId"]
    text = json.dumps(reply, ensure_ascii=False)
    for secret in ("林远", "/home/writer", "chapter1", "Secret", "Traceback", ".py"):
        assert secret not in text
    logged = [e for e in logs if e["event"] == "rpc.internal_error"]
    assert logged[0]["error_id"] == error_id
    assert logged[0]["exc_type"] == "Secret"
    assert "林远" not in json.dumps(logged, ensure_ascii=False)


async def test_application_error_carries_code_and_fields(client: RpcClient) -> None:
    """An application error has its own number, a stable data.code and its fields."""
    with pytest.raises(RpcCallError) as raised:
        await client.call("test:fail", {"kind": "conflict"})
    assert raised.value.error == {"code": -32099, "message": "Test conflict",
                                  "data": {"code": "TEST_CONFLICT", "version": 3}}


async def test_binary_frame_is_refused_politely(client: RpcClient) -> None:
    """A binary frame answers a parse error and the connection stays usable."""
    await client.ws.send(b'{"jsonrpc":"2.0","method":"system:info","id":1}')
    reply = await client.next_unmatched()
    assert reply["error"]["code"] == -32700
    assert (await client.call("test:echo", {"text": "ok"})) == {"text": "ok"}


async def test_lone_surrogates_are_refused_not_echoed(client: RpcClient) -> None:
    """A lone surrogate in a string is not text: INVALID_PARAMS naming the field (text is text at
    the wire, docs/protocol.md), never echoed; the reply is a valid frame and the connection goes on."""
    await client.send_raw('{"jsonrpc":"2.0","method":"test:echo","params":{"text":"a\\ud800b"},"id":5}')
    reply = await client.next_unmatched()
    assert reply == {"jsonrpc": "2.0", "id": 5, "error": {
        "code": -32602, "message": "Invalid params", "data": {"code": "INVALID_PARAMS", "errors": [
            {"loc": ["text"], "type": "string_unicode",
             "msg": "must be valid Unicode text (no lone surrogates)"}]}}}
    assert (await client.call("test:echo", {"text": "林\x00\u202e"})) == {"text": "林\x00\u202e"}

