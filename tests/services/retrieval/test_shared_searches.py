"""Searches shared between requests: neighbouring keystrokes ask one query, identical searches in
flight run once, results are kept per index snapshot and per project, and an exclusion's cursor is
settled to a chunk end without changing what it leaves out."""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from services.caches import SEARCH_RESULT_BYTES, SEARCH_RESULTS, search_result_cache, search_result_size
from services.context.counting import CountCache
from services.context.skills import get_skill
from services.retrieval import Standalone, build_retrieval
from services.retrieval import query as query_module
from services.retrieval.provider import RetrievalProvider
from services.retrieval.query import DenseQuery, settled
from services.retrieval.search import Exclusion, Hit, Snapshot
from services.retrieval.store import ChunkRecord
from services.sources.base import GatherContext
from services.sources.window import cut_window
from services.tokenizer import resolve_tokenizer
from tests.services.retrieval.test_service import write_project
from tests.support.scenarios import KEY_FACT, zh_chapter

COUNTER = CountCache(resolve_tokenizer())
QUERY = "夜里他又想起了那把钥匙，它到底藏在哪里？"


def count_searches(monkeypatch: pytest.MonkeyPatch, standalone: Standalone) -> list[str]:
    """Record the project of every search that really runs (not answered from what is kept)."""
    retrieval = standalone.retrieval
    runs: list[str] = []
    real = retrieval._search

    def counted(project_id: str, *args: Any) -> list[Hit]:
        runs.append(project_id)
        return real(project_id, *args)

    monkeypatch.setattr(retrieval, "_search", counted)
    return runs


async def test_identical_searches_in_flight_run_once_and_equal_a_lone_search(
        standalone: Standalone, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Twelve identical searches sent together run one search; each gets the same hits as the
    same search run alone on a fresh server (nothing kept)."""
    root = write_project(tmp_path / "novel")
    await standalone.retrieval.index_project("p1", root)
    runs = count_searches(monkeypatch, standalone)
    exclude = Exclusion("卷一/第05章.md", 300)
    together = await asyncio.gather(*(standalone.retrieval.search("p1", QUERY, exclude=exclude)
                                      for _ in range(12)))
    assert runs == ["p1"]
    alone_service = build_retrieval(tmp_path / "other-data")
    try:
        await alone_service.retrieval.index_project("p1", root)
        alone = await alone_service.retrieval.search("p1", QUERY, exclude=exclude)
    finally:
        await alone_service.close()
    assert alone
    assert all(hits == alone for hits in together)


async def test_a_search_read_ahead_waits_for_its_pause_until_a_caller_joins_it(
        standalone: Standalone, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A search read ahead does not run while its pause holds it; the same search asked by a caller
    without a pause joins it and has it run at once (once), and both get the hits a search alone
    gets."""
    root = write_project(tmp_path / "novel")
    await standalone.retrieval.index_project("p1", root)
    await standalone.retrieval.wait_idle("p1")
    runs = count_searches(monkeypatch, standalone)
    never = asyncio.Event()

    async def pause() -> bool:
        await never.wait()
        return True

    ahead = asyncio.create_task(standalone.retrieval.search("p1", QUERY, pause=pause))
    for _ in range(10):
        await asyncio.sleep(0)
    assert (runs, ahead.done()) == ([], False)
    joined = await asyncio.wait_for(standalone.retrieval.search("p1", QUERY), 10)
    assert (await asyncio.wait_for(ahead, 10), runs) == (joined, ["p1"])
    assert joined


async def test_a_search_read_ahead_and_given_up_is_empty_and_not_kept(
        standalone: Standalone, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A search read ahead whose pause answers False (the assemblies never went quiet) runs nothing
    and keeps nothing: its answer is empty, and the same search asked afterwards runs and finds."""
    root = write_project(tmp_path / "novel")
    await standalone.retrieval.index_project("p1", root)
    await standalone.retrieval.wait_idle("p1")
    runs = count_searches(monkeypatch, standalone)

    async def gives_up() -> bool:
        return False

    assert await standalone.retrieval.search("p1", QUERY, pause=gives_up) == []
    assert await standalone.retrieval.search("p1", QUERY)
    assert runs == ["p1"]


async def test_a_caller_right_after_a_read_ahead_gave_up_gets_a_search_of_its_own(
        standalone: Standalone, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A keystroke that asks the same search in the very step after a read-ahead gave it up (before
    anything else ran) does not join the abandoned one: it gets its own, with hits."""
    root = write_project(tmp_path / "novel")
    retrieval = standalone.retrieval
    await retrieval.index_project("p1", root)
    await retrieval.wait_idle("p1")
    asked: list[asyncio.Task[list[Hit]]] = []
    gave_up = retrieval._given_up

    def then_asked(*args: Any) -> Any:
        answer = gave_up(*args)
        asked.append(asyncio.ensure_future(retrieval.search("p1", QUERY)))
        return answer

    monkeypatch.setattr(retrieval, "_given_up", then_asked)

    async def gives_up() -> bool:
        return False

    assert await retrieval.search("p1", QUERY, pause=gives_up) == []
    assert await asyncio.wait_for(asked[0], 10)


async def test_a_kept_result_answers_until_the_snapshot_changes(
        standalone: Standalone, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The same search again is answered from what is kept; after an edit is indexed (a new
    snapshot) it runs again and finds the edit, and nothing of the old snapshot is kept."""
    root = write_project(tmp_path / "novel")
    retrieval = standalone.retrieval
    await retrieval.index_project("p1", root)
    await retrieval.wait_idle("p1")  # a result is kept only when no pass is writing meanwhile
    runs = count_searches(monkeypatch, standalone)
    first = await retrieval.search("p1", QUERY)
    assert await retrieval.search("p1", QUERY) == first
    assert runs == ["p1"]
    fact = "林远后来把钥匙挪到了钟楼顶上的铜铃里，谁也没有告诉。"
    chapter = root / "卷一" / "第04章.md"
    chapter.write_text(chapter.read_text(encoding="utf-8") + "\n\n" + fact + "\n", encoding="utf-8")
    await retrieval.index_project("p1", root)
    assert standalone.retrieval._results.entries("p1") == 0
    again = await retrieval.search("p1", QUERY)
    assert runs == ["p1", "p1"]
    assert any(fact in hit.text for hit in again)


async def test_a_search_after_a_slow_index_pass_and_wait_idle_is_kept(
        standalone: Standalone, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An index pass slower than the debounce leaves no pass behind it once wait_idle returns: the
    wake that opening the project set is not a second pass, and a pass waiting for the lock counts
    as busy; so the next search's result is kept and the same search again does not run."""
    root = write_project(tmp_path / "novel")
    retrieval = standalone.retrieval
    real_sync = retrieval._indexer.sync

    def slow_sync(*args: Any, **kwargs: Any) -> Any:
        time.sleep(0.6)  # longer than the 0.3 s debounce
        return real_sync(*args, **kwargs)

    monkeypatch.setattr(retrieval._indexer, "sync", slow_sync)
    await retrieval.index_project("p1", root)
    await retrieval.wait_idle("p1")
    runs = count_searches(monkeypatch, standalone)
    first = await retrieval.search("p1", QUERY)
    assert await retrieval.search("p1", QUERY) == first
    assert runs == ["p1"]


async def test_no_kept_result_crosses_projects(standalone: Standalone, tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """The same query in two projects runs in each and answers each from its own chunks: the
    project holding the fact finds it, the other does not, and each keeps its own entry."""
    with_fact = write_project(tmp_path / "a")
    without = tmp_path / "b"
    (without / "卷一").mkdir(parents=True)
    (without / "卷一" / "第01章.md").write_text(zh_chapter("第1章", 30), encoding="utf-8")
    retrieval = standalone.retrieval
    await retrieval.index_project("p1", with_fact)
    await retrieval.index_project("p2", without)
    runs = count_searches(monkeypatch, standalone)
    one, two = await asyncio.gather(retrieval.search("p1", QUERY), retrieval.search("p2", QUERY))
    assert sorted(runs) == ["p1", "p2"]
    assert {h.project_id for h in one} == {"p1"}
    assert {h.project_id for h in two} == {"p2"}
    assert KEY_FACT in one[0].text
    assert not any(KEY_FACT in h.text for h in two)
    assert (retrieval._results.entries("p1"), retrieval._results.entries("p2")) == (1, 1)


async def test_nothing_is_kept_while_an_index_pass_runs(standalone: Standalone, tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """A pass writes vectors before it publishes its snapshot and deletes orphans after: a search
    answered meanwhile is used by its callers but not kept; once the pass is over it is."""
    root = write_project(tmp_path / "novel")
    retrieval = standalone.retrieval
    await retrieval.index_project("p1", root)
    runs = count_searches(monkeypatch, standalone)
    async with retrieval._projects["p1"].lock:  # as a pass holds it
        assert await retrieval.search("p1", QUERY)
        assert retrieval._results.entries("p1") == 0
    await retrieval.search("p1", QUERY)
    await retrieval.search("p1", QUERY)
    assert runs == ["p1", "p1"]
    assert retrieval._results.entries("p1") == 1


def test_kept_results_are_bounded_by_entries_and_bytes() -> None:
    """Each project keeps at most SEARCH_RESULTS results and SEARCH_RESULT_BYTES bytes of them; one
    project filling its share evicts none of another's."""
    cache = search_result_cache()
    full = tuple(range(200))  # stands for 200 hits: only their number counts
    for n in range(SEARCH_RESULTS + 50):
        cache.put("p1", n, full)
    cache.put("p2", "q", full)
    assert cache.entries("p1") <= SEARCH_RESULTS
    assert cache.size("p1") <= SEARCH_RESULT_BYTES
    assert cache.entries("p1") == min(SEARCH_RESULTS, SEARCH_RESULT_BYTES // search_result_size(full))
    assert cache.entries("p2") == 1


async def test_a_failing_search_fails_every_caller_waiting_on_it_and_is_not_kept(
        standalone: Standalone, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """When the shared search fails, every caller waiting on it gets the error; the next one runs."""
    root = write_project(tmp_path / "novel")
    retrieval = standalone.retrieval
    await retrieval.index_project("p1", root)

    def broken(*args: Any) -> list[Hit]:
        raise RuntimeError("vector store down")

    monkeypatch.setattr(retrieval, "_search", broken)
    results = await asyncio.gather(*(retrieval.search("p1", QUERY) for _ in range(3)), return_exceptions=True)
    assert all(isinstance(r, RuntimeError) for r in results)
    monkeypatch.undo()
    assert await retrieval.search("p1", QUERY)


class Recorder:
    """A searcher that records what it was asked."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str | DenseQuery | None, Exclusion | None]] = []

    async def search(self, project_id: str, query: str, *, limit: int = 200, exclude: Exclusion | None = None,
                     dense_query: str | DenseQuery | None = None,
                     pause: Callable[[], Awaitable[bool]] | None = None) -> list[Hit]:
        self.calls.append((query, dense_query, exclude))
        return []


def _ctx(document: str, cursor: int, skill: str = "continue") -> GatherContext:
    window = cut_window(document, cursor, get_skill(skill), 2000, COUNTER)
    return GatherContext("p1", "卷一/第05章.md", "zh", get_skill(skill), window, "写他想起钥匙", COUNTER)


async def test_every_cursor_in_a_sentence_asks_the_same_query() -> None:
    """Cursors anywhere inside one sentence (keystrokes a character apart) ask the same lexical and
    dense query: the whole sentences before it, with the instruction; once the sentence ends, the
    query is the text up to its end."""
    document = zh_chapter("第五章", 40)
    ends = [m.end() for m in re.finditer("。", document)]
    n = next(n for n in range(20, len(ends) - 1) if "\n" not in document[ends[n]:ends[n + 1]])
    start, end = ends[n], ends[n + 1]  # the sentence being typed lies between
    recorder = Recorder()
    provider = RetrievalProvider(recorder, COUNTER.info.encoding)
    for cursor in range(start + 1, end):
        await provider.gather(_ctx(document, cursor))
    assert len({(query, dense) for query, dense, _ in recorder.calls}) == 1
    query, dense, _ = recorder.calls[0]
    assert query.endswith(document[start - 30:start] + "\n写他想起钥匙")
    assert isinstance(dense, DenseQuery)
    assert document[:start].endswith(dense.sentences[-1])
    await provider.gather(_ctx(document, end))
    assert recorder.calls[-1][0].endswith(document[end - 30:end] + "\n写他想起钥匙")


_TEXT = st.text(alphabet=st.sampled_from(list("林远灯塔，。！？；…\n ab.!?\"”")), max_size=120)


@given(text=_TEXT, typed=st.text(alphabet=st.sampled_from(list("林远灯塔，ab ")), max_size=12))
def test_settled_drops_only_the_sentence_being_typed(text: str, typed: str) -> None:
    """settled() is a prefix of the text and settling again changes nothing; a text that ends a
    sentence is settled as it is, and whatever is typed after it (no sentence end yet) is left out."""
    done = settled(text)
    assert text.startswith(done)
    assert settled(done) == done
    if text and text[-1] in "。！？；…\n":
        assert done == text
        assert settled(text + typed) == text


def _settled_from_the_start(text: str) -> str:
    """settled() as a scan of the whole text for its last sentence end."""
    ends = [match.end() for match in query_module._END.finditer(text)]
    return text[:ends[-1]] if ends else text


@given(text=_TEXT, filler=st.sampled_from([0, 200, 250, 1990, 2100]), tail=_TEXT)
def test_settled_finds_the_end_a_scan_from_the_start_finds(text: str, filler: int, tail: str) -> None:
    """However far back the last sentence end lies (within the near tier, the far one or beyond),
    and wherever a tier starts inside a run of marks and closers, settled() cuts where a scan of the
    whole text does."""
    whole = text + "林" * filler + tail
    assert settled(whole) == _settled_from_the_start(whole)


def _chunks(ends: list[int]) -> list[ChunkRecord]:
    other = ChunkRecord("p1", "b.md", 0, 0, 30, "hb", 5, "b", ("b",))
    return [ChunkRecord("p1", "a.md", n, max(0, end - 50), end, f"h{n}", 5, f"text {n}", (f"t{n}",))
            for n, end in enumerate(sorted(ends))] + [other]


@given(ends=st.lists(st.integers(0, 500), min_size=1, max_size=12, unique=True),
       cursor=st.integers(-5, 600))
def test_a_settled_exclusion_leaves_out_the_same_chunks(ends: list[int], cursor: int) -> None:
    """The exclusion with its cursor settled to a chunk end leaves out exactly the chunks the
    original does, and every cursor between the same two chunk ends settles to the same one."""
    snapshot = Snapshot(_chunks(ends))
    original = Exclusion("a.md", cursor)
    moved = snapshot.settled_exclusion(original)
    left_out = [c for c in snapshot.chunks if original.excludes(c)]
    assert left_out == [c for c in snapshot.chunks if moved.excludes(c)]
    assert moved.cursor <= max(cursor, -1)
    next_end = min((e for e in ends if e > cursor), default=cursor + 1)
    for other in range(max(moved.cursor, cursor - 3), next_end):
        assert snapshot.settled_exclusion(Exclusion("a.md", other)) == moved


def test_every_snapshot_has_a_version_of_its_own() -> None:
    """Two snapshots, even of the same chunks, never share a version (results are kept by it)."""
    chunks = _chunks([10, 20])
    first, second = Snapshot(chunks), Snapshot(chunks)
    assert first.version != second.version
    assert first.updated({}).version not in (first.version, second.version)
