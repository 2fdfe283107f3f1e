"""A fast start: the server announces itself before the vector store and the encoder have loaded,
answers what needs neither at once, and makes what needs them wait for them (never fail for them).

The server runs in this process (``main.app.serve``) with the vector store's opening held at a gate
the test opens, so that "still loading" is a state the test controls, not a race it hopes to win.
"""

from __future__ import annotations

import asyncio
import sqlite3
import subprocess
import sys
import threading
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from main import app, stores
from main.config import Config, StdinWatch
from main.lifecycle import StopSignal
from main.lock import DataDirLock
from services.retrieval.vectors import open_vector_store
from services.store.precheck import SCHEMA_VERSION
from tests.support.client import RpcClient, connected
from tests.support.process import start_server
from tests.support.scenarios import KEY_FACT, Project, zh_chapter
from tests.support.scenarios import KEY_INSTRUCTION as INSTRUCTION

CURSOR_DOCUMENT = "第03章.md"


def chapters() -> dict[str, str]:
    texts = {f"第{n:02d}章.md": zh_chapter(f"第{n}章", 20, start=n * 20) for n in range(1, 4)}
    texts["第01章.md"] += "\n\n" + KEY_FACT + "\n"
    return texts


class Gate:
    """Holds the vector store's opening until :meth:`release`; :attr:`entered` tells that it began."""

    def __init__(self) -> None:
        self.entered = threading.Event()
        self.released = threading.Event()

    def wrap(self, real: Callable[..., Any]) -> Callable[..., Any]:
        def opening(*args: Any, **kwargs: Any) -> Any:
            self.entered.set()
            self.released.wait(60)
            return real(*args, **kwargs)

        return opening

    def release(self) -> None:
        self.released.set()

    async def wait_entered(self) -> None:
        assert await asyncio.to_thread(self.entered.wait, 60), "the vector store never began to open"


@asynccontextmanager
async def serving_here(data_dir: Path, monkeypatch: pytest.MonkeyPatch,
                       gate: Gate | None = None) -> AsyncIterator[dict[str, Any]]:
    """``main.app.serve`` in this process until the block ends; yields its ready message."""
    stops: list[StopSignal] = []

    class Stop(StopSignal):
        async def install(self, watch_stdin: StdinWatch) -> None:
            stops.append(self)

        def uninstall(self) -> None:
            pass

    monkeypatch.setattr(app, "StopSignal", Stop)
    opening = gate.wrap(open_vector_store) if gate else open_vector_store
    monkeypatch.setattr(stores, "open_vector_store", opening)
    config = Config(data_dir=data_dir, watch_stdin=StdinWatch.OFF, index_debounce=0.05)
    announced: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
    server = asyncio.ensure_future(app.serve(config, announced.set_result))
    waiting: set[asyncio.Future[Any]] = {announced, server}
    await asyncio.wait(waiting, return_when=asyncio.FIRST_COMPLETED)
    if server.done():
        server.result()  # raises why it did not start
    try:
        yield announced.result()
    finally:
        if gate is not None:
            gate.release()
        stops[0].trigger("test")
        await server


async def _assemble_at_end(project: Project) -> dict[str, Any]:
    return await project.assemble(CURSOR_DOCUMENT, len(chapters()[CURSOR_DOCUMENT]), "continue", INSTRUCTION)


async def test_the_ready_line_comes_before_the_vector_store_and_system_info_does_not_wait_for_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The ready line is announced, system:info and project:open are answered while the vector store
    has not opened (it is held at a gate); index:status, which needs it, waits for it and then
    answers."""
    gate = Gate()
    async with serving_here(tmp_path / "data", monkeypatch, gate) as ready:
        assert not gate.released.is_set()
        async with connected(ready["url"], ready["token"]) as rpc:
            info = await rpc.call("system:info", {})
            assert info["embedding"]["name"]
            project = await Project.open(rpc, tmp_path / "novel")
            await gate.wait_entered()  # opening the project started loading the vector store
            status = asyncio.ensure_future(rpc.call("index:status", {"projectId": project.project_id}))
            # Answered while the vector store is held: a request that does not need it never waits.
            assert (await rpc.call("system:info", {}))["name"] == "strata"
            assert not status.done()
            gate.release()
            assert (await status)["projectId"] == project.project_id


async def _index(rpc: RpcClient, project: Project) -> None:
    for document_id, text in chapters().items():
        await project.write(document_id, text)
    for _ in range(600):
        status = await rpc.call("index:status", {"projectId": project.project_id})
        if not status["indexing"] and status["documents"] == len(chapters()):
            return
        await asyncio.sleep(0.05)
    pytest.fail("the index did not settle")


async def test_an_assembly_made_while_the_vector_store_loads_waits_and_keeps_its_retrieved_layer(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """After a restart, the first context:assemble arrives while the vector store is still opening: it
    waits for it, then answers with the same prompt (Retrieved layer included) as once loaded."""
    async with serving_here(tmp_path / "data", monkeypatch) as ready, \
            connected(ready["url"], ready["token"]) as rpc:
        project = await Project.open(rpc, tmp_path / "novel")
        await _index(rpc, project)
        before = await _assemble_at_end(project)
    assert KEY_FACT in before["prompt"]
    assert before["layers"]["retrieved"]["chunks"] >= 1

    gate = Gate()
    async with serving_here(tmp_path / "data", monkeypatch, gate) as ready, \
            connected(ready["url"], ready["token"]) as rpc:
        project = await Project.open(rpc, tmp_path / "novel")
        first = asyncio.ensure_future(_assemble_at_end(project))
        await gate.wait_entered()
        assert not first.done()
        gate.release()
        after = await first
        assert after["warnings"] == []
        assert after["prompt"] == before["prompt"]
        assert after["layers"]["retrieved"]["chunks"] == before["layers"]["retrieved"]["chunks"]


async def test_the_ready_line_comes_before_the_other_channels_load_and_their_calls_wait_for_them(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The channels other than the system one load after the ready line (their import held at a
    gate here): system:info answers meanwhile; project:open and rpc.discover wait, then answer (the
    document lists every method); a method nobody serves is refused as unknown only once they have
    loaded."""
    gate = Gate()
    monkeypatch.setattr(app, "_import_wiring", gate.wrap(app._import_wiring))
    async with serving_here(tmp_path / "data", monkeypatch) as ready, \
            connected(ready["url"], ready["token"]) as rpc:
        await gate.wait_entered()
        assert (await rpc.call("system:info", {}))["name"] == "strata"
        opening = asyncio.ensure_future(Project.open(rpc, tmp_path / "novel"))
        discover = asyncio.ensure_future(rpc.call("rpc.discover", {}))
        unknown = asyncio.ensure_future(rpc.request("no:such:method", {}))
        await asyncio.sleep(0.2)
        assert not opening.done()
        assert not discover.done()
        assert not unknown.done()
        gate.release()
        project = await opening
        assert project.project_id
        names = {m["name"] for m in (await discover)["methods"]}
        assert {"system:info", "project:open", "context:assemble", "chat:submit"} <= names
        assert (await unknown)["error"]["code"] == -32601


def waiting_for_stores(monkeypatch: pytest.MonkeyPatch) -> asyncio.Event:
    """Set once a system:info call has reached the wait for the stores (``main.app._described``)."""
    asked = asyncio.Event()
    described = app._described

    async def signalling(opened: asyncio.Future[Any]) -> Any:
        asked.set()
        return await described(opened)

    monkeypatch.setattr(app, "_described", signalling)
    return asked


async def test_the_ready_line_comes_before_the_stores_open_and_calls_that_need_them_wait(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The stores (the database through SQLAlchemy, the documents, retrieval) open after the ready
    line (held at a gate here): system:info, whose encoder is the one the stored index records, and
    project:open wait for them, then answer."""
    gate = Gate()
    monkeypatch.setattr(app, "_open_stores", gate.wrap(app._open_stores))
    asked = waiting_for_stores(monkeypatch)
    async with serving_here(tmp_path / "data", monkeypatch) as ready, \
            connected(ready["url"], ready["token"]) as rpc:
        await gate.wait_entered()
        opening = asyncio.ensure_future(Project.open(rpc, tmp_path / "novel"))
        info = asyncio.ensure_future(rpc.call("system:info", {}))
        await asyncio.wait_for(asked.wait(), 60)
        assert not info.done()
        assert not opening.done()
        gate.release()
        assert (await info)["embedding"]["name"]
        assert (await opening).project_id


async def test_stores_that_fail_to_open_after_the_ready_line_end_the_server_and_free_the_data_dir(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """If the stores fail to open after the ready line, a system:info waiting for them is answered
    SERVER_SHUTTING_DOWN, serve ends with the failure (the process exits with it, main/cli.py), and
    the data dir is released for the next server."""
    gate = Gate()

    def failing(config: Config, startup: Any) -> Any:
        gate.entered.set()
        gate.released.wait(60)
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(app, "_open_stores", failing)
    asked = waiting_for_stores(monkeypatch)
    replies: list[dict[str, Any]] = []

    async def ask_while_opening() -> None:
        async with serving_here(tmp_path / "data", monkeypatch) as ready, \
                connected(ready["url"], ready["token"]) as rpc:
            await gate.wait_entered()
            info = asyncio.ensure_future(rpc.request("system:info", {}))
            await asyncio.wait_for(asked.wait(), 60)
            gate.release()
            replies.append(await info)

    with pytest.raises(OSError, match="No space left"):
        await ask_while_opening()
    assert replies[0]["error"]["data"]["code"] == "SERVER_SHUTTING_DOWN"
    lock = DataDirLock(tmp_path / "data")
    lock.acquire()  # raises DataDirLocked if the failed server still held it
    lock.release()


def test_what_the_ready_line_needs_loads_without_the_stores_libraries() -> None:
    """Importing the server's entry point loads neither SQLAlchemy, SQLModel, Chroma nor numpy:
    they load after the ready line."""
    heavy = ("sqlalchemy", "sqlmodel", "chromadb", "numpy")
    code = f"import sys, main.cli; print(sorted(m for m in {heavy!r} if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=Path(__file__).resolve().parents[2])
    assert out.stdout.strip() == "[]"


@pytest.mark.parametrize("content", [b"\x00not a database" * 1000, "newer"])
def test_a_database_file_the_store_cannot_open_is_refused_before_the_ready_line(
        tmp_path: Path, content: bytes | str) -> None:
    """A file that is not a database, or a database from a newer build, ends the process before its
    ready line with a one-line reason, as when the store itself refused it."""
    data = tmp_path / "data"
    data.mkdir()
    if content == "newer":
        with sqlite3.connect(data / "strata.db") as db:
            db.execute("CREATE TABLE strata_meta (key TEXT PRIMARY KEY, value TEXT)")
            db.execute("INSERT INTO strata_meta VALUES ('schema_version', ?)", (str(SCHEMA_VERSION + 1),))
        db.close()
    else:
        assert isinstance(content, bytes)
        (data / "strata.db").write_bytes(content)
    with pytest.raises(RuntimeError, match="server exited before it was ready") as refused:
        start_server(data)
    assert "strata: cannot start" in str(refused.value)
    assert "Traceback" not in str(refused.value)
