"""The reading service over real SQLite: units, the summaries a level lacks, and accepting one."""

from __future__ import annotations

import json

import pytest

from services.projects import ProjectRecord
from services.reading.layout import lay_out
from services.reading.service import ReadingService, UnitNotFound
from services.reading.store import SummaryStore
from services.reading.summary import SummaryProblem
from services.reading.units import backlog, find
from services.store import Database
from tests.services.reading.support import count, reading_service

DOCS = {
    "ch1.md": "Mira climbed the stair.\n\nThe lamp was cold.\f\nHan waited below.",
    "ch2.md": "苏晚点亮了灯。\n\n风很大。",
}


def summary(page: int, **extra: object) -> dict[str, object]:
    return {"entities": [{"name": "mira", "type": "character", "mentions": 1, "page_spans": [page]}],
            "events": [], "relationships": [], "facts": ["The lamp was cold."], "open_questions": [],
            **extra}


@pytest.fixture
def reading(database: Database) -> ReadingService:
    docs = dict(DOCS)
    service = reading_service(docs, SummaryStore(database))
    service.docs = docs  # type: ignore[attr-defined]
    return service


def test_units_are_found_by_their_names() -> None:
    """A paragraph by its label, a page and a chapter by number; anything else is no unit."""
    book = lay_out(list(DOCS.items()), count)
    assert find(book, "paragraph", "p1.2") is not None
    assert find(book, "page", "3") is not None
    assert find(book, "chapter", "2") is not None
    for level, name in (("paragraph", "p9.1"), ("paragraph", "1.2"), ("page", "0"), ("page", "x"),
                        ("chapter", "3"), ("page", "99999999")):
        assert find(book, level, name) is None  # type: ignore[arg-type]


def test_a_page_waits_for_its_paragraphs() -> None:
    """With no summaries every paragraph is ready and every page waits; a chapter waits for pages."""
    book = lay_out(list(DOCS.items()), count)
    assert len(backlog(book, "paragraph", {}).ready) == len(book.paragraphs)
    pages = backlog(book, "page", {})
    assert (len(pages.ready), pages.waiting) == (0, len(book.pages))


async def test_put_then_pending_then_roll_up(reading: ReadingService, project: ProjectRecord) -> None:
    """A stored paragraph summary is current; once a page's paragraphs all are, the page's roll-up
    prompt holds their JSON and its number."""
    book = await reading.book(project.id)
    first = book.page(1)
    for p in first.paragraphs:
        await reading.put(project.id, "paragraph", p.label, summary(1))
    pending = await reading.pending(project.id, "page")
    ready = {p.unit.name: p for p in pending.ready}
    assert "1" in ready
    assert "page 1" in ready["1"].system
    assert json.loads(ready["1"].user.split("\n", 1)[1])[0]["facts"] == ["The lamp was cold."]
    left = await reading.pending(project.id, "paragraph")
    assert {p.unit.name for p in left.ready}.isdisjoint({p.label for p in first.paragraphs})


async def test_an_edit_makes_only_the_changed_units_stale(reading: ReadingService,
                                                          project: ProjectRecord) -> None:
    """After an edit of chapter 2, the summaries of chapter 1's paragraphs stay current."""
    book = await reading.book(project.id)
    for p in book.paragraphs:
        await reading.put(project.id, "paragraph", p.label, summary(p.page))
    reading.docs["ch2.md"] = "苏晚点亮了灯。\n\n风停了。"  # type: ignore[attr-defined]
    left = await reading.pending(project.id, "paragraph")
    assert [p.unit.name for p in left.ready] == ["p3.2"]


async def test_a_chapter_whose_pages_are_renumbered_is_stale(reading: ReadingService,
                                                            project: ProjectRecord) -> None:
    """Chapter 2's text is unchanged, but chapter 1 lost a page: its summary cites the old page
    numbers, so it is stale and leaves the prompt's parts, and the chapter asks to be summarised
    again once its pages are."""
    await reading.put(project.id, "chapter", "2", summary(3))
    assert [c["summary"] for c in (await reading.layout(project.id))["chapters"]] == ["missing", "current"]
    reading.docs["ch1.md"] = "Mira climbed the stair.\n\nThe lamp was cold.\n\nHan waited below."  # type: ignore[attr-defined]
    layout = await reading.layout(project.id)
    assert [(c["startPage"], c["summary"]) for c in layout["chapters"]] == [(1, "missing"), (2, "stale")]
    assert layout["summaries"]["chapter"] == 0


async def test_put_refuses_spoilers_oversize_and_unknown_units(reading: ReadingService,
                                                               project: ProjectRecord) -> None:
    """A page summary citing a later page is READING_SPOILER at its path; an unknown unit is refused."""
    with pytest.raises(SummaryProblem) as spoiler:
        await reading.put(project.id, "page", "1", summary(2))
    assert (spoiler.value.code, spoiler.value.path) == ("READING_SPOILER", "/entities/0/page_spans/0")
    with pytest.raises(SummaryProblem) as long:
        await reading.put(project.id, "paragraph", "p1.1", summary(1, facts=["word " * 200]))
    assert long.value.code == "READING_SUMMARY_TOO_LONG"
    with pytest.raises(UnitNotFound):
        await reading.put(project.id, "page", "40", summary(40))
