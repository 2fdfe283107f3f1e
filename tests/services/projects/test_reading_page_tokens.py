"""The project setting ``readingPageTokens``: its default, its bounds, and the schema step that adds it."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import inspect, text

from services.errors import InvalidInput
from services.projects import ProjectRecord, ProjectService
from services.projects.settings import DEFAULT_READING_PAGE_TOKENS, SettingsPatch
from services.reading.layout import DEFAULT_PAGE_TOKENS
from services.store import Database
from services.store.database import open_database
from services.store.precheck import SCHEMA_VERSION
from tests.support.projects import make_folder, open_project


def test_the_default_is_the_layouts() -> None:
    """A project's default page size is the reading layout's (400 tokens)."""
    assert DEFAULT_READING_PAGE_TOKENS == DEFAULT_PAGE_TOKENS == 400


async def test_a_new_project_reads_400_and_an_update_changes_it(database: Database,
                                                                 project: ProjectRecord) -> None:
    """New settings hold 400; an update sets the size, bumps the version and leaves the rest."""
    service = ProjectService(database)
    settings = await service.get_settings(project.id)
    assert settings.reading_page_tokens == 400
    updated = await service.update_settings(project.id, settings.version, reading_page_tokens=120)
    assert (updated.reading_page_tokens, updated.version, updated.language) == (
        120, settings.version + 1, settings.language)
    assert (await service.get_settings(project.id)).reading_page_tokens == 120
    kept = await service.update_settings(project.id, updated.version, style_notes="short")
    assert kept.reading_page_tokens == 120


@pytest.mark.parametrize("size", [49, 4001, 0, -400, "400", 400.5, True])
def test_sizes_outside_50_to_4000_or_not_integers_are_refused(size: object) -> None:
    """The size is an integer of 50..4000; anything else is refused, never coerced."""
    with pytest.raises(ValueError, match="reading_page_tokens"):
        SettingsPatch.model_validate({"reading_page_tokens": size}, strict=True)


async def test_a_refused_size_leaves_the_settings_as_they_were(database: Database,
                                                               project: ProjectRecord) -> None:
    """An update with a size out of bounds is INVALID_INPUT naming readingPageTokens; nothing changes."""
    service = ProjectService(database)
    with pytest.raises(InvalidInput) as raised:
        await service.update_settings(project.id, 1, reading_page_tokens=10)
    assert raised.value.fields["errors"][0]["loc"] == ["readingPageTokens"]
    assert (await service.get_settings(project.id)).version == 1


async def test_a_version_7_database_gains_the_setting_at_its_default(tmp_path: Path) -> None:
    """Opening a database of schema 7 (settings without the column) adds it: existing projects read
    400 and keep their other settings."""
    url = f"sqlite:///{tmp_path / 'strata.db'}"
    first = open_database(url)
    project = await open_project(first, make_folder(tmp_path / "novel"))
    await ProjectService(first).update_settings(project.id, 1, language="en")
    with first.engine.begin() as conn:
        conn.execute(text("ALTER TABLE project_settings DROP COLUMN reading_page_tokens"))
        conn.execute(text("UPDATE strata_meta SET value = '7' WHERE key = 'schema_version'"))
    first.close()
    again = open_database(url)
    try:
        assert again.schema_version == SCHEMA_VERSION >= 8
        assert "reading_page_tokens" in {c["name"] for c in inspect(again.engine).get_columns(
            "project_settings")}
        settings = await ProjectService(again).get_settings(project.id)
        assert (settings.reading_page_tokens, settings.language, settings.version) == (400, "en", 2)
    finally:
        again.close()
