"""Start ``python -m main serve`` as a real child process and read its ready line."""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

REPO = Path(__file__).resolve().parents[2]
# The server refuses to run as root unless told to; CI and test machines often are root.
AS_ROOT: tuple[str, ...] = ("--allow-root",) if getattr(os, "geteuid", lambda: -1)() == 0 else ()


@dataclass
class ServerProcess:
    """A running server child; ``ready`` is its parsed ready line."""

    process: subprocess.Popen[bytes]
    ready: dict[str, Any]
    data_dir: Path
    stderr_path: Path
    extra_stdout: list[bytes] = field(default_factory=list)

    @property
    def url(self) -> str:
        return str(self.ready["url"])

    @property
    def token(self) -> str:
        return str(self.ready["token"])

    @property
    def port(self) -> int:
        return int(self.url.rsplit(":", 1)[1].strip("/"))

    def stderr_text(self) -> str:
        return self.stderr_path.read_text(encoding="utf-8", errors="replace")

    def terminate(self, sig: int = signal.SIGTERM, timeout: float = 30) -> int:
        if self.process.poll() is None:
            self.process.send_signal(sig)
        return self._wait(timeout)

    def close_stdin(self, timeout: float = 30) -> int:
        assert self.process.stdin is not None
        self.process.stdin.close()
        return self._wait(timeout)

    def _wait(self, timeout: float) -> int:
        code = self.process.wait(timeout=timeout)
        self._release_pipes()
        return code

    def _release_pipes(self) -> None:
        if self.process.stdin is not None and not self.process.stdin.closed:
            self.process.stdin.close()
        if self.process.stdout is not None and not self.process.stdout.closed:
            self.extra_stdout.append(self.process.stdout.read())
            self.process.stdout.close()

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=30)
        self._release_pipes()


def _read_line(stream: IO[bytes], deadline: float) -> bytes:
    line = b""
    fd = stream.fileno()
    while not line.endswith(b"\n"):
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise TimeoutError("server did not announce itself in time")
        ready, _, _ = select.select([fd], [], [], remaining)
        if ready:
            chunk = os.read(fd, 1)
            if not chunk:
                break
            line += chunk
    return line


def _new_stderr_path(data_dir: Path) -> Path:
    # A server still running on the same data dir keeps writing to its own file: never share it.
    path = data_dir.parent / f"{data_dir.name}-stderr.log"
    n = 1
    while path.exists():
        n += 1
        path = data_dir.parent / f"{data_dir.name}-stderr-{n}.log"
    return path


def start_server(data_dir: Path, *args: str, env: dict[str, str] | None = None,
                 timeout: float = 90) -> ServerProcess:
    """Spawn the server on a free port and wait for its ready line."""
    stderr_path = _new_stderr_path(data_dir)
    full_env = {**os.environ, **(env or {})}
    stderr_file = stderr_path.open("wb")
    process = subprocess.Popen(
        [sys.executable, "-m", "main", "serve", "--data-dir", str(data_dir), "--port", "0", *AS_ROOT, *args],
        cwd=REPO, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr_file, env=full_env,
    )
    stderr_file.close()
    assert process.stdout is not None
    try:
        line = _read_line(process.stdout, time.monotonic() + timeout)
        if not line:
            process.wait(timeout=10)
            raise RuntimeError("server exited before it was ready: "
                               + stderr_path.read_text(errors="replace")[-2000:])
    except BaseException:
        if process.poll() is None:
            process.kill()
            process.wait()
        for pipe in (process.stdin, process.stdout):
            if pipe is not None:
                pipe.close()
        raise
    return ServerProcess(process=process, ready=json.loads(line), data_dir=data_dir,
                         stderr_path=stderr_path)


@contextmanager
def serving(data_dir: Path, *args: str, env: dict[str, str] | None = None) -> Iterator[ServerProcess]:
    """:func:`start_server` for the length of a ``with`` block; the child is stopped afterwards
    (SIGTERM, then SIGKILL if it is still running)."""
    running = start_server(data_dir, *args, env=env)
    try:
        yield running
    finally:
        try:
            running.terminate()
        finally:
            running.kill()
