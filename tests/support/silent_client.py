"""A websocket client over a raw socket that sends when told and reads only when told.

For tests of what the server does with a client that stops reading: the
socket's receive buffer is made small so the server's replies back up into
the server rather than into the client's kernel.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import socket
from typing import Any


class SilentClient:
    """One connection; :meth:`send` writes frames, :meth:`read` reads replies at the pace it is called."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer

    @classmethod
    async def open(cls, port: int, token: str, receive_buffer: int = 4096) -> SilentClient:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, receive_buffer)
        sock.setblocking(False)
        try:
            await asyncio.get_running_loop().sock_connect(sock, ("127.0.0.1", port))
        except BaseException:
            sock.close()
            raise
        reader, writer = await asyncio.open_connection(sock=sock, limit=2**16)
        key = base64.b64encode(os.urandom(16)).decode()
        writer.write((f"GET / HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nUpgrade: websocket\r\n"
                      f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n"
                      f"Authorization: Bearer {token}\r\n\r\n").encode())
        status = await asyncio.wait_for(reader.readline(), 30)
        if b" 101 " not in status:
            writer.transport.abort()
            raise ConnectionError(status.decode(errors="replace").strip())
        while (await asyncio.wait_for(reader.readline(), 30)) not in (b"\r\n", b""):
            pass
        return cls(reader, writer)

    def send(self, message: Any) -> None:
        """Queue one text frame holding ``message`` as JSON (a str is sent as it is)."""
        text = message if isinstance(message, str) else json.dumps(message)
        self.writer.write(masked_text_frame(text))

    async def read(self, timeout: float = 60, chunk: int = 2**16, pause: float = 0.0) -> str:
        """The next text frame, read ``chunk`` bytes at a time with ``pause`` seconds between reads
        (control frames are skipped)."""
        async with asyncio.timeout(timeout):
            while True:
                head = await self.reader.readexactly(2)
                length = head[1] & 0x7F
                if length == 126:
                    length = int.from_bytes(await self.reader.readexactly(2), "big")
                elif length == 127:
                    length = int.from_bytes(await self.reader.readexactly(8), "big")
                parts: list[bytes] = []
                left = length
                while left:
                    part = await self.reader.readexactly(min(chunk, left))
                    parts.append(part)
                    left -= len(part)
                    if pause:
                        await asyncio.sleep(pause)
                if head[0] & 0x0F == 0x1:
                    return b"".join(parts).decode()
                if head[0] & 0x0F == 0x8:
                    raise ConnectionError("closed by the server")

    def abort(self) -> None:
        """Drop the connection at once (close() would wait to flush to a server that may not read)."""
        self.writer.transport.abort()


def masked_text_frame(text: str) -> bytes:
    """A client's text frame; a zero mask leaves the payload as it is."""
    payload = text.encode()
    header = bytearray([0x81])
    if len(payload) < 126:
        header.append(0x80 | len(payload))
    elif len(payload) < 65536:
        header += bytes([0x80 | 126]) + len(payload).to_bytes(2, "big")
    else:
        header += bytes([0x80 | 127]) + len(payload).to_bytes(8, "big")
    return bytes(header) + b"\0\0\0\0" + payload
