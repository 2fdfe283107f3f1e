"""Raw websocket handshakes with exactly the headers a test chooses."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import os


async def raw_handshake(port: int, path: str = "/", headers: dict[str, str] | None = None,
                        host: str | None = None) -> tuple[int, asyncio.StreamReader,
                                                           asyncio.StreamWriter]:
    """Send an upgrade request; return the HTTP status and the open stream."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    lines = [
        f"GET {path} HTTP/1.1",
        f"Host: {host if host is not None else f'127.0.0.1:{port}'}",
        "Upgrade: websocket",
        "Connection: Upgrade",
        f"Sec-WebSocket-Key: {base64.b64encode(os.urandom(16)).decode()}",
        "Sec-WebSocket-Version: 13",
    ]
    lines += [f"{name}: {value}" for name, value in (headers or {}).items()]
    writer.write(("\r\n".join(lines) + "\r\n\r\n").encode())
    await writer.drain()
    status_line = await asyncio.wait_for(reader.readline(), 10)
    while (await asyncio.wait_for(reader.readline(), 10)) not in (b"\r\n", b""):
        pass
    return int(status_line.split()[1]), reader, writer


async def handshake_status(port: int, path: str = "/", headers: dict[str, str] | None = None,
                           host: str | None = None) -> int:
    status, _, writer = await raw_handshake(port, path, headers, host)
    await hang_up(writer)
    return status


async def hang_up(writer: asyncio.StreamWriter) -> None:
    writer.close()
    with contextlib.suppress(OSError):
        await writer.wait_closed()
