"""Every acknowledged write survives ``kill -9`` of the server, and the stores open cleanly after it.

A client writes in a loop through JSON-RPC (constraints, versioned settings and
budget profile, kg entities, semantic and episodic memories, two documents
that grow with every write), seven writers at once. The server child is
killed with SIGKILL at a few points, restarted on the same data dir, and the
test checks that:

* every write that was answered is there (a versioned record is at the last
  acknowledged version, or at the one write that was in flight when it died);
* SQLite passes ``PRAGMA integrity_check`` and answers every read method; the
  Chroma folder opens (the server would not start otherwise);
* each document holds exactly one of the texts written to it, never a mix, at
  least as new as the last acknowledged one, and no temp file is left behind.

The ledger is cumulative: writes of the first round are checked again after
the second and third crash. Each round writes until a set number of writes
has been acknowledged, however long that takes on a busy machine (bounded by
a generous wait), never for a set time: a slow machine proves as much as a
fast one, only later. The same test runs with the server stopped three
quarters of the time (SIGSTOP/SIGCONT), as a machine busy with other work.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import sqlite3
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.support.client import RpcCallError, RpcClient
from tests.support.process import ServerProcess, start_server
from tests.support.scenarios import zh_sentence

# Acknowledged writes (constraints, entities, rules and episodes together) before each kill: a
# different phase of the writers' loops each round. About 0.6, 1.3 and 0.9 s on an idle machine.
KILL_AFTER_WRITES = (80, 170, 120)
WRITING_LIMIT = 120.0  # seconds a round may take to reach its count before the test gives up
EPISODES_PER_DOCUMENT = 150  # episodes are listed per documentId, at most 200 at a time
TEMP_GLOB = ".strata-*"


def zh_text(round_: int, n: int) -> str:
    """The n-th text of the Chinese chapter: grows by 20 sentences per write."""
    return f"# 第{round_}轮\n\n" + "".join(zh_sentence(k) for k in range(20 * (n + 1))) + "\n"


def en_text(round_: int, n: int) -> str:
    """The n-th text of the English chapter (in a sub-folder): grows by 12 sentences per write."""
    return f"# Round {round_}\n\n" + " ".join(f"Sentence {k} of write {n}." for k in range(12 * (n + 1)))


@dataclass
class Versioned:
    """A record updated with an optimistic version: what was acknowledged and what was in flight."""

    acked_version: int
    acked_value: Any
    in_flight: tuple[int, Any] | None = None

    def allowed(self) -> list[tuple[int, Any]]:
        allowed = [(self.acked_version, self.acked_value)]
        if self.in_flight is not None:
            allowed.append(self.in_flight)
        return allowed


@dataclass
class Ledger:
    """What one round's project was told was written."""

    project_id: str
    folder: Path
    round_: int
    constraints: dict[int, str] = field(default_factory=dict)
    entities: dict[int, str] = field(default_factory=dict)
    rules: dict[int, str] = field(default_factory=dict)
    episodes: dict[int, tuple[str, str]] = field(default_factory=dict)  # id -> (documentId, output)
    settings: Versioned | None = None
    budget: Versioned | None = None
    # documentId -> (index of the last acknowledged text or -1, highest index sent)
    documents: dict[str, tuple[int, int]] = field(default_factory=dict)

    def texts(self, document_id: str) -> Callable[[int, int], str]:
        return zh_text if document_id.endswith("第一章.md") else en_text

    def counted(self) -> int:
        """Acknowledged writes of the records that are only ever added."""
        return sum(len(x) for x in (self.constraints, self.entities, self.rules, self.episodes))

    def enough(self, writes: int) -> bool:
        """``writes`` counted, and every other writer has had a write acknowledged too."""
        return (self.counted() >= writes and len(self.documents) == len(DOCUMENTS)
                and all(acked >= 0 for acked, _ in self.documents.values())
                and self.settings is not None and self.settings.acked_version > 1
                and self.budget is not None and self.budget.acked_version > 1)


Writer = Callable[[RpcClient, Ledger], Awaitable[None]]


async def write_constraints(rpc: RpcClient, ledger: Ledger) -> None:
    for n in range(10**6):
        text = f"第{ledger.round_}轮约束{n}"
        created = await rpc.call("constraints:create", {"projectId": ledger.project_id, "kind": "plot",
                                                        "text": text, "priority": n % 7})
        ledger.constraints[created["constraint"]["id"]] = text
        if len(ledger.constraints) >= 480:  # stay under the 500 per project limit
            return


async def write_entities(rpc: RpcClient, ledger: Ledger) -> None:
    for n in range(10**6):
        name = f"角色{ledger.round_}-{n}"
        upserted = await rpc.call("kg:entity:upsert", {"projectId": ledger.project_id, "kind": "character",
                                                       "name": name, "aliases": [f"别名{n}"],
                                                       "description": zh_sentence(n)})
        ledger.entities[upserted["entity"]["id"]] = name


async def write_rules(rpc: RpcClient, ledger: Ledger) -> None:
    for n in range(10**6):
        text = f"偏好{ledger.round_}-{n}：动作场景用短句"
        upserted = await rpc.call("memory:semantic:upsert", {"projectId": ledger.project_id, "text": text,
                                                             "confidence": (n % 10) / 10,
                                                             "confirmed": n % 2 == 0})
        ledger.rules[upserted["rule"]["id"]] = text


async def write_episodes(rpc: RpcClient, ledger: Ledger) -> None:
    for n in range(10**6):
        document_id = f"episodes/{n // EPISODES_PER_DOCUMENT}.md"
        output = f"第{ledger.round_}轮输出{n}。" + zh_sentence(n)
        added = await rpc.call("memory:episodic:add", {"projectId": ledger.project_id, "output": output,
                                                       "instruction": f"续写{n}", "documentId": document_id,
                                                       "skillId": "continue"})
        ledger.episodes[added["episode"]["id"]] = (document_id, output)


async def write_settings(rpc: RpcClient, ledger: Ledger) -> None:
    current = (await rpc.call("project:settings:get", {"projectId": ledger.project_id}))["settings"]
    ledger.settings = Versioned(current["version"], current["styleNotes"])
    for n in range(10**6):
        notes = f"第{ledger.round_}轮风格说明{n}"
        version = ledger.settings.acked_version
        ledger.settings.in_flight = (version + 1, notes)
        updated = await rpc.call("project:settings:update", {"projectId": ledger.project_id,
                                                             "version": version, "styleNotes": notes})
        assert updated["settings"]["version"] == version + 1
        ledger.settings = Versioned(version + 1, notes)


async def write_budget(rpc: RpcClient, ledger: Ledger) -> None:
    current = await rpc.call("context:budget:get", {"projectId": ledger.project_id})
    ledger.budget = Versioned(current["version"], current["contextWindow"])
    for n in range(10**6):
        window = 8192 + n
        version = ledger.budget.acked_version
        ledger.budget.in_flight = (version + 1, window)
        updated = await rpc.call("context:budget:update", {"projectId": ledger.project_id,
                                                           "version": version, "contextWindow": window})
        assert updated["version"] == version + 1
        ledger.budget = Versioned(version + 1, window)


def document_writer(document_id: str) -> Writer:
    async def write(rpc: RpcClient, ledger: Ledger) -> None:
        text_of = ledger.texts(document_id)
        for n in range(10**6):
            acked, _ = ledger.documents.get(document_id, (-1, -1))
            ledger.documents[document_id] = (acked, n)
            await rpc.call("document:write", {"projectId": ledger.project_id, "documentId": document_id,
                                              "text": text_of(ledger.round_, n)})
            ledger.documents[document_id] = (n, n)
    return write


DOCUMENTS = ("第一章.md", "卷二/chapter-02.md")
WRITERS: tuple[Writer, ...] = (write_constraints, write_entities, write_rules, write_episodes, write_settings,
                               write_budget, *map(document_writer, DOCUMENTS))


async def write_until_killed(server: ServerProcess, rpc: RpcClient, ledger: Ledger, writes: int,
                             busy: contextlib.AbstractAsyncContextManager[None]) -> float:
    """Run every writer at once until ``writes`` are acknowledged (and each writer has one), then
    SIGKILL the server and forget what was in flight. Returns the seconds it took."""
    started = time.monotonic()
    tasks = [asyncio.ensure_future(writer(rpc, ledger)) for writer in WRITERS]
    async with busy:
        while not ledger.enough(writes):
            failed = [t for t in tasks if t.done() and not t.cancelled() and t.exception() is not None]
            assert not failed, [repr(t.exception()) for t in failed]
            assert time.monotonic() - started < WRITING_LIMIT, (
                f"{ledger.counted()} of {writes} writes acknowledged in {WRITING_LIMIT} s")
            await asyncio.sleep(0.005)
    seconds = time.monotonic() - started
    await asyncio.to_thread(server.kill)
    for task in tasks:
        task.cancel()
    results = await asyncio.gather(*tasks, return_exceptions=True)
    # Writers end cancelled (reply never came) or with the connection closing under them.
    unexpected = [r for r in results if isinstance(r, BaseException)
                  and not isinstance(r, asyncio.CancelledError | ConnectionError)
                  and type(r).__module__.split(".")[0] != "websockets"]
    assert not unexpected, [repr(r) for r in unexpected]
    assert server.process.returncode == -9
    return seconds


@contextlib.asynccontextmanager
async def stopped_most_of_the_time(server: ServerProcess, running: float = 0.025,
                                   stopped: float = 0.075) -> AsyncIterator[None]:
    """The server gets ``running`` seconds out of every ``running + stopped`` (SIGSTOP, SIGCONT), as
    on a machine whose other work takes three quarters of the CPU; running again when it ends."""
    pid = server.process.pid

    async def stutter() -> None:
        try:
            while True:
                os.kill(pid, signal.SIGSTOP)
                await asyncio.sleep(stopped)
                os.kill(pid, signal.SIGCONT)
                await asyncio.sleep(running)
        finally:
            os.kill(pid, signal.SIGCONT)

    task = asyncio.ensure_future(stutter())
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def check_ledger(rpc: RpcClient, ledger: Ledger) -> None:
    """Every acknowledged write of ``ledger`` is stored; versioned records are acked or in flight."""
    pid = ledger.project_id
    constraints = {c["id"]: c["text"] for c in
                   (await rpc.call("constraints:list", {"projectId": pid}))["constraints"]}
    assert ledger.constraints.items() <= constraints.items()
    entities = {e["id"]: e["name"] for e in
                (await rpc.call("kg:entity:list", {"projectId": pid}))["entities"]}
    assert ledger.entities.items() <= entities.items()
    rules = {r["id"]: r["text"] for r in
             (await rpc.call("memory:semantic:list", {"projectId": pid}))["rules"]}
    assert ledger.rules.items() <= rules.items()
    stored_episodes: dict[int, tuple[str, str]] = {}
    for document_id in sorted({d for d, _ in ledger.episodes.values()}):
        listed = await rpc.call("memory:episodic:list", {"projectId": pid, "documentId": document_id,
                                                         "limit": 200})
        assert len(listed["episodes"]) <= EPISODES_PER_DOCUMENT + 1
        stored_episodes |= {e["id"]: (e["documentId"], e["output"]) for e in listed["episodes"]}
    assert ledger.episodes.items() <= stored_episodes.items()

    assert ledger.settings is not None
    settings = (await rpc.call("project:settings:get", {"projectId": pid}))["settings"]
    assert (settings["version"], settings["styleNotes"]) in ledger.settings.allowed()
    assert ledger.budget is not None
    budget = await rpc.call("context:budget:get", {"projectId": pid})
    assert (budget["version"], budget["contextWindow"]) in ledger.budget.allowed()

    listed_documents = {d["documentId"] for d in
                        (await rpc.call("document:list", {"projectId": pid}))["documents"]}
    for document_id, (acked, sent) in ledger.documents.items():
        allowed = {ledger.texts(document_id)(ledger.round_, n): n for n in range(max(acked, 0), sent + 1)}
        read = {"projectId": pid, "documentId": document_id}
        if acked < 0:  # never acknowledged: absent, or the one text in flight
            with contextlib.suppress(RpcCallError):
                assert (await rpc.call("document:read", read))["text"] in allowed
            continue
        assert document_id in listed_documents
        text = (await rpc.call("document:read", read))["text"]
        assert text in allowed, f"{document_id}: {len(text)} characters, not one of the texts written"
        on_disk = await asyncio.to_thread((ledger.folder / document_id).read_bytes)
        assert on_disk == text.encode("utf-8")
    leftovers = [p.relative_to(ledger.folder) for p in
                 await asyncio.to_thread(lambda: list(ledger.folder.rglob(TEMP_GLOB)))]
    assert leftovers == []


def integrity(database: Path) -> list[tuple[Any, ...]]:
    """SQLite's own check of every page and index, read-only beside the running server."""
    connection = sqlite3.connect(f"file:{database}?mode=ro", uri=True)
    try:
        return connection.execute("PRAGMA integrity_check").fetchall()
    finally:
        connection.close()


async def open_project(rpc: RpcClient, folder: Path, round_: int) -> Ledger:
    await asyncio.to_thread(folder.mkdir, parents=True)
    opened = await rpc.call("project:open", {"path": str(folder)})
    return Ledger(project_id=opened["project"]["projectId"], folder=folder, round_=round_)


@pytest.mark.timeout(600)  # a busy machine takes longer to reach the counts; the waits are bounded
@pytest.mark.parametrize("machine", ["idle", "busy"])
async def test_acknowledged_writes_survive_kill_9(tmp_path: Path, machine: str) -> None:
    """Writes answered before a SIGKILL are all there after a restart; SQLite and documents are intact.

    Three rounds on one data dir: each opens a fresh project, writes with seven concurrent writers
    until 80, 170 and 120 writes are acknowledged (each writer at least one), however long that
    takes, is killed with SIGKILL, and the restarted server must show every acknowledged write of
    every round so far, pass SQLite's integrity_check, and hold documents that are exactly one of
    the texts written (never torn), with no temp file left in the folder. ``busy``: the server is
    stopped three quarters of the time while it is written to, and the test proves just as much.
    """
    data_dir = tmp_path / "data"
    ledgers: list[Ledger] = []
    server = await asyncio.to_thread(start_server, data_dir)
    try:
        for round_, writes in enumerate(KILL_AFTER_WRITES):
            rpc = await RpcClient.open(server.url, server.token)
            ledger = await open_project(rpc, tmp_path / f"项目{round_}", round_)
            ledgers.append(ledger)
            busy = stopped_most_of_the_time(server) if machine == "busy" else contextlib.nullcontext()
            seconds = await write_until_killed(server, rpc, ledger, writes, busy)
            await rpc.close()
            assert ledger.counted() >= writes
            print(f"round {round_}: killed after {seconds:.2f} s with", json.dumps({  # shown with -s
                "constraints": len(ledger.constraints), "entities": len(ledger.entities),
                "rules": len(ledger.rules), "episodes": len(ledger.episodes),
                "settings_version": ledger.settings.acked_version if ledger.settings else None,
                "budget_version": ledger.budget.acked_version if ledger.budget else None,
                "document_writes": {d: acked + 1 for d, (acked, _) in ledger.documents.items()}},
                ensure_ascii=False))
            assert all(acked >= 0 for acked, _ in ledger.documents.values())

            server = await asyncio.to_thread(start_server, data_dir)
            rpc = await RpcClient.open(server.url, server.token)
            try:
                # The Chroma folder opens again (on first need: the index's status needs it).
                await rpc.call("index:status", {"projectId": ledger.project_id})
                assert (data_dir / "chroma").is_dir()
                for checked in ledgers:
                    await check_ledger(rpc, checked)
                projects = (await rpc.call("project:list"))["projects"]
                assert {p["projectId"] for p in projects} == {x.project_id for x in ledgers}
            finally:
                await rpc.close()
            assert await asyncio.to_thread(integrity, data_dir / "strata.db") == [("ok",)]
    finally:
        code = await asyncio.to_thread(server.terminate)
    assert code == 0
    assert await asyncio.to_thread(integrity, data_dir / "strata.db") == [("ok",)]
