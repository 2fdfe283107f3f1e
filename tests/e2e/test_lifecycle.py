"""The real main process: ready line, logs, and clean exits."""

from __future__ import annotations

import asyncio
import json
import os
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.client import RpcClient
from tests.support.process import ServerProcess, serving, start_server


@pytest.fixture
def proc(tmp_path: Path) -> Iterator[ServerProcess]:
    """A server of its own for each test (these tests stop it), instead of the module's one."""
    with serving(tmp_path / "data") as running:
        yield running


def _log_events(text: str) -> list[dict[str, object]]:
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def test_ready_line(proc: ServerProcess) -> None:
    """The first stdout line announces url, token, pid and version, and nothing else is there."""
    ready = proc.ready
    assert set(ready) == {"event", "url", "token", "pid", "version"}
    assert ready["event"] == "ready"
    assert ready["url"].startswith("ws://127.0.0.1:")
    assert ready["pid"] == proc.process.pid
    assert len(ready["token"]) >= 32
    assert proc.terminate() == 0
    assert proc.extra_stdout == [b""]


def test_debug_announces_an_inspector_token(tmp_path: Path) -> None:
    """--debug adds a distinct inspectorToken to the ready line."""
    running = start_server(tmp_path / "data", "--debug")
    try:
        assert running.ready["inspectorToken"] != running.token
    finally:
        assert running.terminate() == 0


def test_fresh_token_each_start(tmp_path: Path) -> None:
    """Without --token every start makes a new token."""
    first = start_server(tmp_path / "data")
    first.terminate()
    second = start_server(tmp_path / "data")
    second.terminate()
    assert first.token != second.token


def test_settings_from_environment(tmp_path: Path) -> None:
    """STRATA_* variables configure the server like flags do."""
    token = "environment-token-0123456789"
    running = start_server(tmp_path / "data", env={"STRATA_TOKEN": token, "STRATA_DEBUG": "1"})
    try:
        assert running.token == token
        assert "inspectorToken" in running.ready
    finally:
        running.terminate()


@pytest.mark.parametrize("how", ["SIGTERM", "SIGINT", "stdin-eof"])
async def test_clean_exit(proc: ServerProcess, how: str, tmp_path: Path) -> None:
    """SIGTERM, SIGINT and EOF on stdin close clients with 1001, close stores (the vector store, which
    a project's index opened, before the database), exit 0."""
    rpc = await RpcClient.open(proc.url, proc.token)
    assert (await rpc.call("system:info"))["name"] == "strata"
    folder = tmp_path / "novel"
    folder.mkdir()
    opened = await rpc.call("project:open", {"path": str(folder)})
    await rpc.call("index:status", {"projectId": opened["project"]["projectId"]})
    if how == "stdin-eof":
        code = await asyncio.to_thread(proc.close_stdin)
    else:
        code = await asyncio.to_thread(proc.terminate, getattr(signal, how))
    assert code == 0
    await asyncio.wait_for(rpc.ws.wait_closed(), 10)
    assert rpc.ws.close_code == 1001
    await rpc.close()
    events = [e["event"] for e in _log_events(proc.stderr_text())]
    assert events[-4:] == ["ws.stopped", "vectors.closed", "store.closed", "main.stopped"]
    stopping = next(e for e in _log_events(proc.stderr_text()) if e["event"] == "main.stopping")
    assert stopping["reason"] == how


async def test_logs_are_json_in_stderr_and_file_without_secrets(proc: ServerProcess) -> None:
    """Logs are JSON lines on stderr and in the data dir's log file; tokens never appear."""
    rpc = await RpcClient.open(proc.url, proc.token)
    await rpc.call("system:info")
    await rpc.close()
    proc.terminate()
    stderr_events = _log_events(proc.stderr_text())
    assert {"main.ready", "ws.open", "ws.close"} <= {e["event"] for e in stderr_events}
    log_file = proc.data_dir / "logs" / "strata.log"
    file_events = _log_events(log_file.read_text(encoding="utf-8"))
    assert [e["event"] for e in file_events] == [e["event"] for e in stderr_events]
    assert proc.token not in proc.stderr_text()
    assert proc.token not in log_file.read_text(encoding="utf-8")


async def test_data_dir_holds_the_stores(proc: ServerProcess, tmp_path: Path) -> None:
    """The embedded defaults put SQLite (in WAL mode) and Chroma under the data dir (Chroma once a
    project's index has opened it)."""
    rpc = await RpcClient.open(proc.url, proc.token)
    folder = tmp_path / "novel"
    folder.mkdir()
    opened = await rpc.call("project:open", {"path": str(folder)})
    await rpc.call("index:status", {"projectId": opened["project"]["projectId"]})
    await rpc.close()
    await asyncio.to_thread(proc.terminate)
    names = set(os.listdir(proc.data_dir))
    assert {"strata.db", "chroma", "logs"} <= names
    assert (proc.data_dir / "chroma" / "chroma.sqlite3").exists()


def test_port_in_use_fails_clearly(tmp_path: Path, proc: ServerProcess) -> None:
    """A port that is taken ends the process with exit 1 and a one-line reason."""
    with pytest.raises(RuntimeError, match="server exited before it was ready"):
        start_server(tmp_path / "other", "--port", str(proc.port))
    stderr = (tmp_path / "other-stderr.log").read_text()
    assert "strata: cannot start" in stderr
    assert "Traceback" not in stderr


def test_second_server_on_the_same_data_dir_is_refused(proc: ServerProcess, tmp_path: Path) -> None:
    """A second `strata serve` on a data dir in use exits 1 with a clear message, touching nothing."""
    with pytest.raises(RuntimeError, match="server exited before it was ready") as refused:
        start_server(proc.data_dir)
    # The reason ends the second server's stderr, which the error quotes.
    assert f"another Strata process (pid {proc.process.pid}) is using this data dir" in str(refused.value)


def test_kill_9_leaves_no_stale_lock(tmp_path: Path) -> None:
    """After the holder is killed outright, a new server starts on the same data dir."""
    first = start_server(tmp_path / "data")
    first.kill()
    second = start_server(tmp_path / "data")
    assert second.terminate() == 0
