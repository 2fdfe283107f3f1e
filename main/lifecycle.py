"""When to stop: SIGTERM, SIGINT, or EOF on stdin (the parent process died)."""

from __future__ import annotations

import asyncio
import os
import signal
import stat
import sys
from collections.abc import Callable

from main.config import StdinWatch


class _EofProtocol(asyncio.Protocol):
    def __init__(self, on_eof: Callable[[str], None]) -> None:
        self._on_eof = on_eof

    def data_received(self, data: bytes) -> None:
        """The parent may write anything; only its going away matters."""

    def eof_received(self) -> bool | None:
        self._on_eof("stdin-eof")
        return None

    def connection_lost(self, exc: Exception | None) -> None:
        self._on_eof("stdin-eof")


def stdin_is_parent_pipe() -> bool:
    try:
        mode = os.fstat(sys.stdin.fileno()).st_mode
    except (OSError, ValueError, AttributeError):
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)


class StopSignal:
    """Resolves once with the reason the process should stop."""

    def __init__(self) -> None:
        self._event = asyncio.Event()
        self.reason = ""

    def trigger(self, reason: str) -> None:
        if not self._event.is_set():
            self.reason = reason
            self._event.set()

    async def wait(self) -> str:
        await self._event.wait()
        return self.reason

    async def install(self, watch_stdin: StdinWatch) -> None:
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, self.trigger, sig.name)
        watch = watch_stdin is StdinWatch.ON or (
            watch_stdin is StdinWatch.AUTO and stdin_is_parent_pipe())
        if watch:
            await loop.connect_read_pipe(lambda: _EofProtocol(self.trigger), sys.stdin)

    def uninstall(self) -> None:
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.remove_signal_handler(sig)
