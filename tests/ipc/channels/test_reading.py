"""reading:* through a registry: every method and error it declares is documented; reading:summaries:run
and the readingPageTokens setting through the app's real registry and a dispatcher."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio

from ipc.channels.reading import register_reading
from ipc.channels.reading_ask import register_reading_ask
from ipc.context import CallContext, Peer
from ipc.dispatch import Dispatcher
from ipc.protocol import Call
from ipc.registry import Registry
from services.context.counting import CountCache
from services.reading.ask import ReadingCompanion
from services.reading.roll_up import RollUp
from services.reading.service import ReadingService
from services.reading.store import SummaryStore
from services.summaries.seam import NoCompleter
from tests.ipc.channels.conftest import Rpc, assert_documented

# The module shares one event loop with its services (see conftest.services).
pytestmark = pytest.mark.asyncio(loop_scope="module")

# Two chapters of three pages (marked) and one paragraph per page but the first.
CHAPTERS = {
    "ch1.md": "# One\n\nMira climbed the stair.\n<!-- page -->\nThe lamp was cold.",
    "ch2.md": "Han waited below.",
}
# One chapter without markers: twelve paragraphs of about twenty tokens each.
UNMARKED = "\n\n".join(f"Paragraph {n}: the keeper wrote the weather in the log, as every night "
                       "before, and slept." for n in range(1, 13))


async def _none(*_args: str) -> list[str]:
    return []


async def _counter(_project_id: str) -> CountCache:
    raise AssertionError("not called")


async def test_methods_and_their_errors_are_documented() -> None:
    """docs/protocol.md has a row for every reading:* method and every error code they declare."""
    registry = Registry()
    reading = ReadingService(documents=_none, read=_none, counter=_counter,  # type: ignore[arg-type]
                             summaries=SummaryStore(None))  # type: ignore[arg-type]
    register_reading(registry, reading, RollUp(reading, NoCompleter()))
    register_reading_ask(registry, ReadingCompanion(edition=None, summaries=None, search=None,  # type: ignore[arg-type]
                                                    assembler=None))  # type: ignore[arg-type]
    assert {m.name for m in registry} == {"reading:layout", "reading:summaries:pending",
                                          "reading:summaries:put", "reading:summaries:run",
                                          "reading:validate", "reading:ask"}
    assert_documented(registry, ("reading:",))


def _summary(request: dict[str, Any]) -> str:
    """A valid summary of the unit a llm:complete request is for, citing its first page."""
    page = re.search(r"pages? (\d+)", request["messages"][0]["content"])
    assert page is not None
    return json.dumps({"entities": [{"name": "mira", "type": "character", "mentions": 1,
                                     "page_spans": [int(page.group(1))]}],
                       "events": [], "relationships": [], "facts": [], "open_questions": []})


class Model:
    """A connection that declared completions and answers llm:complete with valid summaries."""

    def __init__(self, registry: Registry, connection_id: str = "model") -> None:
        self.asked: list[dict[str, Any]] = []
        self.gate = asyncio.Event()
        self.gate.set()
        self.was_asked = asyncio.Event()
        self.dispatcher = Dispatcher(registry)
        self.ctx = CallContext(peer=Peer(connection_id=connection_id, request=self.request))

    async def request(self, method: str, params: Any, timeout: float) -> Any:
        assert method == "llm:complete"
        self.asked.append(params)
        self.was_asked.set()
        await self.gate.wait()
        return {"content": _summary(params)}

    async def reply(self, method: str, params: Any) -> dict[str, Any]:
        text = await self.dispatcher.dispatch(Call(method, params, 1), self.ctx)
        assert text is not None
        reply: dict[str, Any] = json.loads(text)
        return reply


@pytest_asyncio.fixture(loop_scope="module")
async def model(registry: Registry) -> AsyncIterator[Model]:
    client = Model(registry)
    assert (await client.reply("system:capabilities", {"completions": True}))["result"] == {
        "capabilities": ["completions"]}
    try:
        yield client
    finally:
        await client.reply("system:capabilities", {"completions": False})


async def _write(rpc: Rpc, project_id: str, documents: dict[str, str]) -> None:
    for document_id, text in documents.items():
        await rpc.call("document:write", {"projectId": project_id, "documentId": document_id, "text": text})


async def test_run_without_a_completing_client_is_reading_no_completer(rpc: Rpc, project_id: str) -> None:
    """No connection declared completions: READING_NO_COMPLETER (-32094), nothing stored; an unknown
    project is PROJECT_NOT_FOUND and a level that is none INVALID_PARAMS."""
    await _write(rpc, project_id, CHAPTERS)
    error = await rpc.error("reading:summaries:run", {"projectId": project_id})
    assert (error["code"], error["data"]) == (-32094, {"code": "READING_NO_COMPLETER"})
    layout = await rpc.call("reading:layout", {"projectId": project_id})
    assert layout["summaries"] == {"paragraph": 0, "page": 0, "chapter": 0}
    missing = await rpc.error("reading:summaries:run", {"projectId": "0" * 16})
    assert missing["data"]["code"] == "PROJECT_NOT_FOUND"
    bad = await rpc.error("reading:summaries:run", {"projectId": project_id, "level": "book"})
    assert bad["data"]["code"] == "INVALID_PARAMS"


async def test_run_through_a_completing_client_summarises_the_book(rpc: Rpc, project_id: str,
                                                                   model: Model) -> None:
    """With a capable connection: llm:complete per unit (purpose reading.summary.<level>), the result
    per level in camelCase, then nothing pending and the layout counting every summary."""
    await _write(rpc, project_id, CHAPTERS)
    result = await model.reply("reading:summaries:run", {"projectId": project_id})
    assert result["result"] == {"level": "chapter", "warnings": [], "levels": {
        "paragraph": {"done": 4, "refused": 0, "failed": 0, "remaining": 0},
        "page": {"done": 3, "refused": 0, "failed": 0, "remaining": 0},
        "chapter": {"done": 2, "refused": 0, "failed": 0, "remaining": 0}}}
    assert [p["purpose"] for p in model.asked] == (["reading.summary.paragraph"] * 4
                                                    + ["reading.summary.page"] * 3
                                                    + ["reading.summary.chapter"] * 2)
    assert all(p["maxTokens"] > 85 and [m["role"] for m in p["messages"]] == ["system", "user"]
               for p in model.asked)
    for level in ("paragraph", "page", "chapter"):
        pending = await rpc.call("reading:summaries:pending", {"projectId": project_id, "level": level})
        assert (pending["pending"], pending["waiting"]) == ([], 0)
    layout = await rpc.call("reading:layout", {"projectId": project_id})
    assert layout["summaries"] == {"paragraph": 4, "page": 3, "chapter": 2}
    again = await model.reply("reading:summaries:run", {"projectId": project_id, "level": "page"})
    assert again["result"]["levels"] == {"paragraph": {"done": 0, "refused": 0, "failed": 0, "remaining": 0},
                                         "page": {"done": 0, "refused": 0, "failed": 0, "remaining": 0}}


async def test_a_second_run_of_the_project_is_reading_run_busy(rpc: Rpc, project_id: str,
                                                               model: Model) -> None:
    """While a run waits on a completion, another run of the same project (from any connection) is
    READING_RUN_BUSY (-32096); the first then finishes normally."""
    await _write(rpc, project_id, CHAPTERS)
    model.gate.clear()
    first = asyncio.ensure_future(model.reply("reading:summaries:run",
                                              {"projectId": project_id, "level": "paragraph"}))
    await model.was_asked.wait()
    busy = await rpc.error("reading:summaries:run", {"projectId": project_id})
    assert (busy["code"], busy["data"]) == (-32096, {"code": "READING_RUN_BUSY"})
    model.gate.set()
    assert (await first)["result"]["levels"]["paragraph"]["done"] == 4


async def test_the_page_size_setting_changes_the_page_count(rpc: Rpc, project_id: str) -> None:
    """readingPageTokens (default 400) is in the settings; set smaller, the unmarked chapter is laid out
    in more pages of at most that many tokens; out of 50..4000 it is INVALID_PARAMS."""
    await _write(rpc, project_id, {"ch1.md": UNMARKED})
    settings = (await rpc.call("project:settings:get", {"projectId": project_id}))["settings"]
    assert settings["readingPageTokens"] == 400
    before = await rpc.call("reading:layout", {"projectId": project_id})
    assert (before["pageTokens"], before["pageCount"]) == (400, 1)
    updated = (await rpc.call("project:settings:update", {
        "projectId": project_id, "version": settings["version"], "readingPageTokens": 60}))["settings"]
    assert updated["readingPageTokens"] == 60
    after = await rpc.call("reading:layout", {"projectId": project_id})
    pages = after["chapters"][0]["pages"]
    assert after["pageTokens"] == 60
    assert after["pageCount"] == len(pages) > 1
    assert all(p["tokens"] <= 60 for p in pages)
    assert sum(p["paragraphs"] for p in pages) == 12
    for size in (49, 4001, "60"):
        error = await rpc.error("project:settings:update", {
            "projectId": project_id, "version": updated["version"], "readingPageTokens": size})
        assert error["data"]["code"] == "INVALID_PARAMS"
