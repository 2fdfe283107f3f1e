"""Idle projects let go of their index in memory: the snapshot, kept results and vectors, Chroma handle,
watcher and worker leave, and the next request that needs the project opens it again from the store
with the same results; at most ``max_open`` projects stay open, the least recently used leaving first.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from services.retrieval import Standalone, build_retrieval
from services.retrieval.search import Exclusion, Hit
from services.retrieval.service import FREED_AFTER, Retrieval
from tests.support.scenarios import KEY_FACT, zh_chapter

QUERY = "夜里他又想起了那把钥匙，它到底藏在哪里？"


def write_project(root: Path) -> Path:
    root.mkdir(parents=True)
    for n in range(1, 4):
        text = zh_chapter(f"第{n}章", 20, start=n * 20)
        if n == 1:
            text += "\n\n" + KEY_FACT + "\n"
        (root / f"第{n:02d}章.md").write_text(text, encoding="utf-8")
    return root


def roots_of(tmp_path: Path) -> Callable[[str], Any]:
    async def root(project_id: str) -> Path:
        return tmp_path / project_id

    return root


@pytest.fixture
async def opened(tmp_path: Path, request: pytest.FixtureRequest) -> AsyncIterator[Standalone]:
    options = getattr(request, "param", {})
    standalone = build_retrieval(tmp_path / "data", roots=roots_of(tmp_path), **options)
    try:
        yield standalone
    finally:
        await standalone.close()


def key(hits: list[Hit]) -> list[tuple[str, int, str, float]]:
    return [(hit.document_id, hit.ordinal, hit.text, round(hit.score, 6)) for hit in hits]


async def search(retrieval: Retrieval, project_id: str) -> list[Hit]:
    return await retrieval.search(project_id, QUERY, exclude=Exclusion("第03章.md", 100))


async def until_released(retrieval: Retrieval, project_id: str) -> None:
    for _ in range(3000):
        if project_id not in retrieval._projects:
            return
        await asyncio.sleep(0.01)
    pytest.fail(f"{project_id} was never released")


async def test_a_released_project_comes_back_with_the_same_results(opened: Standalone,
                                                                   tmp_path: Path) -> None:
    """release() lets go of an indexed project's index in memory (and the terms of its queries'
    runs); the next search opens it again from the store and gives the same hits, in the same
    order, with the same scores."""
    retrieval = opened.retrieval
    await retrieval.index_project("p1", write_project(tmp_path / "p1"))
    before = await search(retrieval, "p1")
    assert KEY_FACT in before[0].text
    assert retrieval._query_terms.entries("p1") > 0  # the query's runs, kept while it is open
    await retrieval.wait_idle("p1")  # the pass the open scheduled: a project indexing stays
    assert await retrieval.release("p1")
    assert "p1" not in retrieval._projects
    assert retrieval._query_terms.entries("p1") == 0
    assert not await retrieval.release("p1")  # not open: nothing to let go
    after = await search(retrieval, "p1")
    assert key(after) == key(before)
    assert "p1" in retrieval._projects


@pytest.mark.parametrize("opened", [{"idle_after": 0.05}], indirect=True)
async def test_a_project_nobody_uses_is_released_and_comes_back(opened: Standalone, tmp_path: Path) -> None:
    """With idle_after set, a project no request needed for that long leaves memory by itself, and the
    next search brings it back with the same results."""
    retrieval = opened.retrieval
    await retrieval.index_project("p1", write_project(tmp_path / "p1"))
    await retrieval.wait_idle("p1")
    before = await search(retrieval, "p1")
    await until_released(retrieval, "p1")
    assert key(await search(retrieval, "p1")) == key(before)


@pytest.mark.parametrize("opened", [{"max_open": 1, "watch": True}], indirect=True)
async def test_beyond_max_open_the_least_recently_used_project_leaves(opened: Standalone,
                                                                       tmp_path: Path) -> None:
    """With max_open 1, opening a second project releases the first once it is not indexing; the
    project still open keeps indexing its edits (stopping the first one's watcher stops nothing
    else), and the first comes back with the same results when searched again."""
    retrieval = opened.retrieval
    await retrieval.index_project("p1", write_project(tmp_path / "p1"))
    await retrieval.wait_idle("p1")
    before = await search(retrieval, "p1")
    await retrieval.index_project("p2", write_project(tmp_path / "p2"))
    await until_released(retrieval, "p1")
    assert list(retrieval._projects) == ["p2"]
    edit = "灯塔的门在半夜被风吹开了，铜铃响个不停。"
    (tmp_path / "p2" / "第02章.md").write_text(zh_chapter("第2章", 20, start=40) + "\n\n" + edit + "\n",
                                               encoding="utf-8")
    await retrieval.touch("p2", "第02章.md")
    await retrieval.wait_idle("p2")
    assert edit in (await retrieval.search("p2", "半夜灯塔的门被风吹开，铜铃一直在响"))[0].text
    assert key(await search(retrieval, "p1")) == key(before)


@pytest.mark.parametrize("opened", [{"max_open": 1}], indirect=True)
async def test_a_project_busy_when_the_bound_is_passed_leaves_after_its_pass(opened: Standalone,
                                                                            tmp_path: Path) -> None:
    """With max_open 1, a project that is indexing when a second one opens cannot leave then; it
    leaves once its pass is over (without an idle timeout to sweep it), and comes back the same."""
    retrieval = opened.retrieval
    await retrieval.index_project("p1", write_project(tmp_path / "p1"))
    await retrieval.wait_idle("p1")
    before = await search(retrieval, "p1")
    await retrieval.touch("p1", "第01章.md")  # pending for the debounce: busy
    await retrieval.open_project("p2", write_project(tmp_path / "p2"))
    assert "p1" in retrieval._projects
    await until_released(retrieval, "p1")
    assert list(retrieval._projects) == ["p2"]
    assert key(await search(retrieval, "p1")) == key(before)


class Freed:
    """An ``on_freed`` that records which thread ran it."""

    def __init__(self) -> None:
        self.threads: list[str] = []

    def __call__(self) -> None:
        self.threads.append(threading.current_thread().name)


FREED = Freed()


@pytest.fixture
def freed() -> Freed:
    FREED.threads.clear()
    return FREED


@pytest.mark.parametrize("opened", [{"on_freed": FREED}], indirect=True)
async def test_a_pass_that_embedded_many_sentences_gives_memory_back_before_it_counts_as_done(
        opened: Standalone, tmp_path: Path, freed: Freed) -> None:
    """on_freed runs once on the index thread at the end of a pass that embedded FREED_AFTER or more
    sentences, before the pass returns (a settled index has been trimmed); a one-sentence edit's pass
    does not run it."""
    retrieval = opened.retrieval
    report = await retrieval.index_project("p1", write_project(tmp_path / "p1"))
    assert report.sentences >= FREED_AFTER
    assert len(freed.threads) == 1
    assert freed.threads[0].startswith("strata-index")
    root = tmp_path / "p1"
    with (root / "第02章.md").open("a", encoding="utf-8") as file:
        file.write("\n\n灯塔的门在半夜被风吹开了。\n")
    report = await retrieval.index_project("p1")
    assert 0 < report.sentences < FREED_AFTER
    assert len(freed.threads) == 1


@pytest.mark.parametrize("opened", [{"on_freed": FREED}], indirect=True)
async def test_a_release_gives_memory_back_off_the_loop(opened: Standalone, tmp_path: Path,
                                                        freed: Freed) -> None:
    """Letting go of idle indexes runs on_freed once more, on a worker thread, not the event loop's."""
    retrieval = opened.retrieval
    await retrieval.index_project("p1", write_project(tmp_path / "p1"))
    await retrieval.wait_idle("p1")
    await retrieval._release_beyond(0)
    for _ in range(500):
        if len(freed.threads) == 2:
            break
        await asyncio.sleep(0.01)
    assert len(freed.threads) == 2
    assert freed.threads[1] != "MainThread"
