"""Stored character conversations and their messages (issue #14).

A message's ``seq`` is taken from its conversation's ``next_seq`` by the same
``UPDATE ... RETURNING`` that checks the message limit: the update takes the
database's write lock before anything is read, so concurrent adds queue on it
and never share a seq, and the limit cannot be overrun by a race. Seqs are
never reused, so a client's ``after_seq`` stays meaningful after a prune.

A conversation of another project is "not found", like every scoped record.
Reads are not kept in ``database.snapshots``: a conversation is read by the one
chat that writes it, right after it wrote.
"""

from __future__ import annotations

import asyncio
import builtins
import secrets
from typing import Any, Literal, get_args

import structlog
from sqlalchemy import delete, func, update
from sqlmodel import Session, col, select

from services.errors import ConversationFull, ConversationNotFound, RecordNotFound
from services.projects.inputs import invalid
from services.projects.records import Record, UtcDatetime
from services.projects.scope import require_project, table_of
from services.store.database import Database
from services.store.tables import ConversationMessageRow, ConversationRow, utcnow

Role = Literal["user", "assistant", "system"]
Kind = Literal["message", "keyframe"]
MAX_MESSAGES = 10_000
MAX_TEMPLATE = 64  # the column's length

_log = structlog.get_logger("characters")
_Message = ConversationMessageRow  # (short: the queries below name it often)


class Conversation(Record):
    id: str
    project_id: str
    system_character_id: int
    user_character_id: int
    template: str
    options: dict[str, Any]
    message_count: int  # messages stored now (pruned keyframes no longer count)
    next_seq: int
    created_at: UtcDatetime
    updated_at: UtcDatetime  # the last add, mark or prune


class StoredMessage(Record):
    id: int
    conversation_id: str
    seq: int
    role: Role
    kind: Kind
    content: str
    important: bool
    created_at: UtcDatetime


def _positive(name: str, value: int | None) -> None:
    if value is not None and value < 1:
        raise invalid(name, "must be at least 1")


class ConversationStore:
    """Create, read and delete a project's conversations; append, mark and prune their messages."""

    def __init__(self, database: Database, *, max_messages: int = MAX_MESSAGES) -> None:
        self._db = database
        self._max = max_messages

    async def create(self, project_id: str, *, system_character_id: int, user_character_id: int,
                     template: str, options: dict[str, Any]) -> Conversation:
        """A new empty conversation between two characters (whose existence the caller checks)."""
        if not 1 <= len(template) <= MAX_TEMPLATE:
            raise invalid("template", f"must be 1 to {MAX_TEMPLATE} characters")
        row = ConversationRow(id=secrets.token_hex(8), project_id=project_id,
                              system_character_id=system_character_id,
                              user_character_id=user_character_id, template=template,
                              options=dict(options))
        record = await asyncio.to_thread(self._create, row)
        _log.info("conversation.created", project_id=project_id, id=record.id, template=template)
        return record

    async def get(self, project_id: str, conversation_id: str) -> Conversation:
        return await asyncio.to_thread(self._get, project_id, conversation_id)

    async def locate(self, conversation_id: str) -> Conversation:
        """The conversation of this id, whichever project holds it (ids are random and unique)."""
        return await asyncio.to_thread(self._locate, conversation_id)

    async def list(self, project_id: str, *, system_character_id: int | None = None,
                   user_character_id: int | None = None, limit: int = 100) -> builtins.list[Conversation]:
        """The project's conversations (of these characters, if given), newest created first."""
        _positive("limit", limit)
        return await asyncio.to_thread(self._list, project_id, system_character_id,
                                       user_character_id, limit)

    async def delete(self, project_id: str, conversation_id: str) -> None:
        """Delete the conversation and all its messages, in one transaction."""
        await asyncio.to_thread(self._delete, project_id, conversation_id)
        _log.info("conversation.deleted", project_id=project_id, id=conversation_id)

    async def add(self, project_id: str, conversation_id: str, *, role: Role, content: str,
                  kind: Kind = "message", important: bool = False) -> StoredMessage:
        """Append a message at the conversation's next seq; ConversationFull at the limit."""
        if role not in get_args(Role):
            raise invalid("role", "must be one of " + ", ".join(get_args(Role)))
        if kind not in get_args(Kind):
            raise invalid("kind", "must be one of " + ", ".join(get_args(Kind)))
        record = await asyncio.to_thread(self._add, project_id, conversation_id, role, kind,
                                         content, important)
        _log.info("conversation.message_added", project_id=project_id, id=conversation_id,
                  seq=record.seq, role=role, kind=kind, chars=len(content))
        return record

    async def messages(self, project_id: str, conversation_id: str, *, after_seq: int = 0,
                       limit: int | None = None, newest: int | None = None) -> builtins.list[StoredMessage]:
        """Messages with seq > ``after_seq``, seq ascending: the first ``limit`` or the last ``newest``."""
        _positive("limit", limit)
        _positive("newest", newest)
        if limit is not None and newest is not None:
            raise invalid("newest", "cannot be combined with limit")
        return await asyncio.to_thread(self._messages, project_id, conversation_id, after_seq,
                                       limit, newest)

    async def count(self, project_id: str, conversation_id: str) -> dict[str, int]:
        """``user``, ``assistant``, ``system`` (messages by role; keyframes not included),
        ``keyframe`` and ``total``, so the first four add up to the last."""
        return await asyncio.to_thread(self._count, project_id, conversation_id)

    async def set_important(self, project_id: str, conversation_id: str, message_id: int,
                            important: bool) -> StoredMessage:
        return await asyncio.to_thread(self._set_important, project_id, conversation_id,
                                       message_id, important)

    async def prune_keyframes(self, project_id: str, conversation_id: str, keep: int = 2) -> int:
        """Delete the conversation's keyframes but the ``keep`` newest; how many were deleted."""
        if keep < 0:
            raise invalid("keep", "must be at least 0")
        pruned = await asyncio.to_thread(self._prune, project_id, conversation_id, keep)
        _log.info("conversation.keyframes_pruned", project_id=project_id, id=conversation_id,
                  pruned=pruned)
        return pruned

    async def has_message(self, project_id: str, conversation_id: str, message_id: int) -> bool:
        """Whether ``message_id`` is a message of the conversation (ConversationNotFound for none)."""
        return await asyncio.to_thread(self._has_message, project_id, conversation_id, message_id)

    async def pair(self, project_id: str, conversation_id: str) -> tuple[int, int]:
        """(system character id, user character id) of the conversation."""
        record = await self.get(project_id, conversation_id)
        return record.system_character_id, record.user_character_id

    # --- in a worker thread -------------------------------------------------------------------

    def _create(self, row: ConversationRow) -> Conversation:
        with self._db.session() as session:
            require_project(session, row.project_id)
            session.add(row)
            session.flush()
            record = _conversation(row, 0)
            session.commit()
            return record

    def _get(self, project_id: str, conversation_id: str) -> Conversation:
        with self._db.session() as session:
            row = _require(session, project_id, conversation_id)
            counts = _message_counts(session, [row.id])
            return _conversation(row, counts.get(row.id, 0))

    def _locate(self, conversation_id: str) -> Conversation:
        with self._db.session() as session:
            row = session.get(ConversationRow, conversation_id)
            if row is None:
                raise ConversationNotFound()
            return _conversation(row, _message_counts(session, [row.id]).get(row.id, 0))

    def _list(self, project_id: str, system_id: int | None, user_id: int | None,
              limit: int) -> builtins.list[Conversation]:
        with self._db.session() as session:
            require_project(session, project_id)
            query = select(ConversationRow).where(ConversationRow.project_id == project_id)
            if system_id is not None:
                query = query.where(ConversationRow.system_character_id == system_id)
            if user_id is not None:
                query = query.where(ConversationRow.user_character_id == user_id)
            rows = session.exec(query.order_by(col(ConversationRow.created_at).desc()).limit(limit)).all()
            counts = _message_counts(session, [row.id for row in rows])
            return [_conversation(row, counts.get(row.id, 0)) for row in rows]

    def _delete(self, project_id: str, conversation_id: str) -> None:
        with self._db.session() as session:
            # Messages first: they reference the conversation (foreign keys are on).
            session.exec(delete(table_of(_Message)).where(
                col(_Message.conversation_id) == conversation_id, col(_Message.project_id) == project_id))
            gone = session.exec(delete(table_of(ConversationRow)).where(
                col(ConversationRow.id) == conversation_id, col(ConversationRow.project_id) == project_id))
            if gone.rowcount == 0:
                raise ConversationNotFound()  # closing the session rolls the message delete back
            session.commit()

    def _add(self, project_id: str, conversation_id: str, role: str, kind: str, content: str,
             important: bool) -> StoredMessage:
        conversation = table_of(ConversationRow)
        stored = (select(func.count()).select_from(table_of(_Message))
                  .where(col(_Message.conversation_id) == conversation_id).scalar_subquery())
        claim = (update(conversation)
                 .where(conversation.c.id == conversation_id, conversation.c.project_id == project_id,
                        stored < self._max)
                 .values(next_seq=conversation.c.next_seq + 1, updated_at=utcnow())
                 .returning(conversation.c.next_seq))
        with self._db.session() as session:
            claimed = session.exec(claim).scalar_one_or_none()
            if claimed is None:
                _require(session, project_id, conversation_id)
                raise ConversationFull(limit=self._max)
            row = _Message(conversation_id=conversation_id, project_id=project_id, seq=claimed - 1,
                           role=role, kind=kind, content=content, important=important)
            session.add(row)
            session.flush()
            record = StoredMessage.model_validate(row)
            session.commit()
            return record

    def _has_message(self, project_id: str, conversation_id: str, message_id: int) -> bool:
        with self._db.session() as session:
            _require(session, project_id, conversation_id)
            row = session.get(_Message, message_id)
            return row is not None and row.conversation_id == conversation_id

    def _messages(self, project_id: str, conversation_id: str, after_seq: int, limit: int | None,
                  newest: int | None) -> builtins.list[StoredMessage]:
        with self._db.session() as session:
            _require(session, project_id, conversation_id)
            query = select(_Message).where(_Message.conversation_id == conversation_id,
                                           _Message.seq > after_seq)
            if newest is not None:
                rows = session.exec(query.order_by(col(_Message.seq).desc()).limit(newest)).all()
                return [StoredMessage.model_validate(row) for row in reversed(rows)]
            rows = session.exec(query.order_by(col(_Message.seq)).limit(limit)).all()
            return [StoredMessage.model_validate(row) for row in rows]

    def _count(self, project_id: str, conversation_id: str) -> dict[str, int]:
        with self._db.session() as session:
            _require(session, project_id, conversation_id)
            groups = session.exec(select(_Message.role, _Message.kind, func.count())
                                  .where(_Message.conversation_id == conversation_id)
                                  .group_by(col(_Message.role), col(_Message.kind))).all()
        counts = dict.fromkeys((*get_args(Role), "keyframe", "total"), 0)
        for role, kind, n in groups:
            counts["keyframe" if kind == "keyframe" else role] += n
            counts["total"] += n
        return counts

    def _set_important(self, project_id: str, conversation_id: str, message_id: int,
                       important: bool) -> StoredMessage:
        with self._db.session() as session:
            _touch(session, project_id, conversation_id)
            marked = session.exec(update(table_of(_Message))
                                  .where(col(_Message.id) == message_id,
                                         col(_Message.conversation_id) == conversation_id)
                                  .values(important=important)).rowcount
            if marked == 0:
                raise RecordNotFound()
            row = session.get(_Message, message_id, populate_existing=True)
            record = StoredMessage.model_validate(row)
            session.commit()
            return record

    def _prune(self, project_id: str, conversation_id: str, keep: int) -> int:
        keyframes = (col(_Message.conversation_id) == conversation_id, col(_Message.kind) == "keyframe")
        kept = select(_Message.seq).where(*keyframes).order_by(col(_Message.seq).desc()).limit(keep)
        with self._db.session() as session:
            _touch(session, project_id, conversation_id)  # first: it takes the write lock
            pruned = session.exec(delete(table_of(_Message))
                                  .where(*keyframes, col(_Message.seq).not_in(kept))).rowcount
            if pruned:
                session.commit()  # else the rollback also leaves updated_at as it was
            return int(pruned)


def _conversation(row: ConversationRow, message_count: int) -> Conversation:
    # By attribute, like Record.model_validate: model_dump skips expired or unloaded attributes.
    values = {name: getattr(row, name) for name in Conversation.model_fields if name != "message_count"}
    return Conversation.model_validate({**values, "message_count": message_count})


def _require(session: Session, project_id: str, conversation_id: str) -> ConversationRow:
    row = session.get(ConversationRow, conversation_id)
    if row is None or row.project_id != project_id:
        raise ConversationNotFound()
    return row


def _touch(session: Session, project_id: str, conversation_id: str) -> None:
    """Move ``updated_at`` on, or ConversationNotFound; the write also serialises the writers."""
    table = table_of(ConversationRow)
    touched = session.exec(update(table).where(table.c.id == conversation_id,
                                               table.c.project_id == project_id)
                           .values(updated_at=utcnow())).rowcount
    if touched == 0:
        raise ConversationNotFound()


def _message_counts(session: Session, conversation_ids: list[str]) -> dict[str, int]:
    if not conversation_ids:
        return {}
    rows = session.exec(select(_Message.conversation_id, func.count())
                        .where(col(_Message.conversation_id).in_(conversation_ids))
                        .group_by(col(_Message.conversation_id))).all()
    return dict(rows)
