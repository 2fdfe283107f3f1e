"""Every SQL table of Strata. All domain rows are scoped by ``project_id``.

Rows that clients update concurrently carry an integer ``version`` for
optimistic locking: an update names the version it read and fails if the row
has moved on.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import JSON, Column, Index
from sqlmodel import Field, SQLModel


def utcnow() -> datetime:
    return datetime.now(UTC)


class ProjectRow(SQLModel, table=True):
    __tablename__ = "project"
    id: str = Field(primary_key=True, max_length=32)
    path: str = Field(unique=True, index=True)
    name: str = Field(max_length=200)
    created_at: datetime = Field(default_factory=utcnow)


class ProjectSettingsRow(SQLModel, table=True):
    __tablename__ = "project_settings"
    project_id: str = Field(primary_key=True, foreign_key="project.id", max_length=32)
    language: str = Field(default="zh", max_length=8)
    narrative_person: str = Field(default="", max_length=200)
    style_notes: str = Field(default="")
    model: str = Field(default="gpt-4", max_length=100)
    tokenizer_path: str | None = Field(default=None)
    skill_prompts: dict[str, Any] = Field(default_factory=dict, sa_column=Column(JSON, nullable=False))
    # The reading companion's page size (schema 8); the default is reading's DEFAULT_PAGE_TOKENS.
    reading_page_tokens: int = Field(default=400, sa_column_kwargs={"server_default": "400"})
    version: int = Field(default=1)


class ConstraintRow(SQLModel, table=True):
    __tablename__ = "constraint_rule"
    id: int | None = Field(default=None, primary_key=True)
    project_id: str = Field(foreign_key="project.id", index=True, max_length=32)
    kind: str = Field(max_length=16)  # narrative | character | world | style | plot
    text: str
    source: str = Field(default="user", max_length=8)  # user | kg
    priority: int = Field(default=0)
    version: int = Field(default=1)
    created_at: datetime = Field(default_factory=utcnow)
    updated_at: datetime = Field(default_factory=utcnow)


class KgEntityRow(SQLModel, table=True):
    __tablename__ = "kg_entity"
    id: int | None = Field(default=None, primary_key=True)
    project_id: str = Field(foreign_key="project.id", index=True, max_length=32)
    kind: str = Field(max_length=16)  # character | location | object | group | concept
    name: str = Field(max_length=200)
    aliases: list[str] = Field(default_factory=list, sa_column=Column(JSON, nullable=False))
    description: str = Field(default="")
    version: int = Field(default=1)
    updated_at: datetime = Field(default_factory=utcnow)


class SemanticRuleRow(SQLModel, table=True):
    __tablename__ = "semantic_rule"
    id: int | None = Field(default=None, primary_key=True)
    project_id: str = Field(foreign_key="project.id", index=True, max_length=32)
    text: str
    category: str = Field(default="", max_length=50)
    confidence: float = Field(default=0.5)
    confirmed: bool = Field(default=False)
    version: int = Field(default=1)
    updated_at: datetime = Field(default_factory=utcnow)


class EpisodicMemoryRow(SQLModel, table=True):
    __tablename__ = "episodic_memory"
    id: int | None = Field(default=None, primary_key=True)
    project_id: str = Field(foreign_key="project.id", index=True, max_length=32)
    document_id: str | None = Field(default=None)
    skill_id: str | None = Field(default=None, max_length=50)
    instruction: str = Field(default="")
    output: str
    created_at: datetime = Field(default_factory=utcnow, index=True)


class BudgetProfileRow(SQLModel, table=True):
    __tablename__ = "budget_profile"
    project_id: str = Field(primary_key=True, foreign_key="project.id", max_length=32)
    version: int = Field(default=1)
    context_window: int = Field(default=8192)
    output_reserve: int = Field(default=1024)
    rules_ratio: float = Field(default=0.15)
    settings_ratio: float = Field(default=0.10)
    retrieved_ratio: float = Field(default=0.25)
    immediate_ratio: float = Field(default=0.50)
    rules_min: int = Field(default=500)
    settings_min: int = Field(default=200)
    retrieved_min: int = Field(default=0)
    immediate_min: int = Field(default=2000)


class ProfileRow(SQLModel, table=True):
    """A project's own assembly profile: its ``strata.profile/1`` document as compact JSON text.

    Kept as the text the client sent (re-encoded compactly), so ``profile:get`` gives back the
    same document and its size is what the 256 KiB limit counts.
    """

    __tablename__ = "profile"
    project_id: str = Field(primary_key=True, foreign_key="project.id", max_length=32)
    name: str = Field(primary_key=True, max_length=64)
    document: str
    version: int = Field(default=1)
    created_at: datetime = Field(default_factory=utcnow)
    updated_at: datetime = Field(default_factory=utcnow)


class SegmentRow(SQLModel, table=True):
    """A stored prompt segment (the game-master profile): its scope, the thing it belongs to
    (``ref_id``, such as ``world.mystika``; none for some core segments), its text and metadata.

    Ids are never reused (SQLite AUTOINCREMENT), so an exported file that names a deleted
    segment's id cannot update another segment by mistake.
    """

    __tablename__ = "segment"
    __table_args__ = (Index("ix_segment_project_scope_ref", "project_id", "scope", "ref_id"),
                      {"sqlite_autoincrement": True})
    id: int | None = Field(default=None, primary_key=True)
    project_id: str = Field(foreign_key="project.id", max_length=32)
    scope: str = Field(max_length=16)  # core | ruleset | world | entry | entry_start | npc | ...
    ref_id: str | None = Field(default=None, max_length=200)
    content: str
    tier: int = Field(default=0)
    type: str | None = Field(default=None, max_length=64)
    priority: int = Field(default=0)
    active: bool = Field(default=True)
    locale: str | None = Field(default=None, max_length=35)
    version: int = Field(default=1)
    created_at: datetime = Field(default_factory=utcnow)
    updated_at: datetime = Field(default_factory=utcnow)


# Retrieval: derived from the project's files, rebuilt from them whenever missing or stale.

class RetrievalStateRow(SQLModel, table=True):
    """How a project's index was built: a different layout, embedder or tokenizer means rebuild."""

    __tablename__ = "retrieval_state"
    project_id: str = Field(primary_key=True, max_length=32)
    layout: int
    embedding: str = Field(max_length=300)
    tokenizer: str = Field(max_length=100)


class RetrievalDocumentRow(SQLModel, table=True):
    """A file as last indexed: an unchanged size and mtime means nothing to do."""

    __tablename__ = "retrieval_document"
    project_id: str = Field(primary_key=True, max_length=32)
    document_id: str = Field(primary_key=True)
    size: int
    mtime_ns: int
    chunks: int


class RetrievalChunkRow(SQLModel, table=True):
    """One chunk of a document: its place, content hash, exact token count and search terms."""

    __tablename__ = "retrieval_chunk"
    id: int | None = Field(default=None, primary_key=True)
    project_id: str = Field(index=True, max_length=32)
    document_id: str
    ordinal: int
    start: int
    end: int
    content_hash: str = Field(max_length=64)
    tokens: int
    text: str
    terms: str  # space-separated search terms, so the lexical index rebuilds without re-splitting


class ConversationRow(SQLModel, table=True):
    """A character chat: two of the project's kg entities talking, on one template (a profile).

    ``options`` holds the conversation's settings (rating, scene, episodes, keyframeEvery, ...);
    ``next_seq`` numbers its messages, so positions never repeat after a deletion.
    """

    __tablename__ = "conversation"
    id: str = Field(primary_key=True, max_length=32)
    project_id: str = Field(foreign_key="project.id", index=True, max_length=32)
    system_character_id: int
    user_character_id: int
    template: str = Field(max_length=64)
    options: dict[str, Any] = Field(default_factory=dict, sa_column=Column(JSON, nullable=False))
    next_seq: int = Field(default=1)
    created_at: datetime = Field(default_factory=utcnow)
    updated_at: datetime = Field(default_factory=utcnow)


class ConversationMessageRow(SQLModel, table=True):
    """One message of a conversation, as sent (``content`` raw: think blocks, reminders and
    keyframe blocks included); ``kind`` is ``message`` or ``keyframe`` (a summary the server
    wrote into the conversation)."""

    __tablename__ = "conversation_message"
    __table_args__ = (Index("ix_conversation_message_seq", "conversation_id", "seq", unique=True),)
    id: int | None = Field(default=None, primary_key=True)
    conversation_id: str = Field(foreign_key="conversation.id", max_length=32)
    project_id: str = Field(foreign_key="project.id", index=True, max_length=32)
    seq: int
    role: str = Field(max_length=16)  # user | assistant | system
    kind: str = Field(default="message", max_length=16)  # message | keyframe
    content: str
    important: bool = Field(default=False)
    created_at: datetime = Field(default_factory=utcnow)


class TypedMemoryRow(SQLModel, table=True):
    """A character memory (seed 003): typed, weighted and scoped to a character pair, optionally
    narrowed to one conversation or one exchange (``scope``; ``conversation_id`` and
    ``message_id`` say where it came from whatever its scope). ``pair`` is the two
    characters' ids in ascending order (``"3:7"``), whichever of them speaks as the system."""

    __tablename__ = "typed_memory"
    __table_args__ = (Index("ix_typed_memory_project_pair", "project_id", "pair"),
                      {"sqlite_autoincrement": True})
    id: int | None = Field(default=None, primary_key=True)
    project_id: str = Field(foreign_key="project.id", max_length=32)
    memory_type: str = Field(max_length=16)  # NOTE | FACT | EVENT | RELATIONSHIP | ...
    importance: int = Field(default=5)
    summary: str
    content: str = Field(default="")
    source: str = Field(default="user", max_length=256)
    system_character_id: int
    user_character_id: int
    pair: str = Field(max_length=64)
    scope: str = Field(default="pair", max_length=16)  # pair | conversation | exchange
    character_id: int | None = Field(default=None)  # whom it is about, when one of the two
    conversation_id: str | None = Field(default=None, index=True, max_length=32)
    message_id: int | None = Field(default=None)
    created_at: datetime = Field(default_factory=utcnow, index=True)


class ReadingSummaryRow(SQLModel, table=True):
    """A summary of a unit of a project's book (seed 000): a paragraph (``p12.3``), a page
    (``12``) or a chapter (``3``), as its canonical JSON rendering, with the content hash of the
    unit it was made for (it is current while the unit's hash is the same)."""

    __tablename__ = "reading_summary"
    project_id: str = Field(primary_key=True, foreign_key="project.id", max_length=32)
    level: str = Field(primary_key=True, max_length=16)  # paragraph | page | chapter
    unit: str = Field(primary_key=True, max_length=32)
    unit_hash: str = Field(max_length=64)
    summary: str
    tokens: int
    source: str = Field(default="client", max_length=16)  # client (reading:summaries:put) | seam
    updated_at: datetime = Field(default_factory=utcnow)
