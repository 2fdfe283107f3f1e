"""The seed's summary JSON as strict models, its canonical rendering, and the checks a summary must pass.

A summary is accepted for a unit (a paragraph, a page or a chapter) when, in this order:

1. it fits the schema (``READING_SUMMARY_INVALID``, at the JSON pointer of the first error): every
   field present, no other field, no coercion (``"3"`` is not a page), strings not blank, entity
   names and relationship ends lowercase (they name entities), at least one page in every
   ``page_spans`` and ``evidence_pages`` (the seed: "Always cite page numbers");
2. every page it cites lies inside the unit (``READING_SPOILER``, at the offending value);
3. no event's ``what`` is over :data:`EVENT_WHAT_TOKENS` (``READING_SUMMARY_TOO_LONG`` at it);
4. its rendering is within the level's limit (``READING_SUMMARY_TOO_LONG`` at ``""``).

A summary's size is the exact token count of :func:`render`, the one rendering stored and sent.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping
from types import MappingProxyType
from typing import Annotated, Any, Final, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError

Level = Literal["paragraph", "page", "chapter"]
ProblemCode = Literal["READING_SUMMARY_INVALID", "READING_SUMMARY_TOO_LONG", "READING_SPOILER"]

LIMITS: Final[Mapping[Level, int]] = MappingProxyType({"paragraph": 85, "page": 120, "chapter": 300})
EVENT_WHAT_TOKENS: Final = 25


def _not_blank(value: str) -> str:
    if not value.strip():
        raise ValueError("must not be blank")
    return value


def _lowercase(value: str) -> str:
    if value != value.lower():
        raise ValueError("must be lowercase")
    return value


Text = Annotated[str, AfterValidator(_not_blank)]
Name = Annotated[str, AfterValidator(_not_blank), AfterValidator(_lowercase)]
PageNumber = Annotated[int, Field(ge=1)]
Pages = Annotated[list[PageNumber], Field(min_length=1)]


class _Strict(BaseModel):
    model_config = ConfigDict(strict=True, extra="forbid", frozen=True)


class Entity(_Strict):
    name: Name
    type: Literal["character", "location", "object", "group", "concept"]
    mentions: Annotated[int, Field(ge=0)]
    page_spans: Pages


class Event(_Strict):
    who: list[Text]
    what: Text
    where: Text | None
    when: Text | None
    page: PageNumber


class Relationship(_Strict):
    a: Name
    b: Name
    relation: Text
    evidence_pages: Pages


class SummaryJson(_Strict):
    entities: list[Entity]
    events: list[Event]
    relationships: list[Relationship]
    facts: list[Text]
    open_questions: list[Text]


class SummaryProblem(Exception):
    """Why a summary was refused: a code, the JSON pointer of the offending value, and data fields."""

    def __init__(self, code: ProblemCode, path: str, message: str, **data: Any) -> None:
        super().__init__(message)
        self.code: ProblemCode = code
        self.path = path
        self.message = message
        self.data = data


def render(summary: SummaryJson) -> str:
    """The canonical rendering: compact JSON, non-ASCII kept, keys in the schema's order."""
    return json.dumps(summary.model_dump(mode="json"), ensure_ascii=False, separators=(",", ":"))


def pointer(location: tuple[int | str, ...]) -> str:
    """The JSON pointer (RFC 6901) of a location such as ``("events", 0, "page")``."""
    return "".join("/" + str(part).replace("~", "~0").replace("/", "~1") for part in location)


def parse(raw: str | bytes | Mapping[str, Any]) -> SummaryJson:
    """The summary in ``raw`` (JSON text or a decoded object), or ``READING_SUMMARY_INVALID``."""
    try:
        if isinstance(raw, str | bytes):
            return SummaryJson.model_validate_json(raw)
        return SummaryJson.model_validate(raw)
    except ValidationError as error:
        first = error.errors(include_url=False, include_input=False)[0]
        path = pointer(tuple(first["loc"]))
        # pydantic's messages name the rule broken, never the value sent.
        raise SummaryProblem("READING_SUMMARY_INVALID", path,
                             f"the summary does not fit the schema at {path or 'its top'}: {first['msg']}",
                             reason=first["type"]) from None


def citations(summary: SummaryJson) -> Iterator[tuple[str, int]]:
    """Every page the summary cites, with its JSON pointer, in document order."""
    for i, entity in enumerate(summary.entities):
        for j, page in enumerate(entity.page_spans):
            yield f"/entities/{i}/page_spans/{j}", page
    for i, event in enumerate(summary.events):
        yield f"/events/{i}/page", event.page
    for i, relationship in enumerate(summary.relationships):
        for j, page in enumerate(relationship.evidence_pages):
            yield f"/relationships/{i}/evidence_pages/{j}", page


def check(raw: str | bytes | Mapping[str, Any], level: Level, unit_pages: tuple[int, int],
          count: Callable[[str], int]) -> SummaryJson:
    """The summary, if it may stand for a unit of ``level`` covering pages ``unit_pages`` (inclusive).

    Raises :class:`SummaryProblem` for the first rule broken, in the order of the module's list.
    """
    if level not in LIMITS:
        raise ValueError(f"unknown level {level!r}")
    start, end = unit_pages
    if start < 1 or end < start:
        raise ValueError(f"not a page range: {start}..{end}")
    summary = parse(raw)
    for path, page in citations(summary):
        if not start <= page <= end:
            raise SummaryProblem("READING_SPOILER", path,
                                 f"page {page} is outside the pages {start}–{end} this summary covers",
                                 page=page, allowed=[start, end])
    for i, event in enumerate(summary.events):
        tokens = count(event.what)
        if tokens > EVENT_WHAT_TOKENS:
            raise SummaryProblem("READING_SUMMARY_TOO_LONG", f"/events/{i}/what",
                                 f"an event's what is {tokens} tokens, over {EVENT_WHAT_TOKENS}",
                                 tokens=tokens, limit=EVENT_WHAT_TOKENS)
    tokens = count(render(summary))
    if tokens > LIMITS[level]:
        raise SummaryProblem("READING_SUMMARY_TOO_LONG", "",
                             f"the {level} summary is {tokens} tokens, over {LIMITS[level]}",
                             tokens=tokens, limit=LIMITS[level])
    return summary
