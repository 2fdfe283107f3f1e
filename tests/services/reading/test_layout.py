"""Pages and paragraphs of a book: markers, token pages, cut paragraphs, hashes, stability."""

from __future__ import annotations

import itertools
import json
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from services.reading.layout import Book, Page, lay_out
from tests.services.reading.support import count

PROPERTY = settings(max_examples=150, deadline=None)

# --- examples ------------------------------------------------------------------------------------


def test_paragraphs_are_blocks_between_blank_lines() -> None:
    """Blank lines (whitespace-only too) separate paragraphs; lines of one block stay one paragraph;
    each paragraph's span is trimmed and its text is the document's text at that span."""
    text = "  # Arrival \nHan came.\n\n \t\nSu Wan\nwaited.\r\n\r\n\u3000\n苏晚不信他。\n"
    book = lay_out([("ch1.md", text)], count)
    assert [p.text for p in book.paragraphs] == ["# Arrival \nHan came.", "Su Wan\nwaited.", "苏晚不信他。"]
    assert all(text[p.start:p.end] == p.text for p in book.paragraphs)
    assert [p.label for p in book.paragraphs] == ["p1.1", "p1.2", "p1.3"]
    assert book.chapters[0].title == "Arrival"


def test_every_chapter_starts_a_page_and_pages_number_across_the_book() -> None:
    """Chapters follow the given order, each from a new page; numbers run on across chapters."""
    book = lay_out([("a.md", "one"), ("b.md", "two\n\nthree"), ("c.md", "four")], count)
    assert [(c.index, c.document_id, c.start_page, c.end_page) for c in book.chapters] == [
        (1, "a.md", 1, 1), (2, "b.md", 2, 2), (3, "c.md", 3, 3)]
    assert [p.chapter_index for p in book.pages] == [1, 2, 3]
    assert [p.label for p in book.paragraphs] == ["p1.1", "p2.1", "p2.2", "p3.1"]


def test_token_pages_are_filled_greedily() -> None:
    """Without markers, whole paragraphs fill a page until the next one would pass page_tokens."""
    paragraphs = ["word " * 9 + "word"] * 5  # ten tokens each
    assert {count(p) for p in paragraphs} == {10}
    book = lay_out([("ch1.md", "\n\n".join(paragraphs))], count, page_tokens=25)
    assert [len(p.paragraphs) for p in book.pages] == [2, 2, 1]
    assert [p.tokens for p in book.pages] == [20, 20, 10]
    assert book.chapters[0].paged_by == "tokens"


def test_markers_page_a_document_and_only_markers() -> None:
    """A ``<!-- page -->`` line or a form feed starts a page; a marked document ignores page_tokens;
    markers belong to no paragraph and empty pages between markers are dropped."""
    long = "Han walked the long road north. " * 30
    text = f"{long}\n<!-- page -->\nTwo.\n  <!--PAGE-->  \n\nThree.\fFour.\n\f\n\f\nFive."
    book = lay_out([("ch1.md", text)], count, page_tokens=20)
    assert [[p.text for p in page.paragraphs] for page in book.pages] == [
        [long.strip()], ["Two."], ["Three."], ["Four."], ["Five."]]
    assert book.pages[0].tokens > 20
    assert book.chapters[0].paged_by == "markers"


def test_an_empty_document_keeps_one_empty_page() -> None:
    """A chapter with no text still has a page range: one page with no paragraphs."""
    book = lay_out([("a.md", "x"), ("b.md", " \n\n"), ("c.md", "\f")], count)
    assert [(c.start_page, c.end_page) for c in book.chapters] == [(1, 1), (2, 2), (3, 3)]
    assert [len(p.paragraphs) for p in book.pages] == [1, 0, 0]


def test_a_paragraph_larger_than_a_page_is_cut_at_sentence_ends() -> None:
    """An oversized paragraph becomes page-sized pieces cut after 。！？.!? (closing quotes kept),
    each a numbered paragraph; '3.14' is not a sentence end."""
    sentences = ["苏晚不信他，转身就走了。", "“你为什么不信我？”", "Han said pi is 3.14, not three.",
                 "She left the harbor at dawn!"]
    text = " ".join(sentences)
    book = lay_out([("ch1.md", text)], count, page_tokens=16)
    assert [p.tokens for p in book.paragraphs] == [15, 10, 12, 7]  # no two neighbours fit in 16
    assert [p.text for p in book.paragraphs] == sentences
    merged = lay_out([("ch1.md", text)], count, page_tokens=22)
    assert [p.text for p in merged.paragraphs] == [sentences[0], " ".join(sentences[1:3]), sentences[3]]
    assert all(p.tokens <= book.page_tokens for p in book.paragraphs)
    assert [p.label for p in book.paragraphs] == [f"p{p.page}.{p.intra}" for p in book.paragraphs]


def test_a_sentence_larger_than_a_page_is_cut_at_whitespace_then_anywhere() -> None:
    """Without a sentence end, pieces end at whitespace; without whitespace, between characters."""
    words = " ".join(["lighthouse"] * 12)
    book = lay_out([("ch1.md", words)], count, page_tokens=6)
    assert all(set(p.text.split()) == {"lighthouse"} and p.tokens <= 6 for p in book.paragraphs)
    assert " ".join(p.text for p in book.paragraphs) == words
    cjk = "灯塔上的灯一夜没有熄灭她一直等到天亮" * 3
    book = lay_out([("ch1.md", cjk)], count, page_tokens=7)
    assert "".join(p.text for p in book.paragraphs) == cjk
    assert all(p.tokens <= 7 for p in book.paragraphs)
    assert len(book.paragraphs) > 1


def test_hashes_cover_text_not_numbers() -> None:
    """Pages whose text is unchanged keep their hash when renumbered; a chapter's hash follows its
    pages; equal text gives equal paragraph hashes."""
    chapter = "Han came.\n\nSu Wan waited.\f苏晚不信他。"
    alone = lay_out([("b.md", chapter)], count)
    after = lay_out([("a.md", "Prologue."), ("b.md", chapter)], count)
    assert [p.hash for p in alone.pages] == [p.hash for p in after.pages[1:]]
    assert [p.number for p in alone.pages] != [p.number for p in after.pages[1:]]
    assert alone.chapters[0].hash == after.chapters[1].hash
    edited = lay_out([("a.md", "Prologue."), ("b.md", chapter.replace("waited", "wept"))], count)
    assert edited.pages[1].hash != after.pages[1].hash
    assert edited.pages[2].hash == after.pages[2].hash
    assert edited.chapters[1].hash != after.chapters[1].hash
    assert edited.chapters[0].hash == after.chapters[0].hash


def test_page_of_and_paragraphs_between() -> None:
    """page_of finds the page a reader at an offset is on; paragraphs_between is inclusive."""
    text = "intro\f\nHan came.\n\nSu Wan waited.\n<!-- page -->\nend"
    book = lay_out([("a.md", "Prologue."), ("b.md", text)], count)
    assert book.page_of("a.md", 0) == 1
    assert book.page_of("b.md", 0) == 2
    assert book.page_of("b.md", text.index("Su Wan")) == 3
    assert book.page_of("b.md", text.index("<!--")) == 3
    assert book.page_of("b.md", len(text)) == 4
    assert [p.label for p in book.paragraphs_between(3, 4)] == ["p3.1", "p3.2", "p4.1"]
    assert book.paragraphs_between(4, 99)[-1].text == "end"
    with pytest.raises(KeyError):
        book.page_of("c.md", 0)
    with pytest.raises(ValueError, match="page range"):
        book.paragraphs_between(3, 2)
    assert book.page(2).paragraphs[0].text == "intro"
    with pytest.raises(IndexError):
        book.page(5)


def test_layout_result() -> None:
    """reading:layout's result: chapters with their page ranges, each page's paragraph count."""
    book = lay_out([("ch1.md", "# One\n\nHan came.\fSu Wan waited."), ("ch2.md", "")], count)
    result = book.layout()
    assert json.loads(json.dumps(result)) == result
    assert result["pageCount"] == 3
    assert result["pageTokens"] == 400
    assert [(c["index"], c["documentId"], c["title"], c["startPage"], c["endPage"], c["pagedBy"])
            for c in result["chapters"]] == [(1, "ch1.md", "One", 1, 2, "markers"),
                                             (2, "ch2.md", None, 3, 3, "tokens")]
    assert [[(p["number"], p["paragraphs"]) for p in c["pages"]] for c in result["chapters"]] == [
        [(1, 2), (2, 1)], [(3, 0)]]
    assert result["chapters"][0]["pages"][0]["hash"] == book.pages[0].hash


def test_bad_input_is_refused() -> None:
    """page_tokens below 1 and a document listed twice are programming errors."""
    with pytest.raises(ValueError, match="page_tokens"):
        lay_out([("a.md", "x")], count, page_tokens=0)
    with pytest.raises(ValueError, match="twice"):
        lay_out([("a.md", "x"), ("a.md", "y")], count)


def _bilingual_book() -> list[tuple[str, str]]:
    english = ("Han walked along the harbor wall while the lamps came on one by one, counting the boats "
               "that had not come back. Su Wan watched him from the lighthouse stairs.")
    chinese = "苏晚站在灯塔的台阶上看着韩走过港口的石墙，灯一盏一盏亮起来，他在数那些没有回来的船。"
    chapters = []
    for c in range(1, 4):
        paragraphs = [english if (c + i) % 2 else chinese for i in range(24)]
        chapters.append((f"ch{c}.md", f"# Chapter {c}\n\n" + "\n\n".join(paragraphs)))
    return chapters


def test_an_edit_of_page_20_leaves_pages_1_to_19_alone() -> None:
    """On a bilingual three-chapter book of 30+ pages, inserting a sentence into a paragraph of page
    20 keeps pages 1-19 identical (numbers, paragraphs, hashes) and changes page 20's hash."""
    documents = _bilingual_book()
    before = lay_out(documents, count, page_tokens=120)
    assert len(before.pages) >= 30
    assert len(before.chapters) == 3
    target = before.page(20).paragraphs[-1]
    edited = [(d, t[:target.end] + " 他没有回头。" + t[target.end:]) if d == target.document_id else (d, t)
              for d, t in documents]
    after = lay_out(edited, count, page_tokens=120)
    assert after.pages[:19] == before.pages[:19]
    assert after.page(20).hash != before.page(20).hash


# --- properties ----------------------------------------------------------------------------------

_LINE_CHARS = "abcdefg HanSuWn苏晚不信他走了灯塔，,;”\t。！？.!?"
_BREAKS = ("\n\n", "\n \n", "\n\n\n", "\r\n\r\n", "\n\u3000\n")
_MARKERS = ("\n<!-- page -->\n", "\f", "\n\f\n", "\n\n  <!--PAGE-->\t\n\n")
_MARKER_TEXT = re.compile(r"<!--\s*page\s*-->", re.IGNORECASE)

_paragraph = st.lists(st.text(_LINE_CHARS, min_size=1, max_size=40).filter(str.strip), min_size=1,
                      max_size=4).map("\n".join)


@st.composite
def _document(draw: st.DrawFn, marked: bool) -> str:
    paragraphs = draw(st.lists(_paragraph, max_size=8))
    separators = draw(st.lists(st.sampled_from(_BREAKS + _MARKERS if marked else _BREAKS),
                               min_size=len(paragraphs), max_size=len(paragraphs)))
    text = "".join(s + p for s, p in zip(separators, paragraphs, strict=True)).lstrip("\n")
    if marked and not (_MARKER_TEXT.search(text) or "\f" in text):
        text += "\f"
    return text + draw(st.sampled_from(["", "\n", "\n\n"]))


@st.composite
def _book(draw: st.DrawFn, marked: bool | None = None) -> list[tuple[str, str]]:
    n = draw(st.integers(1, 3))
    return [(f"ch{i}.md", draw(_document(draw(st.booleans()) if marked is None else marked)))
            for i in range(1, n + 1)]


_page_tokens = st.integers(4, 60)  # a cl100k character is at most 3 tokens, so every cut can fit


@PROPERTY
@given(_book(), _page_tokens)
def test_token_pages_never_exceed_page_tokens(documents: list[tuple[str, str]], page_tokens: int) -> None:
    """Every token page, and every paragraph or piece, is within page_tokens; a page's tokens are its
    paragraphs' exact counts; a page that is not its chapter's last could not take the next paragraph."""
    book = lay_out(documents, count, page_tokens)
    for chapter in book.chapters:
        pages = book.pages[chapter.start_page - 1:chapter.end_page]
        for page in pages:
            assert page.tokens == sum(count(p.text) for p in page.paragraphs)
            assert all(p.tokens == count(p.text) for p in page.paragraphs)
        if chapter.paged_by == "tokens":
            assert all(page.tokens <= page_tokens for page in pages)
            for page, following in itertools.pairwise(pages):
                assert page.tokens + following.paragraphs[0].tokens > page_tokens


@PROPERTY
@given(_book(), _page_tokens)
def test_every_character_is_in_exactly_one_paragraph(documents: list[tuple[str, str]],
                                                     page_tokens: int) -> None:
    """Paragraph spans of a document are ordered and disjoint, hold their text, and leave out only
    whitespace and markers."""
    book = lay_out(documents, count, page_tokens)
    for document_id, text in documents:
        spans = [(p.start, p.end) for p in book.paragraphs if p.document_id == document_id]
        assert all(a < b <= c for (a, b), (c, _) in itertools.pairwise(spans))
        assert all(0 <= a < b <= len(text) for a, b in spans)
        covered = set().union(*(range(a, b) for a, b in spans))
        outside = "".join(c for i, c in enumerate(text) if i not in covered)
        assert _MARKER_TEXT.sub("", outside).strip() == ""
        for p in book.paragraphs:
            if p.document_id == document_id:
                assert p.text == text[p.start:p.end] == p.text.strip() != ""


@PROPERTY
@given(_book(), _page_tokens)
def test_numbering_is_consecutive_and_deterministic(documents: list[tuple[str, str]],
                                                     page_tokens: int) -> None:
    """Pages run 1..N, paragraphs p{page}.{intra} with intra 1..k, chapters tile the pages in order;
    the same input lays out the same book."""
    book = lay_out(documents, count, page_tokens)
    assert [p.number for p in book.pages] == list(range(1, len(book.pages) + 1))
    for page in book.pages:
        assert [(p.page, p.intra) for p in page.paragraphs] == [
            (page.number, i) for i in range(1, len(page.paragraphs) + 1)]
    ranges = [(c.start_page, c.end_page) for c in book.chapters]
    assert ranges[0][0] == 1
    assert ranges[-1][1] == len(book.pages)
    assert all(a <= b for a, b in ranges)
    assert all(b + 1 == c for (_, b), (c, _) in itertools.pairwise(ranges))
    again = lay_out(documents, count, page_tokens)
    assert again == book
    assert again.layout() == book.layout()


def _same_block(text: str, end: int, start: int) -> bool:
    """Whether two neighbouring paragraphs are pieces of one cut paragraph (no blank line or marker)."""
    gap = text[end:start]
    return gap.count("\n") <= 1 and "\f" not in gap


def _first_page_of_block(book: Book, document_id: str, block_start: int) -> int:
    """The first page holding text of the document from ``block_start`` on."""
    pages = [p.page for p in book.paragraphs if p.document_id == document_id and p.start >= block_start]
    if pages:
        return pages[0]
    chapter = next(c for c in book.chapters if c.document_id == document_id)
    empty = not book.page(chapter.start_page).paragraphs
    return chapter.start_page if empty else chapter.end_page + 1


@PROPERTY
@given(st.data(), st.booleans())
def test_an_edit_leaves_the_pages_before_it_alone(data: st.DataObject, marked: bool) -> None:
    """Replacing any stretch inside a paragraph with any text leaves every page before the first page
    holding the edited paragraph (before or after the edit) unchanged: number, paragraphs and hash.
    That page is at most one before the edited one. Holds for token pages and for markers."""
    documents = data.draw(_book(marked))
    page_tokens = data.draw(_page_tokens)
    before = lay_out(documents, count, page_tokens)
    if not before.paragraphs:
        return
    target = data.draw(st.sampled_from(before.paragraphs))
    text = dict(documents)[target.document_id]
    start = data.draw(st.integers(target.start, target.end))
    end = data.draw(st.integers(start, target.end))
    # A form feed would switch a token-paged document to markers (documented); "<" cannot make one.
    insert = data.draw(st.text(_LINE_CHARS + "\n " + ("\f" if marked else ""), max_size=30))
    edited = text[:start] + insert + text[end:]
    after = lay_out([(d, edited if d == target.document_id else t) for d, t in documents], count, page_tokens)

    siblings = [p for p in before.paragraphs if p.document_id == target.document_id]
    i = siblings.index(target)
    while i and _same_block(text, siblings[i - 1].end, siblings[i].start):
        i -= 1
    block_start = siblings[i].start
    old_page = _first_page_of_block(before, target.document_id, block_start)
    new_page = _first_page_of_block(after, target.document_id, block_start)
    unchanged = min(old_page, new_page) - 1
    assert after.pages[:unchanged] == before.pages[:unchanged]
    assert new_page >= old_page - 1


@PROPERTY
@given(_book(), _page_tokens, st.data())
def test_page_of_names_the_page_of_each_paragraph(documents: list[tuple[str, str]], page_tokens: int,
                                                  data: st.DataObject) -> None:
    """Any offset inside a paragraph is on that paragraph's page; paragraphs_between of one page is
    that page's paragraphs."""
    book = lay_out(documents, count, page_tokens)
    for p in book.paragraphs:
        offset = data.draw(st.integers(p.start, p.end - 1))
        assert book.page_of(p.document_id, offset) == p.page
    page: Page = data.draw(st.sampled_from(book.pages))
    assert book.paragraphs_between(page.number, page.number) == page.paragraphs
