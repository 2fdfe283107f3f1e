"""The stores and the services on them: the database, the documents, retrieval, and the caches
they share. The server opens them right after its ready line (``main.app.serve``), on a worker
thread: importing them brings SQLAlchemy, SQLModel and the retrieval service, about as long as
everything before the ready line.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from main.config import Config
from main.memory import collect_and_trim
from main.startup import Startup, begin
from services.caches import SourceCaches
from services.concurrency.gate import ASSEMBLY_CONCURRENCY, Gate
from services.context.memo import ProjectMemos
from services.lazy import Deferred
from services.projects import DocumentStore
from services.projects.checked import CheckedDocumentStore
from services.projects.documents import MAX_DOCUMENT_BYTES
from services.retrieval.deferred import DeferredRetrieval, deferred_retrieval
from services.retrieval.vectors import close_vector_store, open_vector_store
from services.store import Database, open_database
from services.tokenizer import Tokenizer

# An index pass embeds on the second core too once no assembly has held or waited for a turn for this
# long (services/retrieval/batches.py): a writer typing leaves the index one core, as before, while a
# first index of an imported novel, or one that runs while the writer reads, gets both.
SPARE_CORE_REST_S = 1.0


@dataclass
class Services:
    """Everything with a lifetime longer than one call."""

    database: Database
    tokenizer: Tokenizer
    documents: DocumentStore
    # Chroma and the encoder load on first need, on threads of their own (services/retrieval/deferred.py).
    retrieval: DeferredRetrieval
    # The assemblies' turns (services/concurrency/gate.py); retrieval's index passes ask it whether
    # the spare core has rested.
    gate: Gate
    # Bounded, per project: what the source providers keep of each record between assemblies.
    caches: SourceCaches = field(default_factory=SourceCaches)
    # Bounded, per project: the engine's memo of normalized texts and id order.
    memos: ProjectMemos = field(default_factory=ProjectMemos)
    closers: list[Callable[[], None]] = field(default_factory=list)
    # Work of the services built with the registry (background summaries), stopped first.
    stoppers: list[Callable[[], Awaitable[None]]] = field(default_factory=list)

    async def aclose(self) -> None:
        for stop in self.stoppers:
            await stop()
        await self.retrieval.close()  # stops indexing before the stores it writes to close
        await asyncio.to_thread(self.close)

    def close(self) -> None:
        for close in reversed(self.closers):
            close()

    @property
    def vectors(self) -> Any:
        """The Chroma client, for worker threads: each use waits for it to open."""
        return Deferred(self.retrieval.client)


def open_services(config: Config, startup: Startup | None = None) -> Services:
    """Open the stores (blocking; run off the event loop) on the data dir ``startup`` claimed, or
    claim it here. The vector store and the encoder open when first needed (``services.retrieval``).
    A failed open closes what it opened and releases the data dir."""
    with contextlib.ExitStack() as undo:  # a failed open closes what was already opened
        claimed = startup if startup is not None else begin(config)
        undo.callback(claimed.close)
        database = open_database(config.resolved_database_url)
        undo.callback(database.close)
        tokenizer = claimed.tokenizer  # built on first count
        # Bounded, per project: what providers and retrieval keep between assemblies.
        caches = SourceCaches()
        # A document must fit in a frame both ways, with room for JSON escaping.
        # Refuses a project registered at a place projects may no longer be (services/projects/roots.py).
        documents = CheckedDocumentStore(database, config.folder_policy(),
                                         max_bytes=min(MAX_DOCUMENT_BYTES, config.max_frame_bytes // 2))
        gate = Gate(ASSEMBLY_CONCURRENCY)
        retrieval = deferred_retrieval(
            database, tokenizer, embedding=config.embedding,
            configured="embedding" in config.model_fields_set,
            open_client=partial(open_vector_store, path=config.chroma_path, url=config.chroma_url),
            roots=documents.root, debounce=config.index_debounce,
            results=caches.search_results, query_terms=caches.query_terms,
            idle_after=config.index_idle_minutes * 60 or None,
            max_open=config.max_open_indexes, on_freed=collect_and_trim, cache_dir=config.cache_dir,
            spare_core=partial(gate.rested, SPARE_CORE_REST_S))
        documents.on_write = retrieval.document_written
        services = Services(database=database, tokenizer=tokenizer, documents=documents, retrieval=retrieval,
                            gate=gate, caches=caches)
        services.closers += [claimed.close, database.close,
                             partial(retrieval.client.close, close_vector_store)]
        undo.pop_all()
    return services
