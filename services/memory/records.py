"""Semantic rules (learned preferences) and episodes (past interactions) as services see them."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field, StringConstraints

from services.projects.records import Record, UtcDatetime

MAX_RULE_TEXT = 2000
MAX_CATEGORY = 50
MAX_INSTRUCTION = 10_000
MAX_OUTPUT = 200_000
MAX_EPISODES_LISTED = 200
DEFAULT_EPISODES_LISTED = 20

RuleText = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1,
                                            max_length=MAX_RULE_TEXT)]
Category = Annotated[str, StringConstraints(strip_whitespace=True, max_length=MAX_CATEGORY)]
Confidence = Annotated[float, Field(ge=0.0, le=1.0, allow_inf_nan=False)]
Instruction = Annotated[str, StringConstraints(max_length=MAX_INSTRUCTION)]
Output = Annotated[str, StringConstraints(min_length=1, max_length=MAX_OUTPUT)]
EpisodeLimit = Annotated[int, Field(ge=1, le=MAX_EPISODES_LISTED)]


class SemanticRuleRecord(Record):
    id: int
    project_id: str
    text: str
    category: str
    confidence: float
    confirmed: bool
    version: int
    updated_at: UtcDatetime


class EpisodeRecord(Record):
    id: int
    project_id: str
    document_id: str | None
    skill_id: str | None
    instruction: str
    output: str
    created_at: UtcDatetime
