"""ProjectService and the documents refuse folders a project cannot be: PROJECT_PATH_FORBIDDEN.

The rules themselves are tested in test_roots.py; here they meet the services: what is opened,
what is registered, what is logged, and what happens to a project registered before the rules.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest
from structlog.testing import capture_logs

from services.errors import ProjectPathForbidden, ProjectPathInvalid
from services.projects import ProjectService, project_id_for
from services.projects.checked import CheckedDocumentStore
from services.projects.roots import FolderPolicy
from services.store import Database
from services.store.tables import ProjectRow
from tests.support.projects import make_folder


@pytest.fixture
def policy(tmp_path: Path) -> FolderPolicy:
    """This machine's rules with the test database's folder as the data dir."""
    return FolderPolicy.for_this_machine(data_dir=tmp_path / "data")


@pytest.fixture
def service(database: Database, policy: FolderPolicy) -> ProjectService:
    return ProjectService(database, policy=policy)


@pytest.mark.parametrize(("where", "reason"), [
    ("data", "data_dir"),
    ("data/logs", "data_dir"),
    ("", "data_dir"),  # tmp_path holds the data dir
    ("/etc", "system"),
    ("/proc/self", "system"),
    ("/sys/kernel", "system"),
    ("/", "root"),
    ("/etc/no-such-folder", "system"),
])
async def test_refused_folders_are_not_registered(tmp_path: Path, service: ProjectService, where: str,
                                                  reason: str) -> None:
    """The data dir (inside and holding it), system trees, / and even a missing folder under /etc
    answer PROJECT_PATH_FORBIDDEN with the reason; no project is registered, the path is not logged."""
    (tmp_path / "data" / "logs").mkdir(parents=True, exist_ok=True)
    path = where if where.startswith("/") else str(tmp_path / where)
    with capture_logs() as logs, pytest.raises(ProjectPathForbidden) as refused:
        await service.open(path)
    assert refused.value.fields == {"reason": reason}
    assert path not in refused.value.text
    assert await service.list() == []
    assert {"event": "project.open_refused", "reason": reason, "log_level": "info"} in logs
    assert path not in repr(logs)


async def test_a_link_to_a_refused_folder_is_refused(tmp_path: Path, service: ProjectService) -> None:
    """A link in a writer's tmp folder pointing at /etc or at the data dir is followed and refused."""
    (tmp_path / "etc-link").symlink_to("/etc")
    (tmp_path / "data-link").symlink_to(tmp_path / "data")
    for link, reason in (("etc-link", "system"), ("data-link", "data_dir")):
        with pytest.raises(ProjectPathForbidden) as refused:
            await service.open(str(tmp_path / link))
        assert refused.value.fields == {"reason": reason}


async def test_a_writers_folder_still_opens(service: ProjectService, folder: Path) -> None:
    """A folder in tmp, beside the data dir, opens as before."""
    assert (await service.open(str(folder))).path == str(folder)


async def test_a_missing_folder_elsewhere_is_still_invalid(tmp_path: Path, service: ProjectService) -> None:
    """Outside refused places, a folder that does not exist is PROJECT_PATH_INVALID, as before."""
    with pytest.raises(ProjectPathInvalid):
        await service.open(str(tmp_path / "missing"))


async def test_without_a_policy_this_machines_rules_apply(database: Database) -> None:
    """A ProjectService made without a policy (scripts, tests) still refuses system trees."""
    with pytest.raises(ProjectPathForbidden) as refused:
        await ProjectService(database).open("/etc")
    assert refused.value.fields == {"reason": "system"}


async def test_the_allow_list_admits_only_folders_inside_it(tmp_path: Path, database: Database) -> None:
    """With roots given, a folder inside one opens and one beside it is refused as not_allowed."""
    inside = make_folder(tmp_path / "allowed" / "novel")
    beside = make_folder(tmp_path / "elsewhere")
    service = ProjectService(database, policy=FolderPolicy.for_this_machine(
        data_dir=tmp_path / "data", allowed=[tmp_path / "allowed"]))
    assert (await service.open(str(inside))).path == str(inside)
    with pytest.raises(ProjectPathForbidden) as refused:
        await service.open(str(beside))
    assert refused.value.fields == {"reason": "not_allowed"}


def _plant_row(database: Database, path: Path) -> str:
    """A project row made before the rules existed, pointing at ``path``."""
    project_id = project_id_for(str(path))
    with database.session() as session:
        session.add(ProjectRow(id=project_id, path=str(path), name="old"))
        session.commit()
    return project_id


async def test_a_project_registered_in_a_refused_folder_is_refused_by_the_documents(
        tmp_path: Path, database: Database, policy: FolderPolicy) -> None:
    """A row registered before the rules, pointing into the data dir: every document method and the
    folder lookup retrieval uses answer PROJECT_PATH_FORBIDDEN, and nothing is written there."""
    planted = tmp_path / "data" / "planted"
    planted.mkdir(parents=True)
    project_id = _plant_row(database, planted)
    documents = CheckedDocumentStore(database, policy)
    calls: list[Callable[[], Awaitable[object]]] = [
        lambda: documents.list(project_id), lambda: documents.read(project_id, "a.md"),
        lambda: documents.write(project_id, "planted.md", "x"), lambda: documents.heads(project_id),
        lambda: documents.root(project_id)]
    with capture_logs() as logs:
        for call in calls:
            with pytest.raises(ProjectPathForbidden) as refused:
                await call()
            assert refused.value.fields == {"reason": "data_dir"}
    assert list(planted.iterdir()) == []
    assert {"event": "project.folder_forbidden", "project_id": project_id, "reason": "data_dir",
            "log_level": "warning"} in logs


async def test_the_checked_documents_serve_an_allowed_project(database: Database, policy: FolderPolicy,
                                                              service: ProjectService, folder: Path) -> None:
    """In an allowed project the checked documents work as the plain ones do, checked once."""
    project = await service.open(str(folder))
    documents = CheckedDocumentStore(database, policy)
    await documents.write(project.id, "a.md", "第一章")
    assert await documents.read(project.id, "a.md") == "第一章"
    assert [d.document_id for d in (await documents.list(project.id)).documents] == ["a.md"]
    assert await documents.heads(project.id) == [("a.md", "第一章")]
    assert await documents.root(project.id) == folder


async def test_narrowing_the_rules_refuses_a_project_and_keeps_its_records(
        tmp_path: Path, database: Database, folder: Path) -> None:
    """A project opened under wider rules is refused after an allow-list leaves it out: opening it
    again and its documents answer not_allowed; it is still listed, with its settings, and comes back
    when the rules allow it again."""
    wide = FolderPolicy.for_this_machine(data_dir=tmp_path / "data")
    project = await ProjectService(database, policy=wide).open(str(folder))
    narrow = FolderPolicy.for_this_machine(data_dir=tmp_path / "data", allowed=[tmp_path / "allowed"])
    service = ProjectService(database, policy=narrow)
    with pytest.raises(ProjectPathForbidden) as refused:
        await service.open(str(folder))
    assert refused.value.fields == {"reason": "not_allowed"}
    with pytest.raises(ProjectPathForbidden):
        await CheckedDocumentStore(database, narrow).read(project.id, "a.md")
    assert [p.id for p in await service.list()] == [project.id]
    assert (await service.get_settings(project.id)).version == 1
    assert (await ProjectService(database, policy=wide).open(str(folder))).id == project.id
