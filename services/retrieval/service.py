"""Retrieval for the Retrieved layer: keeps each open project's index current and searches it.

One worker per project applies changes in order (saves until they pause for
``debounce`` seconds are one pass, within MAX_DEFER_S of the first); a watcher
feeds it edits made outside the app. Searches read the last published :class:`Snapshot`, so they never wait
for indexing and never see it half done.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Coroutine, Hashable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import structlog

from services.caches import QueryTerms, SearchResults, query_terms_cache, search_result_cache
from services.retrieval.chunking import content_hash
from services.retrieval.dense import SentenceMatrix
from services.retrieval.embeddings import Embedder, embed_queries
from services.retrieval.indexer import Indexer, IndexStopped, SyncReport
from services.retrieval.lexical import LexicalRanking, Terms, needs_segmenter
from services.retrieval.query import DenseQuery, combine
from services.retrieval.readahead import Steps
from services.retrieval.search import (
    Exclusion,
    Hit,
    Mode,
    Snapshot,
    dense_weight,
    fuse,
    hub_penalty,
)
from services.retrieval.store import ChunkRecord, ChunkStore
from services.retrieval.vectors import VectorIndex
from services.retrieval.watcher import watch_documents

_log = structlog.get_logger("retrieval")

Roots = Callable[[str], Awaitable[Path]]
ProgressSink = Callable[[dict[str, Any]], None]
QUERY_CHARS = 2000  # lexical query cap: terms past it add little
# Nearest sentence vectors a hybrid search takes: exact from the snapshot's sentence vectors
# (services/retrieval/dense.py), or asked of Chroma for a project too large to hold them. Chroma's
# HNSW search looks at as many candidates as it is asked for, and at 100 it missed the nearest
# sentence of several evaluation queries; 400 found them (docs/retrieval.md).
DENSE_SENTENCES = 400
# When Chroma is asked: the nearest sentences whose stored labels (project, chunk) are read and
# checked. The chunks that can score in hybrid fusion (DENSE_FLOOR_RANK of them) come from these;
# the rest are placed by their ids.
LABELLED_SENTENCES = 100
SAMPLED_CHUNKS = 32  # a project's chunks looked at for Chinese when it opens
# Sentence rows from which a held search's matrix product goes to a worker thread: the hop and the
# GIL handoffs cost about 0.1 ms, the product about 0.1 ms per 1,000 rows of 384 dimensions here.
THREADED_ROWS = 2048
# How long a lone search waits for its product's worker thread to take the GIL and start: an idle
# worker wakes in a tenth of a millisecond or so; past this the search goes on without it.
PRODUCT_HANDOFF_S = 0.001
# A pass waits for a document's saves to pause for the debounce, but no longer than this after the
# first: a writer typing saves at every keystroke, and each pass publishes a snapshot that the kept
# search results do not outlive.
MAX_DEFER_S = 2.0
# A pass that failed (the vector store down) is tried again after this long, doubling up to the most.
RETRY_FIRST_S = 1.0
RETRY_MOST_S = 60.0
DENSE_QUERY_CHARS = 600  # the encoder's cost grows with the text (~25 ms per 500 characters)
# Index passes that embedded this many sentences freed the encoder's working arrays (megabytes),
# which the allocator keeps unless asked to give them back; a keystroke's pass embeds one or two.
FREED_AFTER = 32
_PROGRESS_EVERY = 0.2  # seconds between progress reports of one pass
# (snapshot version, lexical query, dense query, limit, mode, exclusion with its cursor settled)
_SearchKey = tuple[int, str, str | DenseQuery, int, Mode, Exclusion | None]


@dataclass
class _Project:
    project_id: str
    root: Path
    snapshot: Snapshot
    wake: asyncio.Event = field(default_factory=asyncio.Event)
    pending: set[str] | None = field(default_factory=set)  # None: every document
    verify: bool = True  # check the vector store against the chunk table on the next pass
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    tasks: list[asyncio.Task[None]] = field(default_factory=list)
    used: float = field(default_factory=time.monotonic)  # when a request last needed it
    queued: int = 0  # passes waiting for the lock
    embedded: int = 0  # sentences embedded since memory was last given back
    # Stops its watcher; its own, since watchfiles sets the event of a watch that is cancelled.
    stop: threading.Event = field(default_factory=threading.Event)

    retry_after: float = 0.0  # seconds before a failed pass is tried again (0: none failed)
    retrying: bool = False  # a retry is waiting to wake the worker

    def schedule(self, documents: Iterable[str] | None, *, wake: bool = True) -> None:
        if documents is None or self.pending is None:
            self.pending = None
        else:
            self.pending.update(documents)
        if wake:
            self.wake.set()

    def take(self) -> set[str] | None:
        taken, self.pending = self.pending, set()
        return taken


@dataclass(frozen=True, slots=True)
class IndexStatus:
    project_id: str
    indexing: bool  # a pass is running or changes are waiting for one
    documents: int  # in the published snapshot
    chunks: int


class Retrieval:
    def __init__(self, store: ChunkStore, indexer: Indexer, vectors: VectorIndex, terms: Terms, *,
                 roots: Roots, debounce: float = 0.3, watch: bool = True,
                 embedder: Embedder | None = None, results: SearchResults | None = None,
                 query_terms: QueryTerms | None = None, idle_after: float | None = None,
                 max_open: int | None = None,
                 on_freed: Callable[[], None] | None = None) -> None:
        self._store = store
        self.embedder = embedder
        self._indexer = indexer
        self._vectors = vectors
        self._terms = terms
        self._roots = roots
        self._debounce = debounce
        self._watch = watch
        self.progress: ProgressSink | None = None
        self._projects: dict[str, _Project] = {}
        self._opening: dict[str, asyncio.Future[_Project]] = {}
        self._closing = indexer.stop  # set by close(): passes stop between embedding batches
        # Index passes run on a thread of their own, one pass at a time: a first index with e5 takes
        # minutes, and in the event loop's default pool it would hold a thread that assemblies' work
        # (searches, reads, counting) needs, and a second core the event loop needs.
        self._indexing = ThreadPoolExecutor(max_workers=1, thread_name_prefix="strata-index")
        self._queries: OrderedDict[str, Any] = OrderedDict()
        self._queries_lock = threading.Lock()
        self._background: set[asyncio.Future[Any]] = set()
        self._terms_loading: asyncio.Future[Any] | None = None  # jieba's dictionary, loading on a thread
        # Results by (snapshot version, query, exclusion, ...), per project and bounded (made by the
        # composition root); searches running now by the same key, so identical ones run once.
        self._results = results if results is not None else search_result_cache()
        # Terms of the runs of words in lexical queries, per project (jieba's segmentation is the cost).
        self._query_terms = query_terms if query_terms is not None else query_terms_cache()
        self._running: dict[tuple[str, Hashable], asyncio.Future[tuple[Hit, ...]]] = {}
        self._steps: dict[tuple[str, Hashable], Steps] = {}  # when each running search's steps may run
        self._products = 0  # held searches' matrix products on worker threads now (event loop only)
        # Projects' indexes in memory are let go after ``idle_after`` seconds without a request that
        # needs them, and beyond ``max_open`` (least recently used first). ``on_freed`` (blocking, run
        # off the loop) gives freed memory back: after a release, and after a pass that embedded at
        # least FREED_AFTER sentences in total with no pass waiting, before that pass counts as done
        # (so a settled index has given its encoder's memory back).
        self._idle_after = idle_after
        self._max_open = max_open
        self._on_freed = on_freed
        self._sweeper: asyncio.Task[None] | None = None

    @property
    def embedding(self) -> Any:
        """The encoder other stores share (a Chroma embedding function): the index's own, except
        that stores embedding inside a request keep the fast bundled encoder when the index uses e5
        (:attr:`Embedder.shared`)."""
        return self.embedder.shared if self.embedder is not None else self._vectors.embedding

    def describe_embedding(self) -> dict[str, str]:
        """``{name, reason}`` of the encoder the index uses (for ``system:info``)."""
        if self.embedder is not None:
            return self.embedder.describe()
        return {"name": self._indexer.state.embedding, "reason": "configured"}

    # -- keeping the index current

    async def open_project(self, project_id: str, root: Path | None = None) -> None:
        """Start keeping the project's index current (idempotent): publish what is indexed, then
        check every file and start watching the folder."""
        await self._project(project_id, root)

    async def index_project(self, project_id: str, root: Path | None = None) -> SyncReport:
        """Open the project and bring its whole index up to date now; the pass's report."""
        project = await self._project(project_id, root)
        project.take()
        return await self._pass(project, None)

    async def touch(self, project_id: str, document_id: str) -> None:
        """A document was written: re-index it after the debounce."""
        (await self._project(project_id)).schedule([document_id])

    def project_opened(self, project_id: str, root: Path) -> None:
        """Start indexing and watching in the background (for ``project:open``)."""
        self._spawn(self.open_project(project_id, root))

    def document_written(self, project_id: str, document_id: str) -> None:
        """Re-index a written document in the background (for ``document:write``)."""
        self._spawn(self.touch(project_id, document_id))

    def _spawn(self, work: Coroutine[Any, Any, None]) -> asyncio.Future[None] | None:
        if self._closing.is_set():
            work.close()  # never started: closed, not left for the collector to warn about
            return None
        task = asyncio.ensure_future(work)
        self._background.add(task)
        task.add_done_callback(self._finished)
        return task

    async def prepared(self, project_id: str) -> None:
        """Wait until a search of the project has nothing left to load: its index open, and jieba's
        dictionary if it holds Chinese (the assembly waits for this apart from its search deadline)."""
        await self._project(project_id)
        if self._terms_loading is not None and not self._terms_loading.done():
            await asyncio.wait([self._terms_loading])  # a failed load: the search tries again itself

    def _finished(self, task: asyncio.Future[Any]) -> None:
        self._background.discard(task)
        if not task.cancelled() and task.exception() is not None:
            _log.warning("retrieval.background_failed", exc_type=type(task.exception()).__name__)

    async def status(self, project_id: str) -> IndexStatus:
        """Whether the project's index is settled, and what its published snapshot holds."""
        project = await self._project(project_id)
        snapshot = project.snapshot
        return IndexStatus(project_id, _busy(project), snapshot.documents, len(snapshot.chunks))

    async def wait_idle(self, project_id: str, timeout: float = 30.0) -> None:
        """Wait until nothing is pending or running for the project (for tests and scripts)."""
        project = await self._project(project_id)
        deadline = time.monotonic() + timeout
        while _busy(project):
            if time.monotonic() > deadline:
                raise TimeoutError("indexing did not settle")
            await asyncio.sleep(0.02)

    async def _project(self, project_id: str, root: Path | None = None) -> _Project:
        project = self._projects.get(project_id)
        if project is not None:
            project.used = time.monotonic()
            return project
        opening = self._opening.get(project_id)
        if opening is None:
            opening = asyncio.ensure_future(self._open(project_id, root))
            self._opening[project_id] = opening
            opening.add_done_callback(lambda _: self._opening.pop(project_id, None))
        return await asyncio.shield(opening)

    async def _open(self, project_id: str, root: Path | None) -> _Project:
        root = root or await self._roots(project_id)
        snapshot = await asyncio.to_thread(self._load_snapshot, project_id)
        project = _Project(project_id, root, snapshot)
        if (self._terms_loading is None and not self._terms.ready
                and any(needs_segmenter(c.text) for c in snapshot.chunks[:SAMPLED_CHUNKS])):
            # A Chinese project's first search would otherwise wait for jieba's dictionary.
            self._terms_loading = self._spawn(asyncio.to_thread(self._terms.load))
        project.tasks.append(asyncio.ensure_future(self._work(project)))
        if self._watch:
            project.tasks.append(asyncio.ensure_future(
                watch_documents(root, project.schedule, debounce=self._debounce, stop=project.stop)))
        self._projects[project_id] = project
        project.schedule(None)
        _log.info("retrieval.opened", project_id=project_id, chunks=len(snapshot.chunks))
        if self._idle_after and self._sweeper is None:
            self._sweeper = asyncio.ensure_future(self._sweep(self._idle_after))
        if self._max_open is not None and len(self._projects) > self._max_open:
            self._spawn(self._release_beyond(self._max_open))
        return project

    # -- letting go of idle projects

    async def release(self, project_id: str) -> bool:
        """Let go of a project's index in memory (its snapshot and BM25 matrix, kept results and
        vectors, Chroma handle, watcher and worker); the next request that needs it opens it again
        from the store, with the same results. False if it was not open or is indexing."""
        project = self._projects.get(project_id)
        if project is None or _busy(project):
            return False
        del self._projects[project_id]
        project.stop.set()
        for task in project.tasks:
            task.cancel()
        await asyncio.gather(*project.tasks, return_exceptions=True)
        self._results.drop(project_id)
        self._query_terms.drop(project_id)
        self._vectors.release(project_id)
        self._indexer.cache.drop(project_id)
        _log.info("retrieval.released", project_id=project_id, chunks=len(project.snapshot.chunks))
        return True

    async def _sweep(self, idle_after: float) -> None:
        while not self._closing.is_set():
            await asyncio.sleep(max(idle_after / 2, 0.05))
            now = time.monotonic()
            released = False
            for project_id in [p.project_id for p in self._projects.values() if now - p.used >= idle_after]:
                released = await self.release(project_id) or released
            if released:
                self._freed()

    async def _release_beyond(self, limit: int) -> None:
        released = False
        for project in sorted(self._projects.values(), key=lambda p: p.used):
            if len(self._projects) <= limit:
                break
            released = await self.release(project.project_id) or released
        if released:
            self._freed()

    def _freed(self) -> None:
        if self._on_freed is not None:
            self._spawn(asyncio.to_thread(self._on_freed))

    def _load_snapshot(self, project_id: str) -> Snapshot:
        if self._store.state(project_id) != self._indexer.state:
            return Snapshot(())  # stale layout or embedder: nothing usable until rebuilt
        return self._with_vectors(project_id, Snapshot(self._store.load(project_id)), None)

    def _updated(self, project_id: str, snapshot: Snapshot,
                 documents: Mapping[str, Sequence[ChunkRecord]]) -> Snapshot:
        return self._with_vectors(project_id, snapshot.updated(documents), snapshot.vectors)

    def _with_vectors(self, project_id: str, snapshot: Snapshot,
                      previous: SentenceMatrix | None) -> Snapshot:
        """``snapshot`` with its sentence vectors for exact search: ``previous``'s rows, and the new
        sentences' read from the vector store. If that read fails, Chroma is searched instead."""
        try:
            snapshot.vectors = SentenceMatrix.build(project_id, snapshot.sentence_vector_ids(),
                                                     partial(self._vectors.stored, project_id), previous)
        except Exception as exc:  # the store's own errors: search it directly, as before
            _log.warning("retrieval.vectors_unread", project_id=project_id, exc_type=type(exc).__name__)
        return snapshot

    async def _work(self, project: _Project) -> None:
        while not self._closing.is_set():
            await project.wake.wait()
            await saves_paused(project.wake, self._debounce)
            only = project.take()
            project.wake.clear()
            if only == set() and not project.verify:
                continue  # what woke it was indexed meanwhile (index_project takes the pending too)
            try:
                await self._pass(project, only)
                project.retry_after = 0.0
            except IndexStopped:
                return
            except Exception as exc:  # the store failed: keep the last snapshot and what was asked
                project.verify = True
                project.schedule(only, wake=False)  # still waiting: index:status says so
                project.retry_after = min(max(project.retry_after * 2, RETRY_FIRST_S), RETRY_MOST_S)
                if not project.retrying:  # one timer a project, however many passes fail meanwhile
                    project.retrying = True
                    self._spawn(self._retry(project, project.retry_after))
                _log.warning("retrieval.index_failed", project_id=project.project_id,
                             exc_type=type(exc).__name__, retry_s=project.retry_after)
            if self._max_open is not None and len(self._projects) > self._max_open:
                # A project busy when the bound was passed (at an open) could not leave then.
                self._spawn(self._release_beyond(self._max_open))

    async def _retry(self, project: _Project, delay: float) -> None:
        """Wake the project's worker for the documents a failed pass left waiting (a store that
        comes back is used without another change), unless a change woke it first."""
        try:
            await asyncio.sleep(delay)
            project.wake.set()
        finally:
            project.retrying = False

    async def _pass(self, project: _Project, only: set[str] | None) -> SyncReport:
        project.queued += 1  # busy while it waits for the pass before it, too
        try:
            await project.lock.acquire()
        finally:
            project.queued -= 1
        try:
            return await self._locked_pass(project, only)
        finally:
            project.lock.release()

    async def _locked_pass(self, project: _Project, only: set[str] | None) -> SyncReport:
        verify, project.verify = project.verify, False
        progress = self._reporter(project.project_id, only)
        try:
            sync = partial(self._indexer.sync, project.project_id, project.root, only, verify=verify,
                           progress=progress)
            report = await asyncio.get_running_loop().run_in_executor(self._indexing, sync)
        except BaseException:
            project.verify = True
            raise
        if report.rebuilt or report.repaired or verify:
            project.snapshot = await asyncio.to_thread(self._load_snapshot, project.project_id)
            self._results.drop(project.project_id)
        elif report.updates:
            project.snapshot = await asyncio.to_thread(
                self._updated, project.project_id, project.snapshot, report.updates)
            self._results.drop(project.project_id)
            await asyncio.to_thread(self._vectors.delete, project.project_id, report.orphans)
        await self._settle(project, report)
        return report

    async def _settle(self, project: _Project, report: SyncReport) -> None:
        """Give memory back once many sentences were embedded and no pass is waiting: the encoder's
        arrays of a whole project's first index are freed by then."""
        project.embedded += report.sentences + report.repaired
        if self._on_freed is None or project.embedded < FREED_AFTER or _waiting(project):
            return
        project.embedded = 0
        await asyncio.get_running_loop().run_in_executor(self._indexing, self._on_freed)

    def _reporter(self, project_id: str, only: set[str] | None) -> Callable[[int, int], None]:
        loop = asyncio.get_running_loop()
        last = [0.0]

        def report(done: int, total: int) -> None:
            if self._closing.is_set():
                raise IndexStopped
            sink = self.progress
            if sink is None or (only is not None and len(only) < 2):
                return
            now = time.monotonic()
            if done != total and done != 1 and now - last[0] < _PROGRESS_EVERY:
                return
            last[0] = now
            kind = "begin" if done == 1 else "end" if done == total else "report"
            params = {"token": f"index/{project_id}", "value": {
                "kind": kind, "title": "Indexing", "projectId": project_id, "done": done, "total": total,
                "percentage": round(100 * done / total) if total else 100}}
            loop.call_soon_threadsafe(sink, params)

        return report

    # -- searching

    async def search(self, project_id: str, query: str, *, limit: int = 200, mode: Mode = "hybrid",
                     exclude: Exclusion | None = None, dense_query: str | DenseQuery | None = None,
                     pause: Callable[[], Awaitable[bool]] | None = None) -> list[Hit]:
        """The project's chunks most relevant to ``query``, best first, scores normalized to 0..1.

        ``dense_query`` (default: ``query``) is what the encoder sees: a text, embedded as a query
        and cut to :data:`DENSE_QUERY_CHARS`, or a :class:`DenseQuery` of the writer's sentences
        (their vectors mostly read from the index) and an instruction. BM25 uses ``query``.

        ``pause`` is for a search nobody waits for yet (reading ahead): it is awaited before each
        step that holds the event loop, and False gives the search up (an empty result, not kept).
        A caller without one that joins the search has it go on without pauses.
        """
        project = await self._project(project_id)
        snapshot = project.snapshot
        if not snapshot.chunks or not query.strip():
            return []
        dense = dense_query if dense_query is not None else query
        if isinstance(dense, str):
            dense = dense[:DENSE_QUERY_CHARS]
        if exclude is not None:
            exclude = snapshot.settled_exclusion(exclude)
        # Everything the result depends on: the same key is the same result, until a new snapshot.
        key = (snapshot.version, query[:QUERY_CHARS], dense, limit, mode, exclude)
        kept = self._results.get(project_id, key)
        if kept is not None:
            return list(kept)
        running_key = (project_id, key)
        running = self._running.get(running_key)
        if running is None:
            steps = self._steps[running_key] = Steps(pause)
            running = asyncio.ensure_future(self._run_search(project, snapshot, key, steps))
            self._running[running_key] = running
            running.add_done_callback(partial(self._search_done, running_key))
        elif pause is None:
            self._steps[running_key].want()
        # A caller that gives up (its deadline) leaves the search running for the others waiting on it.
        return list(await asyncio.shield(running))

    def _given_up(self, project_id: str, key: _SearchKey) -> tuple[Hit, ...]:
        """A search read ahead and given up: no longer running (in the same step as the decision, so
        that no caller can join it now), its empty answer not kept."""
        self._running.pop((project_id, key), None)
        self._steps.pop((project_id, key), None)
        return ()

    def _search_done(self, running_key: tuple[str, Hashable],
                     future: asyncio.Future[tuple[Hit, ...]]) -> None:
        if self._running.get(running_key) is future:  # not a search of the same key started since
            del self._running[running_key]
            self._steps.pop(running_key, None)
        if not future.cancelled():
            future.exception()  # seen here: every waiter gets it, none may be left

    async def _run_search(self, project: _Project, snapshot: Snapshot, key: _SearchKey,
                          steps: Steps) -> tuple[Hit, ...]:
        _, query, dense, limit, mode, exclude = key
        try:
            if not await steps.go_on():
                return self._given_up(project.project_id, key)
            # A search held in memory is mostly GIL-holding Python, run here: a worker thread would not
            # run it beside other work, only contend with the loop for the GIL (a fifth more CPU per
            # assembly at 500 at once, docs/performance.md). Its matrix product releases the GIL and
            # goes to a thread (:meth:`_search_held`). One that reads the vector store or runs the
            # encoder, or splits Chinese before jieba's dictionary has loaded, goes to a thread whole.
            if self._in_memory(project.project_id, snapshot, dense, mode) and (
                    self._terms.ready or mode == "dense" or not needs_segmenter(query)):
                await asyncio.sleep(0)  # frames that came meanwhile are read before the loop is held
                held = await self._search_held(project.project_id, snapshot, query, dense, limit, mode,
                                               exclude, steps)
                if held is None:
                    return self._given_up(project.project_id, key)
                hits = tuple(held)
            else:
                hits = tuple(await asyncio.to_thread(self._search, project.project_id, snapshot, query,
                                                     dense, limit, mode, exclude))
        except Exception:
            project.verify = True  # the vector store may be damaged: the next pass checks and repairs it
            project.schedule(())
            raise
        # Kept only when it is the published snapshot's answer and no pass was writing to the vector
        # store meanwhile: a pass adds vectors before it publishes and deletes orphans after.
        if project.snapshot is snapshot and not project.lock.locked():
            self._results.put(project.project_id, key, hits)
        return hits

    async def _search_held(self, project_id: str, snapshot: Snapshot, query: str,
                           dense_query: str | DenseQuery, limit: int, mode: Mode,
                           exclude: Exclusion | None, steps: Steps) -> list[Hit] | None:
        """:meth:`_search` of a search held in memory, its exact dense product (a matrix-vector
        product over every sentence row, memory-bound and GIL-free) on a worker thread while BM25
        ranks here: under load the product runs on the core the event loop does not hold."""
        matrix = snapshot.vectors
        if matrix is None or mode == "lexical" or len(matrix) < THREADED_ROWS:
            return self._search(project_id, snapshot, query, dense_query, limit, mode, exclude)
        vector = self._query_vector(project_id, snapshot, dense_query)
        if vector is None:
            return self._search(project_id, snapshot, query, dense_query, limit, mode, exclude)
        started = threading.Event()
        # Handed to the default pool here and now (asyncio.to_thread would only once its task runs).
        product = asyncio.get_running_loop().run_in_executor(None, partial(
            _started, started, matrix.top, vector, _sentences_wanted(mode, limit),
            hub_penalty(self._indexer.state.embedding)))
        # No other search running nor waiting, and a caller waiting for this one.
        lone = not self._products and len(self._running) <= 1 and steps.wanted
        self._products += 1
        try:
            if lone:
                # The worker needs the GIL to start, and BM25 below holds it: left alone, the worker
                # waits for it (up to the interpreter's switch interval) and the two run one after the
                # other. Waiting here lets it go until the worker is in the product, which releases it.
                # Only for a lone search: in a burst the workers are busy and the loop has other work
                # (there, in-process, 268 searches of four bursts of 500 still waited, 0.24 ms at p50).
                started.wait(PRODUCT_HANDOFF_S)
            lexical = self._lexical(project_id, snapshot, query, limit, mode)
        finally:  # the thread's product is never left unawaited; BM25's failure, if any, is the one raised
            try:
                await asyncio.wait([product])
            finally:
                self._products -= 1
        if not await steps.go_on():
            return None
        dense = snapshot.dense_rows(matrix, *product.result())
        return fuse(snapshot, dense, lexical, mode=mode, limit=limit, exclude=exclude,
                    dense_weight=dense_weight(self._indexer.state.embedding))

    def _lexical(self, project_id: str, snapshot: Snapshot, query: str, limit: int,
                 mode: Mode) -> LexicalRanking:
        if mode == "dense":
            return LexicalRanking.of(())
        return snapshot.lexical.top(self._terms(query, partial(self._query_terms.get_or_make, project_id)),
                                    2 * limit)

    def _search(self, project_id: str, snapshot: Snapshot, query: str, dense_query: str | DenseQuery,
                limit: int, mode: Mode, exclude: Exclusion | None) -> list[Hit]:
        dense = snapshot.dense_positions(())
        vector = self._query_vector(project_id, snapshot, dense_query) if mode != "lexical" else None
        if vector is not None:
            wanted = _sentences_wanted(mode, limit)
            matrix = snapshot.vectors
            if matrix is not None:
                rows, similarities = matrix.top(vector, wanted, hub_penalty(self._indexer.state.embedding))
                dense = snapshot.dense_rows(matrix, rows, similarities)
            else:  # Chroma's approximate search: only the head's labels matter in hybrid fusion
                labelled = None if mode == "dense" else LABELLED_SENTENCES
                found = self._vectors.query(project_id, vector, wanted, labelled=labelled)
                dense = snapshot.dense_positions([(h.chunk_id, h.project_id, h.similarity) for h in found])
        lexical = self._lexical(project_id, snapshot, query, limit, mode)
        return fuse(snapshot, dense, lexical, mode=mode, limit=limit, exclude=exclude,
                    dense_weight=dense_weight(self._indexer.state.embedding))

    def _in_memory(self, project_id: str, snapshot: Snapshot, dense: str | DenseQuery, mode: Mode) -> bool:
        """Whether the search needs neither the vector store nor the encoder: BM25 alone, or exact
        dense search with every sentence's vector in the snapshot's matrix or the cache and the
        instruction's among the kept query vectors."""
        if mode == "lexical":
            return True
        matrix = snapshot.vectors
        if matrix is None:
            return False
        if isinstance(dense, str):
            return not dense.strip() or self._has_query(dense)
        if dense.instruction and not self._has_query(dense.instruction[:DENSE_QUERY_CHARS]):
            return False
        stored = snapshot.sentence_ids(dense.document_id) if dense.document_id else {}
        cache = self._indexer.cache
        for text in dense.sentences:
            key = content_hash(text)
            vector_id = stored.get(key)
            if (vector_id is None or matrix.row(vector_id) is None) and cache.get(project_id, key) is None:
                return False
        return True

    def _has_query(self, query: str) -> bool:
        with self._queries_lock:
            return query in self._queries

    def _query_vector(self, project_id: str, snapshot: Snapshot, query: str | DenseQuery) -> Any | None:
        """The vector to search with, or None when there is nothing to ask."""
        if isinstance(query, str):
            return self._embed_query(query) if query.strip() else None
        if not query:
            return None
        sentences = self._sentence_vectors(project_id, snapshot, query)
        instruction = self._embed_query(query.instruction[:DENSE_QUERY_CHARS]) if query.instruction else None
        return combine(sentences, instruction)

    def _sentence_vectors(self, project_id: str, snapshot: Snapshot, query: DenseQuery) -> list[Any]:
        """A passage vector per sentence: the row of the snapshot's exact-search matrix, else cached,
        else stored in the index, else embedded now (and cached, so the next assembly and the next
        index pass reuse it)."""
        cache = self._indexer.cache
        keys = [content_hash(text) for text in query.sentences]
        stored = snapshot.sentence_ids(query.document_id) if query.document_id else {}
        found: dict[str, Any] = {}
        if snapshot.vectors is not None:  # held in memory already: no store read, nothing to cache
            found = {key: row for key in set(keys) if key in stored
                     and (row := snapshot.vectors.row(stored[key])) is not None}
        found.update({key: vector for key in set(keys) - found.keys()
                      if (vector := cache.get(project_id, key)) is not None})
        lookup = {stored[key]: key for key in set(keys) - found.keys() if key in stored}
        if lookup:
            for pid, vector in self._vectors.vectors(project_id, lookup).items():
                found[lookup[pid]] = vector
                cache.put(project_id, lookup[pid], vector)
        new = {key: text for key, text in zip(keys, query.sentences, strict=True) if key not in found}
        if new:
            for key, vector in zip(new, self._vectors.embedding(list(new.values())), strict=True):
                found[key] = vector
                cache.put(project_id, key, vector)
        return [found[key] for key in keys]

    def _embed_query(self, query: str) -> Any:
        with self._queries_lock:
            if query in self._queries:
                self._queries.move_to_end(query)
                return self._queries[query]
        vector = embed_queries(self._vectors.embedding, [query])[0]
        with self._queries_lock:
            self._queries[query] = vector
            if len(self._queries) > 256:
                self._queries.popitem(last=False)
        return vector

    # -- lifetime

    async def close(self) -> None:
        """Stop watchers and workers; a pass in progress stops after its current document."""
        self._closing.set()
        tasks = [*self._background, *(t for p in self._projects.values() for t in p.tasks)]
        if self._sweeper is not None:
            tasks.append(self._sweeper)
        for project in self._projects.values():
            project.stop.set()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        for project in self._projects.values():
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(30), project.lock:  # the pass that is writing, if any
                    pass
        self._projects.clear()
        # A cancelled pass's thread goes on to its next check of ``stop`` (a batch of sentences, a
        # fifth of a second or so with e5, and its helper's batch): wait for it, so that the stores it
        # writes to are not closed under it.
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(30):
                await asyncio.to_thread(partial(self._indexing.shutdown, wait=True, cancel_futures=True))


def _started(started: threading.Event, work: Callable[..., Any], *args: Any) -> Any:
    """``work(*args)`` on a worker thread, once ``started`` is set for whoever waits for it to begin."""
    started.set()
    return work(*args)


def _sentences_wanted(mode: Mode, limit: int) -> int:
    """Hybrid scores give nothing to chunks past the dense floor rank, so DENSE_SENTENCES are plenty;
    dense alone ranks and scores them all (several sentences may share a chunk)."""
    return 4 * limit if mode == "dense" else DENSE_SENTENCES


def _busy(project: _Project) -> bool:
    return project.lock.locked() or _waiting(project)


async def saves_paused(wake: asyncio.Event, debounce: float, *, limit: float = MAX_DEFER_S,
                       sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
                       clock: Callable[[], float] = time.monotonic) -> None:
    """Return once no change (``wake`` set) came for ``debounce`` seconds, or ``limit`` seconds after
    the call, whichever is first (the last wait is cut short to end at the limit)."""
    deadline = clock() + limit
    while True:
        wake.clear()
        left = deadline - clock()
        await sleep(min(debounce, left))
        if not wake.is_set() or left <= debounce:
            return


def _waiting(project: _Project) -> bool:
    """A pass waits for the lock, or changes wait for a pass."""
    return project.wake.is_set() or project.queued > 0 or project.pending is None or bool(project.pending)
