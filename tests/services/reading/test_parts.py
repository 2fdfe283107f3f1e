"""The answer prompt's context parts: only the window's pages, current summaries, and paragraph text as
the book holds it now."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from services.reading import parts
from services.reading.service import Edition
from services.sources.relevance import features
from tests.services.reading.reading_fakes import FakeHit, edition, hit_on, stored

QUESTION = features("Who sank the Aurora?")


async def test_chapter_summaries_only_of_chapters_wholly_inside_the_window() -> None:
    """Chapter 1 (pages 1-3) is inside 1..3 and 1..4; chapter 2 (4-5) only inside 1..5; a summary
    made for other text (stale hash) is never offered."""
    e = await edition()
    summaries = stored(e.book, {}, {1: "ch1", 2: "ch2"})
    ids = {end: [p.id for p in parts.chapter_parts(e.book, summaries["chapter"], 1, end, QUESTION, e.words)]
           for end in (2, 3, 4, 5)}
    assert ids == {2: [], 3: ["chapter:1"], 4: ["chapter:1"], 5: ["chapter:1", "chapter:2"]}
    stale = {**summaries["chapter"], "1": summaries["chapter"]["1"].__class__("0" * 64, "old")}
    assert [p.id for p in parts.chapter_parts(e.book, stale, 1, 5, QUESTION, e.words)] == ["chapter:2"]


async def test_page_summaries_bear_on_the_question_or_the_chapter_being_read() -> None:
    """Page 2's summary (the Aurora) is relevant; page 1's (covered by chapter 1's summary, sharing
    nothing rare) is not; page 3's counts while no chapter summary covers it."""
    e = await edition()
    summaries = stored(e.book, {1: "mira climbs", 2: "the aurora passes", 3: "mira sleeps"}, {})
    covered = parts.page_parts(e.book, summaries["page"], 1, 3, QUESTION, e.words, {}, covered=range(1, 4))
    assert [p.id for p in covered] == ["page:2"]
    reading = parts.page_parts(e.book, summaries["page"], 1, 3, QUESTION, e.words, {}, covered=())
    assert [p.id for p in reading] == ["page:1", "page:2", "page:3"]
    assert max(reading, key=lambda p: p.key).id == "page:2"


async def test_evidence_is_the_windows_paragraphs_as_the_book_holds_them() -> None:
    """A hit on page 4 is left out of window 1..3; a hit on page 2 gives page 2's paragraphs with
    their labels, the one holding the question's rare word first in rank."""
    e = await edition()
    found = parts.evidence_parts(e.book, [hit_on(e.book, 4), hit_on(e.book, 2, 0.5)], 1, 3, QUESTION, e.words)
    assert all(p.pages[1] <= 3 for p in found)
    by_id = {p.id: p for p in found}
    assert by_id["paragraph:p2.1"].text == "(p2.1) Far out, the Aurora passed the rocks."
    assert max(found, key=lambda p: p.key).id == "paragraph:p2.1"
    assert "Secret" not in " ".join(p.text for p in found)


async def test_evidence_without_a_search_comes_from_rare_shared_words() -> None:
    """With no hits at all, the paragraph sharing the question's rare word is still found."""
    e = await edition()
    found = parts.evidence_parts(e.book, [], 1, 3, QUESTION, e.words)
    assert [p.id for p in found] == ["paragraph:p2.1"]


def test_a_long_paragraph_is_cut_at_a_sentence_end() -> None:
    """Over the snippet length, a paragraph ends at its last whole sentence, marked with an ellipsis."""
    text = "The lamp was cold. " * 60
    cut = parts.snippet(text)
    assert len(cut) <= parts.SNIPPET_CHARS + 2
    assert cut.endswith("cold. …")


@st.composite
def windows(draw: st.DrawFn) -> tuple[int, int, list[FakeHit]]:
    start = draw(st.integers(1, 5))
    end = draw(st.integers(start, 5))
    hits = draw(st.lists(st.builds(FakeHit, st.sampled_from(["ch1.md", "ch2.md", "gone.md"]),
                                   st.integers(0, 200), st.integers(0, 200), st.floats(0, 1)), max_size=8))
    return start, end, hits


_EDITION: list[Edition] = []


@settings(deadline=None, max_examples=60)
@given(windows(), st.text(max_size=30))
async def test_every_part_lies_inside_the_window(window: tuple[int, int, list[FakeHit]],
                                                question: str) -> None:
    """Whatever the search returns (spans anywhere, of documents gone) and whatever is asked, every
    chapter, page and paragraph part draws only on pages start..end."""
    if not _EDITION:
        _EDITION.append(await edition())
    e = _EDITION[0]
    start, end, hits = window
    q = features(question)
    summaries = stored(e.book, {n: f"page {n} aurora" for n in range(1, 6)}, {1: "one", 2: "two"})
    found = [*parts.chapter_parts(e.book, summaries["chapter"], start, end, q, e.words),
             *parts.page_parts(e.book, summaries["page"], start, end, q, e.words, {}, ()),
             *parts.evidence_parts(e.book, hits, start, end, q, e.words)]
    assert all(parts.within(p.pages, start, end) for p in found)
