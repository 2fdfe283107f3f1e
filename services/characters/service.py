"""Character conversations: persisted messages, a template's prompt with memories, and keyframes
and memories written back through the summarizer seam (seed 003).

``assemble`` builds the next model call's prompt from the conversation's template (a profile)
through the same engine as ``context:assemble``: the two characters' values and the recalled
memory block are published values, the stored messages are the ``chat.history`` items. Adding a
message may inject a reminder into it (every ``remindEvery`` messages) and start background work:
a keyframe every ``keyframeEvery`` messages (kept in the conversation, the last two of them, and
stored as an EVENT memory of the pair) and a memory extraction every ``memoryExtractionEvery``
exchanges. ``assemble`` waits for the conversation's pending work first, so its prompt holds it.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Literal

import structlog
from pydantic import ValidationError

from services.assembly.service import AssembleRequest, ContextService, Outcome
from services.characters import blocks, history, persona
from services.characters.conversations import Conversation, ConversationStore, Role, StoredMessage
from services.characters.display import display
from services.characters.memories import MEMORY_TYPES, MemoryDraft, TypedMemoryStore, checked_draft
from services.characters.options import ConversationOptions
from services.characters.recall import EMPTY as EMPTY_RECOLLECTION
from services.characters.recall import RecallSettings, Recollection, recall
from services.context.models import Message
from services.errors import (
    CharacterNotFound,
    ChatMessageTooLong,
    InputTooLarge,
    InvalidInput,
    ProfileNotFound,
)
from services.knowledge.records import KgEntityRecord
from services.profiles.plans import PlanSource
from services.summaries.seam import Completer, CompletionUnavailable, Summarizer

_log = structlog.get_logger("characters")

Entities = Callable[[str], Awaitable[Sequence[KgEntityRecord]]]
Language = Callable[[str], Awaitable[str]]
MAX_MESSAGE_CHARS = 32_000
KEYFRAMES_KEPT = 2
HISTORY_FACTOR = 3  # history candidates: the newest messages up to this many times the prompt's total
RECENT_TURNS = 4  # the recent exchange memories are ranked against
EVENTS_KEPT = 16
MEMORY_SUMMARY_CHARS = 200
DROPPED = ("MEMORY_EXTRACTION_DROPPED: the answer was not a JSON array of memories ({reason}); "
           "nothing stored")
MAX_TRACKED = 1000  # conversations whose background events are kept


@dataclass(frozen=True, slots=True)
class Event:
    """What a background step did, for ``chat:conversation:get`` and the next assembly's warnings."""

    kind: str  # keyframe | extraction
    status: str  # stored | fallback | unavailable | dropped | failed
    stored: int = 0
    warning: str | None = None


@dataclass(frozen=True, slots=True)
class Added:
    message: StoredMessage
    keyframe_due: bool
    extraction_due: bool


@dataclass(frozen=True, slots=True)
class Assembled:
    conversation: Conversation
    outcome: Outcome
    messages: list[Message]
    memory: Recollection
    history_candidates: int
    warnings: tuple[str, ...]

    def memory_used(self) -> tuple[Recollection, int]:
        """The recalled memories that reached the prompt and the memory block's tokens: none when
        the template's block was dropped for the budget."""
        block = self.outcome.assembly.layers.get(MEMORY_SECTION)
        if block is None:
            return self.memory, 0
        return (self.memory, block.tokens) if block.text else (EMPTY_RECOLLECTION, 0)


@dataclass(frozen=True, slots=True)
class _Window:
    turns: list[blocks.Turn]
    stored: list[StoredMessage]  # every message read, keyframes included
    said: list[StoredMessage]  # the window's messages
    names: list[str]


@dataclass
class _Pending:
    tasks: set[asyncio.Task[None]] = field(default_factory=set)
    events: list[Event] = field(default_factory=list)
    done: dict[str, int] = field(default_factory=dict)  # background steps finished, by kind
    unread: list[str] = field(default_factory=list)


# The memory block's section in the built-in templates (and those that extend them).
MEMORY_SECTION = "memory"


def template_names(name: str) -> list[str]:
    """The profile names a template name may mean, in order: itself, then its display name as a
    profile name (``"SMS Chat"`` and ``"sms_chat"`` -> ``"sms-chat"``)."""
    spaced = "-".join(name.strip().lower().split())
    return list(dict.fromkeys([name.strip(), spaced, spaced.replace("_", "-")]))


class CharacterChat:
    def __init__(self, *, conversations: ConversationStore, memories: TypedMemoryStore, entities: Entities,
                 language: Language, context: ContextService, plans: PlanSource, summarizer: Summarizer,
                 completer: Completer, wait: float = 15.0) -> None:
        self.conversations = conversations
        self.memories = memories
        self._entities = entities
        self._language = language
        self._context = context
        self._plans = plans
        self._summarizer = summarizer
        self._completer = completer
        self._wait = wait
        # Per conversation: its running background work and what the latest of it did. Bounded: the
        # conversations used longest ago, with nothing running, are forgotten first.
        self._pending: OrderedDict[str, _Pending] = OrderedDict()

    # -- conversations

    async def create(self, project_id: str, system_id: int, user_id: int, template: str,
                     options: ConversationOptions) -> Conversation:
        await self._characters(project_id, system_id, user_id)
        name = await self._template(project_id, template)
        conversation = await self.conversations.create(
            project_id, system_character_id=system_id, user_character_id=user_id, template=name,
            options=options.model_dump(mode="json", by_alias=True))
        _log.info("characters.created", project_id=project_id, conversation=_tag(conversation.id),
                  template=name)
        return conversation

    async def _template(self, project_id: str, template: str) -> str:
        for name in template_names(template):
            try:
                await self._plans.plan(project_id, name)
            except ProfileNotFound:
                continue
            return name
        raise ProfileNotFound("No template (built-in or project profile) of this name")

    async def delete(self, conversation_id: str) -> Conversation:
        conversation = await self.conversations.locate(conversation_id)
        await self._drain(conversation_id, cancel=True)
        await self.conversations.delete(conversation.project_id, conversation_id)
        removed = await self.memories.delete_conversation(conversation.project_id, conversation_id)
        self._pending.pop(conversation_id, None)
        _log.info("characters.deleted", project_id=conversation.project_id,
                  conversation=_tag(conversation_id),
                  memories=removed)
        return conversation

    def events(self, conversation_id: str) -> tuple[list[Event], dict[str, int]]:
        """The latest background events, and how many of each kind finished since the server started."""
        found = self._pending.get(conversation_id)
        return (list(found.events), dict(found.done)) if found else ([], {})

    # -- messages

    async def add(self, conversation_id: str, role: Role, content: str, *, important: bool = False) -> Added:
        if len(content) > MAX_MESSAGE_CHARS:
            raise ChatMessageTooLong(length=len(content), limit=MAX_MESSAGE_CHARS)
        if not content.strip():
            raise InvalidInput("content must not be empty", field="content")
        conv = await self.conversations.locate(conversation_id)
        options = ConversationOptions.model_validate(conv.options)
        project_id = conv.project_id
        if role == "user" and options.remind_every and await self._reminder_due(conv, options.remind_every):
            system, _ = await self._characters(project_id, conv.system_character_id, conv.user_character_id)
            language = await self._language(project_id)
            text = blocks.reminder_text(persona.persona(system.name, system.description).first_name,
                                        bool(options.episodes), language)
            content = content.rstrip() + "\n\n" + blocks.reminder_block(conversation_id, text)
        message = await self.conversations.add(project_id, conversation_id, role=role, content=content,
                                               important=important)
        counts = await self.conversations.count(project_id, conversation_id)
        said = counts["total"] - counts["keyframe"]
        keyframe = bool(options.keyframe_every) and said % options.keyframe_every == 0
        every = options.memory_extraction_every if options.extract_memories else 0
        extraction = (role == "assistant" and bool(every)
                      and counts["assistant"] % every == 0)
        if keyframe:
            self._spawn(conversation_id, self._keyframe(conv, options))
        if extraction:
            self._spawn(conversation_id, self._extract(conv, options))
        _log.info("characters.message", project_id=project_id, conversation=_tag(conversation_id), role=role,
                  chars=len(content), seq=message.seq, keyframe=keyframe, extraction=extraction)
        return Added(message, keyframe, extraction)

    async def _reminder_due(self, conv: Conversation, every: int) -> bool:
        """Whether ``every`` messages have passed since the last reminder (or the start)."""
        recent = await self.conversations.messages(conv.project_id, conv.id,
                                                   newest=every * 2 + KEYFRAMES_KEPT)
        said = [m for m in recent if m.kind == "message"]
        since = 0
        for m in reversed(said):
            if display(m.content).has_reminder:
                return since >= every
            since += 1
        return conv.message_count >= every and since >= every

    # -- the prompt

    async def assemble(self, conversation_id: str, variables: dict[str, str] | None = None) -> Assembled:
        conv = await self.conversations.locate(conversation_id)
        await self._drain(conversation_id)
        project_id = conv.project_id
        options = ConversationOptions.model_validate(conv.options)
        system, user = await self._characters(project_id, conv.system_character_id, conv.user_character_id)
        language = _language(await self._language(project_id))
        sys_p, user_p = persona.persona(system.name, system.description), persona.persona(user.name,
                                                                                          user.description)
        stored = await self.conversations.messages(project_id, conversation_id)
        sources = await self.memories.message_ids(project_id, conversation_id)
        counter = await self._context.counter(project_id)
        speakers = {"user": user_p.first_name, "assistant": sys_p.first_name, "system": ""}
        entries = [history.entry(m.id, m.seq, m.role, m.kind, m.content, speakers.get(m.role, ""),
                                 m.important or m.id in sources) for m in stored]
        candidates = history.bounded(entries, options.token_budget * HISTORY_FACTOR, counter.count)
        said = [m for m in stored if m.kind == "message"]
        recent = "\n".join(display(m.content).content for m in said[-RECENT_TURNS:])
        memory = await recall(
            self.memories, project_id, system_id=system.id, user_id=user.id, system_name=sys_p.first_name,
            user_name=user_p.first_name, conversation_id=conversation_id, continuing=bool(said),
            text=recent or None, language=language, count=counter.count,
            settings=RecallSettings(budget=options.memory_budget, format=options.memory_format,
                                    min_similarity=options.min_similarity))
        published = {**persona.values(sys_p, "system", language), **persona.values(user_p, "user", language),
                     "perspective.dynamic": persona.dynamic(sys_p, language),
                     # A writer's own style guidance stands for both the narrative and the texting one.
                     "perspective.casual": options.perspective or persona.casual(sys_p, language)}
        memory_values = memory.variables()
        has_memories = memory_values.pop("hasMemories")
        published.update(memory_values)
        values = options.variables(language, variables or {})
        values.setdefault("perspective", published["perspective.dynamic"])
        values["hasMemories"] = has_memories
        request = AssembleRequest(project_id=project_id, document_id=f"conversation:{conversation_id}",
                                  profile_id=conv.template, variables=values, published=published,
                                  providers=(history.HistoryProvider(tuple(candidates)),))
        outcome = await self._context.assemble(request)
        _require_newest(outcome, candidates, counter.count)
        by_id = {e.item_id: e for e in candidates}
        messages = history.turn_messages(outcome.assembly, outcome.system_prompt, by_id)
        pending = self._pending.get(conversation_id)
        warnings = tuple(pending.unread) if pending else ()
        if pending:
            pending.unread.clear()
        return Assembled(conv, outcome, messages, memory, len(candidates), warnings)

    # -- background work

    def _spawn(self, conversation_id: str, work: Awaitable[None]) -> None:
        pending = self._entry(conversation_id)
        task = asyncio.ensure_future(work)
        pending.tasks.add(task)
        task.add_done_callback(pending.tasks.discard)

    def _entry(self, conversation_id: str) -> _Pending:
        pending = self._pending.get(conversation_id)
        if pending is None:
            pending = self._pending[conversation_id] = _Pending()
            idle = [key for key, p in self._pending.items() if not p.tasks]
            for key in idle[:max(0, len(self._pending) - MAX_TRACKED)]:
                del self._pending[key]
        self._pending.move_to_end(conversation_id)
        return pending

    async def settled(self, conversation_id: str) -> None:
        await self._drain(conversation_id)

    async def _drain(self, conversation_id: str, cancel: bool = False) -> None:
        pending = self._pending.get(conversation_id)
        if not pending or not pending.tasks:
            return
        tasks = list(pending.tasks)
        if cancel:
            for task in tasks:
                task.cancel()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait(tasks, timeout=self._wait)

    async def aclose(self) -> None:
        tasks = [t for p in self._pending.values() for t in p.tasks]
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.wait(tasks, timeout=5)

    def _record(self, conversation_id: str, event: Event) -> None:
        pending = self._entry(conversation_id)
        pending.events = [*pending.events, event][-EVENTS_KEPT:]
        pending.done[event.kind] = pending.done.get(event.kind, 0) + 1
        if event.warning:
            pending.unread.append(event.warning)

    async def _turns(self, conv: Conversation, count: int) -> _Window:
        """The last ``count`` messages (keyframes aside) as a transcript, and what was read with them."""
        system, user = await self._characters(conv.project_id, conv.system_character_id,
                                              conv.user_character_id)
        names = [persona.persona(system.name, system.description).first_name,
                 persona.persona(user.name, user.description).first_name]
        stored = await self.conversations.messages(conv.project_id, conv.id,
                                                   newest=count + KEYFRAMES_KEPT + 1)
        said = [m for m in stored if m.kind == "message"][-count:]
        speaker = {"assistant": names[0], "user": names[1]}
        turns = [blocks.Turn(speaker.get(m.role, ""), display(m.content).content) for m in said]
        return _Window(turns, stored, said, names)

    async def _keyframe(self, conv: Conversation, options: ConversationOptions) -> None:
        try:
            window = await self._turns(conv, options.keyframe_every)
            turns, stored, names = window.turns, window.stored, window.names
            language = await self._language(conv.project_id)
            previous = next((_keyframe_summary(m.content) for m in reversed(stored) if m.kind == "keyframe"),
                            None)
            summary = await self._summarizer.summarize(
                blocks.keyframe_request(turns, previous, names, language),
                lambda: blocks.extractive_keyframe(turns, previous, names, language), blocks.KEYFRAME_CHARS)
            await self.conversations.add(conv.project_id, conv.id, role="system", kind="keyframe",
                                         content=blocks.keyframe_block(conv.id, summary.text, names))
            await self.conversations.prune_keyframes(conv.project_id, conv.id, keep=KEYFRAMES_KEPT)
            important = sum(m.important for m in window.said)
            await self.memories.add(conv.project_id, MemoryDraft(
                memory_type="EVENT", importance=min(10, 5 + important),
                summary=clip_sentences(summary.text, MEMORY_SUMMARY_CHARS), content=summary.text,
                source="keyframe", system_character_id=conv.system_character_id,
                user_character_id=conv.user_character_id, scope="pair", conversation_id=conv.id))
            self._record(conv.id, Event("keyframe", "fallback" if summary.warning else "stored", 1,
                                        f"{summary.warning}: keyframe written without a model "
                                        f"({summary.reason})"
                                        if summary.warning else None))
            _log.info("characters.keyframe", project_id=conv.project_id, conversation=_tag(conv.id),
                      source=summary.source, chars=len(summary.text))
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # background work must never take the conversation down
            _log.warning("characters.keyframe_failed", conversation=_tag(conv.id),
                         exc_type=type(exc).__name__)
            self._record(conv.id, Event("keyframe", "failed", 0, "KEYFRAME_FAILED"))

    async def _extract(self, conv: Conversation, options: ConversationOptions) -> None:
        try:
            window = await self._turns(conv, options.memory_extraction_every * 2)
            turns, stored = window.turns, window.stored
            language = await self._language(conv.project_id)
            try:
                request = blocks.extraction_request(turns, MEMORY_TYPES, language)
                answer = await self._completer.complete(request)
            except CompletionUnavailable as exc:
                self._record(conv.id, Event("extraction", "unavailable", 0,
                                            "MEMORY_EXTRACTION_UNAVAILABLE: no memories extracted "
                                            f"({exc.reason})"))
                return
            try:
                found = blocks.parse_memories(answer, blocks.Extracted)
            except blocks.Malformed as exc:
                _log.warning("characters.extraction_dropped", conversation=_tag(conv.id), reason=exc.reason)
                self._record(conv.id, Event("extraction", "dropped", 0, DROPPED.format(reason=exc.reason)))
                return
            last_user = next((m.id for m in reversed(stored) if m.role == "user" and m.kind == "message"),
                             None)
            try:  # the store's own rules too: one entry it would refuse drops the answer whole
                drafts = [checked_draft(MemoryDraft(
                    memory_type=m.memory_type, importance=m.importance, summary=m.summary, content=m.content,
                    source="extraction", system_character_id=conv.system_character_id,
                    user_character_id=conv.user_character_id, scope="pair", conversation_id=conv.id,
                    message_id=last_user)) for m in found]
            except (ValidationError, InvalidInput):
                dropped = DROPPED.format(reason="invalid_memory")
                self._record(conv.id, Event("extraction", "dropped", 0, dropped))
                return
            if drafts:
                await self.memories.add_many(conv.project_id, drafts)
            self._record(conv.id, Event("extraction", "stored", len(drafts)))
            _log.info("characters.extracted", project_id=conv.project_id, conversation=_tag(conv.id),
                      memories=len(drafts))
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # background work must never take the conversation down
            _log.warning("characters.extraction_failed", conversation=_tag(conv.id),
                         exc_type=type(exc).__name__)
            self._record(conv.id, Event("extraction", "failed", 0, "MEMORY_EXTRACTION_FAILED"))

    async def _characters(self, project_id: str, system_id: int,
                          user_id: int) -> tuple[KgEntityRecord, KgEntityRecord]:
        entities = {e.id: e for e in await self._entities(project_id)}
        for wanted in (system_id, user_id):
            if wanted not in entities:
                raise CharacterNotFound(characterId=wanted)
        return entities[system_id], entities[user_id]


def _require_newest(outcome: Outcome, candidates: Sequence[history.Entry],
                    count: Callable[[str], int]) -> None:
    """The newest message always stays: a prompt that had to drop it to fit answers nothing the
    model could reply to, so the call is refused, saying how large the message is."""
    if not candidates:
        return
    newest = max(candidates, key=lambda e: e.seq)
    if any(r.id == newest.item_id and r.fate != "dropped" for r in outcome.assembly.reports):
        return
    raise InputTooLarge("The newest message does not fit the conversation's token budget",
                        total=outcome.assembly.budget.total, newestTokens=count(newest.text))


def clip_sentences(text: str, limit: int) -> str:
    """As many whole sentences of ``text`` as fit in ``limit`` characters (at least the first one,
    cut at ``limit``): a keyframe memory's summary (the whole keyframe is its content)."""
    flat = " ".join(text.split())
    if len(flat) <= limit:
        return flat
    cut = max((flat.rfind(mark, 0, limit + 1) for mark in ("。", "！", "？", ". ", "! ", "? ")), default=-1)
    return flat[:cut + 1].rstrip() if cut > 0 else flat[:limit].rstrip()


def _language(value: str) -> Literal["zh", "en"]:
    return "zh" if value == "zh" else "en"


def _keyframe_summary(content: str) -> str | None:
    start, end = content.find("{"), content.rfind("}")
    try:
        data = json.loads(content[start:end + 1])
        summary = data["data"]["state"]["summary"]
    except (ValueError, KeyError, TypeError):
        return None
    return summary if isinstance(summary, str) else None


def _tag(conversation_id: str) -> str:
    """A conversation in logs: a short hash, so log lines can be joined without naming it."""
    return hashlib.sha256(conversation_id.encode()).hexdigest()[:12]

