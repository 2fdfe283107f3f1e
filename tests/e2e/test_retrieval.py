"""Retrieval over a real websocket against real servers: the Retrieved layer finds earlier passages,
stays current with edits made in and outside the app, and never crosses projects. The last test runs
the same against a Chroma server (``chroma run``) with ``--chroma-url``.
"""

from __future__ import annotations

import asyncio
import shutil
import socket
import subprocess
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.client import RpcClient
from tests.support.process import ServerProcess, start_server
from tests.support.scenarios import KEY_FACT, Project, zh_chapter
from tests.support.scenarios import KEY_INSTRUCTION as INSTRUCTION

# The default encoder, e5, as the acceptance checks run it (the rest of the suite uses the faster
# Universal Sentence Encoder, see tests/conftest.py).
pytestmark = pytest.mark.server_flags("--index-debounce", "0.1", "--embedding", "multilingual-e5-small")

EN_FACT = "Mara hid the brass key under the third step of the lighthouse stairs and covered it with moss."


def chapters() -> dict[str, str]:
    """Five chapters; the key is hidden in chapter 2 and chapter 5 is where the writer is."""
    texts = {f"卷一/第{n:02d}章.md": zh_chapter(f"第{n}章", 40, start=n * 40) for n in range(1, 6)}
    texts["卷一/第02章.md"] += "\n\n" + KEY_FACT + "\n"
    return texts


async def eventually(check: Callable[[], Awaitable[bool]], what: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not await check():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}")
        await asyncio.sleep(0.1)


async def seeded(rpc: RpcClient, folder: Path) -> Project:
    project = await Project.open(rpc, folder)
    for document_id, text in chapters().items():
        await project.write(document_id, text)
    return project


async def seeded_until_found(server: ServerProcess, folder: Path, what: str) -> None:
    """Seed the project in ``folder`` through ``server`` and wait until chapter 5's prompt holds the
    planted fact."""
    client = await RpcClient.open(server.url, server.token)
    try:
        project = await seeded(client, folder)

        async def found() -> bool:
            return KEY_FACT in (await prompt_at_end_of_chapter_5(project))["prompt"]

        await eventually(found, what)
    finally:
        await client.close()


async def prompt_at_end_of_chapter_5(project: Project, instruction: str = INSTRUCTION) -> dict[str, Any]:
    text = (await project.rpc.call("document:read", {"projectId": project.project_id,
                                                     "documentId": "卷一/第05章.md"}))["text"]
    return await project.assemble("卷一/第05章.md", len(text), "continue", instruction)


async def test_writing_chapter_5_retrieves_the_key_hidden_in_chapter_2(rpc: RpcClient,
                                                                       tmp_path: Path) -> None:
    """At the end of chapter 5, asking about the key puts the chapter-2 passage in the Retrieved layer;
    index:status then reports the settled index."""
    project = await seeded(rpc, tmp_path / "novel")

    async def found() -> bool:
        result = await prompt_at_end_of_chapter_5(project)
        return KEY_FACT in result["prompt"] and result["layers"]["retrieved"]["chunks"] >= 1

    await eventually(found, "the planted fact in the prompt")

    async def settled() -> bool:
        status = await rpc.call("index:status", {"projectId": project.project_id})
        return not status["indexing"]

    await eventually(settled, "indexing to settle")
    status = await rpc.call("index:status", {"projectId": project.project_id})
    assert (status["projectId"], status["documents"]) == (project.project_id, 5)
    assert status["chunks"] >= 5
    result = await prompt_at_end_of_chapter_5(project)
    assert "[相关前文]" in result["prompt"]
    assert not [w for w in result["warnings"] if w.startswith("RETRIEVAL_UNAVAILABLE")]


async def test_writes_in_the_app_and_edits_outside_it_are_picked_up_and_deletions_leave(
        rpc: RpcClient, tmp_path: Path) -> None:
    """document:write re-indexes; a file saved by another program is re-indexed without a call or a
    restart; a deleted file's passages leave the results."""
    project = await seeded(rpc, tmp_path / "novel")
    watch = "\n\n苏晴在钟楼顶上发现了一只银色怀表。\n"
    await project.write("卷一/第03章.md", chapters()["卷一/第03章.md"] + watch)

    async def has(fact: str, instruction: str) -> bool:
        return fact in (await prompt_at_end_of_chapter_5(project, instruction))["prompt"]

    await eventually(lambda: has("银色怀表", "写苏晴想起那只银色怀表"), "a document:write to be indexed")

    outside = project.folder / "卷一" / "第04章.md"
    outside.write_text(outside.read_text(encoding="utf-8") + "\n\n沈舟在雾笛旁找到了失踪船长的航海日志。\n",
                       encoding="utf-8")
    await eventually(lambda: has("失踪船长的航海日志", "写沈舟翻开航海日志"), "an outside edit to be indexed")

    (project.folder / "卷一" / "第02章.md").unlink()

    async def gone() -> bool:
        return not await has(KEY_FACT, INSTRUCTION)

    await eventually(gone, "a deleted file to leave the results")


async def test_two_projects_never_see_each_other(rpc: RpcClient, tmp_path: Path) -> None:
    """A fact written only in project B never reaches project A's prompt, even when asked for."""
    a = await seeded(rpc, tmp_path / "a")
    b = await Project.open(rpc, tmp_path / "b")
    secret = "只有乙项目知道：宝藏埋在北港旧码头第七根木桩下。"
    await b.write("secret.md", secret + "\n")
    for n in range(1, 6):
        await b.write(f"第{n}章.md", zh_chapter(f"第{n}章", 10) + "\n")

    async def b_indexed() -> bool:
        return secret in (await b.assemble("第5章.md", 0, "continue", "宝藏埋在哪里"))["prompt"]

    await eventually(b_indexed, "project B to be indexed")
    result = await prompt_at_end_of_chapter_5(a, "宝藏埋在北港旧码头第七根木桩下")
    assert "只有乙项目知道" not in result["prompt"]
    assert result["prompt"].count("宝藏") == 1  # the instruction's own words, nothing retrieved


async def test_subscribers_receive_indexing_progress(proc: ServerProcess, rpc: RpcClient,
                                                     tmp_path: Path) -> None:
    """After system:subscribe {topics: [progress]}, opening a project with documents on disk sends
    $/progress begin .. end with done/total; a connection that did not subscribe receives none."""
    folder = tmp_path / "novel"
    for document_id, text in chapters().items():
        (folder / document_id).parent.mkdir(parents=True, exist_ok=True)
        (folder / document_id).write_text(text, encoding="utf-8")
    assert await rpc.call("system:subscribe", {"topics": ["progress"]}) == {"topics": ["progress"]}
    quiet = await RpcClient.open(proc.url, proc.token)
    try:
        project = await Project.open(rpc, folder)
        kinds: list[str] = []
        while "end" not in kinds:
            note = await asyncio.wait_for(rpc.notifications.get(), 60)
            assert note["method"] == "$/progress"
            value = note["params"]["value"]
            if value["projectId"] == project.project_id:
                kinds.append(value["kind"])
                assert 1 <= value["done"] <= value["total"] == 5
        assert kinds[0] == "begin"
        assert quiet.notifications.empty()
        assert await rpc.call("system:subscribe", {"topics": []}) == {"topics": []}
    finally:
        await quiet.close()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def chroma_server(tmp_path: Path) -> Iterator[str]:
    """A Chroma server from the chromadb package (``chroma run``) on a free port."""
    executable = shutil.which("chroma") or str(Path(__import__("sys").executable).parent / "chroma")
    port = _free_port()
    log = (tmp_path / "chroma.log").open("wb")
    process = subprocess.Popen([executable, "run", "--path", str(tmp_path / "chroma-server"), "--port",
                                str(port)], stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=1):
                    break
            except OSError:
                if process.poll() is not None or time.monotonic() > deadline:
                    pytest.fail("chroma run did not start")
                time.sleep(0.2)
        yield f"http://127.0.0.1:{port}"
    finally:
        process.terminate()
        process.wait(30)
        log.close()


async def test_after_a_restart_the_first_assembly_keeps_its_retrieved_layer(tmp_path: Path) -> None:
    """A writer restarts the app and types at once in a project indexed before: the first assembly,
    sent as soon as project:open answers, still finds the planted fact (nothing it needs is left
    loading past its search deadline), and jieba's dictionary comes from the data dir's cache folder,
    written once by the first server and not again."""
    data = tmp_path / "data"
    first = await asyncio.to_thread(start_server, data, "--index-debounce", "0.1")
    try:
        await seeded_until_found(first, tmp_path / "novel", "the planted fact before the restart")
    finally:
        first.terminate()
    (kept,) = (data / "cache").glob("jieba-compact-*.bin")
    written = kept.stat().st_mtime_ns
    second = await asyncio.to_thread(start_server, data)
    try:
        client = await RpcClient.open(second.url, second.token)
        try:
            reopened = await Project.open(client, tmp_path / "novel")
            result = await prompt_at_end_of_chapter_5(reopened)
        finally:
            await client.close()
    finally:
        second.terminate()
    assert KEY_FACT in result["prompt"]
    assert not [w for w in result["warnings"] if w.startswith("RETRIEVAL_UNAVAILABLE")]
    assert '"context.provider_failed"' not in second.stderr_text()
    assert kept.stat().st_mtime_ns == written


async def test_the_same_retrieval_runs_against_a_chroma_server(chroma_server: str, tmp_path: Path) -> None:
    """With --chroma-url the vectors live in the Chroma server and the planted fact is still found;
    nothing is written to the local Chroma folder."""
    server = await asyncio.to_thread(start_server, tmp_path / "data", "--chroma-url", chroma_server,
                                     "--index-debounce", "0.1")
    try:
        await seeded_until_found(server, tmp_path / "novel", "the planted fact via the Chroma server")
    finally:
        server.terminate()
    assert not (tmp_path / "data" / "chroma").exists()
    assert any((tmp_path / "chroma-server").iterdir())
