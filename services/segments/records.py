"""Prompt segments as services return and accept them, and as a writer's export file holds them.

A segment is a piece of a game master's prompt stored for one project: its
``scope`` (which part of the prompt, in the fixed order of :data:`SCOPES`),
the thing it belongs to (``ref_id``: a ruleset, world, entry point or NPC),
its ``content`` and metadata (``tier``, ``type``, ``priority``), whether it is
``active`` and the ``locale`` it is written for.

:class:`SegmentRecord` is what the service returns (flat, as stored);
:class:`SegmentDocument` is the JSON object the wire and the export file use
(camelCase, metadata nested); :class:`SegmentInput` is what an upsert or an
import entry may say. The Annotated types carry the bounds once, so the wire
schema and the service agree.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal, Self, get_args

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    Strict,
    StringConstraints,
    WithJsonSchema,
)
from pydantic.alias_generators import to_camel

from services.projects.records import Record, UtcDatetime

Scope = Literal["core", "ruleset", "world", "entry", "entry_start", "npc", "game_state", "player",
                "rng", "input"]
SCOPES: tuple[Scope, ...] = get_args(Scope)  # the order a game master's prompt is built in
SCOPE_ORDER: dict[str, int] = {scope: index for index, scope in enumerate(SCOPES)}

MAX_SEGMENTS = 10_000  # per project
MAX_CONTENT_BYTES = 64 * 1024  # UTF-8
MAX_REF_ID = 200
MAX_TYPE = 64
MAX_LOCALE = 35
MAX_TIER = 1_000_000
MAX_PRIORITY = 1_000_000
PRIORITY_NAMES: dict[str, int] = {"low": 0, "medium": 1, "high": 2}


def unicode_text(value: str) -> str:
    """``value`` if it can be stored as UTF-8 (a JSON string may hold a lone surrogate)."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError("must be valid Unicode text (no lone surrogates)") from None
    return value


def _content(value: str) -> str:
    if not value.strip():
        raise ValueError("must not be empty")
    if len(unicode_text(value).encode("utf-8")) > MAX_CONTENT_BYTES:
        raise ValueError(f"must be at most {MAX_CONTENT_BYTES // 1024} KiB of UTF-8")
    return value


def _priority(value: Any) -> Any:
    """``low``, ``medium`` and ``high`` as 0, 1 and 2; anything else as it is."""
    return PRIORITY_NAMES.get(value, value) if isinstance(value, str) else value


Content = Annotated[str, StringConstraints(min_length=1, max_length=MAX_CONTENT_BYTES),
                    AfterValidator(_content)]
RefId = Annotated[str, StringConstraints(pattern=r"^\S+$", max_length=MAX_REF_ID)]
SegmentType = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=MAX_TYPE),
                        AfterValidator(unicode_text)]
Locale = Annotated[str, StringConstraints(pattern=r"^[A-Za-z]{2,8}(-[A-Za-z0-9]{1,8})*$",
                                          max_length=MAX_LOCALE)]
Tier = Annotated[int, Strict(), Field(ge=0, le=MAX_TIER)]
Priority = Annotated[int, Strict(), Field(ge=-MAX_PRIORITY, le=MAX_PRIORITY)]
PriorityInput = Annotated[
    int, BeforeValidator(_priority), Strict(), Field(ge=-MAX_PRIORITY, le=MAX_PRIORITY),
    WithJsonSchema({"anyOf": [{"type": "integer", "minimum": -MAX_PRIORITY, "maximum": MAX_PRIORITY},
                              {"enum": list(PRIORITY_NAMES)}],
                    "description": "higher is more important; low, medium and high are 0, 1 and 2"}),
]
SegmentId = Annotated[int, Strict(), Field(ge=1, le=2**63 - 1)]
Active = Annotated[bool, Strict()]


class SegmentRecord(Record):
    """One stored segment, as the service returns it."""

    id: int
    project_id: str
    scope: Scope
    ref_id: str | None
    content: str
    tier: int
    type: str | None
    priority: int
    active: bool
    locale: str | None
    version: int
    created_at: UtcDatetime
    updated_at: UtcDatetime


class CamelModel(BaseModel):
    """camelCase names (snake_case accepted too), unknown fields refused, frozen."""

    model_config = ConfigDict(frozen=True, alias_generator=to_camel, populate_by_name=True,
                              extra="forbid")


class MetadataDocument(CamelModel):
    tier: int
    type: str | None
    priority: int


class SegmentDocument(CamelModel):
    """A segment as a JSON object: on the wire and in an export file."""

    id: int
    scope: Scope
    ref_id: str | None
    content: str
    metadata: MetadataDocument
    active: bool
    locale: str | None
    version: int
    created_at: UtcDatetime
    updated_at: UtcDatetime

    @classmethod
    def of(cls, record: SegmentRecord) -> Self:
        return cls(id=record.id, scope=record.scope, ref_id=record.ref_id, content=record.content,
                   metadata=MetadataDocument(tier=record.tier, type=record.type, priority=record.priority),
                   active=record.active, locale=record.locale, version=record.version,
                   created_at=record.created_at, updated_at=record.updated_at)


def document(record: SegmentRecord) -> dict[str, Any]:
    """The segment as a JSON-ready object (camelCase, metadata nested, times in ISO 8601)."""
    return SegmentDocument.of(record).model_dump(mode="json", by_alias=True)


class MetadataInput(CamelModel):
    tier: Tier = 0
    type: SegmentType | None = None
    priority: PriorityInput = 0


class SegmentInput(CamelModel):
    """What ``segments:upsert`` says. Without ``id`` it creates a segment: ``scope`` and
    ``content`` are needed, and ``refId`` for every scope but ``core``. With ``id`` it changes
    only the fields (and metadata keys) given; a ``null`` clears ``refId``, ``type`` or ``locale``."""

    id: SegmentId | None = Field(default=None, description="the segment to update; absent: create")
    scope: Scope | None = None
    ref_id: RefId | None = None
    content: Content | None = None
    metadata: MetadataInput = MetadataInput()
    active: Active = True
    locale: Locale | None = None


class ImportEntry(CamelModel):
    """One entry of ``segments:import``: a whole segment, as ``segments:export`` writes it.

    With the ``id`` of a segment of the project it replaces that segment; otherwise it is
    created. ``version`` and the times are accepted (an export has them) and ignored.
    """

    id: SegmentId | None = Field(default=None, description="a segment of the project to replace")
    scope: Scope
    ref_id: RefId | None = None
    content: Content
    metadata: MetadataInput = MetadataInput()
    active: Active = True
    locale: Locale | None = None
    version: Annotated[int, Strict(), Field(ge=1)] | None = None
    created_at: datetime | None = None
    updated_at: datetime | None = None

    def values(self) -> dict[str, Any]:
        """The stored fields this entry sets (every one: an import replaces)."""
        return {"scope": self.scope, "ref_id": self.ref_id, "content": self.content,
                "tier": self.metadata.tier, "type": self.metadata.type,
                "priority": self.metadata.priority, "active": self.active, "locale": self.locale}
