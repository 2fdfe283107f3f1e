"""ProjectService: deterministic ids, opening folders, settings with an optimistic lock."""

from __future__ import annotations

import asyncio
import hashlib
import os
from pathlib import Path

import pytest
from sqlmodel import select
from structlog.testing import capture_logs

from services.errors import InvalidInput, ProjectNotFound, ProjectPathInvalid, RecordVersionConflict
from services.projects import ProjectRecord, ProjectService, project_id_for
from services.store import Database
from services.store.tables import BudgetProfileRow, ProjectSettingsRow


@pytest.fixture
def service(database: Database) -> ProjectService:
    return ProjectService(database)


def test_project_id_is_sha256_prefix_of_the_real_path() -> None:
    """The id is the first 16 hex chars of SHA-256 of the path: a pure function of it."""
    expected = hashlib.sha256(b"/home/writer/novel").hexdigest()[:16]
    assert project_id_for("/home/writer/novel") == expected
    assert project_id_for("/home/writer/novel") == project_id_for("/home/writer/novel")
    assert project_id_for("/home/writer/novel2") != expected


async def test_same_folder_same_id_across_spellings_and_databases(folder: Path, tmp_path: Path,
                                                                  service: ProjectService) -> None:
    """Opening the folder via `..`, a trailing slash or a symlink gives the one id of its real path."""
    link = tmp_path / "link-to-novel"
    link.symlink_to(folder)
    first = await service.open(str(folder))
    assert first.id == project_id_for(str(folder))
    assert first.path == str(folder)
    for spelling in (f"{folder}/", f"{folder}/../{folder.name}", str(link)):
        assert (await service.open(spelling)).id == first.id
    assert len(await service.list()) == 1


async def test_reopening_renames_only_when_a_name_is_given(folder: Path,
                                                           service: ProjectService) -> None:
    """A new project is named after its folder; reopening with a name renames, without keeps it."""
    created = await service.open(str(folder))
    assert created.name == folder.name
    renamed = await service.open(str(folder), "  第一部  ")
    assert (renamed.id, renamed.name, renamed.created_at) == (created.id, "第一部", created.created_at)
    assert (await service.open(str(folder))).name == "第一部"
    assert (await service.open(str(folder), "   ")).name == "第一部"


async def test_open_creates_default_settings_and_budget(folder: Path, service: ProjectService,
                                                        database: Database) -> None:
    """A new project gets one settings row (version 1, zh) and one default budget profile."""
    project = await service.open(str(folder))
    settings = await service.get_settings(project.id)
    assert (settings.version, settings.language, settings.skill_prompts) == (1, "zh", {})
    with database.session() as session:
        assert len(session.exec(select(ProjectSettingsRow)).all()) == 1
        budget = session.exec(select(BudgetProfileRow)).one()
    assert (budget.project_id, budget.version, budget.context_window) == (project.id, 1, 8192)


async def test_concurrent_opens_of_one_folder_make_one_project(folder: Path,
                                                               service: ProjectService) -> None:
    """Many opens of a new folder at once (real threads) all return the same single project."""
    opened = await asyncio.gather(*(service.open(str(folder)) for _ in range(8)))
    assert {p.id for p in opened} == {project_id_for(str(folder))}
    assert len(await service.list()) == 1


@pytest.mark.parametrize("kind", ["missing", "file", "relative", "empty", "nul", "surrogate"])
async def test_open_refuses_anything_but_an_existing_folder(kind: str, tmp_path: Path,
                                                            service: ProjectService) -> None:
    """Missing, a file, relative, empty or unencodable paths are PROJECT_PATH_INVALID, path not echoed."""
    (tmp_path / "notes.md").write_text("x")
    path = {"missing": str(tmp_path / "secret-missing"), "file": str(tmp_path / "notes.md"),
            "relative": "novel", "empty": "", "nul": f"{tmp_path}/a\x00b",
            "surrogate": f"{tmp_path}/\ud800"}[kind]
    with pytest.raises(ProjectPathInvalid) as raised:
        await service.open(path)
    assert raised.value.fields == {}
    assert str(tmp_path) not in raised.value.text
    assert await service.list() == []


async def test_open_refuses_an_unreadable_folder(tmp_path: Path, service: ProjectService,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """A folder the process may not list is PROJECT_PATH_INVALID (access is denied by the OS check)."""
    locked = tmp_path / "locked"
    locked.mkdir()
    real_access = os.access
    monkeypatch.setattr(os, "access",
                        lambda path, mode: False if str(path) == str(locked) else real_access(path, mode))
    with pytest.raises(ProjectPathInvalid):
        await service.open(str(locked))


async def test_list_and_get(tmp_path: Path, service: ProjectService) -> None:
    """list() returns every project by name; get() one by id; an unknown id is PROJECT_NOT_FOUND."""
    for name in ("b", "a"):
        (tmp_path / name).mkdir()
        await service.open(str(tmp_path / name), f"Novel {name.upper()}")
    listed = await service.list()
    assert [p.name for p in listed] == ["Novel A", "Novel B"]
    assert await service.get(listed[0].id) == listed[0]
    with pytest.raises(ProjectNotFound):
        await service.get("0" * 16)


async def test_update_settings_bumps_the_version(project: ProjectRecord,
                                                 service: ProjectService) -> None:
    """A matching version applies the given fields, keeps the rest and returns version + 1."""
    updated = await service.update_settings(project.id, 1, language="en", narrative_person="first",
                                            skill_prompts={"continue": "续写。"})
    assert (updated.version, updated.language, updated.narrative_person) == (2, "en", "first")
    assert updated.skill_prompts == {"continue": "续写。"}
    again = await service.update_settings(project.id, 2, style_notes="short sentences")
    assert (again.version, again.language, again.style_notes) == (3, "en", "short sentences")
    assert await service.get_settings(project.id) == again


async def test_stale_version_is_a_conflict_naming_the_current_one(project: ProjectRecord,
                                                                  service: ProjectService) -> None:
    """An update from an old version changes nothing and says which version is current."""
    await service.update_settings(project.id, 1, language="en")
    with pytest.raises(RecordVersionConflict) as raised:
        await service.update_settings(project.id, 1, language="zh")
    assert raised.value.fields == {"currentVersion": 2}
    assert (await service.get_settings(project.id)).language == "en"


async def test_concurrent_updates_from_one_version_exactly_one_wins(project: ProjectRecord,
                                                                   service: ProjectService) -> None:
    """Updates racing from the same version on real threads: one applies, the others conflict."""
    outcomes = await asyncio.gather(
        *(service.update_settings(project.id, 1, style_notes=f"writer {i}") for i in range(8)),
        return_exceptions=True)
    winners = [o for o in outcomes if not isinstance(o, BaseException)]
    assert len(winners) == 1
    assert all(isinstance(o, RecordVersionConflict) for o in outcomes if o not in winners)
    final = await service.get_settings(project.id)
    assert (final.version, final.style_notes) == (2, winners[0].style_notes)


async def test_model_sets_the_tokenizer_and_path_can_be_cleared(project: ProjectRecord, tmp_path: Path,
                                                                service: ProjectService) -> None:
    """The encoding follows the model; a tokenizer path must be a readable .json; None clears it."""
    tokenizer = tmp_path / "tokenizer.json"
    tokenizer.write_text("{}")
    updated = await service.update_settings(project.id, 1, model="gpt-4o",
                                            tokenizer_path=str(tokenizer))
    assert (updated.tokenizer_encoding, updated.tokenizer_path) == ("o200k_base", str(tokenizer))
    cleared = await service.update_settings(project.id, 2, tokenizer_path=None, language=None)
    assert (cleared.tokenizer_path, cleared.language, cleared.model) == (None, "zh", "gpt-4o")


@pytest.mark.parametrize("fields", [
    {"language": "fr"}, {"model": "  "}, {"unknown": 1}, {"skill_prompts": {"bad id!": "x"}},
    {"style_notes": "x" * 4001}, {"tokenizer_path": "relative/tokenizer.json"},
    {"tokenizer_path": "/nonexistent/tokenizer.json"}, {"tokenizer_path": "/etc/hostname"},
])
async def test_invalid_settings_are_refused_unchanged(fields: dict[str, object], project: ProjectRecord,
                                                      service: ProjectService) -> None:
    """Fields outside the rules are INVALID_PARAMS, and the settings and version stay as they were."""
    with pytest.raises(InvalidInput) as raised:
        await service.update_settings(project.id, 1, **fields)
    assert "/etc" not in str(raised.value.fields)
    assert "nonexistent" not in str(raised.value.fields)
    assert (await service.get_settings(project.id)).version == 1


async def test_settings_of_an_unknown_project(service: ProjectService) -> None:
    """Settings of a project that does not exist are PROJECT_NOT_FOUND for get and update."""
    with pytest.raises(ProjectNotFound):
        await service.get_settings("feedfacefeedface")
    with pytest.raises(ProjectNotFound):
        await service.update_settings("feedfacefeedface", 1, language="en")


async def test_logs_carry_ids_not_paths(folder: Path, service: ProjectService) -> None:
    """Opening and updating log the project id and field names, never the folder path or values."""
    with capture_logs() as logs:
        project = await service.open(str(folder), "Secret title")
        await service.update_settings(project.id, 1, style_notes="林远 hid the key")
    text = repr(logs)
    assert project.id in text
    assert str(folder) not in text
    assert "Secret" not in text
    assert "林远" not in text
