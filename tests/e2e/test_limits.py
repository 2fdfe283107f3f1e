"""Bounds on everything a client controls, over a real socket."""

from __future__ import annotations

import asyncio
import contextlib
import json

from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed

from ipc.server import TransportLimits
from ipc.session import SessionLimits
from tests.support.client import RpcClient, connected
from tests.support.handshake import handshake_status, hang_up, raw_handshake
from tests.support.inproc import TOKEN, inproc_server
from tests.support.silent_client import masked_text_frame

BEARER = {"Authorization": f"Bearer {TOKEN}"}


async def test_oversized_frame_closes_1009_and_server_lives_on() -> None:
    """A frame over max_frame_bytes closes that connection with 1009; others keep working."""
    async with inproc_server(TransportLimits(max_frame_bytes=64 * 1024)) as running:
        bystander = await RpcClient.open(running.url, TOKEN)
        big = await connect(running.url, additional_headers=BEARER, compression=None,
                            max_size=None)
        await big.send(json.dumps({"jsonrpc": "2.0", "method": "test:echo",
                                   "params": {"text": "x" * 100_000}, "id": 1}))
        with contextlib.suppress(ConnectionClosed):
            await asyncio.wait_for(big.recv(), 5)
        assert big.close_code == 1009
        assert (await bystander.call("test:echo", {"text": "fine"})) == {"text": "fine"}
        await bystander.close()


async def test_too_many_in_flight_requests() -> None:
    """Past max_in_flight a request answers RPC_TOO_MANY_REQUESTS at once; earlier ones finish."""
    limits = TransportLimits(session=SessionLimits(max_in_flight=4, max_batch=8))
    async with inproc_server(limits) as running, connected(running.url, TOKEN) as rpc:
        slow = [asyncio.ensure_future(rpc.request("test:sleep", {"seconds": 0.5})) for _ in range(4)]
        await asyncio.sleep(0.1)
        refused = await asyncio.wait_for(rpc.request("test:echo", {"text": "x"}), 0.4)
        assert refused["error"]["code"] == -32000
        assert refused["error"]["data"] == {"code": "RPC_TOO_MANY_REQUESTS", "limit": 4,
                                            "inFlight": 4}
        assert all("result" in r for r in await asyncio.gather(*slow))
        assert (await rpc.call("test:echo", {"text": "again"})) == {"text": "again"}


async def test_batch_counts_every_entry_and_has_a_size_limit() -> None:
    """A batch larger than max_batch is one -32600 RPC_BATCH_TOO_LARGE."""
    limits = TransportLimits(session=SessionLimits(max_in_flight=8, max_batch=3))
    async with inproc_server(limits) as running, connected(running.url, TOKEN) as rpc:
        entry = {"jsonrpc": "2.0", "method": "get_data", "id": 1}
        await rpc.send_raw(json.dumps([entry] * 4))
        reply = await rpc.next_unmatched()
        assert reply["error"]["code"] == -32600
        assert reply["error"]["data"] == {"code": "RPC_BATCH_TOO_LARGE", "limit": 3, "size": 4}
        await rpc.send_raw(json.dumps([entry] * 3))
        assert len(await rpc.next_unmatched()) == 3


async def test_connection_limit() -> None:
    """Past max_connections a handshake is refused with 503 until one closes."""
    async with inproc_server(TransportLimits(max_connections=2)) as running:
        first = await RpcClient.open(running.url, TOKEN)
        second = await RpcClient.open(running.url, TOKEN)
        status, _, writer = await raw_handshake(running.port, headers=BEARER)
        await hang_up(writer)
        assert status == 503
        await first.close()
        for _ in range(100):
            if running.server.connection_count < 2:
                break
            await asyncio.sleep(0.01)
        third = await RpcClient.open(running.url, TOKEN)
        assert (await third.call("system:info"))["connections"] == 2
        await second.close()
        await third.close()


async def test_dead_client_is_dropped_by_keepalive() -> None:
    """A client that stops answering pings is disconnected."""
    limits = TransportLimits(ping_interval=0.1, ping_timeout=0.1, close_timeout=0.2)
    async with inproc_server(limits) as running:
        status, _reader, writer = await raw_handshake(running.port, headers=BEARER)
        assert status == 101
        assert running.server.connection_count == 1
        for _ in range(100):  # never reads, never pongs
            if running.server.connection_count == 0:
                break
            await asyncio.sleep(0.05)
        assert running.server.connection_count == 0
        await hang_up(writer)


async def test_reader_that_never_reads_is_bounded() -> None:
    """A client that sends but never reads fills its own in-flight quota, not the server's memory."""
    limits = TransportLimits(write_buffer_bytes=64 * 1024,
                             session=SessionLimits(max_in_flight=8, max_batch=8))
    async with inproc_server(limits) as running:
        writer = await send_unread(running.port, 60, "y" * 60_000, count=4)
        await asyncio.sleep(1.0)
        sessions = list(running.server._sessions)
        assert len(sessions) == 1
        assert sessions[0].in_flight <= 8
        bystander = await RpcClient.open(running.url, TOKEN)
        assert (await bystander.call("test:echo", {"text": "ok"})) == {"text": "ok"}
        await bystander.close()
        writer.transport.abort()  # close() would wait forever to flush to a server that stopped reading


async def send_unread(port: int, frames: int, text: str, count: int) -> asyncio.StreamWriter:
    """Open a raw connection and send ``frames`` test:echo requests for ``count`` copies of ``text``
    each, never reading a reply; returns the connection's writer."""
    _status, _reader, writer = await raw_handshake(port, headers=BEARER)
    frame = masked_text_frame(json.dumps({"jsonrpc": "2.0", "method": "test:echo",
                                           "params": {"text": text, "count": count}, "id": 1}))
    for _ in range(frames):
        writer.write(frame)
    return writer


async def test_handshakes_that_never_upgrade_hold_no_slot() -> None:
    """Authenticated requests that never become websockets do not use up the connection limit."""
    async with inproc_server(TransportLimits(max_connections=2)) as running:
        for _ in range(4):
            reader, writer = await asyncio.open_connection("127.0.0.1", running.port)
            writer.write(f"GET /?token={TOKEN} HTTP/1.1\r\nHost: 127.0.0.1:{running.port}\r\n\r\n".encode())
            await writer.drain()
            status = await asyncio.wait_for(reader.readline(), 5)
            assert b"426" in status
            await hang_up(writer)
        rpc = await RpcClient.open(running.url, TOKEN)
        assert (await rpc.call("system:info"))["name"] == "strata"
        await rpc.close()


async def test_repeated_headers_are_refused() -> None:
    """Two Host or Origin headers are a 400, not an error in the server."""
    async with inproc_server() as running:
        for extra in ({"Host": "evil.com"}, {"Origin": "app://strata\r\nOrigin: https://evil.com"}):
            status = await handshake_status(running.port, headers={**BEARER, **extra})
            assert status == 400


async def test_reader_that_never_reads_is_dropped_and_shutdown_still_completes() -> None:
    """A client whose replies cannot be written for stall_timeout, its unread output over the cap,
    is cut off; shutdown never waits on it."""
    limits = TransportLimits(write_buffer_bytes=32 * 1024, max_unread_bytes=256 * 1024,
                             watch_interval=0.05, stall_timeout=0.5, close_timeout=0.3)
    async with inproc_server(limits) as running:
        writer = await send_unread(running.port, 30, "z" * 50_000, count=8)
        for _ in range(100):
            if running.server.connection_count == 0:
                break
            await asyncio.sleep(0.05)
        assert running.server.connection_count == 0
        writer.transport.abort()


async def test_shutdown_completes_with_a_client_that_stopped_reading() -> None:
    """SIGTERM-style shutdown aborts a connection that cannot take its close frame."""
    limits = TransportLimits(write_buffer_bytes=32 * 1024, close_timeout=0.3)
    async with inproc_server(limits) as running:
        writer = await send_unread(running.port, 30, "z" * 50_000, count=8)
        await asyncio.sleep(0.5)
        assert running.server.connection_count == 1
        await asyncio.wait_for(running.server.shutdown(grace=0.1), 5)
        assert running.server.connection_count == 0
        writer.transport.abort()
