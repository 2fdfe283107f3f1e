"""Snapshots: a read is kept until the next write to its table and project, never past it."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

import pytest

from services.concurrency.snapshots import Snapshots
from services.knowledge import ConstraintService, KgService
from services.store import open_database


async def test_a_kept_read_answers_until_a_write_to_its_table_and_project() -> None:
    """The second read is served from the first; a write to the same table and project makes the
    next read load again, while other tables and projects keep theirs."""
    snapshots = Snapshots()
    loads: list[str] = []

    def load(name: str) -> tuple[str, ...]:
        loads.append(name)
        return (name, str(len(loads)))

    first = await snapshots.read("rules", "p1", None, lambda: load("p1 rules"))
    assert await snapshots.read("rules", "p1", None, lambda: load("p1 rules")) is first
    other_table = await snapshots.read("episodes", "p1", None, lambda: load("p1 episodes"))
    other_project = await snapshots.read("rules", "p2", None, lambda: load("p2 rules"))
    snapshots.changed("rules", "p1")
    again = await snapshots.read("rules", "p1", None, lambda: load("p1 rules"))
    assert again == ("p1 rules", "4")
    assert await snapshots.read("episodes", "p1", None, lambda: load("p1 episodes")) is other_table
    assert await snapshots.read("rules", "p2", None, lambda: load("p2 rules")) is other_project
    assert loads == ["p1 rules", "p1 episodes", "p2 rules", "p1 rules"]


async def test_queries_of_one_table_are_kept_apart_and_all_forgotten_on_a_write() -> None:
    """Different queries (e.g. confirmed only, or all) are kept separately; one write drops all."""
    snapshots = Snapshots()
    assert await snapshots.read("rules", "p1", True, lambda: ("confirmed",)) == ("confirmed",)
    assert await snapshots.read("rules", "p1", False, lambda: ("all",)) == ("all",)
    assert await snapshots.read("rules", "p1", True, lambda: ("again",)) == ("confirmed",)
    snapshots.changed("rules", "p1")
    assert await snapshots.read("rules", "p1", True, lambda: ("new",)) == ("new",)
    assert await snapshots.read("rules", "p1", False, lambda: ("new all",)) == ("new all",)


async def test_a_read_that_overlapped_a_write_is_used_once_and_not_kept() -> None:
    """A read that began before a write committed may hold the old rows: its caller gets them, but
    the next read loads again and sees the write."""
    snapshots = Snapshots()
    started, go_on = threading.Event(), threading.Event()

    def slow_load() -> tuple[str, ...]:
        started.set()
        go_on.wait(5)
        return ("before the write",)

    reading = asyncio.create_task(snapshots.read("constraints", "p1", None, slow_load))
    await asyncio.to_thread(started.wait, 5)
    snapshots.write("constraints", "p1", lambda: None)  # commits while the read is in flight
    go_on.set()
    assert await reading == ("before the write",)
    assert await snapshots.read("constraints", "p1", None, lambda: ("after the write",)) == (
        "after the write",)


def test_a_failed_write_still_marks_the_table_changed() -> None:
    """A write that raises may have committed part of its work: what was kept is forgotten."""
    snapshots = Snapshots()
    snapshots.keep("constraints", "p1", None, snapshots.generation("constraints", "p1"), ("old",))

    def failing() -> None:
        raise RuntimeError("constraint limit")

    with pytest.raises(RuntimeError):
        snapshots.write("constraints", "p1", failing)
    assert snapshots.current("constraints", "p1", None) != ("old",)


async def test_errors_are_not_kept() -> None:
    """A read that fails (say, the project does not exist) is tried again next time."""
    snapshots = Snapshots()
    calls = []

    def missing() -> tuple[str, ...]:
        calls.append(1)
        raise LookupError("no such project")

    for _ in range(2):
        with pytest.raises(LookupError):
            await snapshots.read("kg", "nope", None, missing)
    assert len(calls) == 2


async def test_at_most_max_entries_are_kept_least_recently_used_first_out() -> None:
    """Past the bound the read used longest ago is dropped (and loaded again when asked for)."""
    snapshots = Snapshots(max_entries=2)
    loads: list[str] = []

    def load(project: str) -> tuple[str]:
        loads.append(project)
        return (project,)

    async def read(project: str) -> object:
        return await snapshots.read("kg", project, None, lambda: load(project))

    await read("a")
    await read("b")
    await read("a")  # "a" is now the most recent
    await read("c")  # drops "b"
    await read("a")
    await read("b")
    assert loads == ["a", "b", "c", "b"]


def test_one_snapshots_per_database_shared_by_its_services_and_none_between_databases(
        tmp_path: Path) -> None:
    """A Database owns one Snapshots, which every service built on it uses (each sees the others'
    writes); another database has its own, so nothing is kept in a registry between them."""
    first = open_database(f"sqlite:///{tmp_path / 'a.db'}")
    second = open_database(f"sqlite:///{tmp_path / 'b.db'}")
    try:
        assert first.snapshots is first.snapshots
        assert first.snapshots is not second.snapshots
        kg, constraints = KgService(first), ConstraintService(first)
        assert kg._snapshots is first.snapshots
        assert constraints._snapshots is first.snapshots
        assert KgService(second)._snapshots is second.snapshots
        first.snapshots.changed("t", "p")
        assert second.snapshots.generation("t", "p") == 0
    finally:
        first.close()
        second.close()
