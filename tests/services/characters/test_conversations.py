"""ConversationStore: conversations and their numbered messages, stored in SQLite."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest
from sqlmodel import select

from services.characters.conversations import Conversation, ConversationStore
from services.errors import (
    ConversationFull,
    ConversationNotFound,
    InvalidInput,
    ProjectNotFound,
    RecordNotFound,
)
from services.projects import ProjectRecord
from services.store import Database
from services.store.tables import ConversationMessageRow
from tests.support.projects import open_test_database


@pytest.fixture
def store(database: Database) -> ConversationStore:
    return ConversationStore(database)


async def new(store: ConversationStore, project: ProjectRecord, system: int = 1,
              user: int = 2) -> Conversation:
    return await store.create(project.id, system_character_id=system, user_character_id=user,
                              template="roleplay", options={"rating": "sfw", "keyframeEvery": 8})


async def test_create_get_list_delete(project: ProjectRecord, store: ConversationStore) -> None:
    """A created conversation is empty and read back as made; list is newest first and filters
    by either character; delete makes it not found."""
    first = await new(store, project, 1, 2)
    second = await new(store, project, 3, 2)
    assert len(first.id) == 16
    assert (first.message_count, first.next_seq) == (0, 1)
    assert first.options == {"rating": "sfw", "keyframeEvery": 8}
    assert await store.get(project.id, first.id) == first
    assert [c.id for c in await store.list(project.id)] == [second.id, first.id]
    assert [c.id for c in await store.list(project.id, system_character_id=1)] == [first.id]
    assert [c.id for c in await store.list(project.id, user_character_id=2, limit=1)] == [second.id]
    assert await store.pair(project.id, second.id) == (3, 2)
    await store.delete(project.id, first.id)
    with pytest.raises(ConversationNotFound):
        await store.get(project.id, first.id)
    with pytest.raises(ConversationNotFound):
        await store.delete(project.id, first.id)
    assert [c.id for c in await store.list(project.id)] == [second.id]


async def test_unknown_project_is_refused(store: ConversationStore) -> None:
    """Creating or listing in a project that does not exist is PROJECT_NOT_FOUND."""
    with pytest.raises(ProjectNotFound):
        await store.create("nope", system_character_id=1, user_character_id=2, template="t", options={})
    with pytest.raises(ProjectNotFound):
        await store.list("nope")


async def test_another_projects_conversation_is_not_found(project: ProjectRecord,
                                                          other_project: ProjectRecord,
                                                          store: ConversationStore) -> None:
    """Every method named with another project's id answers CONVERSATION_NOT_FOUND and changes nothing."""
    conversation = await new(store, project)
    message = await store.add(project.id, conversation.id, role="user", content="你好")
    other, cid = other_project.id, conversation.id
    calls: list[Callable[[], Awaitable[object]]] = [
        lambda: store.get(other, cid), lambda: store.pair(other, cid),
        lambda: store.messages(other, cid), lambda: store.count(other, cid),
        lambda: store.add(other, cid, role="user", content="x"),
        lambda: store.set_important(other, cid, message.id, True),
        lambda: store.has_message(other, cid, message.id),
        lambda: store.prune_keyframes(other, cid), lambda: store.delete(other, cid)]
    for call in calls:
        with pytest.raises(ConversationNotFound):
            await call()
    assert await store.list(other) == []
    assert (await store.get(project.id, cid)).message_count == 1
    assert not (await store.messages(project.id, cid))[0].important


async def test_concurrent_adds_get_distinct_increasing_seqs(project: ProjectRecord,
                                                            store: ConversationStore) -> None:
    """Twenty adds at once each get their own seq, 1..20, and next_seq ends at 21."""
    conversation = await new(store, project)
    added = await asyncio.gather(*(store.add(project.id, conversation.id, role="user", content=f"m{i}")
                                   for i in range(20)))
    assert sorted(m.seq for m in added) == list(range(1, 21))
    stored = await store.messages(project.id, conversation.id)
    assert [m.seq for m in stored] == list(range(1, 21))
    assert {m.content for m in stored} == {f"m{i}" for i in range(20)}
    after = await store.get(project.id, conversation.id)
    assert (after.message_count, after.next_seq) == (20, 21)
    assert after.updated_at >= conversation.updated_at


async def test_full_conversation_refuses_more(project: ProjectRecord, database: Database) -> None:
    """At max_messages an add is CONVERSATION_FULL with the limit and stores nothing; a prune makes room."""
    store = ConversationStore(database, max_messages=3)
    conversation = await new(store, project)
    for kind in ("keyframe", "keyframe", "keyframe"):
        await store.add(project.id, conversation.id, role="system", content="k", kind=kind)
    with pytest.raises(ConversationFull) as raised:
        await store.add(project.id, conversation.id, role="user", content="one too many")
    assert raised.value.fields == {"limit": 3}
    assert (await store.get(project.id, conversation.id)).next_seq == 4
    assert await store.prune_keyframes(project.id, conversation.id) == 1
    added = await store.add(project.id, conversation.id, role="user", content="fits")
    assert added.seq == 4  # seqs are never reused


async def test_messages_window(project: ProjectRecord, store: ConversationStore) -> None:
    """messages: seq ascending after after_seq; limit takes the first n, newest the last n."""
    conversation = await new(store, project)
    for i in range(6):
        await store.add(project.id, conversation.id, role="user" if i % 2 == 0 else "assistant",
                        content=str(i))
    seqs = [m.seq for m in await store.messages(project.id, conversation.id)]
    assert seqs == [1, 2, 3, 4, 5, 6]
    assert [m.seq for m in await store.messages(project.id, conversation.id, newest=2)] == [5, 6]
    assert [m.seq for m in await store.messages(project.id, conversation.id, after_seq=2, limit=2)] == [3, 4]
    assert [m.seq for m in await store.messages(project.id, conversation.id, after_seq=4, newest=5)] == [5, 6]
    with pytest.raises(InvalidInput):
        await store.messages(project.id, conversation.id, limit=2, newest=2)
    with pytest.raises(InvalidInput):
        await store.messages(project.id, conversation.id, newest=0)


async def test_count_by_role_and_kind(project: ProjectRecord, store: ConversationStore) -> None:
    """count: messages by role, keyframes apart (whatever their role), and the total of all."""
    conversation = await new(store, project)
    for role, kind in [("system", "message"), ("user", "message"), ("assistant", "message"),
                       ("user", "message"), ("system", "keyframe")]:
        await store.add(project.id, conversation.id, role=role, content="x", kind=kind)  # type: ignore[arg-type]
    assert await store.count(project.id, conversation.id) == {
        "user": 2, "assistant": 1, "system": 1, "keyframe": 1, "total": 5}


async def test_prune_keeps_the_newest_keyframes(project: ProjectRecord, store: ConversationStore) -> None:
    """prune_keyframes deletes all keyframes but the newest `keep`, never an ordinary message."""
    conversation = await new(store, project)
    for i in range(5):
        await store.add(project.id, conversation.id, role="user", content=f"m{i}")
        await store.add(project.id, conversation.id, role="system", content=f"k{i}", kind="keyframe")
    assert await store.prune_keyframes(project.id, conversation.id) == 3
    left = await store.messages(project.id, conversation.id)
    assert [m.content for m in left if m.kind == "keyframe"] == ["k3", "k4"]
    assert len([m for m in left if m.kind == "message"]) == 5
    assert await store.prune_keyframes(project.id, conversation.id) == 0
    assert await store.prune_keyframes(project.id, conversation.id, keep=0) == 2


async def test_set_important(project: ProjectRecord, store: ConversationStore) -> None:
    """set_important marks and unmarks one message; a message id of another conversation is
    RECORD_NOT_FOUND, an unknown conversation CONVERSATION_NOT_FOUND."""
    conversation = await new(store, project)
    other = await new(store, project)
    message = await store.add(project.id, conversation.id, role="assistant", content="记住这句")
    marked = await store.set_important(project.id, conversation.id, message.id, True)
    assert (marked.id, marked.important, marked.content) == (message.id, True, "记住这句")
    assert (await store.messages(project.id, conversation.id))[0].important
    assert not (await store.set_important(project.id, conversation.id, message.id, False)).important
    with pytest.raises(RecordNotFound):
        await store.set_important(project.id, other.id, message.id, True)
    with pytest.raises(ConversationNotFound):
        await store.set_important(project.id, "missing", message.id, True)


async def test_has_message_knows_the_conversations_own(project: ProjectRecord,
                                                       store: ConversationStore) -> None:
    """has_message: true for a message of the conversation, false for another's or none."""
    conversation = await new(store, project)
    other = await new(store, project)
    mine = await store.add(project.id, conversation.id, role="user", content="hello")
    theirs = await store.add(project.id, other.id, role="user", content="hi")
    assert await store.has_message(project.id, conversation.id, mine.id)
    assert not await store.has_message(project.id, conversation.id, theirs.id)
    assert not await store.has_message(project.id, conversation.id, theirs.id + 1000)


async def test_delete_removes_messages(project: ProjectRecord, database: Database,
                                       store: ConversationStore) -> None:
    """Deleting a conversation deletes its messages and no other conversation's."""
    doomed = await new(store, project)
    kept = await new(store, project)
    for conversation in (doomed, kept):
        await store.add(project.id, conversation.id, role="user", content="hi")
    await store.delete(project.id, doomed.id)
    with database.session() as session:
        left = session.exec(select(ConversationMessageRow.conversation_id)).all()
    assert left == [kept.id]


async def test_everything_survives_a_restart(project: ProjectRecord, tmp_path: Path) -> None:
    """Conversations, messages, flags and next_seq are read back the same after reopening the database."""
    database = open_test_database(tmp_path / "data")  # the same file as the fixture's
    try:
        store = ConversationStore(database)
        conversation = await new(store, project)
        first = await store.add(project.id, conversation.id, role="user", content="第一句")
        await store.add(project.id, conversation.id, role="assistant", content="k", kind="keyframe")
        await store.set_important(project.id, conversation.id, first.id, True)
        before = (await store.get(project.id, conversation.id),
                  await store.messages(project.id, conversation.id))
    finally:
        database.close()
    reopened = open_test_database(tmp_path / "data")
    try:
        store = ConversationStore(reopened)
        after = (await store.get(project.id, conversation.id),
                 await store.messages(project.id, conversation.id))
        assert after == before
        assert (await store.add(project.id, conversation.id, role="user", content="再来")).seq == 3
    finally:
        reopened.close()


async def test_invalid_inputs_are_refused(project: ProjectRecord, store: ConversationStore) -> None:
    """An unknown role or kind, an empty or too long template, or keep < 0 is INVALID_PARAMS."""
    conversation = await new(store, project)
    with pytest.raises(InvalidInput):
        await store.add(project.id, conversation.id, role="narrator", content="x")  # type: ignore[arg-type]
    with pytest.raises(InvalidInput):
        await store.add(project.id, conversation.id, role="user", content="x", kind="note")  # type: ignore[arg-type]
    for template in ("", "t" * 65):
        with pytest.raises(InvalidInput):
            await store.create(project.id, system_character_id=1, user_character_id=2, template=template,
                               options={})
    with pytest.raises(InvalidInput):
        await store.prune_keyframes(project.id, conversation.id, keep=-1)
