"""The command chat as one manager: submit, reply, reset, state, resolve; rolling summaries behind.

``submit`` normalizes the message, records it and assembles the intent call's
prompt on the chat-navigation plan. After it answers, a session that has
passed the summary threshold gets its rolling summary refreshed in the
background through the summarizer seam (a client's completion, else the
extractive fallback with ``SUMMARY_FALLBACK``); the next submit uses it when it
is ready, so summarizing never holds a submit up.

Everything lives in the :class:`~services.chat.sessions.SessionStore`, in
memory: a restart forgets every session.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

import structlog

from services.chat.extractive import summarize_intents
from services.chat.intents import Conversation, Intent, Resolved, resolve_intent
from services.chat.normalize import Normalizer
from services.chat.prompt import PROFILE, Budgets, build, kept_context
from services.chat.sessions import (
    ChatContext,
    ChatMessage,
    ChatSession,
    MessageTooLong,
    SessionStore,
    UnknownSession,
)
from services.chat.workspace import Workspace
from services.concurrency.offload import off_loop
from services.context.counting import CountCache
from services.context.models import Assembly
from services.errors import ChatBudgetTooSmall, ChatMessageTooLong, ChatSessionNotFound, InputTooLarge
from services.profiles.plans import PlanSource
from services.summaries.seam import CompletionMessage, CompletionRequest, Summarizer, messages

_log = structlog.get_logger("chat")

SUMMARY_PURPOSE = "chat.summary"
SUMMARY_INSTRUCTIONS = (
    "You keep the rolling summary of a writing app's command chat. Write at most {chars} characters "
    "of intent-relevant facts only, one short sentence each, in the language the user writes in, for "
    "example: \"User is trying to open a chapter by number.\" \"User asked for chapter 5.\" Keep facts "
    "of the previous summary that still hold. No greetings, no advice, nothing the messages do not say."
)
FALLBACK_NOTE = {
    "zh": "SUMMARY_FALLBACK: 没有可用的模型客户端，滚动摘要由抽取式摘要生成",
    "en": "SUMMARY_FALLBACK: no client could run the summary; the rolling summary is extractive",
}


@dataclass(frozen=True)
class ChatSettings:
    """The chat's defaults: the recent window (6..8), when and how long a summary is, the budgets."""

    recent: int = 8
    summary_threshold: int = 12
    # Once there is a summary, it is refreshed when this many messages have fallen out of the
    # recent window since: a completion per message would cost the writer's model a call a turn.
    summary_every: int = 4
    summary_chars: int = 600
    token_budget: int = 4096
    context_budget: int = 1024
    summary_max_tokens: int = 256

    def __post_init__(self) -> None:
        if not 6 <= self.recent <= 8:
            raise ValueError("recent must be 6..8")
        if not 400 <= self.summary_chars <= 600:
            raise ValueError("summary_chars must be 400..600")
        if self.summary_threshold < 1 or self.summary_every < 1:
            raise ValueError("summary_threshold and summary_every must be positive")


@dataclass(frozen=True, slots=True)
class Turn:
    """What ``submit`` answers: the session, the message as sent and normalized, the context as
    it made the prompt (recent messages the budget dropped are not in it) and the assembly."""

    session_id: str
    original: str
    normalized: str
    context: ChatContext
    assembly: Assembly
    summary_source: Literal["client", "extractive"] | None
    summary_pending: bool
    warnings: tuple[str, ...]


@dataclass
class _SummaryState:
    source: Literal["client", "extractive"] | None = None
    task: asyncio.Task[None] | None = None
    again: bool = False  # more fell out of the window while a summary was being made
    prefer: str | None = None


@dataclass
class ChatService:
    store: SessionStore
    normalizer: Normalizer
    plans: PlanSource
    counter: CountCache
    summarizer: Summarizer
    workspace: Workspace
    settings: ChatSettings = field(default_factory=ChatSettings)
    _summaries: dict[str, _SummaryState] = field(default_factory=dict)
    # Every summary task still running, also those a reset cancelled and no state names any more.
    _tasks: set[asyncio.Task[None]] = field(default_factory=set)

    async def submit(self, session_id: str | None, project_id: str | None, message: str, *,
                     recent: int | None = None, token_budget: int | None = None,
                     context_budget: int | None = None, connection: str | None = None) -> Turn:
        """Record the user's message and build the intent call's prompt for it."""
        limit = self.store.limits.max_message_chars
        if len(message) > limit:
            raise ChatMessageTooLong(length=len(message), limit=limit)
        if project_id is not None:
            await self.workspace.require_project(project_id)
        normalized = self.normalizer.normalize(message)
        try:
            session = self.store.submit(session_id, project_id, normalized.original, normalized.normalized)
        except UnknownSession:
            raise ChatSessionNotFound() from None
        except MessageTooLong as exc:
            raise ChatMessageTooLong(length=exc.length, limit=exc.limit) from None
        context = self.store.context(session.id, recent or self.settings.recent)
        budgets = Budgets(token_budget or self.settings.token_budget,
                          context_budget or self.settings.context_budget)
        plan = await self.plans.plan(session.project_id or "", PROFILE)
        language = language_of([context.current, *context.recent_user_messages])
        size = sum(map(len, (context.current, context.summary or "", *context.recent_user_messages)))
        if not self.counter.ready:  # the server's encoding, built on first use: not on the loop
            await asyncio.to_thread(self.counter.prepare)
        try:
            assembly = await off_loop(size, build, plan, context, budgets, self.counter, language)
        except InputTooLarge as exc:
            fields: dict[str, int] = {"tokenBudget": budgets.token_budget}
            fixed = exc.fields.get("fixedTokens")
            if isinstance(fixed, int):
                fields["fixedTokens"] = fixed
            raise ChatBudgetTooSmall(None, **fields) from None
        kept = kept_context(assembly, plan, context)
        state = self._summaries.get(session.id)
        source = state.source if state is not None and kept.summary is not None else None
        warnings = list(assembly.warnings)
        if source == "extractive":
            warnings.append(FALLBACK_NOTE[language])
        self._after(session, connection, recent or self.settings.recent)
        pending = session.id in self._summaries and self._summaries[session.id].task is not None
        _log.info("chat.submitted", session=_ref(session.id), messages=len(session.messages),
                  tokens=assembly.token_count, recent=len(kept.recent_user_messages),
                  summary=context.summary is not None, pending=pending)
        return Turn(session.id, normalized.original, normalized.normalized, kept, assembly, source, pending,
                    tuple(warnings))

    def reply(self, session_id: str, content: str, is_question: bool | None = None,
              connection: str | None = None) -> ChatMessage:
        """Record the assistant's answer (a question when flagged, or when it ends with ? or ？)."""
        try:
            message = self.store.reply(session_id, content, is_question)
        except UnknownSession:
            raise ChatSessionNotFound() from None
        except MessageTooLong as exc:
            raise ChatMessageTooLong(length=exc.length, limit=exc.limit) from None
        self._after(self.store.get(session_id), connection, self.settings.recent)
        return message

    async def resolve(self, session_id: str, intent: Intent, current_document_id: str | None = None,
                      project_id: str | None = None) -> Resolved:
        """What the model's intent means for this session's project; a reply it gives the user
        (a clarifying question, "not supported yet", which one) is recorded as the assistant's."""
        session = self.session(session_id)
        if project_id is not None:
            await self.workspace.require_project(project_id)
        users = [m.content for m in session.messages if m.role == "user"]
        conversation = Conversation(users, session.summary, project_id or session.project_id)
        resolved = await resolve_intent(intent, conversation, self.workspace, current_document_id)
        if resolved.reply is not None:
            with contextlib.suppress(UnknownSession):  # expired while the documents were read
                self.store.reply(session_id, resolved.reply)
        _log.info("chat.resolved", session=_ref(session_id), intent=intent.intent, outcome=resolved.outcome,
                  candidates=len(resolved.candidates))
        return resolved

    def reset(self, session_id: str) -> None:
        """Forget the session's messages and summary (a summary being made for it is dropped)."""
        try:
            self.store.reset(session_id)
        except UnknownSession:
            raise ChatSessionNotFound() from None
        state = self._summaries.pop(session_id, None)
        if state is not None and state.task is not None:
            state.task.cancel()

    def session(self, session_id: str) -> ChatSession:
        try:
            return self.store.get(session_id)
        except UnknownSession:
            raise ChatSessionNotFound() from None

    def summary_state(self, session_id: str) -> tuple[str | None, bool]:
        """The source of the session's summary and whether a new one is being made."""
        state = self._summaries.get(session_id)
        if state is None:
            return None, False
        return state.source, state.task is not None

    async def settled(self, session_id: str) -> None:
        """Wait until no summary of the session is being made."""
        while (state := self._summaries.get(session_id)) is not None and state.task is not None:
            await asyncio.shield(state.task)

    async def idle(self) -> None:
        """Wait until no summary task runs, cancelled ones included."""
        while self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)

    async def aclose(self) -> None:
        for task in self._tasks:
            task.cancel()
        await self.idle()

    # --- rolling summaries ---------------------------------------------------------------------

    def _after(self, session: ChatSession, connection: str | None, recent: int) -> None:
        """Start refreshing the summary when older messages fell out of the window uncovered."""
        if len(session.messages) <= self.settings.summary_threshold:
            return
        uncovered = _outside(session, recent) - session.summary_upto
        if uncovered <= 0 or (session.summary is not None and uncovered < self.settings.summary_every):
            return
        if session.id not in self._summaries:
            self._prune()
        state = self._summaries.setdefault(session.id, _SummaryState())
        state.prefer = connection or state.prefer
        if state.task is not None:
            state.again = True
            return
        task = state.task = asyncio.get_running_loop().create_task(self._refresh(session.id, recent))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _prune(self) -> None:
        """Forget the summary state of sessions the store no longer holds (expired, evicted)."""
        if len(self._summaries) < self.store.limits.max_sessions:
            return
        for session_id in [sid for sid, state in self._summaries.items()
                           if state.task is None and sid not in self.store]:
            del self._summaries[session_id]

    async def _refresh(self, session_id: str, recent: int) -> None:
        state = self._summaries[session_id]
        try:
            while True:
                state.again = False
                try:
                    session = self.store.get(session_id)
                except UnknownSession:
                    return
                if not await self._summarize_once(session, recent, state):
                    return
                if not state.again:
                    return
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # a summary is a convenience: never let it take anything down
            _log.warning("chat.summary_failed", session=_ref(session_id), exc_type=type(exc).__name__)
        finally:
            state.task = None

    async def _summarize_once(self, session: ChatSession, recent: int, state: _SummaryState) -> bool:
        kept = session.messages
        outside = _outside(session, recent)
        covered = session.summary_upto
        if outside <= covered:
            return False
        upto = session.recorded - len(kept) + outside
        fresh = kept[covered:outside]
        previous = session.summary
        chars = self.settings.summary_chars
        user_messages = [m.content for m in fresh if m.role == "user"]
        request = CompletionRequest(SUMMARY_PURPOSE, _summary_prompt(previous, fresh, chars),
                                    self.settings.summary_max_tokens, prefer=state.prefer)
        summary = await self.summarizer.summarize(
            request, lambda: summarize_intents(previous, user_messages, chars), max_chars=chars)
        try:
            kept_it = self.store.summarize(session.id, summary.text, upto)
        except UnknownSession:
            return False
        if kept_it:
            state.source = summary.source
        _log.info("chat.summarized", session=_ref(session.id), source=summary.source, chars=len(summary.text),
                  upto=upto, kept=kept_it)
        return True


def _outside(session: ChatSession, recent: int) -> int:
    """How many of the kept messages, from the oldest, lie before the recent window of the latest
    user message (the last ``recent`` user messages before it, and what came after them)."""
    users = 0
    kept = session.messages
    for index in range(len(kept) - 1, -1, -1):
        if kept[index].role == "user":
            users += 1
            if users == recent + 1:
                return index
    return 0


def _summary_prompt(previous: str | None, fresh: Sequence[ChatMessage],
                    chars: int) -> tuple[CompletionMessage, ...]:
    lines = [f"Previous summary: {previous or '(none)'}", "", "Messages since:"]
    lines += [f"{n}) {m.role}: {m.content}" for n, m in enumerate(fresh, start=1)]
    return messages((("system", SUMMARY_INSTRUCTIONS.format(chars=chars)), ("user", "\n".join(lines))))


def language_of(texts: Sequence[str]) -> str:
    """``zh`` when the newest text holding letters is mostly CJK, else ``en``."""
    for text in texts:
        cjk = sum(1 for ch in text if "\u3400" <= ch <= "\u9fff" or "\uf900" <= ch <= "\ufaff")
        latin = sum(1 for ch in text if ch.isascii() and ch.isalpha())
        if cjk or latin:
            return "zh" if cjk * 2 >= latin else "en"
    return "en"


def _ref(session_id: str) -> str:
    """What logs say instead of a session id, which lets its holder read the session."""
    return hashlib.sha256(session_id.encode()).hexdigest()[:12]
