"""Per-project writing settings with an optimistic lock.

An update names the version it read; the compare-and-set is one
``UPDATE ... WHERE version = ?`` so of two concurrent updates from the same
version exactly one wins, and the other learns the version to re-read.
"""

from __future__ import annotations

import os
import stat
from typing import Annotated, Any

from pydantic import Field, StringConstraints
from sqlmodel import Session

from services.errors import ProjectNotFound, RecordVersionConflict
from services.projects.inputs import Input, SkillId, invalid
from services.projects.records import Language, SettingsRecord
from services.projects.scope import require_project, table_of, update_where
from services.store.tables import ProjectSettingsRow
from services.tokenizer.registry import encoding_for_model

DEFAULT_ENCODING = "cl100k_base"  # for models tiktoken does not know (an estimate, not exact)
MAX_STYLE_NOTES = 4000
MAX_SKILL_PROMPT = 20_000
MAX_SKILL_PROMPTS = 100
MAX_PATH = 4096
# The reading companion's page size without page markers (docs/reading.md), in the project's tokens.
DEFAULT_READING_PAGE_TOKENS = 400
MIN_READING_PAGE_TOKENS = 50
MAX_READING_PAGE_TOKENS = 4000

NarrativePerson = Annotated[str, StringConstraints(max_length=200)]
StyleNotes = Annotated[str, StringConstraints(max_length=MAX_STYLE_NOTES)]
ModelName = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=100)]
TokenizerPath = Annotated[str, StringConstraints(min_length=1, max_length=MAX_PATH)]
ReadingPageTokens = Annotated[int, Field(ge=MIN_READING_PAGE_TOKENS, le=MAX_READING_PAGE_TOKENS)]
SkillPrompts = Annotated[
    dict[SkillId, Annotated[str, StringConstraints(max_length=MAX_SKILL_PROMPT)]],
    Field(max_length=MAX_SKILL_PROMPTS),
]


class SettingsPatch(Input):
    """The settings fields an update may change; a field left out (or None) keeps its value."""

    language: Language | None = None
    narrative_person: NarrativePerson | None = None
    style_notes: StyleNotes | None = None
    model: ModelName | None = None
    # Given as None it is cleared: the engine then counts with the tokenizer ``model`` implies.
    tokenizer_path: TokenizerPath | None = None
    skill_prompts: SkillPrompts | None = None  # replaces the whole mapping: skill id -> prompt
    reading_page_tokens: ReadingPageTokens | None = None  # a reading page without markers

    def changes(self) -> dict[str, Any]:
        """Column values to set: the fields given, where None means "keep" except to clear the path."""
        given = self.model_dump(exclude_unset=True)
        return {name: value for name, value in given.items()
                if value is not None or name == "tokenizer_path"}


def settings_record(row: ProjectSettingsRow) -> SettingsRecord:
    return SettingsRecord.model_validate(
        {**row.model_dump(), "tokenizer_encoding": encoding_for_model(row.model, DEFAULT_ENCODING)})


def load_settings(session: Session, project_id: str) -> SettingsRecord:
    """The project's settings, or ProjectNotFound."""
    require_project(session, project_id)
    row = session.get(ProjectSettingsRow, project_id, populate_existing=True)
    if row is None:  # open() creates it with the project, in one transaction
        raise ProjectNotFound()
    return settings_record(row)


def check_tokenizer_file(path: str) -> None:
    """A tokenizer path must be an absolute path of a readable ``.json`` file (not echoed back)."""
    problem = "must be the absolute path of a readable tokenizer .json file"
    if not os.path.isabs(path) or not path.endswith(".json"):
        raise invalid("tokenizer_path", problem)
    try:
        info = os.stat(path)
    except (OSError, ValueError):
        raise invalid("tokenizer_path", problem) from None
    if not stat.S_ISREG(info.st_mode) or not os.access(path, os.R_OK):
        raise invalid("tokenizer_path", problem)


def compare_and_set(session: Session, project_id: str, version: int,
                    patch: SettingsPatch) -> SettingsRecord:
    """Apply ``patch`` if the settings are still at ``version``; the new settings."""
    require_project(session, project_id)
    changes = patch.changes()
    if changes.get("tokenizer_path") is not None:
        check_tokenizer_file(changes["tokenizer_path"])
    table = table_of(ProjectSettingsRow)
    if update_where(session, ProjectSettingsRow, changes, table.c.project_id == project_id,
                    table.c.version == version) is None:
        raise RecordVersionConflict(currentVersion=load_settings(session, project_id).version)
    record = load_settings(session, project_id)
    session.commit()
    return record
