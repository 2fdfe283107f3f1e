"""Every channel but the system one, wired to its services: the part of the composition root the
server loads after its ready line (``main.app.serve``), on a worker thread, because importing it
takes about as long as everything before the ready line."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING, Any

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
from ipc.channels.typed_memory import register_typed_memory
from ipc.completions import ClientCompletions
from ipc.registry import Registry
from main.app import Basics, register_basics
from main.config import Config
from main.stores import Services
from services.assembly.profiles import BudgetProfiles
from services.assembly.service import Collaborators, ContextService
from services.characters.conversations import ConversationStore
from services.characters.memories import MemoryIndex, TypedMemoryStore
from services.characters.service import CharacterChat
from services.chat.normalize import Normalizer
from services.chat.service import ChatService, ChatSettings
from services.chat.sessions import SessionLimits as ChatLimits
from services.chat.sessions import SessionStore
from services.chat.workspace import ProjectWorkspace
from services.context.counting import CountCache
from services.knowledge import ConstraintService, KgService
from services.memory import EpisodicMemoryService, SemanticMemoryService
from services.profiles.plans import BuiltInPlans
from services.profiles.service import ProfileService
from services.projects import DocumentStore, ProjectService
from services.reading.ask import ReadingCompanion
from services.reading.roll_up import RollUp
from services.reading.service import ReadingService, edition_cache
from services.reading.store import SummaryStore
from services.retrieval.deferred import DeferredRetrieval
from services.retrieval.provider import RetrievalProvider
from services.retrieval.readahead import ReadAhead
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
from services.summaries.seam import Summarizer

if TYPE_CHECKING:
    from services.retrieval.search import Hit

# Past interactions ranked per assembly: the newest this many (the Retrieved layer's candidate
# limit), so that an older interaction the cursor's text is about still competes.
EPISODES_CONSIDERED = 200


def build_registry(config: Config, services: Services, connections: Callable[[], int]) -> Registry:
    """Every channel adapter, registered against its services (what the server has once loaded)."""
    registry = Registry()
    basics = register_basics(registry, config, services.tokenizer, connections,
                             services.retrieval.describe_embedding)
    register_services(registry, config, services, basics)
    return registry


def register_services(registry: Registry, config: Config, services: Services, basics: Basics) -> None:
    """Every channel but the system one (:func:`main.app.register_basics`)."""
    completions, tokenizers = basics.completions, basics.tokenizers
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
    # The assemblies' turns: retrieval reads ahead, and an index pass embeds on the spare core, only
    # while none holds or waits for one.
    gate = services.gate
    read_ahead = ReadAhead(gate.quiet)
    services.stoppers.append(read_ahead.aclose)
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
            RetrievalProvider(retrieval, services.tokenizer.info.encoding, items=caches.retrieval_items,
                              queries=caches.dense_queries, read_ahead=read_ahead),
            SegmentsProvider(segments.active),
        ),
        tokenizers=tokenizers,
        plans=assembly_profiles,
    ), memos=services.memos, line_features=caches.line_features, window_features=caches.window_features,
        kept=caches.gathered, gate=gate)
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
    register_typed_memory(registry, memories, kg.list, conversations.pair, conversations.has_message)
