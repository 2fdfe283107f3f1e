"""reading:ask: the seed's runtime answer prompt for a reader at pages ``start``..``end``.

The orchestrator gathers the window's context parts (services/reading/parts.py), hands them to the
context engine through the built-in ``reading-companion`` profile (which writes the seed's answer
template and, when the budget is short, gives up paragraph evidence first, then page summaries,
then chapter summaries), and checks every kept part's pages before the prompt leaves: a part from
outside the window, or one it cannot account for, withholds the prompt.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

import structlog

from services.assembly.service import AssembleRequest, Outcome
from services.concurrency.offload import off_loop
from services.context.models import Item
from services.reading import parts as reading_parts
from services.reading.layout import Book
from services.reading.parts import HitLike, Part
from services.reading.service import Edition
from services.reading.summary import Level
from services.reading.units import Stored
from services.reading.words import Words
from services.sources.base import GatherContext
from services.sources.relevance import features

PROFILE = "reading-companion"
SEARCH_LIMIT = 60  # chunks asked of the search; those outside the window are left out after
_log = structlog.get_logger("reading.ask")

LoadEdition = Callable[[str], Awaitable[Edition]]
LoadSummaries = Callable[[str], Awaitable[Mapping[Level, Mapping[str, Stored]]]]
Search = Callable[[str, str, int], Awaitable[Sequence[HitLike]]]


class Assembler(Protocol):
    async def assemble(self, request: AssembleRequest) -> Outcome: ...


class PageOutOfRange(ValueError):
    """The window is not a range of the book's pages."""

    def __init__(self, field: str, page_count: int) -> None:
        super().__init__(f"{field} is not a page of the book (1..{page_count})")
        self.field = field
        self.page_count = page_count


class WindowBreach(Exception):
    """A kept part draws on pages outside the window, or is not one of the window's parts."""

    def __init__(self, part: str, pages: tuple[int, int] | None, allowed: tuple[int, int]) -> None:
        super().__init__(f"part {part} is outside the reading window")
        self.part = part
        self.pages = pages
        self.allowed = allowed


@dataclass(frozen=True, slots=True)
class PartUse:
    part: Part
    fate: str  # included | trimmed | dropped (the engine's report)
    reason: str | None
    tokens: int = 0  # what the prompt keeps of it


@dataclass(frozen=True, slots=True)
class Answer:
    outcome: Outcome
    start: int
    end: int
    page_count: int
    parts: tuple[PartUse, ...]
    warnings: tuple[str, ...]


@dataclass(frozen=True)
class WindowParts:
    """The provider of one ask: its parts, placed where the profile puts each kind."""

    parts: tuple[Part, ...]
    name: str = "reading"
    warning: str = "READING_CONTEXT_UNAVAILABLE"
    sources: tuple[str, ...] = tuple(reading_parts.SOURCES.values())

    async def gather(self, ctx: GatherContext) -> Sequence[Item]:
        items = []
        for part in self.parts:
            where = ctx.place(part.source)
            if where is not None:
                items.append(Item(part.id, where[0], where[1], f"reading.{part.kind}", part.text,
                                  ctx.counter.count(part.text), part.key, "relevance", ctx.project_id,
                                  origin="project"))
        return items


class ReadingCompanion:
    def __init__(self, *, edition: LoadEdition, summaries: LoadSummaries, search: Search,
                 assembler: Assembler) -> None:
        self._edition = edition
        self._summaries = summaries
        self._search = search
        self._assembler = assembler

    async def ask(self, project_id: str, start: int, end: int, question: str,
                  variables: Mapping[str, str] | None = None) -> Answer:
        """The answer prompt for ``question`` from pages ``start``..``end`` only; raises
        :class:`PageOutOfRange` or :class:`WindowBreach` (never expected: the parts are the
        window's own)."""
        edition = await self._edition(project_id)
        pages = len(edition.book.pages)
        for field, page in (("start", start), ("end", end)):
            if not 1 <= page <= pages:
                raise PageOutOfRange(field, pages)
        if end < start:
            raise PageOutOfRange("end", pages)
        found, warnings = await self._found(project_id, question)
        parts = await self._parts(project_id, edition, start, end, question, found)
        request = AssembleRequest(
            project_id=project_id, document_id=f"reading:{start}-{end}", profile_id=PROFILE,
            variables={**(variables or {}), "start": str(start), "end": str(end), "question": question},
            providers=(WindowParts(tuple(parts)),))
        outcome = await self._assembler.assemble(request)
        uses = check(outcome, {p.id: p for p in parts}, start, end)
        _log.info("reading.asked", project_id=project_id, start=start, end=end, pages=pages,
                  parts=len(parts), kept=sum(u.fate != "dropped" for u in uses),
                  tokens=outcome.assembly.token_count, prefix_hash=outcome.assembly.stable_prefix_hash[:16])
        return Answer(outcome, start, end, pages, uses, warnings)

    async def _found(self, project_id: str, question: str) -> tuple[Sequence[HitLike], tuple[str, ...]]:
        try:
            return await self._search(project_id, question, SEARCH_LIMIT), ()
        except Exception as exc:  # the index is damaged or busy: word overlap alone finds evidence
            _log.warning("reading.search_failed", project_id=project_id, exc_type=type(exc).__name__)
            return (), ("RETRIEVAL_UNAVAILABLE: paragraph evidence found by word overlap only",)

    async def _parts(self, project_id: str, edition: Edition, start: int, end: int, question: str,
                     found: Sequence[HitLike]) -> list[Part]:
        stored = await self._summaries(project_id)
        book, terms = edition.book, features(question)
        words = await off_loop(edition.chars, lambda: edition.words)
        return await off_loop(edition.chars // 8, _parts, book, stored, start, end, terms, words, found)


def _parts(book: Book, stored: Mapping[Level, Mapping[str, Stored]], start: int, end: int,
           terms: frozenset[str], words: Words, found: Sequence[HitLike]) -> list[Part]:
    chapters = reading_parts.chapter_parts(book, stored["chapter"], start, end, terms, words)
    covered = {n for c in chapters for n in range(c.pages[0], c.pages[1] + 1)}
    evidence = reading_parts.evidence_parts(book, found, start, end, terms, words)
    pages = reading_parts.page_parts(book, stored["page"], start, end, terms, words,
                                     reading_parts.found_pages(evidence), covered)
    return [*chapters, *pages, *evidence]


def check(outcome: Outcome, parts: Mapping[str, Part], start: int, end: int) -> tuple[PartUse, ...]:
    """Every item the prompt keeps must be one of the window's parts and lie inside the window."""
    uses = []
    for report in outcome.assembly.reports:
        part = parts.get(report.id)
        if part is None:
            if report.fate != "dropped":
                raise WindowBreach(report.id, None, (start, end))
            continue
        if report.fate != "dropped" and not reading_parts.within(part.pages, start, end):
            raise WindowBreach(part.id, part.pages, (start, end))
        uses.append(PartUse(part, report.fate, report.reason,
                            0 if report.fate == "dropped" else report.kept_tokens or report.tokens))
    kept = {r.id for r in outcome.assembly.reports}
    missing = [p for p in parts.values() if p.id not in kept]
    uses.extend(PartUse(p, "dropped", "not_placed") for p in missing)
    return tuple(uses)
