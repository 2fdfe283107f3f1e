"""What the project services return: frozen pydantic records, never ORM rows.

Records are read from rows by attribute, so a row's session can close before
the record is used. SQLite forgets time zones, so every time is read back as
UTC.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, computed_field


def as_utc(value: datetime) -> datetime:
    """``value`` as an aware UTC time; naive times are stored UTC, so say so."""
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


UtcDatetime = Annotated[datetime, AfterValidator(as_utc)]
Language = Literal["zh", "en"]


class Record(BaseModel):
    """Base of every record a service returns."""

    model_config = ConfigDict(frozen=True, from_attributes=True)


class ProjectRecord(Record):
    id: str
    name: str
    path: str
    created_at: UtcDatetime

    @computed_field  # type: ignore[prop-decorator]
    @property
    def project_id(self) -> str:
        """The id again, so every record a client sees names its project the same way."""
        return self.id


class SettingsRecord(Record):
    project_id: str
    language: Language
    narrative_person: str
    style_notes: str
    model: str
    tokenizer_encoding: str  # follows ``model``; see settings.encoding_for_model
    tokenizer_path: str | None
    skill_prompts: dict[str, str]
    reading_page_tokens: int  # the reading companion's page size where a chapter has no page markers
    version: int


class DocumentInfo(Record):
    document_id: str
    size: int  # bytes on disk
    modified_at: UtcDatetime


class DocumentListing(Record):
    documents: list[DocumentInfo]
    truncated: bool  # more documents exist than a listing returns
