"""reading:ask: the seed's answer prompt for a reader's question, from pages start..end only; thin over
:class:`ReadingCompanion`."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field, StringConstraints

from ipc.channels.context import AssembleResult, result_fields
from ipc.channels.projects import ProjectScoped
from ipc.context import CallContext
from ipc.models import WireModel
from ipc.registry import Registry
from services.errors import (
    Backpressure,
    InvalidParams,
    ProjectNotFound,
    ReadingWindowBreach,
)
from services.reading.ask import PageOutOfRange, ReadingCompanion, WindowBreach

PageNumber = Annotated[int, Field(ge=1, le=99_999)]
MAX_QUESTION = 4096


class AskParams(ProjectScoped):
    start: PageNumber = Field(description="the first page of the reading window")
    end: PageNumber = Field(description="the last page the reader has read")
    question: Annotated[str, StringConstraints(min_length=1, max_length=MAX_QUESTION)]
    token_budget: Annotated[int, Field(ge=256, le=1_000_000)] | None = Field(
        default=None, description="the model's context window (default 4096)")
    output_reserve: Annotated[int, Field(ge=0, le=100_000)] | None = Field(
        default=None, description="tokens kept free for the answer (default 512)")


class WindowInfo(WireModel):
    start: int
    end: int
    page_count: int


class PartWire(WireModel):
    id: str = Field(description='"chapter:2", "page:12" or "paragraph:p12.3"')
    kind: str
    pages: list[int] = Field(description="[first, last]: the pages the part draws on")
    tokens: int
    key: float
    fate: str = Field(description="included, trimmed or dropped")
    reason: str | None


class AskResult(AssembleResult):
    window: WindowInfo
    parts: list[PartWire] = Field(description="every context part offered, with its pages and fate")


def register_reading_ask(registry: Registry, companion: ReadingCompanion) -> None:
    @registry.method("reading:ask", params=AskParams, result=AskResult,
                     summary="The answer prompt for a reader's question from pages start..end only: "
                             "chapter and page summaries and paragraph evidence, each citing its pages.",
                     errors=(ProjectNotFound, InvalidParams, Backpressure, ReadingWindowBreach))
    async def ask(params: AskParams, ctx: CallContext) -> AskResult:
        if not params.question.strip():
            raise InvalidParams("question must not be blank", field="question")
        variables = {name: str(value) for name, value in (("tokenBudget", params.token_budget),
                                                           ("outputReserve", params.output_reserve))
                     if value is not None}
        try:
            answer = await companion.ask(params.project_id, params.start, params.end, params.question,
                                         variables)
        except PageOutOfRange as exc:
            raise InvalidParams(str(exc), field=exc.field, pageCount=exc.page_count) from None
        except WindowBreach as exc:
            raise ReadingWindowBreach(part=exc.part, pages=list(exc.pages) if exc.pages else None,
                                      allowed=list(exc.allowed)) from None
        fields = result_fields(answer.outcome)
        fields["warnings"] = [*answer.outcome.assembly.warnings, *answer.warnings]
        return AskResult(
            **fields,
            window=WindowInfo(start=answer.start, end=answer.end, page_count=answer.page_count),
            parts=[PartWire(id=u.part.id, kind=u.part.kind, pages=list(u.part.pages),
                            tokens=u.tokens, key=u.part.key,
                            fate=u.fate, reason=u.reason)
                   for u in answer.parts])

