"""Completions run by a connected client: the transport's :class:`~services.summaries.seam.Completer`.

A client that declares the ``completions`` capability (``system:capabilities``)
is registered here until it declares without it or its connection closes.
:meth:`ClientCompletions.complete` sends one of them the server-to-client
request ``llm:complete {purpose, messages, maxTokens}`` (as MCP servers ask
their client for sampling) and returns the text it answers. Every way of
getting no text is a :class:`~services.summaries.seam.CompletionUnavailable`
with a reason; neither the client's text nor its error message is ever
logged or passed on.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import structlog

from ipc.context import Peer
from ipc.outbound import OutboundError
from services.summaries.seam import CompletionRequest, CompletionUnavailable

METHOD = "llm:complete"
CAPABILITY = "completions"
MIN_TIMEOUT = 1.0
MAX_TIMEOUT = 120.0


def clamp_timeout(seconds: float) -> float:
    """A completion timeout within 1..120 s."""
    return min(MAX_TIMEOUT, max(MIN_TIMEOUT, seconds))


def _nothing() -> None:
    return None


@dataclass(slots=True)
class _Capable:
    peer: Peer
    timeout: float
    forget: Callable[[], None] = _nothing  # unregisters the close listener


class ClientCompletions:
    """The clients that can run completions, and the completer that asks them."""

    def __init__(self, timeout: float = 10.0) -> None:
        self._timeout = clamp_timeout(timeout)
        self._capable: dict[str, _Capable] = {}  # by connection id, most recently declared last
        self._log = structlog.get_logger("ipc.completions")

    @property
    def connection_ids(self) -> list[str]:
        """The capable connections, most recently declared first."""
        return list(reversed(self._capable))

    def register(self, peer: Peer, timeout_ms: int | None = None) -> None:
        """``peer`` can run completions, answering within ``timeout_ms`` (clamped to 1..120 s)
        or the default; a repeated declaration replaces the previous one and makes it the latest."""
        connection_id = peer.connection_id
        timeout = self._timeout if timeout_ms is None else clamp_timeout(timeout_ms / 1000)
        previous = self._capable.pop(connection_id, None)
        entry = _Capable(peer=peer, timeout=timeout)
        self._capable[connection_id] = entry  # last: the most recently declared
        if previous is not None and previous.peer is peer:
            entry.forget = previous.forget  # the same connection: its close listener stays
        else:
            if previous is not None:
                previous.forget()
            # Runs at once if the connection has already closed, which takes the entry out again.
            entry.forget = peer.on_close(lambda: self._closed(connection_id, peer))
        if self._capable.get(connection_id) is entry:
            self._log.info("completions.capable", conn=connection_id, timeout=timeout,
                           capable=len(self._capable))

    def unregister(self, connection_id: str) -> bool:
        """``connection_id`` no longer runs completions; False if it was not registered."""
        entry = self._capable.pop(connection_id, None)
        if entry is None:
            return False
        entry.forget()
        self._log.info("completions.withdrawn", conn=connection_id, capable=len(self._capable))
        return True

    def _closed(self, connection_id: str, peer: Peer) -> None:
        entry = self._capable.get(connection_id)
        if entry is not None and entry.peer is peer:
            del self._capable[connection_id]
            self._log.info("completions.gone", conn=connection_id, capable=len(self._capable))

    def _pick(self, prefer: str | None) -> _Capable | None:
        if prefer is not None and prefer in self._capable:
            return self._capable[prefer]
        return self._capable[next(reversed(self._capable))] if self._capable else None

    async def complete(self, request: CompletionRequest) -> str:
        """The text a capable client completes ``request`` with; raises CompletionUnavailable."""
        chosen = self._pick(request.prefer)
        if chosen is None:
            raise CompletionUnavailable("no_client")
        params = {
            "purpose": request.purpose,
            "messages": [{"role": m.role, "content": m.content} for m in request.messages],
            "maxTokens": request.max_tokens,
        }
        conn = chosen.peer.connection_id
        try:
            answer = await chosen.peer.request(METHOD, params, chosen.timeout)
        except OutboundError as exc:
            self._log.info("completion.unavailable", conn=conn, purpose=request.purpose,
                           reason=exc.reason, client_code=getattr(exc, "code", None))
            raise CompletionUnavailable(exc.reason) from None
        text = completion_text(answer)
        if text is None:
            self._log.info("completion.unavailable", conn=conn, purpose=request.purpose, reason="invalid")
            raise CompletionUnavailable("invalid")
        self._log.info("completion.answered", conn=conn, purpose=request.purpose, chars=len(text))
        return text


def completion_text(answer: Any) -> str | None:
    """The text of a client's answer: a string, ``{"content": "..."}``, ``{"text": "..."}`` or
    MCP's ``{"content": {"type": "text", "text": "..."}}``; None for anything else."""
    if isinstance(answer, str):
        return answer
    if not isinstance(answer, dict):
        return None
    content = answer.get("content", answer.get("text"))
    if isinstance(content, str):
        return content
    if isinstance(content, dict) and content.get("type") == "text" and isinstance(content.get("text"), str):
        text: str = content["text"]
        return text
    return None
