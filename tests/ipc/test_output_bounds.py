"""Output memory is bounded before it is spent: reply size, a batch's frame, unread output per
connection and reply memory across the server, over a real loopback socket."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from structlog.testing import capture_logs
from websockets.asyncio.client import connect

from ipc.dispatch import Dispatcher
from ipc.errors import ResultTooLarge
from ipc.protocol import success_reply
from ipc.server import TransportLimits
from ipc.session import Session, SessionLimits
from ipc.static import inspector_response
from tests.support.client import RpcClient
from tests.support.handshake import hang_up
from tests.support.inproc import TOKEN, InProcServer, build_test_registry, inproc_server
from tests.support.silent_client import SilentClient

KIB = 1024
LIMIT = 64 * KIB
BEARER = {"Authorization": f"Bearer {TOKEN}"}


def _echo(id_: Any, text: str, count: int = 1) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "method": "test:echo", "params": {"text": text, "count": count}, "id": id_}


def _echo_reply(id_: Any, text: str) -> str:
    return success_reply(id_, {"text": text})


def _too_large(reply: dict[str, Any]) -> dict[str, Any]:
    assert reply["error"]["code"] == ResultTooLarge.code, reply
    data: dict[str, Any] = reply["error"]["data"]
    assert data["code"] == "RPC_RESULT_TOO_LARGE"
    return data


async def test_a_reply_over_the_frame_limit_is_refused_with_its_size() -> None:
    """A reply over max_frame_bytes is never sent: the call answers RPC_RESULT_TOO_LARGE with the
    reply's size in bytes and the limit, and the connection carries on."""
    async with inproc_server(TransportLimits(max_frame_bytes=LIMIT)) as running:
        rpc = await RpcClient.open(running.url, TOKEN, max_size=None)  # it could take the big frame
        text = "x" * (LIMIT + 1)  # asked for as one character repeated: the request itself is small
        reply = await asyncio.wait_for(rpc.request("test:echo", {"text": "x", "count": LIMIT + 1}, id_=7), 10)
        data = _too_large(reply)
        assert reply["id"] == 7
        assert data["size"] == len(_echo_reply(7, text).encode())
        assert data["limit"] == LIMIT
        assert await rpc.call("test:echo", {"text": "still here"}) == {"text": "still here"}
        await rpc.close()


async def test_control_characters_count_as_the_six_bytes_they_are_sent_as() -> None:
    """Text under the limit whose JSON escapes (``\\u0001``, six bytes a character) pass it is
    measured as sent and refused; a reply of exactly the limit still goes out whole."""
    async with inproc_server(TransportLimits(max_frame_bytes=LIMIT)) as running:
        rpc = await RpcClient.open(running.url, TOKEN, max_size=None)
        control = "\x01" * (LIMIT // 4)  # a quarter of the limit as text, 1.5 times it as JSON
        data = _too_large(await rpc.request("test:echo", {"text": "\x01", "count": LIMIT // 4}, id_=1))
        assert data["size"] == len(_echo_reply(1, control).encode()) > LIMIT
        count = (LIMIT - len(_echo_reply(2, "").encode())) // 2  # two bytes each in UTF-8
        exact = "é" * count
        assert len(_echo_reply(2, exact).encode()) in (LIMIT, LIMIT - 1)
        reply = await rpc.request("test:echo", {"text": "é", "count": count}, id_=2)
        assert reply["result"] == {"text": exact}
        await rpc.close()


async def test_a_reply_goes_out_as_one_text_frame_of_its_utf8() -> None:
    """A reply encoded once for its size is sent as those bytes in a text frame: the client
    reads text (not binary), equal to the reply, in any script, escapes and characters past the BMP."""
    async with inproc_server() as running, connect(running.url, additional_headers=BEARER) as ws:
        for n, text in enumerate(["灯塔守夜人林远在雾里点灯。", "é\u2028\x01 ok", "😀" * 3]):
            await ws.send(json.dumps(_echo(n, text)))
            frame = await asyncio.wait_for(ws.recv(), 10)
            assert isinstance(frame, str)
            assert json.loads(frame) == {"jsonrpc": "2.0", "result": {"text": text}, "id": n}


async def test_a_batchs_replies_share_one_frame() -> None:
    """A batch's reply is one frame: entries take their room as they finish; those that no longer
    fit answer RPC_RESULT_TOO_LARGE (with ``available``, and a message that says it was the batch's
    room, not the frame limit), and the frame stays within the limit."""
    async with inproc_server(TransportLimits(max_frame_bytes=LIMIT)) as running:
        ws = await connect(running.url, additional_headers=BEARER, compression=None, max_size=None)
        piece = "y" * (LIMIT // 5)  # five of these cannot share a frame with their envelopes
        batch = [_echo(i, "y", len(piece)) for i in range(8)] + [{"jsonrpc": "2.0", "method": "test:echo",
                                                         "params": {"text": "n"}}]
        await ws.send(json.dumps(batch))
        frame = await asyncio.wait_for(ws.recv(), 10)
        assert isinstance(frame, str)
        assert len(frame.encode()) <= LIMIT
        replies = json.loads(frame)
        assert sorted(r["id"] for r in replies) == list(range(8))  # the notification gets none
        kept = [r for r in replies if "result" in r]
        refused = [_too_large(r) for r in replies if "error" in r]
        assert len(kept) == 4
        assert len(refused) == 4
        assert {r["error"]["message"] for r in replies if "error" in r} == {
            "The reply is larger than the room left for it in its batch's frame and was not sent"}
        assert all(r["result"] == {"text": piece} for r in kept)
        for data in refused:
            assert data["size"] == len(_echo_reply(0, piece).encode())
            assert data["limit"] == LIMIT
            assert 0 <= data["available"] < data["size"]
        await ws.close()


async def test_a_batch_of_small_replies_is_not_held_back() -> None:
    """Entries that fit are answered as usual: a batch of 64 small calls is one frame of 64 results."""
    async with inproc_server(TransportLimits(max_frame_bytes=LIMIT)) as running:
        ws = await connect(running.url, additional_headers=BEARER, compression=None)
        await ws.send(json.dumps([_echo(i, "z" * 100) for i in range(64)]))
        replies = json.loads(await asyncio.wait_for(ws.recv(), 10))
        assert sorted(r["id"] for r in replies) == list(range(64))
        assert all(r["result"] == {"text": "z" * 100} for r in replies)
        await ws.close()


async def test_an_error_reply_over_the_limit_is_refused_too() -> None:
    """Every reply is measured, errors too: one that would pass the limit becomes
    RPC_RESULT_TOO_LARGE, with a null id if even that would not fit with its id."""
    sent: list[str] = []

    async def send(text: str) -> None:
        sent.append(text)

    limit = 200
    session = Session(Dispatcher(build_test_registry(TransportLimits(), [])), send, connection_id="t",
                      limits=SessionLimits(max_reply_bytes=limit))
    await session.receive(json.dumps(_echo("a" * 180, "hi")))
    await session.receive(json.dumps(_echo(3, "hello " * 40)))
    for _ in range(100):
        if len(sent) == 2:
            break
        await asyncio.sleep(0.01)
    replies = [json.loads(text) for text in sent]
    assert all(len(text.encode()) <= limit for text in sent)
    by_size = {r["error"]["data"]["size"]: r for r in replies}
    big_id = len(_echo_reply("a" * 180, "hi").encode())
    assert by_size[big_id]["id"] is None
    assert by_size[len(_echo_reply(3, "hello " * 40).encode())]["id"] == 3
    await session.close()


async def test_an_in_memory_session_has_the_default_limit_of_four_mib() -> None:
    """Without a server the session still bounds replies, at the transport's default frame limit."""
    assert SessionLimits().max_reply_bytes == TransportLimits().max_frame_bytes == 4 * 2**20


# --- Clients that do not read --------------------------------------------------------------


async def silent_client(port: int, frames: list[str]) -> SilentClient:
    """A client with a small receive buffer that sends ``frames`` and does not read."""
    client = await SilentClient.open(port, TOKEN)
    for frame in frames:
        client.send(frame)
    return client


def buffered(running: InProcServer) -> int:
    """Reply bytes the server holds in its sockets' write buffers, every connection together."""
    server = running.server._server
    assert server is not None
    return sum(c.transport.get_write_buffer_size() for c in server.connections)


def held(running: InProcServer) -> int:
    """Reply bytes the server holds: in its sockets' buffers plus built and waiting to be written."""
    return buffered(running) + int(getattr(running.server, "reply_bytes_waiting", 0))


async def sample_max(measure: Callable[[], int], until: Callable[[], bool], timeout: float) -> int:
    """The largest value of ``measure`` seen every few milliseconds until ``until`` or ``timeout``."""
    peak = measure()
    deadline = time.monotonic() + timeout
    while not until() and time.monotonic() < deadline:
        await asyncio.sleep(0.002)
        peak = max(peak, measure())
    return peak


def _requests(count: int, size: int) -> list[str]:
    return [json.dumps(_echo(i, "r" * 1000, size // 1000)) for i in range(count)]


async def test_unread_output_of_a_connection_never_passes_its_cap() -> None:
    """A client that never reads cannot make the server buffer past max_unread_bytes: a reply is
    written only when it fits beside what is still unread, and while the connection's output is
    over its cap its next frames are not read, so their replies are not built either."""
    cap = 256 * KIB
    limits = TransportLimits(max_frame_bytes=128 * KIB, max_unread_bytes=cap, write_buffer_bytes=64 * KIB,
                             stall_timeout=30.0, session=SessionLimits(max_in_flight=300, max_batch=8))
    async with inproc_server(limits) as running:
        writer = await silent_client(running.port, _requests(300, 100_000))
        peak_buffered = await sample_max(lambda: buffered(running), lambda: False, 2.0)
        peak_held = await sample_max(lambda: held(running), lambda: False, 0.5)
        assert peak_buffered <= cap
        assert peak_held <= cap + 2 * 100_100
        ran = sum(1 for s in running.seen if s.startswith("echo:"))
        assert ran < 300  # the frames behind were left unread: TCP backpressure on the client
        writer.abort()


async def test_replies_of_calls_that_end_together_are_made_only_as_room_allows() -> None:
    """Calls already running when a client stops reading (here 64 that all end at once, as reads
    on threads do) keep their results, but the JSON of their replies is made only while the
    connection's output has room: what the server holds stays near its cap, not 64 replies."""
    cap = 256 * KIB
    reply = 100_000
    limits = TransportLimits(max_frame_bytes=128 * KIB, max_unread_bytes=cap, write_buffer_bytes=64 * KIB,
                             stall_timeout=30.0)
    async with inproc_server(limits) as running:
        frames = [json.dumps({"jsonrpc": "2.0", "method": "test:sleep", "id": i,
                              "params": {"seconds": 0.5, "label": f"{i:03}" + "s" * reply}})
                  for i in range(64)]
        writer = await silent_client(running.port, frames)

        def ended() -> int:
            return sum(1 for s in running.seen if s.startswith("sleep-end"))

        peak_held = await sample_max(lambda: held(running), lambda: ended() == 64, 30)
        # The replies are made (or wait to be) once the calls have ended: keep looking a little.
        peak_held = max(peak_held, await sample_max(lambda: held(running), lambda: False, 0.5))
        assert ended() == 64
        assert peak_held <= cap + 2 * (reply + 100)
        writer.abort()


async def test_a_connection_stalled_over_its_cap_is_closed() -> None:
    """A reply that cannot be written for stall_timeout because the client does not read closes
    that connection (``ws.dropped_slow_reader``); the server holds nothing for it afterwards."""
    limits = TransportLimits(max_frame_bytes=128 * KIB, max_unread_bytes=256 * KIB,
                             write_buffer_bytes=64 * KIB, stall_timeout=0.5)
    async with inproc_server(limits) as running:
        with capture_logs() as logs:
            writer = await silent_client(running.port, _requests(64, 100_000))
            await sample_max(lambda: 0, lambda: running.server.connection_count == 0, 30)
        assert running.server.connection_count == 0
        assert any(e["event"] == "ws.dropped_slow_reader" for e in logs)
        assert held(running) == 0
        writer.abort()


async def test_reply_memory_of_the_whole_server_has_a_ceiling() -> None:
    """Clients that never read share one ceiling of unread reply bytes: a reply waits for room,
    and while one waits the client lagging longest past pressure_grace that holds the most is cut
    off (``why=reply_memory_full``), long before its stall_timeout; a client that reads is served
    meanwhile, its calls run although the server is over its ceiling."""
    ceiling = 256 * KIB
    limits = TransportLimits(max_frame_bytes=128 * KIB, max_unread_bytes=192 * KIB,
                             write_buffer_bytes=64 * KIB, reply_memory_bytes=ceiling, stall_timeout=300.0,
                             pressure_grace=0.2, close_timeout=0.3)
    async with inproc_server(limits) as running:
        with capture_logs() as logs:
            hogs = [await silent_client(running.port, _requests(64, 120_000)) for _ in range(4)]
            bystander = await RpcClient.open(running.url, TOKEN)
            answer = asyncio.ensure_future(bystander.call("test:echo", {"text": "ok"}))
            peak = await sample_max(lambda: buffered(running), answer.done, 60)
            assert await answer == {"text": "ok"}
            await sample_max(lambda: 0, lambda: running.server.connection_count <= 3, 60)
            peak = max(peak, buffered(running))
        assert peak <= ceiling
        relieved = [e for e in logs if e["event"] == "ws.dropped_slow_reader"]
        assert relieved
        assert {e["why"] for e in relieved} == {"reply_memory_full"}
        assert await bystander.call("test:echo", {"text": "again"}) == {"text": "again"}
        await bystander.close()
        for hog in hogs:
            hog.abort()


async def test_a_slow_reader_gets_every_reply_whole() -> None:
    """A client that reads slowly is not dropped while it keeps reading: every reply arrives whole,
    with the server's buffer within the cap all along."""
    cap = 256 * KIB
    limits = TransportLimits(max_frame_bytes=128 * KIB, max_unread_bytes=cap, write_buffer_bytes=64 * KIB)
    async with inproc_server(limits) as running:
        # max_queue=1: the client library reads the socket only as fast as recv() is called
        ws = await connect(running.url, additional_headers=BEARER, compression=None, max_size=None,
                           max_queue=1)
        for i in range(20):
            await ws.send(json.dumps(_echo(i, "s" * 1000, 100)))
        got: dict[int, str] = {}
        peak = 0
        while len(got) < 20:
            await asyncio.sleep(0.05)
            peak = max(peak, buffered(running))
            reply = json.loads(await asyncio.wait_for(ws.recv(), 30))
            got[reply["id"]] = reply["result"]["text"]
        assert all(text == "s" * 100_000 for text in got.values())
        assert sorted(got) == list(range(20))
        assert peak <= cap
        await ws.close()


# --- The inspector's HTTP routes -------------------------------------------------------------


async def _http(port: int, method: str, path: str) -> tuple[int, dict[str, str], bytes]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(f"{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n".encode())
    await writer.drain()
    status = int((await asyncio.wait_for(reader.readline(), 10)).split()[1])
    headers: dict[str, str] = {}
    while (line := await asyncio.wait_for(reader.readline(), 10)) not in (b"\r\n", b""):
        name, _, value = line.decode().partition(":")
        headers[name.strip().lower()] = value.strip()
    if method == "HEAD":  # nothing follows the headers: the server closes the connection
        body = await asyncio.wait_for(reader.read(), 10)
    else:
        body = await asyncio.wait_for(reader.readexactly(int(headers.get("content-length", "0"))), 10)
    await hang_up(writer)
    return status, headers, body


@pytest.mark.parametrize("method", ["POST", "PUT", "DELETE", "PATCH", "OPTIONS", "TRACE"])
async def test_inspector_routes_answer_only_get(method: str) -> None:
    """Any method but GET (and HEAD) on an inspector path is 405 with ``Allow: GET, HEAD``, and no
    file in the body."""
    async with inproc_server() as running:
        for path in ("/inspector/", "/inspector", "/inspector/inspector.js", "/inspector/nothing"):
            status, headers, body = await _http(running.port, method, path)
            assert status == 405, (method, path)
            assert headers["allow"] == "GET, HEAD"
            assert b"<html" not in body.lower()
            assert len(body) < 100


async def test_inspector_head_has_the_headers_of_get_and_no_body() -> None:
    """HEAD of an inspector file answers GET's status and headers without the body."""
    async with inproc_server() as running:
        got = await _http(running.port, "GET", "/inspector/")
        head = await _http(running.port, "HEAD", "/inspector/")
        assert (head[0], got[0]) == (200, 200)
        assert head[1]["content-length"] == got[1]["content-length"] == str(len(got[2]))
        assert head[1]["content-security-policy"] == got[1]["content-security-policy"]
        assert head[2] == b""


async def test_the_websocket_path_answers_only_get() -> None:
    """Other methods on the websocket path get 405 with ``Allow: GET``, before any token check."""
    async with inproc_server() as running:
        for method in ("POST", "PUT", "HEAD"):
            status, headers, _ = await _http(running.port, method, "/")
            assert status == 405, method
            assert headers["allow"] == "GET"


def test_inspector_response_answers_get_and_head_and_refuses_the_rest() -> None:
    """inspector_response: HEAD is GET's status and headers with an empty body, for files,
    the redirect and a 404 alike; any other method is 405 with Allow and no file."""
    for path in ("/inspector/", "/inspector", "/inspector/missing.js"):
        got = inspector_response(path)
        head = inspector_response(path, method="HEAD")
        assert (head.status_code, head.body) == (got.status_code, b"")
        same = [(k, v) for k, v in head.headers.raw_items() if k != "Date"]
        assert same == [(k, v) for k, v in got.headers.raw_items() if k != "Date"]
    refused = inspector_response("/inspector/", method="POST")
    assert refused.status_code == 405
    assert refused.headers["Allow"] == "GET, HEAD"
    assert refused.body == b"method not allowed\n"


_IDS = st.one_of(st.integers(-(2**53) + 1, 2**53 - 1), st.text(max_size=40), st.none())


@settings(max_examples=80, deadline=None)
@given(st.lists(st.tuples(_IDS, st.integers(0, 1500), st.booleans()), min_size=1, max_size=24),
       st.integers(600, 4000))
def test_a_batch_frame_never_passes_the_limit_and_answers_every_request(
        entries: list[tuple[Any, int, bool]], limit: int) -> None:
    """Whatever the sizes, ids and notifications of a batch, its one reply frame is within the
    limit and holds exactly one answer per request: the result, or RPC_RESULT_TOO_LARGE; or, when
    not even those errors could fit, one RPC_BATCH_TOO_LARGE for the batch."""
    sent: list[str] = []

    async def send(text: str) -> None:
        sent.append(text)

    async def run() -> None:
        session = Session(Dispatcher(build_test_registry(TransportLimits(), [])), send, connection_id="t",
                          limits=SessionLimits(max_reply_bytes=limit, max_in_flight=64))
        batch = [{"jsonrpc": "2.0", "method": "test:echo", "params": {"text": "é", "count": size}}
                 | ({} if notification else {"id": id_}) for id_, size, notification in entries]
        await session.receive(json.dumps(batch))
        for _ in range(500):
            if sent or session.in_flight == 0:
                break
            await asyncio.sleep(0.001)
        await session.close()

    asyncio.run(run())
    requests = [(id_, size) for id_, size, notification in entries if not notification]
    if not requests:
        assert sent == []
        return
    assert len(sent) == 1
    assert len(sent[0].encode()) <= limit
    replies = json.loads(sent[0])
    if isinstance(replies, dict):  # only when even the refusals' reserves do not fit: one for all
        assert replies["id"] is None
        data = replies["error"]["data"]
        assert (data["code"], data["maxFrameBytes"]) == ("RPC_BATCH_TOO_LARGE", limit)
        assert data["needed"] > limit
        return
    assert sorted(map(repr, (r["id"] for r in replies))) == sorted(repr(i) for i, _ in requests)
    for reply in replies:
        if "result" in reply:
            assert set(reply["result"]["text"]) <= {"é"}
        else:
            assert _too_large(reply)["limit"] == limit
