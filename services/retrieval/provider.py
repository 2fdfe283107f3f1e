"""The Retrieved layer's passages: hybrid search over the project's earlier text."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Protocol

import structlog

from services.caches import DenseQueries, RetrievalItems, dense_query_cache, retrieval_items_cache
from services.context.models import Item
from services.context.screening import MAX_RETRIEVED
from services.retrieval.query import CONTEXT_CHARS, DenseQuery, settled
from services.retrieval.readahead import ReadAhead, next_queries
from services.retrieval.search import Exclusion, Hit
from services.sources.base import GatherContext


class Searcher(Protocol):
    async def search(self, project_id: str, query: str, *, limit: int = ..., exclude: Exclusion | None = ...,
                     dense_query: str | DenseQuery | None = ...,
                     pause: Callable[[], Awaitable[bool]] | None = ...) -> list[Hit]: ...


_log = structlog.get_logger("retrieval.provider")

DENSE_INSTRUCTION = 300  # characters of additionalInput the encoder sees
QUERY_BEFORE = 800  # characters before the cursor BM25 sees


@dataclass(frozen=True)
class RetrievalProvider:
    """Chunks of the project's documents relevant to the text before the cursor and the instruction.

    Text after the cursor in the current document is left out when the skill
    says so; chunks overlapping the window carry their span so screening drops
    them as duplicates. Token counts come from the index when it was counted
    with the request's tokenizer.
    """

    searcher: Searcher
    index_encoding: str  # the encoding chunk token counts were computed with
    name: str = "retrieval"
    warning: str = "RETRIEVAL_UNAVAILABLE"
    sources: tuple[str, ...] = ("retrieval.passages",)
    items: RetrievalItems = field(default_factory=retrieval_items_cache, repr=False)
    queries: DenseQueries = field(default_factory=dense_query_cache, repr=False)
    # Searches the next sentence end will ask for, made while no assembly waits (None: none).
    read_ahead: ReadAhead | None = field(default=None, repr=False)

    async def ready(self, project_id: str) -> None:
        """Wait until the searcher can search the project: the server's retrieval loads Chroma and
        the encoder when first needed (services/retrieval/deferred.py), a project's index when it
        opens and jieba's dictionary for a Chinese one; the assembly waits for these outside the
        provider's deadline, so the first assemblies after a start keep their Retrieved layer."""
        ready = getattr(self.searcher, "ready", None)
        if ready is not None:
            await ready()
        prepared = getattr(self.searcher, "prepared", None)
        if prepared is not None:
            await prepared(project_id)

    async def gather(self, ctx: GatherContext) -> Sequence[Item]:
        where = ctx.place("retrieval.passages")
        if where is None:
            return []
        window = ctx.window
        hits = await self._search(ctx, window.before, window.cursor)
        if ctx.skill.exclude_after and window.document is not None:
            hits = _before_cursor(hits, ctx.document_id, window.document, window.cursor)
        if self.read_ahead is not None and window.document is not None:
            self._schedule(self.read_ahead, ctx, where, window.document)
        return self._items(ctx, where, hits)

    def _schedule(self, read_ahead: ReadAhead, ctx: GatherContext, where: tuple[str, str],
                  document: str) -> None:
        """Read ahead the queries of the next sentence end, unless they are being or were read ahead:
        they are known by where they end in the very same document text (the window's start aside:
        a query reads less than a window holds)."""
        window = ctx.window
        ahead = next_queries(document, window.start, window.cursor)
        if not ahead:
            return
        key = (ctx.project_id, ctx.document_id, id(document), tuple(ahead), where, ctx.skill.exclude_after,
               ctx.additional_input, ctx.counter)
        read_ahead.schedule(key, partial(self._read_ahead, read_ahead, ctx, where, document, ahead))

    async def _search(self, ctx: GatherContext, before: str, cursor: int,
                      pause: Callable[[], Awaitable[bool]] | None = None) -> list[Hit]:
        """The search for a window whose text before the cursor (at ``cursor``) is ``before`` (read
        ahead with ``pause``: see Retrieval.search)."""
        exclude = Exclusion(ctx.document_id, cursor) if ctx.skill.exclude_after else None
        # The query is the whole sentences before the cursor: the sentence being typed is left out, so
        # neighbouring keystrokes ask the same query and share its result (Retrieval.search keeps it per
        # index snapshot), and the Retrieved layer stays the same while the writer types a sentence.
        before = settled(before)
        # The dense query is the sentences nearest the cursor, whose vectors the index already holds,
        # and the start of the instruction; BM25 gets the whole query.
        dense = self._dense_query(ctx, before)
        query = before[-QUERY_BEFORE:] + "\n" + ctx.additional_input
        return await self.searcher.search(ctx.project_id, query, limit=MAX_RETRIEVED, exclude=exclude,
                                          dense_query=dense, pause=pause)

    async def _read_ahead(self, read_ahead: ReadAhead, ctx: GatherContext, where: tuple[str, str],
                          document: str, ahead: list[int]) -> bool:
        """The searches (and their items) of the keystrokes at ``ahead``, as they will ask them: their
        windows' text before the cursor is taken from where this window starts, which is theirs too
        whenever the query reads less than the window holds (QUERY_BEFORE and CONTEXT_CHARS
        characters: a window holds thousands). False when it gave up, waiting for quiet."""
        start = ctx.window.start
        found = 0
        for cursor in ahead:
            # Its steps wait for quiet too: a keystroke that comes meanwhile waits for one step at most.
            hits = await self._search(ctx, document[start:cursor], cursor, read_ahead.pause)
            if not hits or not await read_ahead.pause():
                return False
            found += len(self._items(ctx, where, hits))
            if not await read_ahead.pause():
                return False
        _log.info("retrieval.read_ahead", project_id=ctx.project_id, document_id=ctx.document_id,
                  cursor=ctx.window.cursor, queries=len(ahead), hits=found)
        return True

    def _items(self, ctx: GatherContext, where: tuple[str, str], hits: list[Hit]) -> list[Item]:
        same = ctx.counter.info.exact and ctx.counter.info.encoding == self.index_encoding
        if not hits or not same:
            return [self._item(hit, ctx, same, where) for hit in hits]
        # A search makes new Hit objects every time it runs, so a result whose first and last hits are
        # the very objects kept (held here, so never collected and their ids never reused) is the same
        # kept result: its items, for this document and placement, are the ones made before.
        key = (ctx.document_id, where, len(hits), id(hits[0]), id(hits[-1]))
        kept = self.items.get(ctx.project_id, key)
        if kept is not None and kept[0] is hits[0] and kept[1] is hits[-1]:
            return list(kept[2])
        items = tuple(self._item(hit, ctx, same, where) for hit in hits)
        self.items.put(ctx.project_id, key, (hits[0], hits[-1], items))
        return list(items)

    def _dense_query(self, ctx: GatherContext, before: str) -> DenseQuery:
        """:meth:`DenseQuery.before_cursor`, kept: it reads only the last CONTEXT_CHARS + 1
        characters of ``before`` (the sentences in range, from a line's start) and whether there are
        more, so every keystroke inside one sentence gets the query made for the first."""
        instruction = ctx.additional_input[:DENSE_INSTRUCTION]
        tail = before[-(CONTEXT_CHARS + 1):]

        def make() -> tuple[DenseQuery, int]:
            query = DenseQuery.before_cursor(before, instruction, ctx.document_id)
            return query, len(tail) + len(instruction) + sum(map(len, query.sentences))

        key = (ctx.document_id, tail, len(before) > CONTEXT_CHARS, instruction)
        found: DenseQuery = self.queries.get_or_make(ctx.project_id, key, make)[0]
        return found

    @staticmethod
    def _item(hit: Hit, ctx: GatherContext, same_tokenizer: bool, where: tuple[str, str]) -> Item:
        here = hit.document_id == ctx.document_id
        return Item(id=f"chunk:{hit.document_id}#{hit.ordinal}", layer=where[0], section=where[1],
                    source=f"document:{hit.document_id}", text=hit.text,
                    tokens=hit.tokens if same_tokenizer else ctx.counter.count(hit.text), key=hit.score,
                    key_name="score", project_id=hit.project_id, span=(hit.start, hit.end) if here else None)


def _before_cursor(hits: list[Hit], document_id: str, document: str, cursor: int) -> list[Hit]:
    """``hits`` less those of the current document that may hold text after the cursor although the
    search's exclusion (by the index's offsets) let them through: the document changed since it was
    indexed (a pass is pending), so a chunk no longer stands where the index says. Such a chunk is
    kept only if its text stands before the cursor."""
    stale = [n for n, hit in enumerate(hits)
             if hit.document_id == document_id and document[hit.start:hit.end] != hit.text]
    if not stale:
        return hits
    before = document[:cursor]
    gone = {n for n in stale if hits[n].text not in before}
    return [hit for n, hit in enumerate(hits) if n not in gone] if gone else hits
