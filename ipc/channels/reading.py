"""reading:* methods: the reading companion's book, summaries and citation checks (seed 000), thin
over :class:`ReadingService`."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, PlainValidator, StringConstraints, WithJsonSchema

from ipc.channels.projects import ProjectScoped
from ipc.context import CallContext
from ipc.models import WireModel
from ipc.registry import Registry
from services.errors import (
    InvalidParams,
    ProjectNotFound,
    ReadingNoCompleter,
    ReadingRunBusy,
    ReadingSpoiler,
    ReadingSummaryInvalid,
    ReadingSummaryTooLong,
    ReadingUnitNotFound,
    StrataError,
)
from services.reading.citations import Citation
from services.reading.roll_up import NoCompleter, RollUp, RunBusy, read_answer
from services.reading.service import ReadingService, UnitNotFound
from services.reading.summary import SummaryProblem

Level = Literal["paragraph", "page", "chapter"]
PageNumber = Annotated[int, Field(ge=1, le=99_999)]
MAX_ANSWER = 65_536


SummaryState = Literal["current", "stale", "missing"]
MAX_SUMMARY_TEXT = 65_536


def _summary_input(value: Any) -> dict[str, Any] | str:
    """An object, or text short enough to read; one error at ``summary`` otherwise (not one per form)."""
    if isinstance(value, dict) or (isinstance(value, str) and len(value) <= MAX_SUMMARY_TEXT):
        return value
    raise ValueError(f"the summary must be a JSON object, or JSON text of at most {MAX_SUMMARY_TEXT} "
                     "characters")


SummaryInput = Annotated[dict[str, Any] | str, PlainValidator(_summary_input), WithJsonSchema(
    {"anyOf": [{"type": "object"}, {"type": "string", "maxLength": MAX_SUMMARY_TEXT}]})]


class PageInfo(WireModel):
    number: int
    paragraphs: int = Field(description="how many paragraphs the page has")
    tokens: int
    hash: str = Field(description="the page's content hash")
    summary: SummaryState = Field(description="its summary: made for its text as it is now, for older "
                                              "text (stale), or none")
    paragraph_summaries: int = Field(description="its paragraphs with a current summary")


class ChapterInfo(WireModel):
    index: int
    document_id: str
    title: str | None
    start_page: int
    end_page: int
    paged_by: str = Field(description='"markers" or "tokens"')
    hash: str
    summary: SummaryState
    pages: list[PageInfo]


class LayoutResult(WireModel):
    page_tokens: int = Field(description="the page size used where a document has no page markers")
    page_count: int
    chapters: list[ChapterInfo]
    summaries: dict[str, int] = Field(description="units of each level with a current summary")


class PendingParams(ProjectScoped):
    level: Level


class PendingUnit(WireModel):
    unit: str
    pages: list[int] = Field(description="[first, last]")
    hash: str
    messages: list[dict[str, str]] = Field(description="the seed's template for this step: system, user")


class PendingResult(WireModel):
    level: Level
    pending: list[PendingUnit]
    waiting: int = Field(description="units that wait for the level below to be summarised first")
    current: int


class PutParams(ProjectScoped):
    level: Level
    unit: Annotated[str, StringConstraints(min_length=1, max_length=32)] | PageNumber = Field(
        description='"p12.3" (a paragraph), "12" or 12 (a page), "3" or 3 (a chapter)')
    summary: SummaryInput = Field(
        description="the summary: a JSON object, or the model's reply holding one as JSON text")


class PutResult(WireModel):
    level: Level
    unit: str
    pages: list[int]
    tokens: int


class RunParams(ProjectScoped):
    level: Level = Field(default="chapter", description="summarise every level from the paragraphs up to "
                                                        "this one")


class LevelTally(WireModel):
    done: int = Field(description="summaries stored")
    refused: int = Field(description="answers refused twice (invalid, too long or citing other pages)")
    failed: int = Field(description="completions that did not come (an error, a timeout, no text)")
    remaining: int = Field(description="units of the level still without a current summary")


class RunResult(WireModel):
    level: Level
    levels: dict[str, LevelTally] = Field(description="by level, from paragraph up to `level`")
    warnings: list[str]


class ValidateParams(ProjectScoped):
    start: PageNumber
    end: PageNumber
    answer: Annotated[str, StringConstraints(max_length=MAX_ANSWER)]


class CitationWire(WireModel):
    raw: str
    pages: list[int]
    start: int
    end: int
    problem: str | None


class ClaimWire(WireModel):
    text: str
    pages: list[int]
    citations: list[CitationWire]


class ValidateResult(WireModel):
    ok: bool
    claims: list[ClaimWire]
    outside: list[CitationWire] = Field(description="citations of pages outside start..end")
    uncited: list[str] = Field(description="claims with no citation")
    malformed: list[str]
    restate: str | None = Field(description="when not ok: the prompt asking to restate within the window")


def _citation(c: Citation) -> CitationWire:
    return CitationWire(raw=c.raw, pages=list(c.pages), start=c.start_char, end=c.end_char, problem=c.problem)


def _problem(problem: SummaryProblem) -> StrataError:
    kinds: dict[str, type[StrataError]] = {"READING_SUMMARY_INVALID": ReadingSummaryInvalid,
                                           "READING_SUMMARY_TOO_LONG": ReadingSummaryTooLong,
                                           "READING_SPOILER": ReadingSpoiler}
    return kinds[problem.code](path=problem.path, **problem.data)


def register_reading(registry: Registry, reading: ReadingService, roll_up: RollUp) -> None:
    @registry.method("reading:layout", params=ProjectScoped, result=LayoutResult,
                     summary="The book: chapters (documents in natural order), their pages and each page's "
                             "paragraph count.", errors=(ProjectNotFound,))
    async def layout(params: ProjectScoped, ctx: CallContext) -> LayoutResult:
        return LayoutResult.model_validate(await reading.layout(params.project_id))

    @registry.method("reading:summaries:pending", params=PendingParams, result=PendingResult,
                     summary="Every unit of a level without a current summary, with the seed's prompt "
                             "for it.",
                     errors=(ProjectNotFound, InvalidParams))
    async def pending(params: PendingParams, ctx: CallContext) -> PendingResult:
        backlog = await reading.pending(params.project_id, params.level)
        ready = [PendingUnit(unit=p.unit.name, pages=list(p.unit.pages), hash=p.unit.hash,
                             messages=[{"role": "system", "content": p.system},
                                       {"role": "user", "content": p.user}])
                 for p in backlog.ready]
        return PendingResult(level=params.level, waiting=backlog.waiting, current=backlog.current,
                             pending=ready)

    @registry.method("reading:summaries:put", params=PutParams, result=PutResult,
                     summary="Store a unit's summary if it validates, fits its level and cites only its "
                             "pages.",
                     errors=(ProjectNotFound, ReadingUnitNotFound, ReadingSummaryInvalid,
                             ReadingSummaryTooLong, ReadingSpoiler, InvalidParams))
    async def put(params: PutParams, ctx: CallContext) -> PutResult:
        try:
            summary = read_answer(params.summary) if isinstance(params.summary, str) else params.summary
            accepted = await reading.put(params.project_id, params.level, str(params.unit), summary)
        except UnitNotFound:
            raise ReadingUnitNotFound() from None
        except SummaryProblem as problem:
            raise _problem(problem) from None
        return PutResult(level=params.level, unit=accepted.unit.name, pages=list(accepted.unit.pages),
                         tokens=accepted.tokens)

    @registry.method("reading:summaries:run", params=RunParams, result=RunResult,
                     summary="Summarise the book from the paragraphs up to `level` through a connected "
                             "client that runs completions (llm:complete), with $/progress reports.",
                     errors=(ProjectNotFound, ReadingNoCompleter, ReadingRunBusy, InvalidParams))
    async def run(params: RunParams, ctx: CallContext) -> RunResult:
        try:
            report = await roll_up.run(params.project_id, params.level, prefer=ctx.peer.connection_id)
        except NoCompleter:
            raise ReadingNoCompleter() from None
        except RunBusy:
            raise ReadingRunBusy() from None
        return RunResult(level=report.level, warnings=list(report.warnings),
                         levels={level: LevelTally(done=t.done, refused=t.refused, failed=t.failed,
                                                   remaining=t.remaining)
                                 for level, t in report.levels.items()})

    @registry.method("reading:validate", params=ValidateParams, result=ValidateResult,
                     summary="Check an answer's citations against pages start..end.",
                     errors=(ProjectNotFound, InvalidParams))
    async def validate(params: ValidateParams, ctx: CallContext) -> ValidateResult:
        if params.end < params.start:
            raise InvalidParams("end must not be before start", field="end")
        await reading.layout(params.project_id)  # the project must exist
        checked = reading.validate(params.answer, params.start, params.end)
        return ValidateResult(
            ok=checked.ok, outside=[_citation(c) for c in checked.outside], uncited=list(checked.uncited),
            malformed=list(checked.malformed), restate=checked.restate,
            claims=[ClaimWire(text=c.text, pages=list(c.pages), citations=[_citation(x) for x in c.citations])
                    for c in checked.claims])
