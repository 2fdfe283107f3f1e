"""The server's retrieval, made on first need: the server announces itself before Chroma and the
encoder have loaded (about a second and 70 MB between them), and only what needs them waits.

:class:`DeferredRetrieval` has the methods the server's channels and providers call on
:class:`~services.retrieval.service.Retrieval`. Its first use starts loading, on threads of their
own, the encoder and the Chroma client, then builds the service over them; a call that needs the
service waits for that (never fails for it); a request that needs no retrieval never waits.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

import structlog

from services.lazy import Deferred, Lazy
from services.retrieval.embeddings import EmbeddingChoice, embedder_for, settle_embedding

if TYPE_CHECKING:
    from services.caches import QueryTerms, SearchResults
    from services.retrieval.embeddings import Embedder
    from services.retrieval.indexer import SyncReport
    from services.retrieval.query import DenseQuery
    from services.retrieval.search import Exclusion, Hit, Mode
    from services.retrieval.service import IndexStatus, ProgressSink, Retrieval, Roots
    from services.store import Database
    from services.tokenizer import Tokenizer

_log = structlog.get_logger("retrieval")


class DeferredRetrieval:
    """Retrieval whose heavy parts load when first needed (see the module docstring)."""

    def __init__(self, choice: Lazy[EmbeddingChoice], embedder: Lazy[Embedder], client: Lazy[Any],
                 build: Callable[[Any, Embedder], Retrieval]) -> None:
        self.choice = choice  # which encoder, and why: settled without Chroma
        self.embedder = embedder
        self.client = client  # the Chroma client, shared with the typed memories' index
        self._build = build
        self._service: Lazy[Retrieval] = Lazy("retrieval", self._load)
        self._progress: ProgressSink | None = None
        self._closing = False
        self._background: set[asyncio.Future[Any]] = set()

    def _load(self) -> Retrieval:
        self.client.start()  # both at once: the client's thread opens Chroma while this one waits
        retrieval = self._build(self.client.get(), self.embedder.get())
        retrieval.progress = self._progress
        return retrieval

    @property
    def loaded(self) -> bool:
        return self._service.loaded

    def start(self) -> None:
        """Start loading now, without waiting for it."""
        self._service.start()

    async def ready(self) -> Retrieval:
        """The service, once its parts have loaded (starts loading them if nothing has)."""
        service = self._service.value()
        return service if service is not None else await self._service.wait()

    @property
    def progress(self) -> ProgressSink | None:
        return self._progress

    @progress.setter
    def progress(self, sink: ProgressSink | None) -> None:
        self._progress = sink
        service = self._service.value()
        if service is not None:
            service.progress = sink

    @property
    def embedding(self) -> Any:
        """The encoder other stores share (:attr:`Retrieval.embedding`), for worker threads: each use
        waits for it to load."""
        return Deferred(Lazy("shared-encoder", lambda: self.embedder.get().shared))

    async def describe_embedding(self) -> dict[str, str]:
        """``{name, reason}`` of the encoder the index uses (waits for the choice, not for Chroma)."""
        return (await self.choice.wait()).describe()

    # -- what the channels and providers call

    def project_opened(self, project_id: str, root: Path) -> None:
        self._then(lambda service: service.project_opened(project_id, root))

    def document_written(self, project_id: str, document_id: str) -> None:
        self._then(lambda service: service.document_written(project_id, document_id))

    async def open_project(self, project_id: str, root: Path | None = None) -> None:
        await (await self.ready()).open_project(project_id, root)

    async def prepared(self, project_id: str) -> None:
        await (await self.ready()).prepared(project_id)

    async def index_project(self, project_id: str, root: Path | None = None) -> SyncReport:
        return await (await self.ready()).index_project(project_id, root)

    async def touch(self, project_id: str, document_id: str) -> None:
        await (await self.ready()).touch(project_id, document_id)

    async def status(self, project_id: str) -> IndexStatus:
        return await (await self.ready()).status(project_id)

    async def wait_idle(self, project_id: str, timeout: float = 30.0) -> None:
        await (await self.ready()).wait_idle(project_id, timeout)

    async def search(self, project_id: str, query: str, *, limit: int = 200, mode: Mode = "hybrid",
                     exclude: Exclusion | None = None, dense_query: str | DenseQuery | None = None,
                     pause: Callable[[], Awaitable[bool]] | None = None) -> list[Hit]:
        return await (await self.ready()).search(project_id, query, limit=limit, mode=mode,
                                                 exclude=exclude, dense_query=dense_query, pause=pause)

    def _then(self, call: Callable[[Retrieval], None]) -> None:
        """``call`` now if the service has loaded, else in the background once it has."""
        if self._closing:
            return
        service = self._service.value()
        if service is not None:
            call(service)
            return
        task = asyncio.ensure_future(self._after_load(call))
        self._background.add(task)
        task.add_done_callback(self._finished)

    async def _after_load(self, call: Callable[[Retrieval], None]) -> None:
        service = await self.ready()
        if not self._closing:
            call(service)

    def _finished(self, task: asyncio.Future[Any]) -> None:
        self._background.discard(task)
        if not task.cancelled() and task.exception() is not None:
            _log.warning("retrieval.load_failed", exc_type=type(task.exception()).__name__)

    async def close(self) -> None:
        """Stop what waits for the load; wait for a load in progress, then close the service."""
        self._closing = True
        for task in list(self._background):
            task.cancel()
        await asyncio.gather(*self._background, return_exceptions=True)
        service = None
        with contextlib.suppress(TimeoutError):  # a load in progress ends first; none is started
            async with asyncio.timeout(30):
                service = await self._service.settled()
        if service is not None:
            await service.close()


def deferred_retrieval(database: Database, tokenizer: Tokenizer, *, embedding: str, configured: bool,
                       open_client: Callable[[], Any], roots: Roots, debounce: float,
                       results: SearchResults | None = None, query_terms: QueryTerms | None = None,
                       idle_after: float | None = None,
                       max_open: int | None = None, on_freed: Callable[[], None] | None = None,
                       cache_dir: Path | None = None, spare_core: Callable[[], bool] | None = None,
                       create: Callable[..., Retrieval] | None = None) -> DeferredRetrieval:
    """The server's retrieval over an open database: nothing loads until first needed.

    ``open_client`` opens the Chroma client (blocking). ``create`` builds the service
    (:func:`services.retrieval.create_retrieval` by default); the other options are its own.
    """
    if create is None:
        from services.retrieval import create_retrieval

        create = create_retrieval
    choice = Lazy("encoder", partial(settle_embedding, embedding, configured=configured))
    embedder = Lazy("embedder", lambda: embedder_for(choice.get()))
    client: Lazy[Any] = Lazy("vectors", open_client)
    options = {"embedding": embedding, "configured": configured, "roots": roots,
               "debounce": debounce, "results": results, "query_terms": query_terms, "idle_after": idle_after,
               "max_open": max_open, "on_freed": on_freed, "cache_dir": cache_dir, "spare_core": spare_core}
    return DeferredRetrieval(choice, embedder, client, partial(_build, create, database, tokenizer, options))


def _build(create: Callable[..., Retrieval], database: Database, tokenizer: Tokenizer,
           options: dict[str, Any], client: Any, embedder: Embedder) -> Retrieval:
    return create(database, client, tokenizer, embedder=embedder, **options)


