"""The Retrieved layer's passage provider: query, exclusion, spans, token counts, project ids."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

import pytest

from services.context.counting import CountCache
from services.context.models import Layer
from services.context.screening import MAX_RETRIEVED
from services.context.skills import get_skill
from services.retrieval.provider import RetrievalProvider
from services.retrieval.query import DenseQuery
from services.retrieval.readahead import ReadAhead
from services.retrieval.search import Exclusion, Hit
from services.sources.base import GatherContext
from services.sources.window import cut_window
from services.tokenizer import resolve_tokenizer
from tests.support.scenarios import zh_chapter

DOCUMENT = zh_chapter("第五章", 60)
COUNTER = CountCache(resolve_tokenizer())


@dataclass
class Searcher:
    hits: list[Hit]
    calls: list[tuple[str, str, int, Exclusion | None]] = field(default_factory=list)
    dense: list[str | DenseQuery | None] = field(default_factory=list)

    async def search(self, project_id: str, query: str, *, limit: int = 200, exclude: Exclusion | None = None,
                     dense_query: str | DenseQuery | None = None,
                     pause: Callable[[], Awaitable[bool]] | None = None) -> list[Hit]:
        self.calls.append((project_id, query, limit, exclude))
        self.dense.append(dense_query)
        return self.hits


def _ctx(skill: str, cursor: int = 900, additional_input: str = "写他想起钥匙") -> GatherContext:
    window = cut_window(DOCUMENT, cursor, get_skill(skill), 300, COUNTER)
    return GatherContext("p1", "卷一/第05章.md", "zh", get_skill(skill), window, additional_input, COUNTER)


def _hit(document: str, start: int, tokens: int = 999, project: str = "p1") -> Hit:
    """A chunk of 40 characters at ``start``, its text as the indexed document holds it there (every
    test document has DOCUMENT's text: a chunk of the current one is where the index says)."""
    return Hit(project, document, 3, start, start + 40, DOCUMENT[start:start + 40], tokens, 0.75, 0, None)


async def test_searches_with_the_text_before_the_cursor_and_the_instruction() -> None:
    """The query is the window's text just before the cursor plus additionalInput; at most 200. The
    encoder's query is the last sentences before the cursor (whole sentences, as the index cut them,
    nearest last) and the instruction, from the current document."""
    searcher = Searcher([])
    ctx = _ctx("continue")
    await RetrievalProvider(searcher, COUNTER.info.encoding).gather(ctx)
    project_id, query, limit, _ = searcher.calls[0]
    assert (project_id, limit) == ("p1", MAX_RETRIEVED)
    assert query.endswith("写他想起钥匙")
    assert ctx.window.before[-50:] in query
    dense = searcher.dense[0]
    assert isinstance(dense, DenseQuery)
    assert (dense.instruction, dense.document_id) == ("写他想起钥匙", "卷一/第05章.md")
    assert 1 < len(dense.sentences) <= 4
    assert ctx.window.before.rstrip().endswith(dense.sentences[-1])
    assert all(s in ctx.window.before[-600:] and s.endswith("。") for s in dense.sentences)


async def test_text_after_the_cursor_is_excluded_per_skill() -> None:
    """continue and expand exclude the current document past the cursor; polish and rewrite do not."""
    for skill, excluded in (("continue", True), ("expand", True), ("polish", False), ("rewrite", False)):
        searcher = Searcher([])
        await RetrievalProvider(searcher, COUNTER.info.encoding).gather(_ctx(skill))
        exclude = searcher.calls[0][3]
        assert (exclude == Exclusion("卷一/第05章.md", 900)) if excluded else exclude is None


async def test_items_are_passages_with_scores_spans_and_index_token_counts() -> None:
    """Hits become Retrieved passages keyed by score; only chunks of the current document carry a span
    (so screening can drop those overlapping the window); stored token counts are used as they are."""
    searcher = Searcher([_hit("卷一/第02章.md", 100), _hit("卷一/第05章.md", 200)])
    items = await RetrievalProvider(searcher, COUNTER.info.encoding).gather(_ctx("continue"))
    assert [(i.layer, i.section, i.key_name, i.key) for i in items] == [
        (Layer.RETRIEVED, "passages", "score", 0.75)] * 2
    assert [i.span for i in items] == [None, (200, 240)]
    assert [i.id for i in items] == ["chunk:卷一/第02章.md#3", "chunk:卷一/第05章.md#3"]
    assert [i.tokens for i in items] == [999, 999]
    assert items[0].source == "document:卷一/第02章.md"


async def test_a_chunk_moved_since_it_was_indexed_is_kept_only_if_it_stands_before_the_cursor() -> None:
    """While the current document's index is stale (it changed; a pass is pending), a chunk of it no
    longer stands where its offsets say: for continue and expand it is kept only if its text stands
    before the cursor, so text that moved past the cursor never reaches Retrieved; polish keeps it."""
    moved = "林远把铜钥匙藏在灯塔台阶下。"
    document = DOCUMENT[:900] + DOCUMENT[900:950] + moved + DOCUMENT[950:]
    earlier = DOCUMENT[300:340]
    here, there = "卷一/第05章.md", "卷一/第02章.md"
    stale = [Hit("p1", here, 1, 10, 10 + len(moved), moved, 9, 0.9, 0, None),  # now past the cursor
             Hit("p1", here, 2, 0, 40, earlier, 9, 0.8, 1, None),  # moved, still before it
             Hit("p1", there, 3, 10, 24, moved, 9, 0.7, 2, None)]  # another document
    for skill, kept in (("continue", [2, 3]), ("expand", [2, 3]), ("polish", [1, 2, 3])):
        window = cut_window(document, 900, get_skill(skill), 300, COUNTER)
        ctx = GatherContext("p1", "卷一/第05章.md", "zh", get_skill(skill), window, "", COUNTER)
        items = await RetrievalProvider(Searcher(list(stale)), "x").gather(ctx)
        assert [int(i.id.rsplit("#", 1)[1]) for i in items] == kept, skill


async def test_counts_again_when_the_index_used_another_tokenizer() -> None:
    """When the request's tokenizer is not the one the index counted with, the text is counted again."""
    items = await RetrievalProvider(Searcher([_hit("a.md", 0)]), "o200k_base").gather(_ctx("continue"))
    assert items[0].tokens == COUNTER.count(items[0].text)


async def test_the_chunk_keeps_the_project_the_store_reported() -> None:
    """A hit from another project keeps that project id, so screening fails the request loudly."""
    items = await RetrievalProvider(Searcher([_hit("a.md", 0, project="p2")]), "x").gather(_ctx("continue"))
    assert items[0].project_id == "p2"


async def test_the_same_kept_result_gives_the_same_items_and_a_new_one_new_items() -> None:
    """Requests answered by the same kept search result (the same Hit objects) share its items, made
    once; another document's request gets items of its own (its spans differ); a result searched
    anew (new Hit objects, however equal) gets new items."""
    hits = [_hit("卷一/第05章.md", 100), _hit("卷一/第02章.md", 200)]
    searcher = Searcher(hits)
    provider = RetrievalProvider(searcher, COUNTER.info.encoding)
    first = await provider.gather(_ctx("continue"))
    second = await provider.gather(_ctx("continue", cursor=903))
    assert [a is b for a, b in zip(first, second, strict=True)] == [True, True]
    assert first[0].span == (100, 140)
    elsewhere = _ctx("continue")
    other = GatherContext("p1", "卷一/第02章.md", "zh", elsewhere.skill, elsewhere.window, "", COUNTER)
    theirs = await provider.gather(other)
    assert (theirs[0].span, theirs[1].span) == (None, (200, 240))
    searcher.hits = [_hit("卷一/第05章.md", 100), _hit("卷一/第02章.md", 200)]
    anew = await provider.gather(_ctx("continue"))
    assert anew == first
    assert not any(a is b for a, b in zip(first, anew, strict=True))


async def test_keystrokes_inside_a_sentence_share_the_dense_query_made_for_the_first() -> None:
    """The dense query is kept per project under the text it reads: the next keystrokes inside
    one sentence get the very query made for the first (equal to one made afresh), a keystroke past
    the sentence's end and another instruction get new ones."""
    searcher = Searcher([])
    provider = RetrievalProvider(searcher, COUNTER.info.encoding)
    end = DOCUMENT.index("。", 900) + 1
    for cursor in (end + 2, end + 3, end + 4):
        await provider.gather(_ctx("continue", cursor))
    await provider.gather(_ctx("continue", DOCUMENT.index("。", end) + 2))
    await provider.gather(_ctx("continue", end + 4, additional_input="写雾"))
    first, second, third, past, other = searcher.dense
    assert first is second is third
    alone = Searcher([])
    await RetrievalProvider(alone, COUNTER.info.encoding).gather(_ctx("continue", end + 3))
    assert alone.dense[0] == first
    assert isinstance(past, DenseQuery)
    assert isinstance(first, DenseQuery)
    assert past.sentences != first.sentences
    assert other is not first
    assert isinstance(other, DenseQuery)
    assert other.instruction == "写雾"


async def _always_quiet() -> None:
    """No assembly holds or waits for a turn."""


def _wide(cursor: int, skill: str = "continue") -> GatherContext:
    """A window of 2,000 tokens: the query reads less than its text before the cursor."""
    window = cut_window(DOCUMENT, cursor, get_skill(skill), 2000, COUNTER)
    return GatherContext("p1", "卷一/第05章.md", "zh", get_skill(skill), window, "写他想起钥匙", COUNTER)


@pytest.mark.parametrize("skill", ["continue", "polish"])
async def test_reads_ahead_the_search_the_next_sentence_end_asks(skill: str) -> None:
    """Once quiet, a keystroke inside a sentence is followed by the search the keystroke past its end
    will ask: the same query, limit, exclusion and dense query as that keystroke's gather; the
    keystrokes between ask nothing new, and that keystroke finds the items made for it."""
    read_ahead = ReadAhead(_always_quiet)
    searcher = Searcher([_hit("卷一/第02章.md", 10, tokens=12)])
    provider = RetrievalProvider(searcher, COUNTER.info.encoding, read_ahead=read_ahead)
    end = DOCUMENT.index("。", 900) + 1
    cursor = DOCUMENT.rindex("。", 0, end - 1) + 3  # inside the sentence that ends at ``end``
    await provider.gather(_wide(cursor, skill))
    for _ in range(10):
        await asyncio.sleep(0)
    assert len(searcher.calls) == 2
    alone = Searcher(searcher.hits)
    await RetrievalProvider(alone, COUNTER.info.encoding).gather(_wide(end, skill))
    assert (searcher.calls[1], searcher.dense[1]) == (alone.calls[0], alone.dense[0])
    assert searcher.calls[0] != searcher.calls[1]
    for between in range(cursor + 1, end):
        await provider.gather(_wide(between, skill))
    made = provider.items.get("p1", ("卷一/第05章.md", ("retrieved", "passages"), 1, id(searcher.hits[0]),
                                     id(searcher.hits[0])))
    assert made is not None
    past = await provider.gather(_wide(end, skill))
    assert past[0] is made[2][0]
    await read_ahead.aclose()
