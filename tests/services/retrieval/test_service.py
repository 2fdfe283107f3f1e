"""Retrieval end to end on real stores: SQLite chunk table, a Chroma folder, the bundled encoder, BM25.

Each test indexes a small bilingual project written into a temp folder.
"""

from __future__ import annotations

import asyncio
import shutil
import threading
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from services.context.counting import CountCache
from services.context.screening import check_scope
from services.context.skills import get_skill
from services.errors import ScopeViolation
from services.retrieval import Standalone, build_retrieval
from services.retrieval.chunking import content_hash
from services.retrieval.provider import RetrievalProvider
from services.retrieval.query import DenseQuery, combine, settled
from services.retrieval.search import Exclusion, Mode
from services.retrieval.service import Retrieval, saves_paused
from services.retrieval.store import ChunkStore
from services.sources.base import GatherContext
from services.sources.window import cut_window
from services.tokenizer import resolve_tokenizer
from tests.support.scenarios import KEY_FACT, zh_chapter

EN_FACT = "Mara hid the brass key under the third step of the lighthouse stairs and covered it with moss."


def write_project(root: Path) -> Path:
    """Five Chinese chapters (the key fact planted in chapter 2) and two English ones."""
    (root / "卷一").mkdir(parents=True)
    (root / "part-1").mkdir()
    for n in range(1, 6):
        text = zh_chapter(f"第{n}章", 30, start=n * 30)
        if n == 2:
            text += "\n\n" + KEY_FACT + "\n"
        (root / "卷一" / f"第{n:02d}章.md").write_text(text, encoding="utf-8")
    english = ("The harbour was quiet that night. Boats knocked against the pier. " * 12).strip()
    (root / "part-1" / "chapter-01.md").write_text(english + "\n\n" + EN_FACT + "\n", encoding="utf-8")
    (root / "part-1" / "chapter-02.md").write_text(english + "\n", encoding="utf-8")
    return root


async def test_a_fact_planted_early_is_found_when_writing_a_later_chapter(standalone: Standalone,
                                                                          tmp_path: Path) -> None:
    """Writing chapter 5 ("he remembered the key"), the chapter-2 passage with the key ranks first,
    in Chinese and in English, and scores are normalized to 0..1."""
    root = write_project(tmp_path / "novel")
    retrieval = standalone.retrieval
    report = await retrieval.index_project("p1", root)
    assert report.documents == 7
    assert report.changed == 7
    assert report.embedded > 7

    zh = await retrieval.search("p1", "夜里他又想起了那把钥匙，它到底藏在哪里？",
                                exclude=Exclusion("卷一/第05章.md", 300))
    assert zh[0].document_id == "卷一/第02章.md"
    assert KEY_FACT in zh[0].text
    en = await retrieval.search("p1", "Where did she put the key she found?")
    assert en[0].document_id == "part-1/chapter-01.md"
    assert EN_FACT in en[0].text
    assert all(0 <= h.score <= 1 for h in zh + en)
    assert zh[0].score == max(h.score for h in zh)


async def test_an_edit_re_embeds_only_the_changed_chunks_and_a_deleted_file_leaves(
        standalone: Standalone, tmp_path: Path) -> None:
    """Appending a paragraph to one chapter embeds at most a few chunks; deleting a file removes its
    chunks from the table, the vector store and the results. After every pass the exact search's
    sentence vectors are exactly the snapshot's sentences, and dense search alone finds the new one."""
    root = write_project(tmp_path / "novel")
    retrieval = standalone.retrieval
    await retrieval.index_project("p1", root)
    _assert_exact_rows_follow_the_snapshot(standalone)
    chapter = root / "卷一" / "第03章.md"
    chapter.write_text(chapter.read_text(encoding="utf-8") + "\n\n苏晴在钟楼顶上发现了一只银色怀表。\n",
                       encoding="utf-8")
    report = await retrieval.index_project("p1", root)
    assert (report.changed, report.embedded) == (1, 1)
    _assert_exact_rows_follow_the_snapshot(standalone)
    assert (await retrieval.search("p1", "银色怀表在哪里"))[0].document_id == "卷一/第03章.md"
    dense = await retrieval.search("p1", "苏晴在钟楼顶上发现了一只银色怀表", mode="dense")
    assert "银色怀表" in dense[0].text

    (root / "卷一" / "第02章.md").unlink()
    report = await retrieval.index_project("p1", root)
    assert report.removed == 1
    hits = await retrieval.search("p1", "钥匙藏在灯塔台阶下")
    assert all(h.document_id != "卷一/第02章.md" for h in hits)
    chunks = ChunkStore(standalone.database).load("p1")
    assert {c.document_id for c in chunks} == {
        "卷一/第01章.md", "卷一/第03章.md", "卷一/第04章.md", "卷一/第05章.md", "part-1/chapter-01.md",
        "part-1/chapter-02.md"}
    assert retrieval._vectors.ids("p1") == {pid for c in chunks for pid, _ in c.passages()}
    _assert_exact_rows_follow_the_snapshot(standalone)


def _assert_exact_rows_follow_the_snapshot(standalone: Standalone) -> None:
    snapshot = standalone.retrieval._projects["p1"].snapshot
    assert snapshot.vectors is not None
    assert list(snapshot.vectors.ids) == snapshot.sentence_vector_ids()
    stored = standalone.retrieval._vectors.vectors("p1", snapshot.vectors.ids[:5])
    for row, vid in enumerate(snapshot.vectors.ids[:5]):
        expected = np.asarray(stored[vid], dtype=np.float32)
        assert np.allclose(snapshot.vectors.matrix[row], expected / np.linalg.norm(expected), atol=1e-6)


async def test_two_projects_never_see_each_other(standalone: Standalone, tmp_path: Path) -> None:
    """A fact written only in project B is never returned by project A's search, in any mode."""
    a = write_project(tmp_path / "a")
    b = tmp_path / "b"
    b.mkdir()
    (b / "secret.md").write_text("只有乙项目知道：宝藏埋在北港旧码头第七根木桩下。\n", encoding="utf-8")
    retrieval = standalone.retrieval
    await retrieval.index_project("pa", a)
    await retrieval.index_project("pb", b)
    for mode in ("hybrid", "dense", "lexical"):
        hits = await retrieval.search("pa", "宝藏埋在北港旧码头第七根木桩下", mode=mode)
        assert all(h.project_id == "pa" and h.document_id != "secret.md" for h in hits)
    assert (await retrieval.search("pb", "宝藏埋在哪里"))[0].document_id == "secret.md"


async def test_a_missing_or_corrupted_vector_store_is_rebuilt_from_the_chunk_table(tmp_path: Path) -> None:
    """Deleting the Chroma folder, or replacing its database with garbage, loses nothing: on reopen the
    store starts over and the vectors are embedded again from the stored chunks."""
    root = write_project(tmp_path / "novel")
    data = tmp_path / "data"
    opened = build_retrieval(data)
    await opened.retrieval.index_project("p1", root)
    chunks = len(ChunkStore(opened.database).load("p1"))
    await opened.close()

    for damage in ("delete", "garbage"):
        if damage == "delete":
            shutil.rmtree(data / "chroma")
        else:
            (data / "chroma" / "chroma.sqlite3").write_bytes(b"\x00not a database" * 1000)
        opened = build_retrieval(data)
        try:
            report = await opened.retrieval.index_project("p1", root)
            assert report.repaired == chunks
            hits = await opened.retrieval.search("p1", "他想起了那把钥匙藏在哪里", mode="dense")
            assert KEY_FACT in hits[0].text
        finally:
            await opened.close()
    assert any(p.name.startswith("chroma.damaged-") for p in data.iterdir())


async def test_an_older_layout_or_another_embedding_rebuilds_everything(tmp_path: Path) -> None:
    """When the stored index was built with another layout or embedder (a previous version of the
    app), the next start drops it and indexes every document again."""
    root = write_project(tmp_path / "novel")
    data = tmp_path / "data"
    opened = build_retrieval(data)
    await opened.retrieval.index_project("p1", root)
    await opened.close()
    for change in ("layout", "embedding"):
        opened = build_retrieval(data)
        try:
            store = ChunkStore(opened.database)
            state = store.state("p1")
            assert state is not None
            older = replace(state, layout=0) if change == "layout" else replace(state, embedding="other")
            store.reset("p1", older)
            report = await opened.retrieval.index_project("p1", root)
            assert report.rebuilt
            assert report.changed == 7
            assert store.state("p1") == state
            assert KEY_FACT in (await opened.retrieval.search("p1", "钥匙藏在灯塔台阶下"))[0].text
        finally:
            await opened.close()


async def test_an_edit_outside_the_app_is_picked_up_by_the_watcher(tmp_path: Path) -> None:
    """With watching on, a file saved by another program is re-indexed without any call."""
    root = write_project(tmp_path / "novel")
    opened = build_retrieval(tmp_path / "data", watch=True)
    retrieval = opened.retrieval
    try:
        await retrieval.index_project("p1", root)
        await asyncio.sleep(0.3)  # the watcher is running
        (root / "卷一" / "第06章.md").write_text("第六章\n\n沈舟在雾笛旁找到了失踪船长的航海日志。\n",
                                               encoding="utf-8")
        for _ in range(200):
            hits = await retrieval.search("p1", "失踪船长的航海日志", mode="lexical")
            if hits and hits[0].document_id == "卷一/第06章.md":
                break
            await asyncio.sleep(0.05)
        else:
            pytest.fail("the new chapter was never indexed")
    finally:
        await opened.close()


class _GatedEmbedding:
    """Wraps the real embedding; blocks batches while ``gate`` is clear (to hold a pass midway)."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.gate = threading.Event()
        self.gate.set()
        self.entered = threading.Event()

    def __call__(self, texts: list[str]) -> Any:
        if len(texts) > 1 or not self.gate.is_set():
            self.entered.set()
            self.gate.wait(30)
        return self.inner(texts)


async def test_a_search_during_indexing_answers_from_the_last_consistent_state(tmp_path: Path) -> None:
    """While a pass is stuck embedding a changed chapter, searches answer at once from the previous
    snapshot (the old text), and see the new text only after the pass completes."""
    root = write_project(tmp_path / "novel")
    opened = build_retrieval(tmp_path / "data")
    retrieval = opened.retrieval
    try:
        await retrieval.index_project("p1", root)
        gated = _GatedEmbedding(retrieval._vectors.embedding)
        retrieval._vectors.embedding = gated
        gated.gate.clear()
        (root / "卷一" / "第04章.md").write_text("第四章\n\n" + "许宁在盐沼边埋下了一封褪色的信。" * 3 + "\n"
                                               + "她回头看了看灯塔，又继续往前走。" * 3 + "\n",
                                               encoding="utf-8")
        indexing = asyncio.ensure_future(retrieval.index_project("p1", root))
        assert await asyncio.to_thread(gated.entered.wait, 30)
        during = await asyncio.wait_for(retrieval.search("p1", "褪色的信埋在哪里", mode="lexical"), 5)
        assert all(h.document_id != "卷一/第04章.md" or "褪色的信" not in h.text for h in during)
        gated.gate.set()
        await indexing
        after = await retrieval.search("p1", "褪色的信埋在哪里", mode="lexical")
        assert after[0].document_id == "卷一/第04章.md"
        assert "褪色的信" in after[0].text
    finally:
        await opened.close()


async def test_passes_stuck_embedding_in_many_projects_leave_searches_and_other_work_running(
        tmp_path: Path) -> None:
    """Index passes run one at a time on a thread of their own: with ten projects waiting to be
    indexed and the running pass stuck in the encoder, a search of an indexed project and other work
    of the event loop's thread pool still answer at once."""
    root = write_project(tmp_path / "novel")
    opened = build_retrieval(tmp_path / "data")
    retrieval = opened.retrieval
    try:
        await retrieval.index_project("p1", root)
        gated = _GatedEmbedding(retrieval._vectors.embedding)
        retrieval._vectors.embedding = gated
        gated.gate.clear()
        for n in range(10):
            folder = tmp_path / f"other-{n}"
            folder.mkdir()
            (folder / "a.md").write_text(f"第{n}个项目。" + "她回头看了看灯塔，又继续往前走。" * 4 + "\n",
                                         encoding="utf-8")
            retrieval.project_opened(f"other-{n}", folder)
        assert await asyncio.to_thread(gated.entered.wait, 30)
        hits = await asyncio.wait_for(retrieval.search("p1", "钥匙藏在灯塔台阶下", mode="lexical"), 5)
        assert hits[0].document_id == "卷一/第02章.md"
        assert await asyncio.wait_for(asyncio.gather(*(asyncio.to_thread(sum, [n, 1]) for n in range(8))),
                                      5) == list(range(1, 9))
        statuses = [await retrieval.status(f"other-{n}") for n in range(10)]
        assert all(status.indexing for status in statuses)
    finally:
        gated.gate.set()
        await opened.close()


async def test_a_vector_from_another_project_fails_the_scope_check(standalone: Standalone,
                                                                   tmp_path: Path) -> None:
    """If the vector store ever holds a sentence labelled with another project, the exact search's
    matrix keeps that label when it reads the row (the project opened again here), the provider's
    item carries that project and screening refuses the whole request with CONTEXT_SCOPE_VIOLATION."""
    root = write_project(tmp_path / "novel")
    retrieval = standalone.retrieval
    await retrieval.index_project("p1", root)
    await retrieval.wait_idle("p1")
    chunk = next(c for c in ChunkStore(standalone.database).load("p1") if KEY_FACT in c.text)
    sentence_id = next(pid for pid, text in chunk.passages() if KEY_FACT in text)
    collection = retrieval._vectors._collection("p1")
    collection.update(ids=[sentence_id],
                      metadatas=[{"project_id": "intruder", "document_id": chunk.document_id}])
    assert await retrieval.release("p1")
    await retrieval.open_project("p1", root)
    hits = await retrieval.search("p1", "钥匙藏在灯塔第三级台阶下的砖缝里")
    assert retrieval._projects["p1"].snapshot.vectors is not None
    foreign = [h for h in hits if h.project_id != "p1"]
    assert [h.project_id for h in foreign] == ["intruder"]
    item = RetrievalProvider._item(foreign[0], _gather_context(), True, ("retrieved", "passages"))
    with pytest.raises(ScopeViolation):
        check_scope([item], "p1")


def _gather_context() -> GatherContext:
    counter = CountCache(resolve_tokenizer())
    skill = get_skill("continue")
    window = cut_window("第五章", 3, skill, 100, counter)
    return GatherContext("p1", "卷一/第05章.md", "zh", skill, window, "", counter)


async def test_a_failing_vector_store_raises_to_the_caller_and_is_checked_on_the_next_pass(
        standalone: Standalone, tmp_path: Path) -> None:
    """When Chroma cannot be read as a project opens, its searches ask Chroma directly; when that
    fails too the error reaches the provider (the assembly then degrades with
    RETRIEVAL_UNAVAILABLE), and the project's next pass verifies the vector store and reads the
    sentence vectors for exact search again."""
    root = write_project(tmp_path / "novel")
    retrieval = standalone.retrieval
    await retrieval.index_project("p1", root)
    await retrieval.wait_idle("p1")
    assert await retrieval.release("p1")
    vectors = retrieval._vectors

    def broken(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("store unavailable")

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(vectors, "stored", broken)
        patch.setattr(vectors, "query", broken)
        await retrieval.open_project("p1", root)
        assert retrieval._projects["p1"].snapshot.vectors is None
        with pytest.raises(RuntimeError):
            await retrieval.search("p1", "钥匙藏在哪里")
        assert retrieval._projects["p1"].verify
    await retrieval.wait_idle("p1")
    assert not retrieval._projects["p1"].verify
    assert retrieval._projects["p1"].snapshot.vectors is not None
    assert KEY_FACT in (await retrieval.search("p1", "钥匙藏在灯塔台阶下"))[0].text


async def test_a_pass_that_fails_keeps_its_documents_waiting_and_is_tried_again(
        standalone: Standalone, tmp_path: Path) -> None:
    """A document written while the vector store fails stays waiting (index:status says indexing)
    and is indexed once the store is back, without another change; the store's failure is not
    taken for a settled index."""
    root = write_project(tmp_path / "novel")
    retrieval = standalone.retrieval
    await retrieval.index_project("p1", root)
    await retrieval.wait_idle("p1")
    vectors = retrieval._vectors
    failed = asyncio.Event()

    def broken(*args: Any, **kwargs: Any) -> Any:
        failed.set()
        raise RuntimeError("store unavailable")

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(vectors, "add", broken)
        (root / "卷一" / "第07章.md").write_text("第七章\n\n沈舟在雾笛旁找到了失踪船长的航海日志。\n",
                                               encoding="utf-8")
        retrieval.document_written("p1", "卷一/第07章.md")
        await asyncio.wait_for(failed.wait(), 30)
        for _ in range(3000):  # the failed pass hands its documents back as it ends
            if not retrieval._projects["p1"].lock.locked():
                break
            await asyncio.sleep(0.01)
        else:
            pytest.fail("the failed pass never ended")
        assert retrieval._projects["p1"].pending  # its document waits for the next pass
        assert (await retrieval.status("p1")).indexing
    await retrieval.wait_idle("p1", timeout=30)
    hits = await retrieval.search("p1", "失踪船长的航海日志", mode="lexical")
    assert hits[0].document_id == "卷一/第07章.md"
    assert not (await retrieval.status("p1")).indexing


def test_collection_names_are_valid_for_any_project_id() -> None:
    """Hex ids name their collection directly; an id Chroma would refuse is hashed into a valid name."""
    from services.retrieval.vectors import VectorIndex

    assert VectorIndex.collection_name("0123abcd") == "strata-0123abcd"
    name = VectorIndex.collection_name("项目 一/二")
    assert name.startswith("strata-")
    assert len(name) == 39
    assert all(ch.isalnum() or ch in "-" for ch in name)


async def test_the_dense_query_takes_indexed_sentences_from_the_snapshot_matrix_not_the_store(
        standalone: Standalone, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The sentences before the cursor that the index holds are taken from the snapshot's sentence
    matrix: the vector store is not read for them, and the query vector is the one their stored
    vectors give (to float32 precision)."""
    root = write_project(tmp_path / "novel")
    retrieval = standalone.retrieval
    await retrieval.index_project("p1", root)
    document = "卷一/第05章.md"
    text = (root / document).read_text(encoding="utf-8")
    query = DenseQuery.before_cursor(settled(text[:400]), "", document)
    project = await retrieval._project("p1")
    snapshot = project.snapshot
    assert snapshot.vectors is not None
    assert query.sentences
    ids = [snapshot.sentence_ids(document)[content_hash(s)] for s in query.sentences]
    stored = retrieval._vectors.vectors("p1", ids)
    expected = combine([stored[i] for i in ids], None)
    reads: list[object] = []
    real_read = retrieval._vectors.vectors

    def read(*args: Any) -> dict[str, Any]:
        reads.append(args)
        return real_read(*args)

    monkeypatch.setattr(retrieval._vectors, "vectors", read)
    vector = retrieval._query_vector("p1", snapshot, query)
    assert reads == []
    assert vector is not None
    assert np.allclose(vector, expected, atol=1e-6)


def _search_threads(retrieval: Retrieval, monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The threads that each whole search (``Retrieval._search``) ran on from now on, in order."""
    threads: list[int] = []
    real_search = retrieval._search

    def search(*args: Any) -> Any:
        threads.append(threading.get_ident())
        return real_search(*args)

    monkeypatch.setattr(retrieval, "_search", search)
    return threads


async def test_a_search_held_in_memory_runs_on_the_loop_and_one_that_embeds_runs_on_a_thread(
        standalone: Standalone, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A search that needs neither the vector store nor the encoder (BM25 alone, or exact dense
    search with the sentences' vectors in the snapshot's matrix and the instruction's kept) runs on
    the event loop's thread; one whose instruction must be embedded first runs on a worker thread,
    and so does the next search with a new sentence; the same search again, now held, on the loop."""
    root = write_project(tmp_path / "novel")
    retrieval = standalone.retrieval
    await retrieval.index_project("p1", root)
    await retrieval.wait_idle("p1")
    document = "卷一/第05章.md"
    text = (root / document).read_text(encoding="utf-8")
    threads = _search_threads(retrieval, monkeypatch)
    loop = threading.get_ident()

    async def thread_of(query: str, dense: DenseQuery | None, mode: str = "hybrid") -> int:
        threads.clear()
        await retrieval.search("p1", query, dense_query=dense, mode=mode,  # type: ignore[arg-type]
                               exclude=Exclusion(document, 400))
        assert len(threads) == 1
        return threads[0]

    before = settled(text[:400])
    indexed = DenseQuery.before_cursor(before, "", document)
    assert indexed.sentences
    assert await thread_of(before, indexed) == loop
    assert await thread_of("钥匙藏在哪里", None, mode="lexical") == loop
    instructed = DenseQuery.before_cursor(before, "续写：他想起了钥匙", document)
    assert await thread_of(before + "续写", instructed) != loop
    assert await thread_of(before + "续写一段", instructed) == loop  # the instruction's vector is kept
    unseen = DenseQuery(("这是一个索引里没有的句子。",), "", document)
    assert await thread_of(before + "新", unseen) != loop
    assert await thread_of(before + "新句", unseen) == loop  # embedded once, then cached


async def _held_query(retrieval: Retrieval, tmp_path: Path) -> tuple[str, str, DenseQuery]:
    """A project indexed and settled as p1, and a query of one of its chapters that its sentence
    matrix holds: (document, text before the cursor up to its last sentence, dense query)."""
    root = write_project(tmp_path / "novel")
    await retrieval.index_project("p1", root)
    await retrieval.wait_idle("p1")
    document = "卷一/第05章.md"
    before = settled((root / document).read_text(encoding="utf-8")[:400])
    return document, before, DenseQuery.before_cursor(before, "", document)


async def test_a_held_search_over_many_rows_multiplies_on_a_thread_and_answers_as_on_the_loop(
        standalone: Standalone, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Past THREADED_ROWS sentence rows, a search held in memory runs its matrix product on a worker
    thread (BM25 ranks on the loop meanwhile) and answers the very hits, scores and order of the same
    search run whole on the loop, in each mode."""
    from services.retrieval import service as retrieval_service
    from services.retrieval.dense import SentenceMatrix

    retrieval = standalone.retrieval
    document, before, dense = await _held_query(retrieval, tmp_path)
    threads: list[int] = []
    real_top = SentenceMatrix.top

    def top(matrix: SentenceMatrix, *args: Any) -> Any:
        threads.append(threading.get_ident())
        return real_top(matrix, *args)

    monkeypatch.setattr(SentenceMatrix, "top", top)
    answers: dict[int, list[Any]] = {}
    modes: list[tuple[Mode, str]] = [("hybrid", ""), ("dense", "。"), ("lexical", "，")]
    for rows in (10**9, 0):  # whole on the loop, then the product on a thread
        monkeypatch.setattr(retrieval_service, "THREADED_ROWS", rows)
        retrieval._results.drop("p1")
        answers[rows] = [await retrieval.search("p1", before + suffix, dense_query=dense, mode=mode,
                                                exclude=Exclusion(document, 400))
                         for mode, suffix in modes]
    assert threads[:2] == [threading.get_ident()] * 2
    assert len(threads) == 4
    assert threading.get_ident() not in threads[2:]
    assert answers[0] == answers[10**9]
    assert all(answers[0][:2])


async def test_a_lone_search_starts_its_product_before_bm25_holds_the_loop(
        standalone: Standalone, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A lone held search lets its worker thread begin the matrix product before BM25 ranks on the
    loop (so the two run side by side); a search while another's product runs does not wait for its
    own; the count of products in flight comes back to none, also when BM25 fails."""
    from services.retrieval import service as retrieval_service
    from services.retrieval.dense import SentenceMatrix

    retrieval = standalone.retrieval
    document, before, dense = await _held_query(retrieval, tmp_path)
    monkeypatch.setattr(retrieval_service, "THREADED_ROWS", 0)
    monkeypatch.setattr(retrieval_service, "PRODUCT_HANDOFF_S", 60.0)  # the wait ends when it starts
    events: list[str] = []
    real_top, real_lexical = SentenceMatrix.top, retrieval._lexical

    def top(matrix: SentenceMatrix, *args: Any) -> Any:
        events.append("product")
        return real_top(matrix, *args)

    def lexical(*args: Any) -> Any:
        events.append("bm25")
        return real_lexical(*args)

    # A worker of the default pool waits idle (a new one would be started by the call that hands it
    # the product, and could run it before BM25 even without the wait). The pause only sharpens the
    # test against a missing wait: with the wait, the order holds however long the worker takes.
    await asyncio.get_running_loop().run_in_executor(None, time.sleep, 0)
    await asyncio.sleep(0.1)
    monkeypatch.setattr(SentenceMatrix, "top", top)
    monkeypatch.setattr(retrieval, "_lexical", lexical)
    await retrieval.search("p1", before, dense_query=dense, exclude=Exclusion(document, 400))
    assert events == ["product", "bm25"]
    assert retrieval._products == 0

    events.clear()
    retrieval._products = 1  # another search's product is running
    waits: list[float | None] = []
    real_wait = threading.Event.wait

    def wait(event: threading.Event, timeout: float | None = None) -> bool:
        waits.append(timeout)
        return real_wait(event, timeout)

    monkeypatch.setattr(threading.Event, "wait", wait)
    await retrieval.search("p1", before + "。", dense_query=dense, exclude=Exclusion(document, 400))
    assert 60.0 not in waits
    assert retrieval._products == 1
    retrieval._products = 0

    def failing(*args: Any) -> Any:
        raise RuntimeError("bm25 failed")

    monkeypatch.setattr(retrieval, "_lexical", failing)
    with pytest.raises(RuntimeError):
        await retrieval.search("p1", before + "，", dense_query=dense, exclude=Exclusion(document, 400))
    assert retrieval._products == 0


async def test_chinese_is_never_split_on_the_loop_before_the_dictionary_loads(
        standalone: Standalone, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """jieba's dictionary takes seconds to load. A project with Chinese chunks starts loading it in
    the background when it opens, off the event loop, and ``prepared`` waits for it; until it is
    ready, a search that splits Chinese runs whole on a worker thread (and waits for it there),
    with the hits it has once loaded; the next one, the dictionary ready, runs on the loop."""
    from services.retrieval.lexical import Terms

    root = write_project(tmp_path / "novel")
    retrieval = standalone.retrieval
    await retrieval.index_project("p1", root)
    await retrieval.wait_idle("p1")
    query = "钥匙藏在哪里"
    expected = await retrieval.search("p1", query, mode="lexical")
    assert expected

    loads: list[int] = []

    class Watched(Terms):
        def _segmenter(self) -> Any:
            if not self.ready:
                loads.append(threading.get_ident())
            return super()._segmenter()

    threads = _search_threads(retrieval, monkeypatch)
    loop = threading.get_ident()
    retrieval._terms = Watched()
    retrieval._results.drop("p1")
    retrieval._query_terms.drop("p1")
    assert await retrieval.search("p1", query, mode="lexical") == expected
    assert threads
    assert threads[-1] != loop
    assert loop not in loads

    assert await retrieval.release("p1")
    retrieval._terms = Watched()
    await retrieval.open_project("p1", root)
    await retrieval.prepared("p1")  # what an assembly waits for apart from its search deadline
    assert retrieval._terms.ready
    assert loads
    assert loop not in loads
    threads.clear()
    assert await retrieval.search("p1", query + "？", mode="lexical") == expected
    assert threads == [loop]


class Saves:
    """A clock that moves only with sleeps, and saves that come during the first ``saving`` of them."""

    def __init__(self, wake: asyncio.Event, saving: int) -> None:
        self.wake, self.saving, self.now, self.sleeps = wake, saving, 0.0, 0

    async def sleep(self, seconds: float) -> None:
        self.sleeps += 1
        self.now += seconds
        if self.sleeps <= self.saving:
            self.wake.set()  # another keystroke's save

    def clock(self) -> float:
        return self.now


@pytest.mark.parametrize(("saving", "sleeps"), [(0, 1), (3, 4), (100, 7)])
async def test_a_pass_waits_for_the_saves_to_pause_but_not_past_the_limit(saving: int, sleeps: int) -> None:
    """One save waits one debounce; saves that keep coming within the debounce (a writer typing) are
    waited out, then one debounce more; saves that never stop are waited for at most the limit
    (2 s here: 7 debounces of 0.3 s)."""
    wake = asyncio.Event()
    wake.set()
    saves = Saves(wake, saving)
    await saves_paused(wake, 0.3, limit=2.0, sleep=saves.sleep, clock=saves.clock)
    assert saves.sleeps == sleeps




async def test_saves_that_never_stop_are_waited_for_until_the_limit_not_past_it() -> None:
    """With saves coming at every debounce, the pass starts when the limit is reached: the last
    wait is cut short, so the pass never starts later than the limit after the first save."""
    wake = asyncio.Event()
    wake.set()
    saves = Saves(wake, 100)
    await saves_paused(wake, 0.3, limit=2.0, sleep=saves.sleep, clock=saves.clock)
    assert saves.now == pytest.approx(2.0)


def _wait_for_the_helper(monkeypatch: pytest.MonkeyPatch, encoder: type) -> None:
    """Make the pass's thread wait (bounded) until the helper has taken a batch, so that both work."""
    embed, helping = encoder.__call__, threading.Event()

    def paced(self: Any, input: list[str]) -> Any:  # Chroma checks the parameter's name
        if threading.current_thread().name == "strata-index-helper":
            helping.set()
        else:
            helping.wait(10)
        return embed(self, input)

    monkeypatch.setattr(encoder, "__call__", paced)


async def _first_index(data: Path, root: Path, monkeypatch: pytest.MonkeyPatch,
                       spare_core: Any) -> tuple[Any, dict[str, Any], list[Any]]:
    opened = build_retrieval(data, spare_core=spare_core)
    try:
        if spare_core is not None:
            _wait_for_the_helper(monkeypatch, type(opened.retrieval._vectors.embedding))
        report = await opened.retrieval.index_project("p1", root)
        vectors = opened.retrieval._vectors
        return report, vectors.vectors("p1", vectors.ids("p1")), ChunkStore(opened.database).load("p1")
    finally:
        await opened.close()


async def test_a_pass_on_the_spare_core_stores_the_vectors_a_pass_alone_stores(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """With the spare core idle, a first index embeds some batches on a helper thread (the pass
    says how many), and stores exactly the vectors, under the same ids, and the same chunks as a
    pass on one thread."""
    root = tmp_path / "novel"
    (root / "卷一").mkdir(parents=True)
    (root / "卷一" / "第01章.md").write_text(zh_chapter("第1章", 120), encoding="utf-8")
    (root / "卷一" / "第02章.md").write_text(zh_chapter("第2章", 10, start=200), encoding="utf-8")
    alone, alone_vectors, alone_chunks = await _first_index(tmp_path / "a", root, monkeypatch, None)
    helped, helped_vectors, helped_chunks = await _first_index(tmp_path / "b", root, monkeypatch,
                                                               lambda: True)
    assert alone.helped == 0
    assert helped.helped >= 1
    assert alone.sentences == helped.sentences > 64  # more than two batches in the first chapter
    assert alone_vectors.keys() == helped_vectors.keys()
    assert all(np.array_equal(alone_vectors[k], helped_vectors[k]) for k in alone_vectors)
    assert alone_chunks == helped_chunks
