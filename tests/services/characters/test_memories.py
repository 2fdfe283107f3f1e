"""TypedMemoryStore over real SQLite and a real Chroma folder, with a small deterministic encoder:
scope, isolation, similarity, ranking, deletion and the repair of missing vectors."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from typing import Any

import pytest

from services.characters.memories import (
    MemoryDraft,
    MemoryIndex,
    MemoryQuery,
    TypedMemory,
    TypedMemoryStore,
    pair_key,
)
from services.errors import InvalidInput, MemoryNotFound, ProjectNotFound
from services.projects import ProjectRecord
from services.store import Database

A, B, C = 3, 7, 11  # character entity ids


class WordsEmbedding:
    """A bag of words hashed into 1024 dimensions (plus a small constant one, so that no vector is
    zero): texts sharing words are similar, texts sharing none are about 0 apart."""

    DIMENSIONS = 1024

    def __call__(self, input: Sequence[str]) -> list[list[float]]:
        vectors = []
        for text in input:
            vector = [0.0] * self.DIMENSIONS
            vector[0] = 0.05
            for word in re.findall(r"[a-z0-9]+|[\u4e00-\u9fff]", text.lower()):
                vector[1 + int(hashlib.sha256(word.encode()).hexdigest(), 16) % (self.DIMENSIONS - 1)] += 1.0
            vectors.append(vector)
        return vectors

    @staticmethod
    def name() -> str:
        return "test-words"


class OtherEmbedding(WordsEmbedding):
    @staticmethod
    def name() -> str:
        return "test-words-2"


@pytest.fixture
def index(chroma: Any) -> MemoryIndex:
    return MemoryIndex(chroma, WordsEmbedding())


@pytest.fixture
def store(database: Database, index: MemoryIndex) -> TypedMemoryStore:
    return TypedMemoryStore(database, index)


def draft(summary: str, memory_type: str = "FACT", importance: int = 5, system: int = A, user: int = B,
          **fields: Any) -> MemoryDraft:
    return MemoryDraft.model_validate({"memory_type": memory_type, "importance": importance,
                                       "summary": summary, "system_character_id": system,
                                       "user_character_id": user, **fields})


def summaries(found: Sequence[Any]) -> list[str]:
    return [(item.memory if hasattr(item, "memory") else item).summary for item in found]


async def test_add_returns_the_stored_memory(project: ProjectRecord, store: TypedMemoryStore,
                                            index: MemoryIndex) -> None:
    """add stores every field, keys the pair whichever character speaks as the system, and embeds
    the memory; get reads the same record back."""
    added = await store.add(project.id, {
        "memory_type": "RELATIONSHIP", "importance": 8, "summary": "  They met at a coffee shop ",
        "content": "It rained.", "system_character_id": B, "user_character_id": A,
        "scope": "exchange", "conversation_id": "c1", "message_id": 4, "character_id": A})
    assert isinstance(added, TypedMemory)
    assert (added.project_id, added.memory_type, added.importance, added.summary, added.content,
            added.source, added.scope, added.conversation_id, added.message_id, added.character_id) == (
        project.id, "RELATIONSHIP", 8, "They met at a coffee shop", "It rained.", "user", "exchange",
        "c1", 4, A)
    assert added.pair == pair_key(A, B) == pair_key(B, A) == "3:7"
    assert added.created_at.tzinfo is not None
    assert await store.get(project.id, added.id) == added
    assert index.ids(project.id) == {added.id}


@pytest.mark.parametrize(("fields", "loc"), [
    ({"importance": 0}, ["importance"]),
    ({"importance": 11}, ["importance"]),
    ({"importance": True}, ["importance"]),
    ({"summary": "   "}, ["summary"]),
    ({"summary": "x" * 2001}, ["summary"]),
    ({"summary": "bad \ud800"}, ["summary"]),
    ({"content": "y" * 16_001}, ["content"]),
    ({"source": "s" * 257}, ["source"]),
    ({"memory_type": "GOSSIP"}, ["memoryType"]),
    ({"scope": "world"}, ["scope"]),
    ({"scope": "conversation"}, ["conversationId"]),
    ({"scope": "exchange", "conversation_id": "c1"}, ["messageId"]),
    ({"message_id": 3}, ["conversationId"]),
    ({"character_id": C}, ["characterId"]),
    ({"surprise": 1}, ["surprise"]),
])
async def test_drafts_out_of_bounds_are_refused(project: ProjectRecord, store: TypedMemoryStore,
                                                fields: dict[str, Any], loc: list[str]) -> None:
    """A draft breaking a bound or a rule across fields is INVALID_PARAMS naming the field (never
    its value), and nothing is stored."""
    values = {"memory_type": "FACT", "summary": "ok", "system_character_id": A, "user_character_id": B,
              **fields}
    with pytest.raises(InvalidInput) as raised:
        await store.add(project.id, values)
    assert [error["loc"] for error in raised.value.fields["errors"]] == [loc]
    assert await store.list(project.id) == ([], 0)


async def test_add_many_is_all_or_nothing(project: ProjectRecord, store: TypedMemoryStore,
                                          index: MemoryIndex) -> None:
    """add_many stores every draft in order and embeds them all, or, if one is invalid, none
    (the error locates the draft by its index)."""
    with pytest.raises(InvalidInput) as raised:
        await store.add_many(project.id, [draft("first"), {"memory_type": "FACT", "summary": ""}])
    assert raised.value.fields["errors"][0]["loc"][0] == 1
    assert await store.list(project.id) == ([], 0)
    added = await store.add_many(project.id, [draft(f"fact {i}") for i in range(30)])
    assert summaries(added) == [f"fact {i}" for i in range(30)]
    assert index.ids(project.id) == {m.id for m in added}
    with pytest.raises(ProjectNotFound):
        await store.add_many("0" * 16, [draft("x")])


async def test_search_keeps_to_the_pair_and_the_project(project: ProjectRecord,
                                                        other_project: ProjectRecord,
                                                        store: TypedMemoryStore) -> None:
    """Another pair's memories and another project's never come back, by text or without, even
    when they say exactly what is asked."""
    mine = await store.add(project.id, draft("the lighthouse keeper hates storms", importance=9))
    await store.add(project.id, draft("the lighthouse keeper hates storms", system=A, user=C, importance=9))
    await store.add(other_project.id, draft("the lighthouse keeper hates storms", importance=9))
    for text in ("lighthouse storms", None):
        found = await store.search(project.id, MemoryQuery(B, A, text=text))
        assert [r.memory.id for r in found] == [mine.id]
    with pytest.raises(MemoryNotFound):
        await store.get(other_project.id, mine.id)


async def test_planted_vectors_surface_nothing(project: ProjectRecord, other_project: ProjectRecord,
                                               store: TypedMemoryStore, chroma: Any) -> None:
    """Vectors planted in the project's collection, with metadata claiming the queried pair, for a
    memory of another project or of another pair, are ignored: results are re-read from SQL."""
    foreign = await store.add(other_project.id, draft("secret map of the caves"))
    other_pair = await store.add(project.id, draft("secret map of the caves", system=B, user=C))
    await store.add(project.id, draft("unrelated weather talk"))
    collection = chroma.get_collection(MemoryIndex.collection_name(project.id))
    vector = WordsEmbedding()(["secret map of the caves"])[0]
    metadata = {"pair": pair_key(A, B), "type": "FACT", "scope": "pair", "conversation": "",
                "importance": 5, "created": 0.0, "system": A, "user": B, "character": -1}
    collection.upsert(ids=[str(foreign.id), str(other_pair.id), "not-a-number"],
                      embeddings=[vector] * 3, metadatas=[metadata] * 3)
    found = await store.search(project.id, MemoryQuery(A, B, text="secret map caves", min_similarity=0.0))
    assert summaries(found) == ["unrelated weather talk"]


async def test_scope_hierarchy(project: ProjectRecord, store: TypedMemoryStore) -> None:
    """Pair-scope memories are recalled in every conversation of the pair; conversation and
    exchange scope ones only in their own conversation, and never without one."""
    await store.add(project.id, draft("pair wide", conversation_id="c1"))
    await store.add(project.id, draft("only c1", scope="conversation", conversation_id="c1"))
    await store.add(project.id, draft("exchange of c1", scope="exchange", conversation_id="c1", message_id=2))
    await store.add(project.id, draft("only c2", scope="conversation", conversation_id="c2"))
    for text in (None, "pair wide only c1 c2 exchange"):
        async def found(conversation: str | None, text: str | None = text) -> set[str]:
            query = MemoryQuery(A, B, conversation_id=conversation, text=text, min_similarity=0.0)
            return set(summaries(await store.search(project.id, query)))

        assert await found(None) == {"pair wide"}
        assert await found("c1") == {"pair wide", "only c1", "exchange of c1"}
        assert await found("c2") == {"pair wide", "only c2"}
        assert await found("c3") == {"pair wide"}


async def test_min_similarity_with_important_memories_always_in(project: ProjectRecord,
                                                                store: TypedMemoryStore) -> None:
    """With text, a memory less similar than min_similarity is left out unless it is at least
    always_importance important; similarities are cosine, None for one found only by importance."""
    await store.add(project.id, draft("dragons guard the northern pass"))
    await store.add(project.id, draft("bread prices rose again", importance=7))
    await store.add(project.id, draft("she swore an oath to the queen", importance=8))
    found = await store.search(project.id, MemoryQuery(A, B, text="who guards the northern pass dragons"))
    assert summaries(found) == ["she swore an oath to the queen", "dragons guard the northern pass"]
    assert found[0].similarity is None
    similarity = found[1].similarity
    assert similarity is not None
    assert 0.5 < similarity <= 1.0 + 1e-6
    strict = await store.search(project.id, MemoryQuery(A, B, text="dragons", always_importance=10,
                                                        min_similarity=0.99))
    assert strict == []


async def test_what_the_exchange_is_about_gets_in_beside_many_important_memories(
        project: ProjectRecord, store: TypedMemoryStore) -> None:
    """With more important memories than the limit holds, the ``always_limit`` most important come
    whatever their similarity and the rest of the limit goes to the most similar: a minor memory
    about what the exchange mentions is still recalled."""
    await store.add_many(project.id, [draft(f"an oath sworn in winter number {n}", importance=9)
                                      for n in range(30)])
    await store.add(project.id, draft("dragons guard the northern pass", importance=3))
    query = MemoryQuery(A, B, text="who guards the northern pass dragons", limit=12, always_limit=10)
    found = await store.search(project.id, query)
    assert len(found) == 11  # ten by importance, and the one similar enough
    assert "dragons guard the northern pass" in summaries(found)
    assert sum(r.similarity is None for r in found) <= 10


async def test_ranking_and_filters(project: ProjectRecord, store: TypedMemoryStore) -> None:
    """Results rank by importance, then newest first, then similarity; types filter; limit cuts."""
    await store.add(project.id, draft("old important", importance=9))
    await store.add(project.id, draft("old plain", importance=3))
    await store.add(project.id, draft("new important", importance=9))
    await store.add(project.id, draft("bond", memory_type="RELATIONSHIP", importance=5))
    found = await store.search(project.id, MemoryQuery(A, B))
    assert summaries(found) == ["new important", "old important", "bond", "old plain"]
    assert all(r.similarity is None for r in found)
    assert summaries(await store.search(project.id, MemoryQuery(A, B, limit=2))) == [
        "new important", "old important"]
    assert summaries(await store.search(project.id, MemoryQuery(A, B, types=frozenset({"RELATIONSHIP"}),
                                                                text="bond important"))) == ["bond"]
    assert await store.search(project.id, MemoryQuery(A, B, types=frozenset())) == []


async def test_list_pages_newest_first(project: ProjectRecord, store: TypedMemoryStore) -> None:
    """list filters by pair (either order), by one character, by types and by conversation, newest
    first, with the total of all matches and offset paging; limits are checked."""
    first = await store.add(project.id, draft("ab fact", conversation_id="c1"))
    second = await store.add(project.id, draft("ab bond", memory_type="RELATIONSHIP"))
    third = await store.add(project.id, draft("bc fact", system=B, user=C))
    assert await store.list(project.id) == ([third, second, first], 3)
    assert await store.list(project.id, system_character_id=B, user_character_id=A) == ([second, first], 2)
    assert await store.list(project.id, user_character_id=B) == ([third, second, first], 3)
    assert await store.list(project.id, system_character_id=C) == ([third], 1)
    assert await store.list(project.id, pair="7:11") == ([third], 1)
    assert await store.list(project.id, types={"RELATIONSHIP"}) == ([second], 1)
    assert await store.list(project.id, conversation_id="c1") == ([first], 1)
    assert await store.list(project.id, limit=1, offset=1) == ([second], 3)
    for limit, offset in ((0, 0), (501, 0), (1, -1)):
        with pytest.raises(InvalidInput):
            await store.list(project.id, limit=limit, offset=offset)
    with pytest.raises(ProjectNotFound):
        await store.list("0" * 16)


async def test_delete_removes_row_and_vector(project: ProjectRecord, other_project: ProjectRecord,
                                             store: TypedMemoryStore, index: MemoryIndex) -> None:
    """delete removes the memory and its vector; absent, already deleted or of another project it
    is MEMORY_NOT_FOUND and nothing changes."""
    kept = await store.add(project.id, draft("kept"))
    gone = await store.add(project.id, draft("gone"))
    with pytest.raises(MemoryNotFound):
        await store.delete(other_project.id, gone.id)
    await store.delete(project.id, gone.id)
    assert index.ids(project.id) == {kept.id}
    assert await store.list(project.id) == ([kept], 1)
    for memory_id in (gone.id, 10_000):
        with pytest.raises(MemoryNotFound):
            await store.delete(project.id, memory_id)


async def test_delete_conversation_keeps_the_pairs_memory(project: ProjectRecord,
                                                          store: TypedMemoryStore,
                                                          index: MemoryIndex) -> None:
    """delete_conversation deletes the conversation's conversation- and exchange-scope memories
    (and their vectors); pair-scope memories that came from it, and other conversations', stay."""
    durable = await store.add(project.id, draft("durable", conversation_id="c1", message_id=5))
    await store.add(project.id, draft("session", scope="conversation", conversation_id="c1"))
    await store.add(project.id, draft("moment", scope="exchange", conversation_id="c1", message_id=6))
    other = await store.add(project.id, draft("other", scope="conversation", conversation_id="c2"))
    assert await store.message_ids(project.id, "c1") == frozenset({5, 6})
    assert await store.delete_conversation(project.id, "c1") == 2
    assert await store.list(project.id) == ([other, durable], 2)
    assert index.ids(project.id) == {other.id, durable.id}
    assert await store.message_ids(project.id, "c1") == frozenset({5})
    assert await store.delete_conversation(project.id, "c1") == 0


async def test_pairs_keyframes_and_personal_memories(project: ProjectRecord,
                                                     store: TypedMemoryStore) -> None:
    """has_pair knows a pair with any memory; last_keyframe is the pair's newest keyframe memory of
    another conversation; personal gives pair-scope personality and preference memories about
    either character (named, or unnamed in a pair it is part of), ranked."""
    assert not await store.has_pair(project.id, pair_key(A, B))
    older = await store.add(project.id, draft("met at dawn", source="keyframe", conversation_id="c1"))
    newer = await store.add(project.id, draft("parted at dusk", source="keyframe", conversation_id="c2"))
    await store.add(project.id, draft("not a keyframe", conversation_id="c3"))
    await store.add(project.id, draft("another pair", system=B, user=C, source="keyframe",
                                      conversation_id="c9"))
    assert await store.has_pair(project.id, pair_key(B, A))
    assert not await store.has_pair(project.id, pair_key(A, C))
    assert await store.last_keyframe(project.id, pair_key(A, B), None) == newer
    assert await store.last_keyframe(project.id, pair_key(A, B), "c2") == older
    assert await store.last_keyframe(project.id, pair_key(A, C), None) is None

    await store.add(project.id, draft("A is stubborn", "PERSONALITY", 6, character_id=A))
    await store.add(project.id, draft("B loves tea", "PREFERENCE", 9, character_id=B))
    await store.add(project.id, draft("the two like rain", "PREFERENCE", 4))
    await store.add(project.id, draft("C fears the dark", "PERSONALITY", 9, system=B, user=C,
                                      character_id=C))
    await store.add(project.id, draft("A fact", "FACT", 10, character_id=A))
    await store.add(project.id, draft("only in c1", "PERSONALITY", 10, character_id=A,
                                      scope="conversation", conversation_id="c1"))
    found = await store.personal(project.id, (A, 20))
    assert summaries(found) == ["A is stubborn", "the two like rain"]
    assert summaries(await store.personal(project.id, (B,))) == ["B loves tea", "the two like rain"]
    assert summaries(await store.personal(project.id, (C, B), limit=2)) == ["C fears the dark", "B loves tea"]


async def test_a_new_pairing_searches_each_characters_personal_memories(project: ProjectRecord,
                                                                        store: TypedMemoryStore) -> None:
    """search_or_personal is search for a pair with memories, and for a pair with none each
    character's personality and preference memories (only those of the types asked)."""
    await store.add(project.id, draft("A is stubborn", "PERSONALITY", 6, character_id=A))
    await store.add(project.id, draft("A and B met at dawn", "EVENT", 7))
    new_pair = MemoryQuery(A, C)
    assert await store.search(project.id, new_pair) == []
    assert summaries(await store.search_or_personal(project.id, new_pair)) == ["A is stubborn"]
    assert summaries(await store.search_or_personal(project.id, MemoryQuery(A, C, text="stubborn"))) == \
        ["A is stubborn"]
    assert await store.search_or_personal(project.id, MemoryQuery(A, C, types=frozenset({"EVENT"}))) == []
    known = MemoryQuery(A, B, types=frozenset({"EVENT"}))
    assert await store.search_or_personal(project.id, known) == await store.search(project.id, known)
    await store.add(project.id, draft("only in c7", "FACT", 5, system=A, user=C, scope="conversation",
                                      conversation_id="c7"))
    assert await store.search_or_personal(project.id, new_pair) == []  # the pair has memories now


async def test_a_failed_vector_write_is_repaired_by_the_next_search(
        project: ProjectRecord, store: TypedMemoryStore, index: MemoryIndex,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """When Chroma fails, add still stores the row; the next search with text embeds it (sync) and
    finds it by similarity."""
    await store.search(project.id, MemoryQuery(A, B, text="anything"))  # the project is synced
    real_add = index.add

    def broken(*args: Any) -> None:
        raise RuntimeError("chroma is down")

    monkeypatch.setattr(index, "add", broken)
    lost = await store.add(project.id, draft("the amulet is cursed"))
    assert index.ids(project.id) == set()
    monkeypatch.setattr(index, "add", real_add)
    found = await store.search(project.id, MemoryQuery(A, B, text="cursed amulet"))
    assert [(r.memory.id, r.similarity is not None) for r in found] == [(lost.id, True)]
    assert index.ids(project.id) == {lost.id}


async def test_sync_is_bounded_and_removes_stray_vectors(
        project: ProjectRecord, database: Database, index: MemoryIndex,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A sync embeds at most its batch (newest first) and leaves the project to be synced again;
    vectors whose memory is gone are deleted."""
    store = TypedMemoryStore(database, index, sync_batch=2)
    monkeypatch.setattr(index, "add", lambda *args: (_ for _ in ()).throw(RuntimeError("down")))
    added = await store.add_many(project.id, [draft(f"memory {i}") for i in range(5)])
    monkeypatch.undo()
    index.add(project.id, [added[0]], WordsEmbedding()(["x"]))
    await store.delete(project.id, added[0].id)
    index.add(project.id, [added[0]], WordsEmbedding()(["x"]))  # a stray vector of a deleted memory
    assert await store.sync(project.id) == 2
    assert index.ids(project.id) == {added[4].id, added[3].id}
    await store.search(project.id, MemoryQuery(A, B, text="memory"))  # syncs 2 more
    assert await store.sync(project.id) == 0
    assert index.ids(project.id) == {m.id for m in added[1:]}


async def test_search_without_the_vector_store_ranks_by_importance(
        project: ProjectRecord, store: TypedMemoryStore, index: MemoryIndex,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """If the vector query fails, a search with text answers as one without: importance and recency."""
    await store.add(project.id, draft("low", importance=2))
    await store.add(project.id, draft("high", importance=6))

    def broken(*args: Any) -> list[tuple[int, float]]:
        raise RuntimeError("chroma is down")

    monkeypatch.setattr(index, "query", broken)
    found = await store.search(project.id, MemoryQuery(A, B, text="unrelated words"))
    assert [(r.memory.summary, r.similarity) for r in found] == [("high", None), ("low", None)]
    with pytest.raises(ProjectNotFound):
        await store.search("0" * 16, MemoryQuery(A, B, text="x"))


async def test_another_encoder_rebuilds_the_collection(project: ProjectRecord, database: Database,
                                                       store: TypedMemoryStore, chroma: Any) -> None:
    """A collection made by another encoder is emptied when opened, and the next search's sync
    embeds every memory again with the new one."""
    added = await store.add_many(project.id, [draft("alpha"), draft("beta")])
    index = MemoryIndex(chroma, OtherEmbedding())
    assert index.ids(project.id) == set()
    found = await TypedMemoryStore(database, index).search(project.id, MemoryQuery(A, B, text="alpha"))
    assert summaries(found) == ["alpha"]
    assert index.ids(project.id) == {m.id for m in added}


def test_collection_names() -> None:
    """One collection per project, named strata-mem-<id>; an unsafe id is hashed as the retrieval
    index hashes it."""
    assert MemoryIndex.collection_name("0123abcd") == "strata-mem-0123abcd"
    hashed = MemoryIndex.collection_name("a b/é")
    assert re.fullmatch(r"strata-mem-[0-9a-f]{32}", hashed)
