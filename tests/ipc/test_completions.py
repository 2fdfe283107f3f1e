"""ClientCompletions: which client is asked for a completion, how, and what its answer becomes."""

from __future__ import annotations

import asyncio
import itertools
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest
from structlog.testing import capture_logs

from ipc.completions import METHOD, ClientCompletions, completion_text
from ipc.context import Peer
from ipc.dispatch import Dispatcher
from ipc.outbound import ClientBusy, ClientClosed, ClientRequestError, ClientTimeout, OutboundError
from ipc.registry import Registry
from ipc.session import Session
from services.summaries.seam import CompletionRequest, CompletionUnavailable, Summarizer, messages

REQUEST = CompletionRequest(purpose="chat.summary", messages=messages([("system", "Summarize."),
                                                                       ("user", "林远推开门。")]),
                            max_tokens=200)


@dataclass
class FakeClient:
    """A peer whose requests are answered by ``answer`` (a value, or an exception to raise)."""

    connection_id: str
    answer: Any = "text"
    asked: list[tuple[str, Any, float]] = field(default_factory=list)
    listeners: dict[int, Callable[[], None]] = field(default_factory=dict)
    closed: bool = False

    async def request(self, method: str, params: dict[str, Any] | list[Any] | None, timeout: float) -> Any:
        self.asked.append((method, params, timeout))
        if isinstance(self.answer, BaseException):
            raise self.answer
        return self.answer

    def on_close(self, callback: Callable[[], None]) -> Callable[[], None]:
        if self.closed:
            callback()
            return lambda: None
        key = next(self._keys)
        self.listeners[key] = callback

        def remove() -> None:
            self.listeners.pop(key, None)

        return remove

    def close(self) -> None:
        self.closed = True
        for callback in list(self.listeners.values()):
            callback()
        self.listeners.clear()

    @property
    def peer(self) -> Peer:
        return self._peer

    def __post_init__(self) -> None:
        self._keys = itertools.count()
        self._peer = Peer(connection_id=self.connection_id, request=self.request, on_close=self.on_close)


def _prefer(connection_id: str | None) -> CompletionRequest:
    return CompletionRequest(REQUEST.purpose, REQUEST.messages, REQUEST.max_tokens, prefer=connection_id)


async def test_no_capable_client_is_no_client() -> None:
    """With nobody registered, complete() raises CompletionUnavailable('no_client')."""
    with pytest.raises(CompletionUnavailable) as raised:
        await ClientCompletions().complete(REQUEST)
    assert raised.value.reason == "no_client"


async def test_the_request_is_llm_complete_with_the_wire_params() -> None:
    """The client is sent llm:complete {purpose, messages [{role, content}], maxTokens} with the
    completer's default timeout, and its text is returned."""
    client = FakeClient("c1", answer="A door opens.")
    completions = ClientCompletions(timeout=7.5)
    completions.register(client.peer)
    assert await completions.complete(REQUEST) == "A door opens."
    assert client.asked == [(METHOD, {"purpose": "chat.summary",
                                      "messages": [{"role": "system", "content": "Summarize."},
                                                   {"role": "user", "content": "林远推开门。"}],
                                      "maxTokens": 200}, 7.5)]
    assert METHOD == "llm:complete"


@pytest.mark.parametrize(("timeout_ms", "expected"), [(None, 10.0), (2500, 2.5), (10, 1.0),
                                                      (500_000, 120.0)])
async def test_a_client_may_set_its_own_timeout_within_bounds(timeout_ms: int | None,
                                                              expected: float) -> None:
    """A declared timeoutMs replaces the default (10 s) for that client, clamped to 1..120 s."""
    client = FakeClient("c1")
    completions = ClientCompletions()
    completions.register(client.peer, timeout_ms)
    await completions.complete(REQUEST)
    assert client.asked[0][2] == expected


async def test_the_preferred_client_else_the_latest_declared() -> None:
    """prefer picks that connection when it is capable; otherwise the most recently declared one
    is asked, and declaring again makes a client the latest."""
    one, two = FakeClient("c1", answer="one"), FakeClient("c2", answer="two")
    completions = ClientCompletions()
    completions.register(one.peer)
    completions.register(two.peer)
    assert completions.connection_ids == ["c2", "c1"]
    assert await completions.complete(REQUEST) == "two"
    assert await completions.complete(_prefer("c1")) == "one"
    assert await completions.complete(_prefer("c9")) == "two"
    completions.register(one.peer)
    assert completions.connection_ids == ["c1", "c2"]
    assert await completions.complete(REQUEST) == "one"
    assert len(one.listeners) == 1  # declaring again does not pile up close listeners


async def test_withdrawn_and_closed_clients_are_not_asked() -> None:
    """unregister() removes a client (and its close listener); a closing connection removes itself;
    a peer that is already closed is never kept."""
    one, two = FakeClient("c1", answer="one"), FakeClient("c2", answer="two")
    completions = ClientCompletions()
    completions.register(one.peer)
    completions.register(two.peer)
    assert completions.unregister("c2") is True
    assert completions.unregister("c2") is False
    assert two.listeners == {}
    assert await completions.complete(_prefer("c2")) == "one"
    one.close()
    assert completions.connection_ids == []
    gone = FakeClient("c3", closed=True)
    completions.register(gone.peer)
    assert completions.connection_ids == []


@pytest.mark.parametrize(("answer", "text"), [
    ("plain", "plain"),
    ({"content": "an object"}, "an object"),
    ({"content": {"type": "text", "text": "mcp"}, "model": "m", "role": "assistant"}, "mcp"),
    ("", ""),
    ({"text": "plain text member"}, "plain text member"),
    (None, None), (5, None), (["x"], None), ({"content": 5}, None), ({"text": 5}, None),
    ({"content": {"type": "image", "data": "x"}}, None), ({"content": {"type": "text", "text": 3}}, None),
    ({"content": [{"type": "text", "text": "x"}]}, None),
])
def test_answer_shapes(answer: Any, text: str | None) -> None:
    """A string, {content: string}, {text: string} and MCP's {content: {type: text, text}} give
    text; nothing else does."""
    assert completion_text(answer) == text


async def test_an_answer_with_no_text_is_invalid() -> None:
    """An answer of any other shape raises CompletionUnavailable('invalid'), its content unlogged."""
    client = FakeClient("c1", answer={"content": {"type": "image", "data": "secret-bytes"}})
    completions = ClientCompletions()
    completions.register(client.peer)
    with capture_logs() as logs, pytest.raises(CompletionUnavailable) as raised:
        await completions.complete(REQUEST)
    assert raised.value.reason == "invalid"
    assert "secret" not in repr(logs)


@pytest.mark.parametrize(("failure", "reason"), [
    (ClientRequestError(-32603), "error"), (ClientRequestError(None), "error"),
    (ClientTimeout(1.0), "timeout"), (ClientClosed(), "closed"),
    (ClientBusy("limit"), "busy"), (ClientBusy("congested"), "busy"),
])
async def test_failures_become_reasons(failure: OutboundError, reason: str) -> None:
    """A client error, a timeout, a closed connection and a refusal (limit or lag) each raise
    CompletionUnavailable with their reason and nothing else."""
    client = FakeClient("c1", answer=failure)
    completions = ClientCompletions()
    completions.register(client.peer)
    with pytest.raises(CompletionUnavailable) as raised:
        await completions.complete(REQUEST)
    assert raised.value.reason == reason
    assert raised.value.__cause__ is None


async def test_the_summarizer_falls_back_when_the_client_fails() -> None:
    """Behind the seam's Summarizer, a failing client means the extractive fallback with its reason."""
    client = FakeClient("c1", answer=ClientTimeout(1.0))
    completions = ClientCompletions()
    completions.register(client.peer)
    summary = await Summarizer(completions).summarize(REQUEST, lambda: "fallback")
    assert (summary.text, summary.source, summary.reason) == ("fallback", "extractive", "timeout")


# --- over a Session (in memory: a list for a socket) ---------------------------


def _session(sent: list[str], connection_id: str = "c1") -> Session:
    async def send(text: str) -> None:
        sent.append(text)

    return Session(Dispatcher(Registry()), send, connection_id=connection_id)


async def _sent_request(sent: list[str]) -> dict[str, Any]:
    for _ in range(500):
        for text in sent:
            message = json.loads(text)
            if message.get("method") == METHOD:
                found: dict[str, Any] = message
                return found
        await asyncio.sleep(0.01)
    raise AssertionError("no llm:complete sent")


async def test_over_a_session_the_client_answers_and_errors_stay_private() -> None:
    """Through a real Session, the client's result answers complete(); its error answer becomes
    'error' and neither its message nor its text reaches the logs."""
    sent: list[str] = []
    session = _session(sent)
    completions = ClientCompletions()
    completions.register(session.peer)
    pending = asyncio.ensure_future(completions.complete(REQUEST))
    asked = await _sent_request(sent)
    assert asked["id"] == "s1"
    assert asked["params"]["maxTokens"] == 200
    await session.receive(json.dumps({"jsonrpc": "2.0", "id": "s1",
                                      "result": {"content": {"type": "text", "text": "secret summary"}}}))
    assert await pending == "secret summary"
    sent.clear()
    with capture_logs() as logs:
        pending = asyncio.ensure_future(completions.complete(REQUEST))
        asked = await _sent_request(sent)
        await session.receive(json.dumps({"jsonrpc": "2.0", "id": asked["id"],
                                          "error": {"code": -32000, "message": "secret quota text"}}))
        with pytest.raises(CompletionUnavailable) as raised:
            await pending
    assert raised.value.reason == "error"
    assert "secret" not in repr(logs)
    assert "secret" not in str(raised.value)


async def test_closing_the_session_fails_the_wait_and_forgets_the_client() -> None:
    """A completion waiting on a connection that closes fails at once as 'closed', and the
    connection is no longer asked."""
    sent: list[str] = []
    session = _session(sent)
    completions = ClientCompletions(timeout=60)
    completions.register(session.peer)
    pending = asyncio.ensure_future(completions.complete(REQUEST))
    await _sent_request(sent)
    await session.close()
    with pytest.raises(CompletionUnavailable) as raised:
        await asyncio.wait_for(pending, 5)
    assert raised.value.reason == "closed"
    assert completions.connection_ids == []
    completions.register(session.peer)  # declared again after the close: not kept
    assert completions.connection_ids == []
