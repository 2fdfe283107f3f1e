"""The reading companion's operations on a project (seed 000): its layout, the summaries it lacks
and the prompts for them, accepting a summary, and checking an answer's citations.

The book is the project's documents in natural order of their ids, one chapter each, laid out from
their current text: every call reads the texts, and the last layout of each project is kept (bounded)
while the texts, the page size and the tokenizer are the same. Summaries are current while their
unit's content hash is unchanged.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import structlog

from services.caches import ProjectCache
from services.concurrency.offload import off_loop
from services.context.counting import CountCache
from services.reading import citations, units
from services.reading.layout import DEFAULT_PAGE_TOKENS, Book, lay_out, reading_order
from services.reading.store import SummaryStore
from services.reading.summary import Level, SummaryProblem, check, render
from services.reading.words import Words

_log = structlog.get_logger("reading")

ListDocuments = Callable[[str], Awaitable[list[str]]]
ReadDocument = Callable[[str, str], Awaitable[str]]
Counter = Callable[[str], Awaitable[CountCache]]
PageTokens = Callable[[str], Awaitable[int]]


async def default_page_tokens(project_id: str) -> int:
    return DEFAULT_PAGE_TOKENS


# One layout per project, of a book up to this many characters; four projects at once.
MAX_BOOK_CHARS = 16_000_000
MAX_BOOK_PROJECTS = 4


@dataclass(frozen=True)
class Edition:
    """A project's book as laid out from one set of texts, with what finding passages in it needs."""

    texts: tuple[tuple[str, str], ...]
    page_tokens: int
    counter: CountCache
    book: Book

    def same(self, texts: tuple[tuple[str, str], ...], page_tokens: int, counter: CountCache) -> bool:
        return self.page_tokens == page_tokens and self.counter is counter and self.texts == texts

    @cached_property
    def words(self) -> Words:
        return Words.of(p.text for p in self.book.paragraphs)

    @property
    def chars(self) -> int:
        # The texts, the paragraphs' copies of them and their word features: about three times over.
        return 3 * sum(len(text) for _, text in self.texts)


def edition_cache() -> ProjectCache[str, Edition]:
    return ProjectCache(max_entries=1, max_size=MAX_BOOK_CHARS, max_projects=MAX_BOOK_PROJECTS,
                        size=lambda e: e.chars)


class UnitNotFound(LookupError):
    """No unit of this name at this level in the book as it is now."""


@dataclass(frozen=True, slots=True)
class Accepted:
    unit: units.Unit
    tokens: int


class ReadingService:
    def __init__(self, *, documents: ListDocuments, read: ReadDocument, counter: Counter,
                 summaries: SummaryStore, page_tokens: PageTokens = default_page_tokens,
                 editions: ProjectCache[str, Edition] | None = None) -> None:
        self._documents = documents
        self._editions = editions or edition_cache()
        self._read = read
        self._counter = counter
        self._summaries = summaries
        self._page_tokens = page_tokens

    async def book(self, project_id: str) -> Book:
        return (await self.edition(project_id)).book

    async def edition(self, project_id: str) -> Edition:
        """The book as the project's documents are now (the kept layout when they are unchanged)."""
        ids = reading_order(await self._documents(project_id))
        texts = tuple([(document_id, await self._read(project_id, document_id)) for document_id in ids])
        count = await self._counter(project_id)
        size = await self._page_tokens(project_id)
        kept = self._editions.get(project_id, "book")
        if kept is not None and kept.same(texts, size, count):
            return kept
        edition = Edition(texts, size, count, await off_loop(sum(len(t) for _, t in texts), lay_out,
                                                               list(texts), count.count, size))
        self._editions.put(project_id, "book", edition)
        return edition

    async def layout(self, project_id: str) -> dict[str, Any]:
        book = await self.book(project_id)
        stored = await self._summaries.all(project_id)
        layout = book.layout()
        current = {level: sum(units.is_current(u, stored[level]) for u in units.units(book, level))
                   for level in ("paragraph", "page", "chapter")}
        layout["summaries"] = current
        paragraphs = stored["paragraph"]
        for chapter, entry in zip(book.chapters, layout["chapters"], strict=True):
            entry["summary"] = units.state(units.chapter_unit(chapter), stored["chapter"])
            for page, shown in zip(book.pages[chapter.start_page - 1:chapter.end_page], entry["pages"],
                                   strict=True):
                shown["summary"] = units.state(units.page_unit(page), stored["page"])
                shown["paragraphSummaries"] = sum(units.is_current(units.paragraph_unit(p), paragraphs)
                                                  for p in page.paragraphs)
        return layout

    async def pending(self, project_id: str, level: Level) -> units.Backlog:
        book = await self.book(project_id)
        return units.backlog(book, level, await self._summaries.all(project_id))

    async def put(self, project_id: str, level: Level, name: str, summary: Any,
                  source: str = "client") -> Accepted:
        """Store ``summary`` for the unit if it validates, fits the level's limit and cites only the
        unit's pages; else :class:`SummaryProblem` (or :class:`UnitNotFound`)."""
        book = await self.book(project_id)
        unit = units.find(book, level, name)
        if unit is None:
            raise UnitNotFound(name)
        count = await self._counter(project_id)
        checked = check(summary, level, unit.pages, count.count)
        rendered = render(checked)
        tokens = count.count(rendered)
        await self._summaries.put(project_id, unit, rendered, tokens, source)
        _log.info("reading.summary_stored", project_id=project_id, level=level, pages=list(unit.pages),
                  tokens=tokens, source=source)
        return Accepted(unit, tokens)

    @staticmethod
    def validate(answer: str, start: int, end: int) -> citations.Validation:
        return citations.validate(answer, start, end)


__all__ = ["Accepted", "ReadingService", "SummaryProblem", "UnitNotFound"]
