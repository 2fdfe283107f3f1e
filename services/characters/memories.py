"""Typed character memories (seed 003, §4.1 and §4.6): SQL rows, and one Chroma collection per project.

A memory belongs to an unordered pair of characters (:func:`pair_key`): ``pair`` scope memories
are shared by every conversation of the pair, ``conversation`` and ``exchange`` scope ones only
by the conversation they came from.

SQL holds the truth and a vector is derived data: a memory is written to SQL first, then
embedded. A failed vector write is logged and never loses the row; :meth:`TypedMemoryStore.sync`
embeds rows that have no vector, before the first search of a project in this process and again
after any failure. Every search result is re-read from SQL by id under the project, pair and
scope filters, so neither a stray vector nor its metadata can surface a memory it should not.
"""

from __future__ import annotations

import asyncio
import builtins
import hashlib
import json
import math
import threading
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Annotated, Any, Literal, get_args

import structlog
from pydantic import AfterValidator, Field, Strict, StringConstraints
from sqlalchemy import ColumnElement, and_, delete, func, or_
from sqlmodel import Session, col, select

from services.errors import InvalidInput, MemoryNotFound, StrataError
from services.projects.inputs import Input, invalid, validated
from services.projects.records import Record, UtcDatetime
from services.projects.scope import require_project, table_of
from services.retrieval.vectors import VectorIndex
from services.segments.records import unicode_text
from services.store.database import Database
from services.store.tables import TypedMemoryRow

_log = structlog.get_logger("characters.memories")

MemoryType = Literal["NOTE", "FACT", "EVENT", "RELATIONSHIP", "PERSONALITY", "PREFERENCE", "RULE", "OUTCOME"]
MEMORY_TYPES: tuple[MemoryType, ...] = get_args(MemoryType)
Scope = Literal["pair", "conversation", "exchange"]
SCOPES: tuple[Scope, ...] = get_args(Scope)
NARROW_SCOPES: tuple[Scope, ...] = ("conversation", "exchange")  # visible to their conversation only
PERSONAL_TYPES: frozenset[str] = frozenset({"PERSONALITY", "PREFERENCE"})
KEYFRAME_SOURCE = "keyframe"

MAX_SUMMARY = 2000
MAX_CONTENT = 16_000
MAX_SOURCE = 256
MAX_CONVERSATION_ID = 32  # the conversation table's key
MAX_BATCH = 5000  # drafts per add_many: one transaction, one embedding batch
MAX_LISTED = 500
EMBEDDED_CONTENT = 1000  # characters of content embedded after the summary: the summary carries it
QUERY_CHARS = 600  # the encoder's cost grows with the text
SYNC_BATCH = 1000  # vectors a sync embeds before letting the search go on; the next search goes on
_UPSERT_BATCH = 1000  # below Chroma's largest batch
_ENCODER_KEY = "strata:encoder"

RowId = Annotated[int, Strict(), Field(ge=1, le=2**63 - 1)]
Importance = Annotated[int, Strict(), Field(ge=1, le=10)]
Summary = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=MAX_SUMMARY),
                    AfterValidator(unicode_text)]
Content = Annotated[str, StringConstraints(max_length=MAX_CONTENT), AfterValidator(unicode_text)]
Source = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=MAX_SOURCE),
                   AfterValidator(unicode_text)]
ConversationId = Annotated[str, StringConstraints(min_length=1, max_length=MAX_CONVERSATION_ID),
                           AfterValidator(unicode_text)]


def pair_key(a: int, b: int) -> str:
    """The pair's key, the same whichever of the two speaks as the system: ``"3:7"``."""
    return f"{min(a, b)}:{max(a, b)}"


class TypedMemory(Record):
    id: int
    project_id: str
    memory_type: MemoryType
    importance: int
    summary: str
    content: str
    source: str
    system_character_id: int
    user_character_id: int
    scope: Scope
    character_id: int | None  # whom it is about, when one of the two
    conversation_id: str | None  # where it came from, whatever its scope
    message_id: int | None
    created_at: UtcDatetime

    @property
    def pair(self) -> str:
        return pair_key(self.system_character_id, self.user_character_id)


class MemoryDraft(Input):
    """A memory to add. ``conversation_id`` is required for conversation and exchange scope,
    ``message_id`` for exchange scope; ``character_id`` must be one of the two characters."""

    memory_type: MemoryType
    importance: Importance = 5
    summary: Summary
    content: Content = ""
    source: Source = "user"
    system_character_id: RowId
    user_character_id: RowId
    scope: Scope = "pair"
    conversation_id: ConversationId | None = None
    message_id: RowId | None = None
    character_id: RowId | None = None

    def problem(self) -> tuple[str, str] | None:
        """(field, message) of the first rule across fields that the draft breaks, if any."""
        if self.scope != "pair" and self.conversation_id is None:
            return "conversation_id", f"is required for {self.scope} scope"
        if self.message_id is not None and self.conversation_id is None:
            return "conversation_id", "is required with a message id"
        if self.scope == "exchange" and self.message_id is None:
            return "message_id", "is required for exchange scope"
        if self.character_id is not None and self.character_id not in (self.system_character_id,
                                                                       self.user_character_id):
            return "character_id", "must be the system or the user character"
        return None


@dataclass(frozen=True, slots=True)
class MemoryQuery:
    """What :meth:`TypedMemoryStore.search` looks for (see there)."""

    system_character_id: int
    user_character_id: int
    conversation_id: str | None = None
    types: frozenset[str] | None = None  # None: every type
    text: str | None = None
    limit: int = 50
    min_similarity: float = 0.2
    always_importance: int = 8  # at least this important: a candidate whatever its similarity
    always_limit: int = 10  # how many of those, the most important and newest first


@dataclass(frozen=True, slots=True)
class Recalled:
    memory: TypedMemory
    similarity: float | None  # cosine similarity to the query text; None when not found by it


def rank(found: Recalled) -> tuple[int, float, float, int]:
    """Sort key: importance, then newest, then most similar, then the latest id, each first."""
    memory, similarity = found.memory, found.similarity
    return (-memory.importance, -memory.created_at.timestamp(),
            -(similarity if similarity is not None else -math.inf), -memory.id)


def embedded_text(memory: TypedMemory) -> str:
    return memory.summary + "\n" + memory.content[:EMBEDDED_CONTENT]


def encoder_identity(embedding: Any) -> str:
    """Which encoder made a collection's vectors (its name and config), as a short hash."""
    name = embedding.name() if callable(getattr(embedding, "name", None)) else type(embedding).__qualname__
    try:
        config = json.dumps(embedding.get_config(), sort_keys=True, default=str)
    except Exception:  # not a Chroma embedding function: the name has to do
        config = ""
    return hashlib.sha256(f"{name}\n{config}".encode()).hexdigest()[:16]


class MemoryIndex:
    """One Chroma collection per project: a vector per memory, its id the row's id.

    Blocking; called from worker threads. A collection remembers the encoder that made its
    vectors: opened with another, it is emptied (the store's sync fills it again).
    """

    def __init__(self, client: Any, embedding: Any) -> None:
        self._client = client
        self.embedding = embedding
        self._identity: str | None = None  # worked out on first use: the encoder may still be loading
        self._open: dict[str, Any] = {}
        self._lock = threading.Lock()

    @staticmethod
    def collection_name(project_id: str) -> str:
        """``strata-mem-<project id>``, the id hashed as the retrieval index hashes it when unsafe."""
        return "strata-mem-" + VectorIndex.collection_name(project_id).removeprefix("strata-")

    def _collection(self, project_id: str) -> Any:
        with self._lock:
            collection = self._open.get(project_id)
            if collection is None:
                collection = self._open[project_id] = self._get_or_create(project_id)
            return collection

    def _get_or_create(self, project_id: str) -> Any:
        name = self.collection_name(project_id)
        if self._identity is None:
            self._identity = encoder_identity(self.embedding)
        metadata = {"hnsw:space": "cosine", _ENCODER_KEY: self._identity}
        # No embedding function: Strata embeds off the event loop and hands vectors over.
        collection = self._client.get_or_create_collection(name, embedding_function=None, metadata=metadata)
        if (collection.metadata or {}).get(_ENCODER_KEY) != self._identity:
            # Another encoder's vectors cannot be compared with this one's queries.
            self._client.delete_collection(name)
            collection = self._client.get_or_create_collection(name, embedding_function=None,
                                                               metadata=metadata)
            _log.info("typed_memory.index_reset", project_id=project_id)
        return collection

    def forget(self, project_id: str) -> None:
        """Drop the open handle (after a failure), so the next call opens the collection again."""
        with self._lock:
            self._open.pop(project_id, None)

    def embed(self, texts: Sequence[str]) -> builtins.list[Any]:
        return list(self.embedding(list(texts))) if texts else []

    def add(self, project_id: str, memories: Sequence[TypedMemory], vectors: Sequence[Any]) -> None:
        collection = self._collection(project_id)
        for start in range(0, len(memories), _UPSERT_BATCH):
            batch = memories[start:start + _UPSERT_BATCH]
            collection.upsert(ids=[str(m.id) for m in batch],
                              embeddings=list(vectors[start:start + _UPSERT_BATCH]),
                              metadatas=[_metadata(m) for m in batch])

    def ids(self, project_id: str) -> set[int]:
        found = self._collection(project_id).get(include=[])["ids"]
        return {int(vid) for vid in found if vid.isdigit()}

    def delete(self, project_id: str, ids: Iterable[int]) -> None:
        batch = [str(i) for i in ids]
        if batch:
            self._collection(project_id).delete(ids=batch)

    def query(self, project_id: str, vector: Any, where: dict[str, Any],
              limit: int) -> builtins.list[tuple[int, float]]:
        """``(memory id, similarity)`` of the nearest ``limit`` vectors that match ``where``."""
        collection = self._collection(project_id)
        size = collection.count()
        if not size or limit < 1:
            return []
        found = collection.query(query_embeddings=[vector], n_results=min(limit, size), where=where,
                                 include=["distances"])
        return [(int(vid), 1.0 - float(distance))
                for vid, distance in zip(found["ids"][0], found["distances"][0], strict=True)
                if vid.isdigit()]


def _metadata(memory: TypedMemory) -> dict[str, Any]:
    return {"pair": memory.pair, "type": memory.memory_type, "system": memory.system_character_id,
            "user": memory.user_character_id, "scope": memory.scope,
            "conversation": memory.conversation_id or "",
            "character": memory.character_id if memory.character_id is not None else -1,
            "importance": memory.importance, "created": memory.created_at.timestamp()}


def _vector_filter(pair: str, types: frozenset[str] | None, conversation_id: str | None) -> dict[str, Any]:
    """The Chroma ``where`` of the scope rule (SQL checks the same again on the way out)."""
    scope: dict[str, Any] = {"scope": "pair"}
    if conversation_id is not None:
        scope = {"$or": [scope, {"$and": [{"scope": {"$in": list(NARROW_SCOPES)}},
                                          {"conversation": conversation_id}]}]}
    clauses: builtins.list[dict[str, Any]] = [{"pair": pair}, scope]
    if types is not None:
        clauses.append({"type": {"$in": sorted(types)}})
    return {"$and": clauses}


def _in_scope(conversation_id: str | None) -> ColumnElement[bool]:
    """Pair-scope memories, plus the conversation's own when one is given."""
    pair_scope = col(TypedMemoryRow.scope) == "pair"
    if conversation_id is None:
        return pair_scope
    return or_(pair_scope, and_(col(TypedMemoryRow.scope).in_(NARROW_SCOPES),
                                col(TypedMemoryRow.conversation_id) == conversation_id))


_NEWEST = (col(TypedMemoryRow.created_at).desc(), col(TypedMemoryRow.id).desc())
_RANKED = (col(TypedMemoryRow.importance).desc(), *_NEWEST)


def checked_draft(value: MemoryDraft | Mapping[str, Any], at: tuple[int, ...] = ()) -> MemoryDraft:
    """``value`` checked as a draft, or InvalidInput (locations prefixed with ``at``)."""
    try:
        draft = value if isinstance(value, MemoryDraft) else validated(MemoryDraft, dict(value))
        broken = draft.problem()
        if broken is not None:
            raise invalid(*broken)
    except InvalidInput as exc:
        if at and "errors" in exc.fields:
            for error in exc.fields["errors"]:
                error["loc"] = [*at, *error["loc"]]
        raise
    return draft


class TypedMemoryStore:
    """A project's typed memories: add, list, search, delete."""

    def __init__(self, database: Database, index: MemoryIndex, *, sync_batch: int = SYNC_BATCH) -> None:
        self._db = database
        self._index = index
        self._sync_batch = sync_batch
        self._synced: set[str] = set()  # projects whose vectors were checked in this process
        self._failures = 0  # vector failures so far: a sync that saw one begin under it is not complete
        self._sync_lock = asyncio.Lock()

    # --- writing ------------------------------------------------------------------------------

    async def add(self, project_id: str, draft: MemoryDraft | Mapping[str, Any]) -> TypedMemory:
        checked = checked_draft(draft)
        return (await self._add(project_id, [checked]))[0]

    async def add_many(self, project_id: str,
                       drafts: Sequence[MemoryDraft | Mapping[str, Any]]) -> builtins.list[TypedMemory]:
        """Add every draft or none (one transaction), embedded in one batch; in the drafts' order."""
        if len(drafts) > MAX_BATCH:
            raise InvalidInput(f"At most {MAX_BATCH} memories at once", limit=MAX_BATCH)
        checked = [checked_draft(draft, (index,)) for index, draft in enumerate(drafts)]
        return await self._add(project_id, checked) if checked else []

    async def _add(self, project_id: str, drafts: builtins.list[MemoryDraft]) -> builtins.list[TypedMemory]:
        records = await asyncio.to_thread(self._insert, project_id, drafts)
        _log.info("typed_memory.added", project_id=project_id, memories=len(records),
                  ids=[m.id for m in records[:20]])
        try:
            await asyncio.to_thread(self._vectorize, project_id, records)
        except BaseException as exc:  # the rows stay; the next search's sync embeds them
            self._failed(project_id)
            if not isinstance(exc, Exception):
                raise
            _log.warning("typed_memory.vectors_failed", project_id=project_id, memories=len(records),
                         exc_type=type(exc).__name__)
        return records

    async def delete(self, project_id: str, memory_id: int) -> None:
        """Delete the memory and its vector; MemoryNotFound if the project has no such memory."""
        await asyncio.to_thread(self._delete_rows, project_id, memory_id=memory_id)
        await self._unvector(project_id, [memory_id])
        _log.info("typed_memory.deleted", project_id=project_id, id=memory_id)

    async def delete_conversation(self, project_id: str, conversation_id: str) -> int:
        """Delete the conversation's conversation- and exchange-scope memories; how many. Pair-scope
        memories that came from it stay: they are the pair's durable memory."""
        ids = await asyncio.to_thread(self._delete_rows, project_id, conversation_id=conversation_id)
        await self._unvector(project_id, ids)
        _log.info("typed_memory.conversation_deleted", project_id=project_id,
                  conversation_id=conversation_id, memories=len(ids))
        return len(ids)

    async def _unvector(self, project_id: str, ids: builtins.list[int]) -> None:
        try:
            await asyncio.to_thread(self._index.delete, project_id, ids)
        except Exception as exc:  # a stray vector surfaces nothing (results are re-read from SQL)
            self._failed(project_id)
            _log.warning("typed_memory.vector_delete_failed", project_id=project_id,
                         exc_type=type(exc).__name__)

    def _failed(self, project_id: str) -> None:
        self._failures += 1
        self._synced.discard(project_id)
        self._index.forget(project_id)

    # --- reading ------------------------------------------------------------------------------

    async def get(self, project_id: str, memory_id: int) -> TypedMemory:
        found = await asyncio.to_thread(self._read, project_id, col(TypedMemoryRow.id) == memory_id)
        if not found:
            raise MemoryNotFound()
        return found[0]

    async def list(self, project_id: str, *, system_character_id: int | None = None,
                   user_character_id: int | None = None, pair: str | None = None,
                   types: Collection[str] | None = None, conversation_id: str | None = None,
                   limit: int = 100, offset: int = 0) -> tuple[builtins.list[TypedMemory], int]:
        """A page of the project's memories, newest first, and how many match in all.

        Both character ids: that pair's memories (whichever speaks as the system); one: every
        memory that character takes part in. ``conversation_id``: the memories that came from it.
        """
        if not 1 <= limit <= MAX_LISTED:
            raise invalid("limit", f"must be 1 to {MAX_LISTED}")
        if offset < 0:
            raise invalid("offset", "must not be negative")
        conditions: builtins.list[ColumnElement[bool]] = []
        if system_character_id is not None and user_character_id is not None:
            conditions.append(col(TypedMemoryRow.pair) == pair_key(system_character_id, user_character_id))
        else:
            for character in (system_character_id, user_character_id):
                if character is not None:
                    conditions.append(or_(col(TypedMemoryRow.system_character_id) == character,
                                          col(TypedMemoryRow.user_character_id) == character))
        if pair is not None:
            conditions.append(col(TypedMemoryRow.pair) == pair)
        if types is not None:
            conditions.append(col(TypedMemoryRow.memory_type).in_(sorted(types)))
        if conversation_id is not None:
            conditions.append(col(TypedMemoryRow.conversation_id) == conversation_id)
        return await asyncio.to_thread(self._page, project_id, conditions, limit, offset)

    async def message_ids(self, project_id: str, conversation_id: str) -> frozenset[int]:
        """Ids of the conversation's messages that some memory cites as its source exchange."""
        return await asyncio.to_thread(self._message_ids, project_id, conversation_id)

    async def has_pair(self, project_id: str, pair: str) -> bool:
        found = await asyncio.to_thread(self._read, project_id, col(TypedMemoryRow.pair) == pair, limit=1)
        return bool(found)

    async def last_keyframe(self, project_id: str, pair: str,
                            exclude_conversation: str | None) -> TypedMemory | None:
        """The pair's newest memory written from a keyframe, of a conversation other than the one
        excluded (the summary of the last session)."""
        conditions = [col(TypedMemoryRow.pair) == pair, col(TypedMemoryRow.source) == KEYFRAME_SOURCE]
        if exclude_conversation is not None:
            conditions.append(or_(col(TypedMemoryRow.conversation_id).is_(None),
                                  col(TypedMemoryRow.conversation_id) != exclude_conversation))
        found = await asyncio.to_thread(self._read, project_id, *conditions, order=_NEWEST, limit=1)
        return found[0] if found else None

    async def personal(self, project_id: str, character_ids: Iterable[int],
                       types: frozenset[str] = PERSONAL_TYPES, limit: int = 50) -> builtins.list[Recalled]:
        """For a new pairing: pair-scope memories of ``types`` about one of the characters (its
        ``character_id``, or no ``character_id`` and a pair it takes part in), ranked."""
        ids = sorted(set(character_ids))
        about = or_(col(TypedMemoryRow.character_id).in_(ids),
                    and_(col(TypedMemoryRow.character_id).is_(None),
                         or_(col(TypedMemoryRow.system_character_id).in_(ids),
                             col(TypedMemoryRow.user_character_id).in_(ids))))
        found = await asyncio.to_thread(
            self._read, project_id, about, col(TypedMemoryRow.memory_type).in_(sorted(types)),
            col(TypedMemoryRow.scope) == "pair", limit=max(limit, 0))
        return [Recalled(memory, None) for memory in found]

    async def search_or_personal(self, project_id: str, query: MemoryQuery) -> builtins.list[Recalled]:
        """:meth:`search`; for a pair with no memory yet (a new pairing), each character's own
        memories of the personal types (those of ``query.types``), as a prompt recalls them."""
        found = await self.search(project_id, query)
        pair = pair_key(query.system_character_id, query.user_character_id)
        if found or await self.has_pair(project_id, pair):
            return found
        types = PERSONAL_TYPES if query.types is None else PERSONAL_TYPES & query.types
        if not types:
            return []
        return await self.personal(project_id, (query.system_character_id, query.user_character_id),
                                   types, limit=query.limit)

    async def search(self, project_id: str, query: MemoryQuery) -> builtins.list[Recalled]:
        """The pair's memories in scope (pair scope, plus the conversation's own when it is given),
        of ``types``, ranked by importance, recency, similarity and id, at most ``limit``.

        With ``text``: the ``always_limit`` most important memories of at least
        ``always_importance``, whatever their similarity, and the rest of ``limit`` from the nearest
        by vector that are at least ``min_similarity`` similar (most similar first), so that what the
        recent exchange is about gets in beside what matters most. Without (or when the vector store
        fails): by importance and recency alone.
        """
        text = (query.text or "").strip()
        hits: dict[int, float] | None = None
        if text and query.limit > 0:
            try:
                hits = await self._nearest(project_id, query, text[:QUERY_CHARS])
            except StrataError:
                raise
            except Exception as exc:  # a prompt without similarity beats no prompt
                self._failed(project_id)
                _log.warning("typed_memory.search_degraded", project_id=project_id,
                             exc_type=type(exc).__name__)
        found = await asyncio.to_thread(self._candidates, project_id, query, hits)
        return sorted(found, key=rank)[:max(query.limit, 0)]

    async def _nearest(self, project_id: str, query: MemoryQuery, text: str) -> dict[int, float]:
        if project_id not in self._synced:
            await self.sync(project_id)
        vector = (await asyncio.to_thread(self._index.embed, [text]))[0]
        where = _vector_filter(pair_key(query.system_character_id, query.user_character_id),
                               query.types, query.conversation_id)
        found = await asyncio.to_thread(self._index.query, project_id, vector, where, 2 * query.limit)
        return {memory_id: similarity for memory_id, similarity in found
                if similarity >= query.min_similarity}

    async def sync(self, project_id: str) -> int:
        """Embed the project's memories that have no vector (at most the sync batch, newest first)
        and delete vectors whose memory is gone; how many were embedded."""
        async with self._sync_lock:
            failures = self._failures
            embedded, complete = await asyncio.to_thread(self._sync, project_id)
            if complete and failures == self._failures:
                self._synced.add(project_id)
        if embedded:
            _log.info("typed_memory.synced", project_id=project_id, embedded=embedded, complete=complete)
        return embedded

    # --- in a worker thread -------------------------------------------------------------------

    def _insert(self, project_id: str, drafts: builtins.list[MemoryDraft]) -> builtins.list[TypedMemory]:
        with self._db.session() as session:
            require_project(session, project_id)
            rows = [TypedMemoryRow(project_id=project_id, **draft.model_dump(),
                                   pair=pair_key(draft.system_character_id, draft.user_character_id))
                    for draft in drafts]
            session.add_all(rows)
            session.flush()
            records = [TypedMemory.model_validate(row) for row in rows]
            session.commit()
            return records

    def _vectorize(self, project_id: str, memories: builtins.list[TypedMemory]) -> None:
        vectors = self._index.embed([embedded_text(memory) for memory in memories])
        self._index.add(project_id, memories, vectors)

    def _sync(self, project_id: str) -> tuple[int, bool]:
        # Vectors first: a vector missing from SQL read afterwards is one whose row was deleted,
        # never one of a row inserted in between (ids are never reused).
        vectors = self._index.ids(project_id)
        with self._db.session() as session:
            require_project(session, project_id)
            rows = set(session.exec(select(TypedMemoryRow.id)
                                    .where(col(TypedMemoryRow.project_id) == project_id)).all())
        self._index.delete(project_id, sorted(vectors - {i for i in rows if i is not None}))
        missing = sorted((i for i in rows if i is not None and i not in vectors), reverse=True)
        todo = missing[:self._sync_batch]
        if todo:
            self._vectorize(project_id, self._read(project_id, col(TypedMemoryRow.id).in_(todo)))
        return len(todo), len(missing) <= self._sync_batch

    def _read(self, project_id: str, *conditions: ColumnElement[bool],
              order: tuple[Any, ...] = _RANKED, limit: int | None = None) -> builtins.list[TypedMemory]:
        with self._db.session() as session:
            require_project(session, project_id)
            return self._select(session, project_id, conditions, order, limit)

    @staticmethod
    def _select(session: Session, project_id: str, conditions: Sequence[ColumnElement[bool]],
                order: tuple[Any, ...] = _RANKED, limit: int | None = None,
                offset: int = 0) -> builtins.list[TypedMemory]:
        query = (select(TypedMemoryRow).where(col(TypedMemoryRow.project_id) == project_id, *conditions)
                 .order_by(*order).offset(offset))
        if limit is not None:
            query = query.limit(limit)
        return [TypedMemory.model_validate(row) for row in session.exec(query)]

    def _page(self, project_id: str, conditions: builtins.list[ColumnElement[bool]], limit: int,
              offset: int) -> tuple[builtins.list[TypedMemory], int]:
        with self._db.session() as session:
            require_project(session, project_id)
            page = self._select(session, project_id, conditions, _NEWEST, limit, offset)
            total = session.exec(select(func.count()).select_from(TypedMemoryRow).where(
                col(TypedMemoryRow.project_id) == project_id, *conditions)).one()
            return page, int(total)

    def _candidates(self, project_id: str, query: MemoryQuery,
                    hits: dict[int, float] | None) -> builtins.list[Recalled]:
        conditions = [col(TypedMemoryRow.pair) == pair_key(query.system_character_id,
                                                           query.user_character_id),
                      _in_scope(query.conversation_id)]
        if query.types is not None:
            conditions.append(col(TypedMemoryRow.memory_type).in_(sorted(query.types)))
        limit = max(query.limit, 0)
        with self._db.session() as session:
            require_project(session, project_id)
            if hits is None:  # no text (or no vectors): importance and recency decide
                return [Recalled(m, None) for m in self._select(session, project_id, conditions,
                                                                limit=limit)]
            similar = self._select(session, project_id, [*conditions, col(TypedMemoryRow.id).in_(list(hits))])
            important = self._select(session, project_id, [
                *conditions, col(TypedMemoryRow.importance) >= query.always_importance],
                limit=min(limit, max(query.always_limit, 0)))
        found = {m.id: Recalled(m, hits.get(m.id)) for m in important}
        nearest = sorted((m for m in similar if m.id not in found), key=lambda m: (-hits[m.id], -m.id))
        for m in nearest[:max(limit - len(found), 0)]:
            found[m.id] = Recalled(m, hits[m.id])
        return list(found.values())

    def _delete_rows(self, project_id: str, *, memory_id: int | None = None,
                     conversation_id: str | None = None) -> builtins.list[int]:
        table = table_of(TypedMemoryRow)
        if memory_id is not None:
            condition = table.c.id == memory_id
        else:
            condition = and_(table.c.conversation_id == conversation_id, table.c.scope.in_(NARROW_SCOPES))
        with self._db.session() as session:
            require_project(session, project_id)
            statement = delete(table).where(table.c.project_id == project_id, condition).returning(table.c.id)
            ids = [int(i) for i in session.exec(statement).scalars().all()]
            if memory_id is not None and not ids:
                raise MemoryNotFound()
            session.commit()
            return ids

    def _message_ids(self, project_id: str, conversation_id: str) -> frozenset[int]:
        with self._db.session() as session:
            require_project(session, project_id)
            found = session.exec(select(TypedMemoryRow.message_id).distinct().where(
                col(TypedMemoryRow.project_id) == project_id,
                col(TypedMemoryRow.conversation_id) == conversation_id,
                col(TypedMemoryRow.message_id).is_not(None))).all()
            return frozenset(int(i) for i in found if i is not None)
