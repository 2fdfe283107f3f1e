"""The roll-up through the summarizer seam (reading:summaries:run) over a real ReadingService and
SQLite, with a fake completer: levels in order, fenced answers, a refusal asked again once, completions
that do not come, progress reports, and one run per project at a time."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Callable
from typing import Any

import pytest
from structlog.testing import capture_logs

from services.errors import ProjectNotFound
from services.projects import ProjectRecord
from services.reading.roll_up import (
    LEVELS,
    MAX_ANSWER_CHARS,
    NoCompleter,
    RollUp,
    RunBusy,
    max_tokens,
    read_answer,
)
from services.reading.service import ReadingService
from services.reading.store import SummaryStore
from services.reading.summary import LIMITS, SummaryProblem
from services.store import Database
from services.summaries.seam import CompletionRequest, CompletionUnavailable
from tests.services.reading.support import reading_service

# Chapter 1: page 1 (p1.1, p1.2) and page 2 (p2.1); chapter 2: page 3 (p3.1, p3.2).
DOCS = {
    "ch1.md": "Mira climbed the stair.\n\nThe lamp was cold.\f\nHan waited below.",
    "ch2.md": "苏晚点亮了灯。\n\n风很大。",
}
UNITS = {"paragraph": 5, "page": 3, "chapter": 2}
CANARY = "zebracanary"  # in an answer: must never reach a log


def summary(*pages: int, **extra: Any) -> dict[str, Any]:
    return {"entities": [{"name": "mira", "type": "character", "mentions": 1, "page_spans": list(pages)}],
            "events": [], "relationships": [], "facts": [f"The lamp was cold ({CANARY})."],
            "open_questions": [], **extra}


def first_page(request: CompletionRequest) -> int:
    """The first page the prompt names: a paragraph's page, a page, a chapter's first page."""
    found = re.search(r"pages? (\d+)", request.messages[0].content)
    assert found is not None
    return int(found.group(1))


def unit_of(request: CompletionRequest) -> str:
    """The unit a prompt is for, as named on the wire."""
    system, user = request.messages[0].content, request.messages[1].content
    if request.purpose.endswith("paragraph"):
        found = re.match(r"Paragraph \((p\d+\.\d+)\)", user)
        assert found is not None
        return found.group(1)
    if request.purpose.endswith("page"):
        return str(first_page(request))
    found = re.search(r"for chapter (\d+)", system)
    assert found is not None
    return found.group(1)


Answer = Callable[[CompletionRequest], str]


def good(request: CompletionRequest) -> str:
    return json.dumps(summary(first_page(request)))


class FakeModel:
    """A completer that answers with ``answer`` and keeps every request."""

    def __init__(self, answer: Answer = good) -> None:
        self.answer = answer
        self.requests: list[CompletionRequest] = []

    async def complete(self, request: CompletionRequest) -> str:
        self.requests.append(request)
        await asyncio.sleep(0)
        return self.answer(request)


@pytest.fixture
def reading(database: Database) -> ReadingService:
    docs = dict(DOCS)
    service = reading_service(docs, SummaryStore(database))
    service.docs = docs  # type: ignore[attr-defined]
    return service


def roll_up(reading: ReadingService, model: Any, **kwargs: Any) -> tuple[RollUp, list[dict[str, Any]]]:
    reports: list[dict[str, Any]] = []
    return RollUp(reading, model, progress=reports.append, **kwargs), reports


async def lacking(reading: ReadingService, project_id: str) -> dict[str, int]:
    found: dict[str, int] = {}
    for level in LEVELS:
        backlog = await reading.pending(project_id, level)
        found[level] = len(backlog.ready) + backlog.waiting
    return found


async def test_good_answers_summarise_every_level_in_order(reading: ReadingService,
                                                           project: ProjectRecord) -> None:
    """Paragraphs, then pages, then chapters, each with its seed prompt, purpose and a token allowance
    a little above its limit; everything is stored, nothing remains and the layout counts it all."""
    model = FakeModel()
    runner, _ = roll_up(reading, model)
    report = await runner.run(project.id, prefer="conn-1")
    assert {level: (t.done, t.refused, t.failed, t.remaining) for level, t in report.levels.items()} == {
        level: (count, 0, 0, 0) for level, count in UNITS.items()}
    assert report.warnings == ()
    purposes = [r.purpose for r in model.requests]
    assert purposes == (["reading.summary.paragraph"] * 5 + ["reading.summary.page"] * 3
                        + ["reading.summary.chapter"] * 2)
    assert [unit_of(r) for r in model.requests] == ["p1.1", "p1.2", "p2.1", "p3.1", "p3.2",
                                                    "1", "2", "3", "1", "2"]
    for request in model.requests:
        level = next(lvl for lvl in LEVELS if request.purpose == f"reading.summary.{lvl}")
        assert LIMITS[level] < request.max_tokens == max_tokens(level)
        assert [m.role for m in request.messages] == ["system", "user"]
        assert request.prefer == "conn-1"
    chapter_two = model.requests[-1].messages
    assert "Include only content from pages 3–3." in chapter_two[0].content
    assert json.loads(chapter_two[1].content.split("\n", 1)[1])[0]["entities"][0]["page_spans"] == [3]
    assert await lacking(reading, project.id) == {"paragraph": 0, "page": 0, "chapter": 0}
    assert (await reading.layout(project.id))["summaries"] == UNITS


async def test_a_run_stops_at_its_level(reading: ReadingService, project: ProjectRecord) -> None:
    """level "paragraph" summarises only paragraphs; a later run to "page" asks only for the pages."""
    model = FakeModel()
    runner, _ = roll_up(reading, model)
    report = await runner.run(project.id, "paragraph")
    assert list(report.levels) == ["paragraph"]
    assert report.levels["paragraph"].done == 5
    again = await runner.run(project.id, "page")
    assert (again.levels["paragraph"].done, again.levels["page"].done) == (0, 3)
    assert {r.purpose for r in model.requests[5:]} == {"reading.summary.page"}


async def test_fenced_json_and_prose_around_it_are_read(reading: ReadingService,
                                                        project: ProjectRecord) -> None:
    """An answer in a ```json fence, or with a sentence before the object, is read as its JSON."""
    def fenced(request: CompletionRequest) -> str:
        body = good(request)
        return f"```json\n{body}\n```" if request.purpose.endswith("paragraph") else f"Here it is: {body}"

    runner, _ = roll_up(reading, FakeModel(fenced))
    report = await runner.run(project.id)
    assert [t.done for t in report.levels.values()] == [5, 3, 2]


def test_read_answer_takes_one_object_or_refuses() -> None:
    """Plain, fenced (any info string) and embedded objects are read; arrays, broken JSON and answers
    past the size cap are READING_SUMMARY_INVALID."""
    assert read_answer(' {"a": 1} ') == {"a": 1}
    assert read_answer('```\n{"a": 1}\n```') == {"a": 1}
    assert read_answer('```JSON {"a": 1}```') == {"a": 1}
    assert read_answer('Sure! {"a": {"b": 2}} Hope it helps.') == {"a": {"b": 2}}
    for bad in ("[1, 2]", '{"a": ', "no json here", "", "{" + " " * MAX_ANSWER_CHARS + "}"):
        with pytest.raises(SummaryProblem) as raised:
            read_answer(bad)
        assert (raised.value.code, raised.value.path) == ("READING_SUMMARY_INVALID", "")


async def test_a_spoiling_answer_is_asked_again_with_the_problem(reading: ReadingService,
                                                                 project: ProjectRecord) -> None:
    """Page 1's first answer cites page 2: it is refused and asked again once, the refusal (code,
    path, allowed page) appended after the answer as a user message; the second answer is stored."""
    def spoils_page_one_once(request: CompletionRequest) -> str:
        if request.purpose.endswith(".page") and first_page(request) == 1 and len(request.messages) == 2:
            return json.dumps(summary(1, 2))
        return good(request)

    model = FakeModel(spoils_page_one_once)
    runner, _ = roll_up(reading, model)
    report = await runner.run(project.id, "page")
    assert (report.levels["page"].done, report.levels["page"].refused) == (3, 0)
    retried = [r for r in model.requests if len(r.messages) == 4]
    assert len(retried) == 1
    system, user, answer, follow = retried[0].messages
    assert (answer.role, follow.role) == ("assistant", "user")
    assert json.loads(answer.content) == summary(1, 2)
    assert "READING_SPOILER at /entities/0/page_spans/1" in follow.content
    assert "citing only page 1." in follow.content
    assert (system.content, user.content) == (model.requests[5].messages[0].content,
                                              model.requests[5].messages[1].content)


async def test_refused_twice_counts_as_refused_and_the_run_goes_on(reading: ReadingService,
                                                                   project: ProjectRecord) -> None:
    """p1.2 is always answered over its 85-token limit: refused after one retry, the other paragraphs
    and pages are stored, page 1 and chapter 1 remain (they wait for p1.2), with a warning."""
    def long_p12(request: CompletionRequest) -> str:
        if request.purpose.endswith("paragraph") and unit_of(request) == "p1.2":
            return json.dumps(summary(1, facts=["The lamp was cold and the rope was wet. " * 12]))
        return good(request)

    model = FakeModel(long_p12)
    runner, _ = roll_up(reading, model)
    report = await runner.run(project.id)
    tallies = {level: (t.done, t.refused, t.failed, t.remaining) for level, t in report.levels.items()}
    assert tallies == {"paragraph": (4, 1, 0, 1), "page": (2, 0, 0, 1), "chapter": (1, 0, 0, 1)}
    assert [w.split(":")[0] for w in report.warnings] == ["READING_SUMMARIES_REFUSED"]
    assert sum(unit_of(r) == "p1.2" for r in model.requests) == 2
    assert "READING_SUMMARY_TOO_LONG" in model.requests[2].messages[-1].content
    assert [unit_of(r) for r in model.requests if r.purpose.endswith("page")] == ["2", "3"]


async def test_not_json_is_refused_like_an_invalid_summary(reading: ReadingService,
                                                           project: ProjectRecord) -> None:
    """An answer that is no JSON object is asked again with READING_SUMMARY_INVALID; answers never
    reach the log."""
    model = FakeModel(lambda r: f"I cannot do that ({CANARY})" if len(r.messages) == 2 else good(r))
    runner, _ = roll_up(reading, model)
    with capture_logs() as logs:
        report = await runner.run(project.id, "paragraph")
    assert report.levels["paragraph"].done == 5
    assert "READING_SUMMARY_INVALID" in model.requests[1].messages[-1].content
    assert CANARY not in repr(logs)
    assert any(entry["event"] == "reading.run_unit" and entry["outcome"] == "refused" for entry in logs)


async def test_progress_begins_reports_and_ends(reading: ReadingService, project: ProjectRecord) -> None:
    """$/progress params with token reading/<projectId>: begin at 0 of every lacking unit, a report at
    each level, end with done == total and 100 %."""
    runner, reports = roll_up(reading, FakeModel())
    await runner.run(project.id)
    assert {r["token"] for r in reports} == {f"reading/{project.id}"}
    values = [r["value"] for r in reports]
    assert values[0] == {"kind": "begin", "title": "Summarizing", "projectId": project.id,
                         "level": "paragraph", "done": 0, "total": 10, "percentage": 0}
    assert values[-1]["kind"] == "end"
    assert (values[-1]["done"], values[-1]["total"], values[-1]["percentage"]) == (10, 10, 100)
    assert {v["kind"] for v in values[1:-1]} == {"report"}
    assert {"paragraph", "page", "chapter"} <= {v["level"] for v in values}
    dones = [v["done"] for v in values]
    assert dones == sorted(dones)


async def test_with_no_client_nothing_is_asked(reading: ReadingService, project: ProjectRecord) -> None:
    """available() false: NoCompleter before any request or progress; an unknown project is
    ProjectNotFound first."""
    model = FakeModel()
    runner, reports = roll_up(reading, model, available=lambda: False)
    with pytest.raises(NoCompleter):
        await runner.run(project.id)
    with pytest.raises(ProjectNotFound):
        await runner.run("0" * 16)
    assert (model.requests, reports) == ([], [])
    assert not runner.running(project.id)


async def test_completions_that_do_not_come_count_as_failed_and_stop_the_run(
        reading: ReadingService, project: ProjectRecord) -> None:
    """Three timeouts in a row stop the run with READING_COMPLETIONS_FAILING; what was done stays and
    progress still ends."""
    def times_out_after_one(request: CompletionRequest) -> str:
        if unit_of(request) != "p1.1":
            raise CompletionUnavailable("timeout")
        return good(request)

    model = FakeModel(times_out_after_one)
    runner, reports = roll_up(reading, model)
    report = await runner.run(project.id)
    paragraph = report.levels["paragraph"]
    assert (paragraph.done, paragraph.failed, paragraph.remaining) == (1, 3, 4)
    assert len(model.requests) == 4
    assert [w.split(":")[0] for w in report.warnings] == ["READING_COMPLETIONS_FAILING"]
    assert reports[-1]["value"]["kind"] == "end"
    assert (report.levels["page"].done, report.levels["chapter"].done) == (0, 0)


async def test_the_client_leaving_stops_the_run_at_once(reading: ReadingService,
                                                        project: ProjectRecord) -> None:
    """A completion that finds no client any more (it left mid-run) stops the run with
    READING_COMPLETER_GONE after that one request."""
    def leaves(request: CompletionRequest) -> str:
        if unit_of(request) == "p1.2":
            raise CompletionUnavailable("closed")
        return good(request)

    model = FakeModel(leaves)
    runner, _ = roll_up(reading, model)
    report = await runner.run(project.id)
    assert (report.levels["paragraph"].done, report.levels["paragraph"].failed) == (1, 1)
    assert len(model.requests) == 2
    assert [w.split(":")[0] for w in report.warnings] == ["READING_COMPLETER_GONE"]


async def test_a_unit_edited_while_it_is_summarised_is_not_stored(reading: ReadingService,
                                                                  project: ProjectRecord) -> None:
    """The text of p3.2 changes while its summary is being written: that answer is not stored (it
    would summarise the old text as current), READING_TEXT_CHANGED says so, a later run does it."""
    def edits_p32(request: CompletionRequest) -> str:
        if unit_of(request) == "p3.2":
            reading.docs["ch2.md"] = "苏晚点亮了灯。\n\n风停了。"  # type: ignore[attr-defined]
        return good(request)

    runner, _ = roll_up(reading, FakeModel(edits_p32))
    report = await runner.run(project.id, "paragraph")
    assert (report.levels["paragraph"].done, report.levels["paragraph"].remaining) == (4, 1)
    assert [w.split(":")[0] for w in report.warnings] == ["READING_TEXT_CHANGED"]
    again = await roll_up(reading, FakeModel())[0].run(project.id, "paragraph")
    assert (again.levels["paragraph"].done, again.levels["paragraph"].remaining) == (1, 0)


async def test_one_run_per_project_at_a_time(reading: ReadingService, project: ProjectRecord) -> None:
    """While a run waits on a completion, a second run of the project is RunBusy; once the first ends
    (here cancelled, which still ends its progress) the project can run again."""
    started, release = asyncio.Event(), asyncio.Event()

    class Slow(FakeModel):
        async def complete(self, request: CompletionRequest) -> str:
            started.set()
            await release.wait()
            return await super().complete(request)

    runner, reports = roll_up(reading, Slow())
    first = asyncio.create_task(runner.run(project.id))
    await started.wait()
    assert runner.running(project.id)
    with pytest.raises(RunBusy):
        await runner.run(project.id, "paragraph")
    first.cancel()
    with pytest.raises(asyncio.CancelledError):
        await first
    assert not runner.running(project.id)
    assert [r["value"]["kind"] for r in reports][-1] == "end"
    release.set()
    report = await runner.run(project.id, "paragraph")
    assert report.levels["paragraph"].done == 5
