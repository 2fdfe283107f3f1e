"""Kept reads never hide a write: every write through the services shows in the next assembly.

ContextService is wired here as ``strata serve`` wires it (main/wiring.py), on real SQLite
stores, but without the retrieval index.
"""

from __future__ import annotations

import asyncio
import dataclasses
import threading
import time
from functools import partial
from pathlib import Path

import pytest

from services.assembly.profiles import BudgetProfiles
from services.assembly.service import AssembleRequest, Collaborators, ContextService
from services.context.models import DEFAULT_PROFILE
from services.knowledge import ConstraintService, KgService
from services.knowledge.records import ConstraintRecord
from services.memory import EpisodicMemoryService, SemanticMemoryService
from services.projects import DocumentStore, ProjectRecord, ProjectService
from services.sources.providers import (
    EpisodicMemoryProvider,
    KnowledgeGraphProvider,
    NullRetrievalProvider,
    SemanticMemoryProvider,
    UserConstraintsProvider,
)
from services.sources.records import shared
from services.store import Database
from services.tokenizer.registry import TokenizerRegistry

CHAPTER = "林远推开灯塔的门，海风灌进来。他在台阶上站了很久。\n\n" * 20


@dataclasses.dataclass
class App:
    """The services of one database, and a context service reading through them."""

    projects: ProjectService
    constraints: ConstraintService
    kg: KgService
    semantic: SemanticMemoryService
    episodic: EpisodicMemoryService
    profiles: BudgetProfiles
    context: ContextService


def build(database: Database) -> App:
    projects, documents = ProjectService(database), DocumentStore(database)
    constraints, kg = ConstraintService(database), KgService(database)
    semantic, episodic = SemanticMemoryService(database), EpisodicMemoryService(database)
    profiles = BudgetProfiles(database)
    constraint_list = shared(constraints.list)
    context = ContextService(Collaborators(
        settings=projects.get_settings, read_document=documents.read, profiles=profiles.get,
        providers=(UserConstraintsProvider(constraint_list), KnowledgeGraphProvider(constraint_list, kg.list),
                   SemanticMemoryProvider(partial(semantic.list, confirmed_only=True)),
                   EpisodicMemoryProvider(partial(episodic.list, limit=50)), NullRetrievalProvider()),
        tokenizers=TokenizerRegistry()))
    return App(projects, constraints, kg, semantic, episodic, profiles, context)


@pytest.fixture
async def app(database: Database, project: ProjectRecord, folder: Path) -> App:
    (folder / "ch1.md").write_text(CHAPTER, encoding="utf-8")
    built = build(database)
    await built.profiles.update(project.id, 1, dataclasses.replace(DEFAULT_PROFILE, context_window=32768))
    return built


async def prompt(app: App, project: ProjectRecord) -> str:
    outcome = await app.context.assemble(AssembleRequest(project.id, "ch1.md", len(CHAPTER), "continue"))
    return outcome.assembly.prompt


async def test_every_kind_of_write_shows_in_the_next_assembly(app: App, project: ProjectRecord) -> None:
    """After an assembly has read (and kept) every table, a create, update or delete of a
    constraint, an entity, a rule, an episode or the budget profile is in the very next one."""
    assert "严格第一人称" not in await prompt(app, project)

    constraint = await app.constraints.create(project.id, kind="narrative", text="严格第一人称叙述")
    assert "严格第一人称叙述" in await prompt(app, project)
    await app.constraints.update(project.id, constraint.id, text="严格第三人称叙述")
    text = await prompt(app, project)
    assert ("严格第三人称叙述" in text, "严格第一人称叙述" in text) == (True, False)
    await app.constraints.delete(project.id, constraint.id)
    assert "严格第三人称叙述" not in await prompt(app, project)

    entity, _ = await app.kg.upsert(project.id, kind="character", name="林远", description="灯塔看守人")
    assert "林远（角色）：灯塔看守人" in await prompt(app, project)
    await app.kg.upsert(project.id, kind="character", name="林远", description="退休的灯塔看守人")
    assert "林远（角色）：退休的灯塔看守人" in await prompt(app, project)
    await app.kg.delete(project.id, entity.id)
    assert "退休的灯塔看守人" not in await prompt(app, project)

    rule, _ = await app.semantic.upsert(project.id, text="动作场景偏好短句", confirmed=False)
    assert "动作场景偏好短句" not in await prompt(app, project)  # only confirmed rules are used
    await app.semantic.upsert(project.id, rule_id=rule.id, confirmed=True)
    assert "动作场景偏好短句" in await prompt(app, project)
    await app.semantic.delete(project.id, rule.id)
    assert "动作场景偏好短句" not in await prompt(app, project)

    episode = await app.episodic.add(project.id, instruction="续写", output="他把钥匙藏在台阶下。")
    assert "他把钥匙藏在台阶下。" in await prompt(app, project)
    await app.episodic.delete(project.id, episode.id)
    assert "他把钥匙藏在台阶下。" not in await prompt(app, project)

    current = await app.profiles.get(project.id)
    await app.profiles.update(project.id, current.version,
                              dataclasses.replace(current, context_window=16384))
    outcome = await app.context.assemble(AssembleRequest(project.id, "ch1.md", 10, "continue"))
    assert outcome.assembly.budget.context_window == 16384


async def test_writes_through_another_service_object_on_the_same_database_show(
        app: App, database: Database, project: ProjectRecord) -> None:
    """A second set of service objects on the same database (as a test or a tool might build)
    writes; the first set's next read, and the next assembly, see it."""
    await prompt(app, project)
    assert await app.constraints.list(project.id) == []
    other = build(database)
    await other.constraints.create(project.id, kind="world", text="本世界没有魔法")
    await other.semantic.upsert(project.id, text="少用成语", confirmed=True)
    assert [c.text for c in await app.constraints.list(project.id)] == ["本世界没有魔法"]
    text = await prompt(app, project)
    assert "本世界没有魔法" in text
    assert "少用成语" in text


async def test_a_write_whose_caller_gave_up_still_shows_once_committed(
        app: App, project: ProjectRecord, monkeypatch: pytest.MonkeyPatch) -> None:
    """A create whose awaiting task is cancelled while its worker thread is still committing is
    marked after the commit, by that thread: reads after it see the constraint, never a kept list
    from before it."""
    await app.constraints.list(project.id)  # kept: the empty list
    entered, go_on, left = threading.Event(), threading.Event(), threading.Event()
    original = app.constraints._create

    def slow_create(*args: object) -> ConstraintRecord:
        entered.set()
        go_on.wait(10)
        try:
            return original(*args)  # type: ignore[arg-type]
        finally:
            left.set()

    monkeypatch.setattr(app.constraints, "_create", slow_create)
    task = asyncio.create_task(app.constraints.create(project.id, kind="plot", text="灯塔会在第十章熄灭"))
    await asyncio.to_thread(entered.wait, 10)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert await app.constraints.list(project.id) == []  # not committed yet
    go_on.set()
    await asyncio.to_thread(left.wait, 10)
    deadline = time.monotonic() + 10  # the thread marks the change just after it commits
    while not await app.constraints.list(project.id):
        assert time.monotonic() < deadline, "the committed constraint never showed"
        await asyncio.sleep(0.01)
    assert [c.text for c in await app.constraints.list(project.id)] == ["灯塔会在第十章熄灭"]
    assert "灯塔会在第十章熄灭" in await prompt(app, project)


async def test_kept_reads_stay_in_their_project(app: App, project: ProjectRecord,
                                                other_project: ProjectRecord) -> None:
    """Each project's reads are kept apart: a write to one neither shows in nor disturbs the other."""
    await app.constraints.create(project.id, kind="narrative", text="甲项目的约束")
    await app.constraints.create(other_project.id, kind="narrative", text="乙项目的约束")
    assert [c.text for c in await app.constraints.list(project.id)] == ["甲项目的约束"]
    assert [c.text for c in await app.constraints.list(other_project.id)] == ["乙项目的约束"]
    await app.constraints.create(other_project.id, kind="world", text="乙项目的第二条")
    assert [c.text for c in await app.constraints.list(project.id)] == ["甲项目的约束"]
    assert len(await app.constraints.list(other_project.id)) == 2
