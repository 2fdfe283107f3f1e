"""The composition root: builds every service and wires it into the server.

What the ready line needs (the stores, the system channel, the socket) is built here; the other
channels and their services (``main.wiring``) load right after it, on a worker thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import os
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import structlog

from ipc.auth import origin_patterns
from ipc.channels.system import Limits, TokenizerDescription, register_system
from ipc.completions import ClientCompletions
from ipc.dispatch import Dispatcher
from ipc.registry import Registry
from ipc.server import TransportLimits, WebSocketServer
from ipc.session import SessionLimits
from main.config import Config
from main.lifecycle import StopSignal
from main.lock import DataDirLock
from main.memory import collect_and_trim, fix_mmap_threshold, limit_arenas
from main.version import NAME, VERSION
from services.caches import SourceCaches
from services.context.memo import ProjectMemos
from services.lazy import Deferred
from services.projects import DocumentStore
from services.projects.documents import MAX_DOCUMENT_BYTES
from services.projects.roots import CheckedDocumentStore
from services.retrieval.deferred import DeferredRetrieval, deferred_retrieval
from services.retrieval.vectors import close_vector_store, open_vector_store
from services.store import Database, open_database
from services.tokenizer import Tokenizer, resolve_tokenizer
from services.tokenizer.registry import TokenizerRegistry

_log = structlog.get_logger("main")

Announce = Callable[[dict[str, Any]], None]


@dataclass
class Services:
    """Everything with a lifetime longer than one call."""

    database: Database
    tokenizer: Tokenizer
    documents: DocumentStore
    # Chroma and the encoder load on first need, on threads of their own (services/retrieval/deferred.py).
    retrieval: DeferredRetrieval
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


def open_services(config: Config) -> Services:
    """Open the database and the tokenizer (blocking; run off the event loop). The vector store and the
    encoder open when first needed (``services.retrieval``), or right after the ready line with
    ``--preload``."""
    # The writer's text lives here: keep it private to the user.
    config.data_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    with contextlib.ExitStack() as undo:  # a failed open closes what was already opened
        lock = DataDirLock(config.data_dir)
        lock.acquire()
        undo.callback(lock.release)
        database = open_database(config.resolved_database_url)
        undo.callback(database.close)
        tokenizer = resolve_tokenizer(config.tokenizer_encoding, deferred=True)  # built on first count
        # Bounded, per project: what providers and retrieval keep between assemblies.
        caches = SourceCaches()
        # A document must fit in a frame both ways, with room for JSON escaping.
        # Refuses a project registered at a place projects may no longer be (services/projects/roots.py).
        documents = CheckedDocumentStore(database, config.folder_policy(),
                                         max_bytes=min(MAX_DOCUMENT_BYTES, config.max_frame_bytes // 2))
        retrieval = deferred_retrieval(
            database, tokenizer, embedding=config.embedding,
            configured="embedding" in config.model_fields_set,
            open_client=partial(open_vector_store, path=config.chroma_path, url=config.chroma_url),
            roots=documents.root, debounce=config.index_debounce,
            results=caches.search_results, query_terms=caches.query_terms,
            idle_after=config.index_idle_minutes * 60 or None,
            max_open=config.max_open_indexes, on_freed=collect_and_trim)
        documents.on_write = retrieval.document_written
        services = Services(database=database, tokenizer=tokenizer, documents=documents, retrieval=retrieval,
                            caches=caches)
        services.closers += [lock.release, database.close,
                             partial(retrieval.client.close, close_vector_store)]
        undo.pop_all()
    return services


def transport_limits(config: Config) -> TransportLimits:
    return TransportLimits(
        max_frame_bytes=config.max_frame_bytes,
        max_connections=config.max_connections,
        ping_interval=config.ping_interval,
        ping_timeout=config.ping_timeout,
        session=SessionLimits(max_in_flight=config.max_in_flight, max_batch=config.max_batch),
    )


@dataclass(frozen=True)
class Basics:
    """What the system channel shares with the others: the clients that answer completions, and
    the projects' own tokenizers (system:info lists those that failed to load)."""

    completions: ClientCompletions
    tokenizers: TokenizerRegistry


def register_basics(registry: Registry, config: Config, services: Services,
                    connections: Callable[[], int]) -> Basics:
    """The system channel (system:*, rpc.discover, $/cancelRequest): served from the ready line on."""
    info = services.tokenizer.info
    # Projects' own tokenizers: system:info lists those that did not load.
    basics = Basics(ClientCompletions(config.completion_timeout),
                    TokenizerRegistry(config.tokenizer_encoding))
    register_system(
        registry,
        name=NAME,
        version=VERSION,
        tokenizer=TokenizerDescription(encoding=info.encoding, source=info.source, exact=info.exact),
        limits=Limits(max_frame_bytes=config.max_frame_bytes, max_in_flight=config.max_in_flight,
                      max_batch=config.max_batch, max_connections=config.max_connections),
        connections=connections,
        completions=basics.completions,
        tokenizer_problems=basics.tokenizers.problems,
        embedding=services.retrieval.describe_embedding,
    )
    return basics


async def load_methods(registry: Registry, config: Config, services: Services, basics: Basics) -> None:
    """Import the other channels and their services on a worker thread (the event loop answers
    meanwhile), then register them; calls to them wait until then (:meth:`Registry.completed`)."""
    try:
        register = await asyncio.to_thread(_import_wiring)
        register(registry, config, services, basics)
    finally:
        registry.complete()


def _import_wiring() -> Callable[[Registry, Config, Services, Basics], None]:
    from main.wiring import register_services

    return register_services


def ready_message(config: Config, port: int) -> dict[str, Any]:
    host = f"[{config.host}]" if ":" in config.host else config.host
    message: dict[str, Any] = {"event": "ready", "url": f"ws://{host}:{port}/",
                               "token": config.token, "pid": os.getpid(), "version": VERSION}
    if config.debug:
        message["inspectorToken"] = config.inspector_token
    return message


async def serve(config: Config, announce: Announce) -> None:
    """Run until a stop signal; close everything in order on the way out."""
    limit_arenas()
    fix_mmap_threshold()
    stop = StopSignal()
    await stop.install(config.watch_stdin)
    services = await asyncio.to_thread(open_services, config)
    try:
        holder: list[WebSocketServer] = []
        registry = Registry()
        basics = register_basics(registry, config, services, lambda: holder[0].connection_count)
        registry.expect_more()
        server = WebSocketServer(
            Dispatcher(registry, trace=config.log_level == "debug"),
            token=config.token,
            inspector_token=config.inspector_token,
            origin_patterns=origin_patterns(config.allowed_origins, config.allow_file_origins),
            limits=transport_limits(config),
            debug=config.debug,
        )
        holder.append(server)
        services.retrieval.progress = partial(server.publish, "progress", "$/progress")
        port = await server.start(config.host, config.port)
        _log.info("main.ready", port=port, debug=config.debug, tokenizer=services.tokenizer.info.source)
        announce(ready_message(config, port))
        await load_methods(registry, config, services, basics)
        # Everything made so far (imports, stores, the registry) lives as long as the process: keep
        # it out of the collector's full passes, which otherwise stall a request for 50-80 ms.
        gc.freeze()
        _log.info("main.loaded", methods=len(registry))
        reason = await stop.wait()
        _log.info("main.stopping", reason=reason)
        await server.shutdown(config.shutdown_grace)
    finally:
        stop.uninstall()
        await services.aclose()
    _log.info("main.stopped")
