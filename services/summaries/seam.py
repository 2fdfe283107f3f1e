"""The summarizer seam: a completion from a client that can run one, else a deterministic fallback.

Strata never holds a model or its keys. When it needs a summary (the command
chat's rolling summary, a character's keyframes, a reader's roll-ups) it asks a
:class:`Completer`; the transport's completer sends a client that declared the
capability a server-to-client request ``llm:complete {purpose, messages,
maxTokens}`` (the way MCP servers ask their client for sampling). When no such
client is connected, or it errs, times out or answers nonsense, the caller's
deterministic fallback is used and the result says so with the warning
``SUMMARY_FALLBACK``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal, Protocol

import structlog

FALLBACK_WARNING = "SUMMARY_FALLBACK"

_log = structlog.get_logger("summaries")

MessageRole = Literal["system", "user", "assistant"]


@dataclass(frozen=True, slots=True)
class CompletionMessage:
    role: MessageRole
    content: str


@dataclass(frozen=True, slots=True)
class CompletionRequest:
    """What a client is asked to complete.

    ``purpose`` names the use (``chat.summary``, ...), so a client may pick a
    model for it; ``prefer`` is the connection id of the client the work is
    for, asked first when it is capable.
    """

    purpose: str
    messages: tuple[CompletionMessage, ...]
    max_tokens: int
    prefer: str | None = None


class CompletionUnavailable(Exception):
    """No completion: no capable client, or it erred, timed out or gave no text.

    ``reason`` is one of ``no_client``, ``error``, ``timeout``, ``invalid``,
    ``closed``, ``busy``; never the client's own message.
    """

    def __init__(self, reason: str) -> None:
        super().__init__(f"completion unavailable: {reason}")
        self.reason = reason


class Completer(Protocol):
    async def complete(self, request: CompletionRequest) -> str:
        """The completion's text; raises :class:`CompletionUnavailable`."""
        ...


class NoCompleter:
    """A completer with no client behind it: every request falls back."""

    async def complete(self, request: CompletionRequest) -> str:
        raise CompletionUnavailable("no_client")


@dataclass(frozen=True, slots=True)
class Summary:
    text: str
    source: Literal["client", "extractive"]
    warning: str | None = None  # FALLBACK_WARNING when the fallback made it
    reason: str | None = None  # why the fallback was used


class Summarizer:
    """Runs the seam: the completer first, the caller's fallback when it has nothing."""

    def __init__(self, completer: Completer) -> None:
        self._completer = completer

    async def summarize(self, request: CompletionRequest, fallback: Callable[[], str],
                        max_chars: int | None = None) -> Summary:
        """A summary of ``request``'s messages, at most ``max_chars`` characters when given."""
        try:
            text = (await self._completer.complete(request)).strip()
            if not text:
                raise CompletionUnavailable("invalid")
        except CompletionUnavailable as exc:
            _log.info("summary.fallback", purpose=request.purpose, reason=exc.reason)
            return Summary(_cap(fallback(), max_chars), "extractive", FALLBACK_WARNING, exc.reason)
        _log.info("summary.client", purpose=request.purpose, chars=len(text))
        return Summary(_cap(text, max_chars), "client")


def _cap(text: str, max_chars: int | None) -> str:
    if max_chars is None or len(text) <= max_chars:
        return text
    cut = text[:max_chars]
    # End on a sentence or word boundary when one is near, rather than mid-word.
    for mark in ("。", ". ", "！", "？", "! ", "? ", "；", "; ", " "):
        at = cut.rfind(mark)
        if at >= max_chars * 3 // 4:
            return cut[: at + len(mark)].rstrip()
    return cut.rstrip()


def messages(pairs: Sequence[tuple[MessageRole, str]]) -> tuple[CompletionMessage, ...]:
    return tuple(CompletionMessage(role, content) for role, content in pairs)
