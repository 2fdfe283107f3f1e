"""Chat sessions of the app's command chat, kept in memory only.

A session is the conversation since the app was loaded: the user's messages
(as sent and as normalized) and the assistant's replies, a rolling summary of
older turns and the time it was last used. Nothing here is written to disk, so
a restart of the main process forgets every session (the seed's "reset on
reload").

:class:`SessionStore` owns the sessions and keeps them bounded
(:class:`SessionLimits`): a number of sessions (past it the least recently
used goes), messages and bytes of message text per session (the oldest
messages go first, never the one just recorded), the length of one message
(longer is :class:`MessageTooLong`) and idle time (an idle session expires and
is then unknown, :class:`UnknownSession`).

:meth:`SessionStore.context` gives the seed's context block for the latest
user message: the rolling summary, the last N user messages before that
message, the last assistant message before it when that message was a
question, and the message itself.

The store is used from the event loop only: every method runs to completion
without awaiting, so no locks are needed and none are taken. It must not be
called from worker threads.
"""

from __future__ import annotations

import secrets
import time
from collections import OrderedDict, deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

Role = Literal["user", "assistant"]

# A reply counts as a question when it ends with one of these, once trailing
# whitespace and closing quotes are set aside.
QUESTION_MARKS = frozenset("?？")
CLOSING_QUOTES = frozenset("\"'”’」』»›")

# UTF-8 takes at most 4 bytes per character; a user message keeps two texts.
_MAX_UTF8_BYTES_PER_CHAR = 4
_TEXTS_PER_MESSAGE = 2

DEFAULT_RECENT = 8


class UnknownSession(LookupError):
    """No live session has this id (never created, expired, evicted, or the server restarted)."""

    def __init__(self, session_id: str) -> None:
        super().__init__("unknown chat session")
        self.session_id = session_id


class MessageTooLong(ValueError):
    """A message is longer than :attr:`SessionLimits.max_message_chars`."""

    def __init__(self, length: int, limit: int) -> None:
        super().__init__(f"chat message of {length} characters is longer than {limit}")
        self.length = length
        self.limit = limit


class NoUserMessage(ValueError):
    """The session has no user message to build a context for (new or just reset)."""

    def __init__(self) -> None:
        super().__init__("the chat session has no user message yet")


@dataclass(frozen=True)
class SessionLimits:
    """The store's bounds.

    ``max_session_bytes`` counts the UTF-8 bytes of every message's texts
    (content, and the original for user messages); it must hold the longest
    possible message on its own, so that the message just recorded is never
    the one dropped. ``max_summary_chars`` caps a rolling summary (a longer one
    is cut).
    """

    max_sessions: int = 1_000
    max_messages: int = 200
    max_session_bytes: int = 256 * 1024
    idle_seconds: float = 30 * 60
    max_message_chars: int = 8_000
    max_summary_chars: int = 600

    def __post_init__(self) -> None:
        if min(self.max_sessions, self.max_messages, self.max_message_chars, self.max_summary_chars) < 1:
            raise ValueError("chat session bounds must be positive")
        if not self.idle_seconds > 0:
            raise ValueError("idle_seconds must be positive")
        if self.max_session_bytes < self.max_message_chars * _MAX_UTF8_BYTES_PER_CHAR * _TEXTS_PER_MESSAGE:
            raise ValueError("max_session_bytes must hold the longest message on its own")


@dataclass(frozen=True)
class ChatMessage:
    """One recorded message.

    ``content`` is the text as recorded (for a user message, the normalized
    text); ``original`` is the text as sent (user messages only, else None);
    ``is_question`` is meaningful for assistant messages (always False for the
    user's); ``at`` is the store's clock when it was recorded.
    """

    role: Role
    content: str
    original: str | None
    is_question: bool
    at: float

    @property
    def size(self) -> int:
        """UTF-8 bytes of the texts this message keeps."""
        size = len(self.content.encode("utf-8"))
        if self.original is not None:
            size += len(self.original.encode("utf-8"))
        return size


@dataclass(frozen=True)
class ChatContext:
    """The seed's context block for the latest user message (``current``).

    ``recent_user_messages`` are the normalized user messages immediately
    before ``current``, oldest first; ``last_assistant_question`` is the last
    assistant message before ``current`` when it was a question, else None.
    """

    summary: str | None
    recent_user_messages: tuple[str, ...]
    last_assistant_question: str | None
    current: str


def ends_with_question(text: str) -> bool:
    """Whether ``text`` ends with ``?`` or ``？``, trailing whitespace and closing quotes set aside."""
    end = len(text)
    while end > 0 and (text[end - 1].isspace() or text[end - 1] in CLOSING_QUOTES):
        end -= 1
    return end > 0 and text[end - 1] in QUESTION_MARKS


class ChatSession:
    """One conversation, owned and mutated by its :class:`SessionStore` only.

    ``recorded`` counts every message ever recorded in the session (it is not
    lowered by drops or resets); a summary covers the messages recorded up to a
    value of it, so a summary computed while messages were dropped still
    applies to the right ones. ``summary_upto`` is how many of the kept
    messages (from the oldest) the summary covers.
    """

    __slots__ = ("_messages", "_summary_through", "bytes", "id", "last_used", "project_id",
                 "recorded", "summary")

    def __init__(self, session_id: str, project_id: str | None, now: float) -> None:
        self.id = session_id
        self.project_id = project_id
        self.summary: str | None = None
        self.last_used = now
        self.recorded = 0
        self.bytes = 0
        self._messages: deque[ChatMessage] = deque()
        self._summary_through = 0

    @property
    def messages(self) -> tuple[ChatMessage, ...]:
        """The kept messages, oldest first."""
        return tuple(self._messages)

    @property
    def summary_upto(self) -> int:
        """How many of the kept messages, from the oldest, the summary covers."""
        if self.summary is None:
            return 0
        first = self.recorded - len(self._messages)
        return max(0, min(len(self._messages), self._summary_through - first))


class SessionStore:
    """The live chat sessions, bounded by ``limits``; used from the event loop only.

    ``clock`` gives monotonic, non-decreasing seconds (``time.monotonic`` unless
    a test injects its own). Every call first lets idle sessions expire, and
    every call naming a session counts as a use of it.
    """

    def __init__(self, limits: SessionLimits, clock: Callable[[], float] = time.monotonic) -> None:
        self.limits = limits
        self._clock = clock
        # Least recently used first: last_used never decreases along this order.
        self._sessions: OrderedDict[str, ChatSession] = OrderedDict()

    def __contains__(self, session_id: object) -> bool:
        """Whether a session of this id is live (without counting as a use of it)."""
        return session_id in self._sessions

    def __len__(self) -> int:
        """The number of live sessions (expired ones included until the next call expires them)."""
        return len(self._sessions)

    def submit(self, session_id: str | None, project_id: str | None,
               original: str, normalized: str) -> ChatSession:
        """Record a user message (as sent and normalized) and return its session.

        Without ``session_id`` a new session with a random id is made (the least
        recently used one goes if the store is full); an unknown or expired id
        raises :class:`UnknownSession`. A ``project_id`` given replaces the
        session's. Either text longer than the limit raises
        :class:`MessageTooLong` and records nothing.
        """
        self._check_length(original)
        self._check_length(normalized)
        now = self._now()
        if session_id is None:
            session = self._create(project_id, now)
        else:
            session = self._use(session_id, now)
            if project_id is not None:
                session.project_id = project_id
        self._record(session, ChatMessage("user", normalized, original, False, now))
        return session

    def reply(self, session_id: str, content: str, is_question: bool | None = None) -> ChatMessage:
        """Record the assistant's reply: a question when flagged so, or (no flag) when it ends with one."""
        self._check_length(content)
        now = self._now()
        session = self._use(session_id, now)
        question = ends_with_question(content) if is_question is None else is_question
        message = ChatMessage("assistant", content, None, question, now)
        self._record(session, message)
        return message

    def reset(self, session_id: str) -> ChatSession:
        """Forget the session's messages and summary; the session and its id stay."""
        session = self._use(session_id, self._now())
        session._messages.clear()
        session.bytes = 0
        session.summary = None
        session._summary_through = session.recorded
        return session

    def get(self, session_id: str) -> ChatSession:
        """The live session with this id, else :class:`UnknownSession`."""
        return self._use(session_id, self._now())

    def summarize(self, session_id: str, summary: str, upto: int) -> bool:
        """Keep ``summary`` as the session's rolling summary of the messages recorded up to ``upto``.

        ``upto`` is the session's ``recorded`` when the summarized messages were
        read. A summary is kept only when it is not older than the one kept and
        covers something since the last reset; it returns whether it was kept.
        A summary longer than ``max_summary_chars`` is cut to it.
        """
        session = self._use(session_id, self._now())
        if not 0 <= upto <= session.recorded:
            raise ValueError("upto must be a count of messages the session has recorded")
        newer = upto > session._summary_through
        same = upto == session._summary_through and session.summary is not None
        if not (newer or same):
            return False
        session.summary = summary[: self.limits.max_summary_chars]
        session._summary_through = upto
        return True

    def context(self, session_id: str, recent: int = DEFAULT_RECENT) -> ChatContext:
        """The seed's context block for the session's latest user message.

        The summary (if any); the ``recent`` user messages immediately before
        the latest one, oldest first; the last assistant message before the
        latest user message when it was a question; the latest user message.
        Assistant replies recorded after the latest user message play no part.
        Raises :class:`NoUserMessage` when the session holds no user message.
        """
        if recent < 0:
            raise ValueError("recent must not be negative")
        session = self._use(session_id, self._now())
        current: str | None = None
        before: list[str] = []
        last_assistant: ChatMessage | None = None
        seen_assistant = False
        for message in reversed(session._messages):
            if message.role == "user":
                if current is None:
                    current = message.content
                elif len(before) < recent:
                    before.append(message.content)
                else:
                    break
            elif current is not None and not seen_assistant:
                seen_assistant = True
                last_assistant = message
        if current is None:
            raise NoUserMessage()
        asked = last_assistant is not None and last_assistant.is_question
        question = last_assistant.content if last_assistant is not None and asked else None
        return ChatContext(session.summary, tuple(reversed(before)), question, current)

    def expire(self) -> tuple[str, ...]:
        """Remove every session idle longer than ``idle_seconds``; their ids, least recently used first."""
        return self._expire(self._clock())

    def _expire(self, now: float) -> tuple[str, ...]:
        gone: list[str] = []
        while self._sessions:
            session_id, session = next(iter(self._sessions.items()))
            if now - session.last_used <= self.limits.idle_seconds:
                break
            del self._sessions[session_id]
            gone.append(session_id)
        return tuple(gone)

    def _now(self) -> float:
        now = self._clock()
        self._expire(now)
        return now

    def _check_length(self, text: str) -> None:
        if len(text) > self.limits.max_message_chars:
            raise MessageTooLong(len(text), self.limits.max_message_chars)

    def _create(self, project_id: str | None, now: float) -> ChatSession:
        while len(self._sessions) >= self.limits.max_sessions:
            self._sessions.popitem(last=False)
        session_id = secrets.token_urlsafe(12)
        while session_id in self._sessions:
            session_id = secrets.token_urlsafe(12)
        session = ChatSession(session_id, project_id, now)
        self._sessions[session_id] = session
        return session

    def _use(self, session_id: str, now: float) -> ChatSession:
        session = self._sessions.get(session_id)
        if session is None:
            raise UnknownSession(session_id)
        session.last_used = now
        self._sessions.move_to_end(session_id)
        return session

    def _record(self, session: ChatSession, message: ChatMessage) -> None:
        session._messages.append(message)
        session.recorded += 1
        session.bytes += message.size
        limits = self.limits
        while len(session._messages) > limits.max_messages or session.bytes > limits.max_session_bytes:
            dropped = session._messages.popleft()
            session.bytes -= dropped.size
