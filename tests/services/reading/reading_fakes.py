"""A small laid-out book, its stored summaries and a fake search, for the reading companion's unit tests."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from services.reading.layout import Book
from services.reading.service import Edition
from services.reading.summary import Level
from services.reading.units import Stored, chapter_unit, page_unit
from tests.services.reading.support import reading_service

MARK = "\n<!-- page -->\n"
# Chapter 1: pages 1-3; chapter 2: pages 4-5. The Aurora is seen on page 2 and sunk on page 4.
DOCS = {
    "ch1.md": MARK.join(["Mira climbed the stair. The lamp was cold.\n\nHan waited below with the rope.",
                         "Far out, the Aurora passed the rocks.\n\nThe keeper wrote in the log.",
                         "Mira slept by the lamp.\n\nThe wind rose."]),
    "ch2.md": MARK.join(["Secret: Han sank the Aurora on purpose.\n\nNobody saw him.",
                         "苏晚点亮了灯。\n\n风很大。"]),
}


@dataclass(frozen=True, slots=True)
class FakeHit:
    document_id: str
    start: int
    end: int
    score: float


async def edition() -> Edition:
    return await reading_service(dict(DOCS)).edition("p1")


def stored(book: Book, pages: Mapping[int, str],
           chapters: Mapping[int, str]) -> dict[Level, dict[str, Stored]]:
    """Current summaries: page and chapter number -> rendered text."""
    found: dict[Level, dict[str, Stored]] = {"paragraph": {}, "page": {}, "chapter": {}}
    for n, text in pages.items():
        unit = page_unit(book.page(n))
        found["page"][unit.name] = Stored(unit.hash, text)
    for index, text in chapters.items():
        unit = chapter_unit(book.chapters[index - 1])
        found["chapter"][unit.name] = Stored(unit.hash, text)
    return found


def hit_on(book: Book, page: int, score: float = 0.9) -> FakeHit:
    """A search hit spanning the whole of ``page``."""
    paragraphs = book.page(page).paragraphs
    return FakeHit(paragraphs[0].document_id, paragraphs[0].start, paragraphs[-1].end, score)
