"""Bursts of simultaneous context:assemble calls over real websockets: what is shared between
requests (retrieval results, identical searches in flight) never changes a result, and never hides
a write.

* The same requests sent together in a burst (neighbouring cursors, each several times) and one at
  a time to a second server seeded alike give the same prompt, stablePrefixHash and tokenCount.
* A constraint, an entity sheet and a document written during a burst are in every assembly sent
  after the write was acknowledged.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from tests.support.client import RpcClient
from tests.support.process import ServerProcess, serving
from tests.support.scenarios import Project, log_events, zh_chapter

DOCUMENTS = {f"卷一/第{n:02d}章.md": zh_chapter(f"第{n}章", 30, start=n * 30) for n in range(1, 9)}
INSTRUCTION = "写林远想起那把铜钥匙"
COMPARED = ("prompt", "stablePrefixHash", "tokenCount", "prefixHashes")


async def seed(url: str, token: str, folder: Path) -> tuple[list[RpcClient], Project]:
    """Four connections to a server holding one project (chapters, constraints, an entity, a rule,
    an episode), its retrieval index settled."""
    clients = [await RpcClient.open(url, token) for _ in range(4)]
    project = await Project.open(clients[0], folder, narrative_person="第一人称")
    for document_id, text in DOCUMENTS.items():
        await project.write(document_id, text)
    await project.constraint("严格第一人称叙述", priority=5)
    await project.entity("林远", "灯塔看守人，沉默寡言。")
    await project.rule("动作场景用短句", confidence=0.9)
    await project.episode("续写灯塔的夜晚", "他把马灯举高了一点。")
    deadline = time.monotonic() + 120
    while (await clients[0].call("index:status", {"projectId": project.project_id}))["indexing"]:
        assert time.monotonic() < deadline, "indexing did not settle"
        await asyncio.sleep(0.1)
    return clients, project


@contextlib.asynccontextmanager
async def seeded(data_dir: Path,
                 folder: Path) -> AsyncIterator[tuple[ServerProcess, list[RpcClient], Project]]:
    """A server seeded by :func:`seed`, its connections closed afterwards."""
    with serving(data_dir) as server:
        clients, project = await seed(server.url, server.token, folder)
        try:
            yield server, clients, project
        finally:
            for client in clients:
                await client.close()


def requests(project: Project, documents: Sequence[str] = tuple(DOCUMENTS)) -> list[dict[str, Any]]:
    """Two neighbouring cursors in each document, 3 characters apart inside one sentence, and at
    the end of the sentence before (continue in odd chapters, polish in even ones)."""
    found = []
    for n, document_id in enumerate(documents):
        text = DOCUMENTS[document_id]
        end = text.index("。", len(text) // 2) + 1
        skill = "polish" if n % 2 else "continue"
        found += [project.params(document_id, cursor, skill, INSTRUCTION) for cursor in (end + 2, end + 5)]
    return found


async def burst(clients: Sequence[RpcClient], calls: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every call sent at once, spread over the connections; the results in order."""
    replies = await asyncio.gather(*(clients[n % len(clients)].call("context:assemble", params)
                                     for n, params in enumerate(calls)))
    return list(replies)


def fields(result: dict[str, Any]) -> dict[str, Any]:
    return {name: result[name] for name in COMPARED}


async def test_a_request_gives_the_same_prompt_alone_and_inside_a_burst(tmp_path: Path) -> None:
    """Each request of a burst (16 distinct, each sent twice, all at once: 4 per document, the
    per-document limit) equals the same request sent alone to a second server seeded alike:
    prompt, stablePrefixHash, tokenCount and prefix hashes; and the copies inside the burst equal
    each other."""
    async with seeded(tmp_path / "burst-data", tmp_path / "novel") as (_, clients, project):
        distinct = requests(project)
        together = await burst(clients, distinct * 2)
    async with seeded(tmp_path / "alone-data", tmp_path / "novel-2") as (_, clients, project):
        alone = [await clients[0].call("context:assemble", params) for params in requests(project)]
    assert any(r["layers"]["retrieved"]["chunks"] for r in alone)
    for n, lone in enumerate(alone):
        for copy in (together[n], together[n + len(alone)]):
            assert fields(copy) == fields(lone), distinct[n]


@pytest.mark.parametrize("what", ["constraint", "entity", "document"])
async def test_a_write_during_a_burst_is_in_every_assembly_sent_after_its_answer(tmp_path: Path,
                                                                               what: str) -> None:
    """While a burst runs, a write (a constraint, an entity sheet, a chapter's text) is acknowledged;
    every assembly sent after the acknowledgement shows it, whether it was sent during the burst or
    after it; before the write, none does."""
    marker = "钟楼顶上的铜铃里藏着第二把钥匙"
    early, late = list(DOCUMENTS)[:4], list(DOCUMENTS)[4:]
    document_id = late[0]
    with serving(tmp_path / "data") as server:
        clients, project = await seed(server.url, server.token, tmp_path / "novel")
        try:
            before = await burst(clients, requests(project) * 2)
            assert not any(marker in r["prompt"] for r in before)
            # A burst in the first chapters is being served while the write is made.
            running = asyncio.ensure_future(burst(clients, requests(project, early) * 2))
            await asyncio.sleep(0.05)
            writer = Project(await RpcClient.open(server.url, server.token), project.project_id,
                             project.folder)
            text = DOCUMENTS[document_id]
            cut = text.index("。", len(text) // 2) + 1
            try:
                if what == "constraint":
                    await writer.constraint(marker, priority=9)
                elif what == "entity":
                    await writer.entity("林远", marker)
                else:
                    await writer.write(document_id, text[:cut] + marker + "。" + text[cut:])
            finally:
                await writer.rpc.close()
            # Sent after the answer, while the first burst may still run: the other chapters (for
            # the document, at the cursor just after the written sentence).
            wanted = requests(project, late) * 2
            if what == "document":
                wanted = [{**c, "cursorPosition": cut + len(marker) + 1} for c in wanted
                          if c["documentId"] == document_id]
            after = await burst(clients, wanted)
            await running
            assert all(marker in r["prompt"] for r in after)
        finally:
            for client in clients:
                await client.close()


async def test_typing_through_sentence_ends_reads_ahead_and_changes_no_prompt(tmp_path: Path) -> None:
    """A writer moving the cursor one character at a time through two sentence ends: the server
    reads ahead the searches of the keystrokes that pass them (logged with counts, no text), and
    every keystroke's prompt, stablePrefixHash, tokenCount and prefix hashes equal those of the same
    keystrokes sent in reverse order to a second server seeded alike, where nothing foresees them."""
    document_id = list(DOCUMENTS)[2]
    text = DOCUMENTS[document_id]
    first_end = text.index("。", len(text) // 2) + 1
    cursors = list(range(first_end - 6, text.index("。", first_end) + 3))
    async with seeded(tmp_path / "typing-data", tmp_path / "novel") as (first, clients, project):
        typed = []
        for cursor in cursors:
            params = project.params(document_id, cursor, "continue", INSTRUCTION)
            typed.append(await clients[0].call("context:assemble", params))
            await asyncio.sleep(0.01)  # a fast typist's pause, in which the server reads ahead
        # The last keystroke's read-ahead, at the latest, runs once nothing else does.
        deadline = time.monotonic() + 30
        while not (read := [e for e in log_events(first.stderr_text(), "retrieval.read_ahead")
                            if e["document_id"] == document_id]):
            assert time.monotonic() < deadline, "nothing was read ahead"
            await asyncio.sleep(0.05)
    async with seeded(tmp_path / "reverse-data", tmp_path / "novel-2") as (_, clients, project):
        backwards = [await clients[0].call("context:assemble",
                                           project.params(document_id, cursor, "continue", INSTRUCTION))
                     for cursor in reversed(cursors)]
    assert all(e["queries"] >= 1 and e["hits"] > 0 and e["cursor"] in cursors for e in read)
    assert "林远" not in repr(read)
    assert any(r["layers"]["retrieved"]["chunks"] for r in typed)
    for cursor, forward, backward in zip(cursors, typed, reversed(backwards), strict=True):
        assert fields(forward) == fields(backward), cursor
