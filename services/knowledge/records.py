"""Constraints and knowledge-graph entities as services return and accept them.

The Annotated types carry the bounds once; the wire models in
``ipc/channels/knowledge.py`` reuse them so schema and service agree.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import AfterValidator, Field, StringConstraints

from services.projects.records import Record, UtcDatetime

MAX_CONSTRAINTS = 500  # the spec's cap on Rules-layer constraint entries per project
MAX_CONSTRAINT_TEXT = 2000
MAX_ENTITY_NAME = 200
MAX_ALIASES = 50
MAX_DESCRIPTION = 4000

ConstraintKind = Literal["narrative", "character", "world", "style", "plot"]
ConstraintSource = Literal["user", "kg"]
EntityKind = Literal["character", "location", "object", "group", "concept"]

ConstraintText = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1,
                                                  max_length=MAX_CONSTRAINT_TEXT)]
Priority = Annotated[int, Field(ge=-1_000_000, le=1_000_000)]  # higher = more important
EntityName = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1,
                                              max_length=MAX_ENTITY_NAME)]
Description = Annotated[str, StringConstraints(max_length=MAX_DESCRIPTION)]


def distinct(values: list[str]) -> list[str]:
    """Each alias once, in the order given."""
    return list(dict.fromkeys(values))


Aliases = Annotated[list[EntityName], Field(max_length=MAX_ALIASES), AfterValidator(distinct)]


class ConstraintRecord(Record):
    id: int
    project_id: str
    kind: ConstraintKind
    text: str
    source: ConstraintSource
    priority: int
    version: int
    created_at: UtcDatetime
    updated_at: UtcDatetime


class KgEntityRecord(Record):
    id: int
    project_id: str
    kind: EntityKind
    name: str
    aliases: list[str]
    description: str
    version: int
    updated_at: UtcDatetime
