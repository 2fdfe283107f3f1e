"""The composition root: builds every service and wires it into the server."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import os
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING, Any

import structlog

from ipc.auth import origin_patterns
from ipc.channels.characters import register_characters
from ipc.channels.chat import register_chat
from ipc.channels.context import register_context
from ipc.channels.gamemaster import register_game_master
from ipc.channels.knowledge import register_knowledge
from ipc.channels.memory import register_memory
from ipc.channels.profiles import register_profiles
from ipc.channels.projects import register_projects
from ipc.channels.reading import register_reading
from ipc.channels.reading_ask import register_reading_ask
from ipc.channels.retrieval import register_retrieval
from ipc.channels.segments import register_segments
from ipc.channels.system import Limits, TokenizerDescription, register_system
from ipc.channels.typed_memory import register_typed_memory
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
from services.assembly.profiles import BudgetProfiles
from services.assembly.service import Collaborators, ContextService
from services.caches import SourceCaches
from services.characters.conversations import ConversationStore
from services.characters.memories import MemoryIndex, TypedMemoryStore
from services.characters.service import CharacterChat
from services.chat.normalize import Normalizer
from services.chat.service import ChatService, ChatSettings
from services.chat.sessions import SessionLimits as ChatLimits
from services.chat.sessions import SessionStore
from services.chat.workspace import ProjectWorkspace
from services.context.counting import CountCache
from services.context.memo import ProjectMemos
from services.knowledge import ConstraintService, KgService
from services.lazy import Deferred
from services.memory import EpisodicMemoryService, SemanticMemoryService
from services.profiles.plans import BuiltInPlans
from services.profiles.service import ProfileService
from services.projects import DocumentStore, ProjectService
from services.projects.documents import MAX_DOCUMENT_BYTES
from services.projects.roots import CheckedDocumentStore
from services.reading.ask import ReadingCompanion
from services.reading.roll_up import RollUp
from services.reading.service import ReadingService, edition_cache
from services.reading.store import SummaryStore
from services.retrieval.deferred import DeferredRetrieval, deferred_retrieval
from services.retrieval.provider import RetrievalProvider
from services.retrieval.vectors import close_vector_store, open_vector_store
from services.segments import SegmentService
from services.segments.assembler import GameMaster
from services.segments.provider import SegmentsProvider
from services.sources.providers import (
    EpisodicMemoryProvider,
    KnowledgeGraphProvider,
    SemanticMemoryProvider,
    UserConstraintsProvider,
)
from services.sources.records import shared
from services.store import Database, open_database
from services.summaries.seam import Summarizer
from services.tokenizer import Tokenizer, resolve_tokenizer
from services.tokenizer.registry import TokenizerRegistry

if TYPE_CHECKING:
    from services.retrieval.search import Hit

_log = structlog.get_logger("main")

# Past interactions ranked per assembly: the newest this many.
EPISODES_CONSIDERED = 50

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


def build_registry(config: Config, services: Services, connections: Callable[[], int]) -> Registry:
    """Every channel adapter, registered against its services."""
    registry = Registry()
    info = services.tokenizer.info
    completions = ClientCompletions(config.completion_timeout)
    tokenizers = TokenizerRegistry(config.tokenizer_encoding)  # projects' own; system:info lists problems
    register_system(
        registry,
        name=NAME,
        version=VERSION,
        tokenizer=TokenizerDescription(encoding=info.encoding, source=info.source, exact=info.exact),
        limits=Limits(max_frame_bytes=config.max_frame_bytes, max_in_flight=config.max_in_flight,
                      max_batch=config.max_batch, max_connections=config.max_connections),
        connections=connections,
        completions=completions,
        tokenizer_problems=tokenizers.problems,
        embedding=services.retrieval.describe_embedding,
    )
    database, documents, retrieval = services.database, services.documents, services.retrieval
    projects = ProjectService(database, on_open=retrieval.project_opened, policy=config.folder_policy())
    constraints, kg = ConstraintService(database), KgService(database)
    semantic, episodic = SemanticMemoryService(database), EpisodicMemoryService(database)
    register_projects(registry, projects=projects, documents=documents)
    register_knowledge(registry, constraints=constraints, kg=kg)
    register_memory(registry, semantic=semantic, episodic=episodic)
    register_retrieval(registry, retrieval)
    segments = SegmentService(database)
    register_segments(registry, segments)
    profiles = BudgetProfiles(database)
    # The assembly's plans: the built-in profiles and each project's own.
    assembly_profiles = ProfileService(database, BuiltInPlans())
    register_profiles(registry, assembly_profiles)
    constraint_list = shared(constraints.list)
    caches = services.caches
    context = ContextService(Collaborators(
        settings=projects.get_settings,
        read_document=documents.read,
        profiles=profiles.get,
        providers=(
            UserConstraintsProvider(constraint_list, kept=caches.gathered),
            KnowledgeGraphProvider(constraint_list, kg.list, sheets=caches.entity_sheets,
                                   kept=caches.gathered),
            SemanticMemoryProvider(partial(semantic.list, confirmed_only=True), kept=caches.gathered),
            EpisodicMemoryProvider(partial(episodic.list, limit=EPISODES_CONSIDERED),
                                   texts=caches.episode_texts, kept=caches.gathered),
            RetrievalProvider(retrieval, services.tokenizer.info.encoding, items=caches.retrieval_items),
            SegmentsProvider(segments.active),
        ),
        tokenizers=tokenizers,
        plans=assembly_profiles,
    ), memos=services.memos, line_features=caches.line_features)
    register_context(registry, context, profiles)
    register_game_master(registry, GameMaster(context))
    chat = ChatService(
        store=SessionStore(ChatLimits(max_sessions=config.chat_max_sessions,
                                      idle_seconds=config.chat_idle_minutes * 60,
                                      max_summary_chars=config.chat_summary_chars)),
        normalizer=Normalizer.builtin(),
        plans=assembly_profiles,
        # Its own, small: chat messages are not kept past their session any longer than need be.
        counter=CountCache(services.tokenizer, max_entries=4096, max_chars=1_000_000),
        summarizer=Summarizer(completions),
        workspace=ProjectWorkspace(projects.get, projects.list, documents.heads),
        settings=ChatSettings(summary_threshold=config.chat_summary_threshold,
                              summary_chars=config.chat_summary_chars),
    )
    services.stoppers.append(chat.aclose)
    register_chat(registry, chat)
    register_character_chat(registry, config, services, context, kg, projects, assembly_profiles, completions)
    reading = ReadingService(documents=partial(_document_ids, documents), read=documents.read,
                             counter=context.counter, summaries=SummaryStore(database),
                             page_tokens=partial(_reading_page_tokens, projects), editions=edition_cache())
    register_reading(registry, reading, RollUp(reading, completions,
                                               available=lambda: bool(completions.connection_ids),
                                               progress=partial(_publish_progress, retrieval)))
    register_reading_ask(registry, ReadingCompanion(
        edition=reading.edition, summaries=SummaryStore(database).all, assembler=context,
        search=partial(_search_passages, services.retrieval)))
    return registry


async def _search_passages(retrieval: DeferredRetrieval, project_id: str, query: str,
                           limit: int) -> list[Hit]:
    return await retrieval.search(project_id, query, limit=limit)


async def _reading_page_tokens(projects: ProjectService, project_id: str) -> int:
    return (await projects.get_settings(project_id)).reading_page_tokens


def _publish_progress(retrieval: DeferredRetrieval, params: dict[str, Any]) -> None:
    """Reading's $/progress goes where indexing's goes (set by serve): to the connections subscribed
    to the ``progress`` topic."""
    if retrieval.progress is not None:
        retrieval.progress(params)


async def _document_ids(documents: DocumentStore, project_id: str) -> list[str]:
    return [d.document_id for d in (await documents.list(project_id)).documents]


def register_character_chat(registry: Registry, config: Config, services: Services, context: ContextService,
                            kg: KgService, projects: ProjectService, plans: ProfileService,
                            completions: ClientCompletions) -> None:
    """Character conversations and their typed memories (seed 003)."""
    conversations = ConversationStore(services.database)
    index = MemoryIndex(services.vectors, services.retrieval.embedding)
    memories = TypedMemoryStore(services.database, index)

    async def language(project_id: str) -> str:
        return (await projects.get_settings(project_id)).language

    characters = CharacterChat(conversations=conversations, memories=memories, entities=kg.list,
                               language=language, context=context, plans=plans,
                               summarizer=Summarizer(completions), completer=completions,
                               wait=config.completion_timeout + 5)
    services.stoppers.append(characters.aclose)
    register_characters(registry, characters)
    register_typed_memory(registry, memories, kg.list, conversations.pair)


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
        registry = build_registry(config, services, lambda: holder[0].connection_count)
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
        # Everything made so far (imports, stores, the registry) lives as long as the process: keep
        # it out of the collector's full passes, which otherwise stall a request for 50-80 ms.
        gc.freeze()
        _log.info("main.ready", port=port, debug=config.debug, methods=len(registry),
                  tokenizer=services.tokenizer.info.source)
        announce(ready_message(config, port))
        reason = await stop.wait()
        _log.info("main.stopping", reason=reason)
        await server.shutdown(config.shutdown_grace)
    finally:
        stop.uninstall()
        await services.aclose()
    _log.info("main.stopped")
