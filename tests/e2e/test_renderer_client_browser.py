"""renderer-stub/strata-client.js, driven in real headless Chromium against a real server.

The page ``renderer-stub/client-test.html`` is served from 127.0.0.1, so the
browser sends a loopback Origin that the server's default policy allows. It
imports the client module exactly as a renderer would and exposes it as
``window.strata``; each test runs a scenario with ``page.evaluate`` and checks
what the page saw, and, where it matters, what the server saw.

The server's own requests to the page (``llm:complete``) are tested against
an in-process :class:`ipc.server.WebSocketServer` whose registry has the
system methods with a :class:`ipc.completions.ClientCompletions`, the test
methods, and ``test:ask``, a test-only method whose handler asks its caller
``llm:complete`` and returns what the page answered.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from playwright.async_api import Page, WebSocket

from ipc.auth import origin_patterns
from ipc.channels.system import Limits, TokenizerDescription, register_system
from ipc.completions import ClientCompletions
from ipc.context import CallContext
from ipc.dispatch import Dispatcher
from ipc.models import WireModel
from ipc.outbound import ClientRequestError, OutboundError
from ipc.registry import Registry
from ipc.server import TransportLimits, WebSocketServer
from services.summaries.seam import CompletionRequest, CompletionUnavailable, messages
from tests.support.browser import chromium, serve_folder
from tests.support.inproc import TOKEN, InProcServer, add_test_methods
from tests.support.process import serving

pytestmark = pytest.mark.browser

ROOT = Path(__file__).resolve().parents[2]
STUB = ROOT / "renderer-stub"
OUTPUT = ROOT / "test-output"


@dataclass
class Harness:
    """The loaded test page, the server it talks to, and what the browser saw."""

    page: Page
    origin: str
    server: InProcServer
    frames: list[str] = field(default_factory=list)
    sent_frames: list[str] = field(default_factory=list)
    page_errors: list[str] = field(default_factory=list)

    def args(self, **extra: Any) -> dict[str, Any]:
        return {"url": self.server.url, "token": TOKEN, **extra}


@pytest.fixture
async def harness(server: InProcServer, request: pytest.FixtureRequest) -> AsyncIterator[Harness]:
    async with open_page(server, request.node.name) as h:
        yield h


@asynccontextmanager
async def open_page(server: InProcServer, name: str) -> AsyncIterator[Harness]:
    """The test page loaded in Chromium, talking to ``server``; no uncaught page errors allowed."""
    with serve_folder(STUB) as origin:
        async with chromium() as browser:
            page = await browser.new_page(viewport={"width": 900, "height": 600})
            page.set_default_timeout(10_000)
            h = Harness(page=page, origin=origin, server=server)
            page.on("pageerror", lambda exc: h.page_errors.append(str(exc)))

            def watch(ws: WebSocket) -> None:
                ws.on("framereceived",
                      lambda payload: h.frames.append(payload if isinstance(payload, str)
                                                      else payload.decode()))
                ws.on("framesent",
                      lambda payload: h.sent_frames.append(payload if isinstance(payload, str)
                                                           else payload.decode()))

            page.on("websocket", watch)
            await page.goto(f"{origin}/client-test.html")
            await page.wait_for_function("window.strataReady === true")
            yield h
            OUTPUT.mkdir(exist_ok=True)
            await page.screenshot(path=str(OUTPUT / f"renderer-client-{name}.png"))
            await page.close()
    assert h.page_errors == [], "uncaught errors in the page"


async def eventually(predicate: Callable[[], bool], within: float = 5.0) -> None:
    """Poll ``predicate`` until it holds; fail after ``within`` seconds."""
    deadline = time.monotonic() + within
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        await asyncio.sleep(0.02)


async def test_connects_with_token_and_resolves_results(harness: Harness) -> None:
    """connect() opens with ?token= from a loopback origin; call() resolves with result."""
    out = await harness.page.evaluate(
        """async ({url, token}) => {
            const client = await strata.StrataClient.connect(url, token);
            log(`connected from ${location.origin}`, "ok");
            const echo = await client.call("test:echo", {text: "ab", count: 3});
            log(`test:echo -> ${JSON.stringify(echo)}`, "ok");
            const info = await client.call("system:info");
            log(`system:info -> ${info.name} (${info.tokenizer.encoding})`, "ok");
            const open = client.isOpen;
            client.close();
            return {origin: location.origin, echo, name: info.name, open};
        }""",
        harness.args(),
    )
    assert out == {"origin": harness.origin, "echo": {"text": "ababab"}, "name": "strata",
                   "open": True}
    assert harness.server.seen == ["echo:ab"]
    OUTPUT.mkdir(exist_ok=True)
    shot = OUTPUT / "renderer-client.png"
    await harness.page.screenshot(path=str(shot))
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


async def test_error_replies_reject_with_code_and_data_code(harness: Harness) -> None:
    """An error reply rejects with StrataRpcError carrying code, message, data and dataCode."""
    out = await harness.page.evaluate(
        """async ({url, token}) => {
            const client = await strata.StrataClient.connect(url, token);
            const outcomes = {};
            for (const [name, method, params] of [
                ["conflict", "test:fail", {kind: "conflict"}],
                ["crash", "test:fail", {kind: "crash"}],
                ["unknown", "test:nope", undefined],
                ["badParams", "test:echo", {count: "many"}],
            ]) {
                try {
                    await client.call(method, params);
                    outcomes[name] = null;
                } catch (err) {
                    outcomes[name] = describeError(err);
                    log(`${method} -> ${err.code} ${err.dataCode}`, "err");
                }
            }
            client.close();
            return outcomes;
        }""",
        harness.args(),
    )
    conflict = out["conflict"]
    assert conflict["isRpcError"]
    assert conflict["name"] == "StrataRpcError"
    assert (conflict["code"], conflict["dataCode"]) == (-32099, "TEST_CONFLICT")
    assert conflict["data"] == {"code": "TEST_CONFLICT", "version": 3}
    assert conflict["message"] == "Test conflict"
    crash = out["crash"]
    assert (crash["code"], crash["dataCode"]) == (-32603, "INTERNAL")
    assert "secret" not in json.dumps(crash)
    assert (out["unknown"]["code"], out["unknown"]["dataCode"]) == (-32601, "METHOD_NOT_FOUND")
    assert (out["badParams"]["code"], out["badParams"]["dataCode"]) == (-32602, "INVALID_PARAMS")


async def test_notifications_reach_handlers_until_unsubscribed(harness: Harness) -> None:
    """onNotification() handlers get $/progress params; the returned function unsubscribes."""
    out = await harness.page.evaluate(
        """async ({url, token}) => {
            const client = await strata.StrataClient.connect(url, token);
            const first = [], second = [];
            const offFirst = client.onNotification("$/progress", (p) => first.push(p));
            client.onNotification("$/progress", (p, message) => second.push(message.method));
            await client.call("test:notify", {times: 3});
            log(`$/progress x${first.length}: ${JSON.stringify(first)}`, "ok");
            offFirst();
            await client.call("test:notify", {times: 2});
            client.close();
            return {first, second};
        }""",
        harness.args(),
    )
    assert out["first"] == [{"done": 1, "total": 3}, {"done": 2, "total": 3},
                            {"done": 3, "total": 3}]
    assert out["second"] == ["$/progress"] * 5


async def test_abort_signal_cancels_a_long_call_on_the_server(harness: Harness) -> None:
    """Aborting sends $/cancelRequest; the call rejects -32800 REQUEST_CANCELLED at once,
    the server stops the work and answers the id with REQUEST_CANCELLED, and that late
    reply is dropped without disturbing the connection."""
    page, server = harness.page, harness.server
    await page.evaluate(
        """async ({url, token}) => {
            const client = await strata.StrataClient.connect(url, token);
            window.client = client;
            window.unmatched = [];
            client.onunmatched = (m) => unmatched.push(m);
            window.controller = new AbortController();
            window.outcome = client
                .call("test:sleep", {seconds: 30, label: "long"}, {signal: controller.signal})
                .then((result) => ({result}), (err) => ({error: describeError(err)}));
        }""",
        harness.args(),
    )
    await eventually(lambda: "sleep-start:long" in server.seen)
    out = await page.evaluate(
        """async () => {
            const started = performance.now();
            controller.abort();
            const outcome = await window.outcome;
            log(`test:sleep aborted -> ${outcome.error.code} ${outcome.error.dataCode}`, "err");
            return {...outcome, ms: performance.now() - started, pending: client.pendingCount};
        }"""
    )
    error = out["error"]
    assert error["isRpcError"]
    assert (error["code"], error["dataCode"]) == (-32800, "REQUEST_CANCELLED")
    assert out["ms"] < 1000
    assert out["pending"] == 0
    await eventually(lambda: "sleep-cancelled:long" in server.seen)
    assert "sleep-end:long" not in server.seen

    def cancelled_reply_seen() -> bool:
        for frame in harness.frames:
            reply = json.loads(frame)
            if isinstance(reply, dict) and reply.get("id") == 1 and "error" in reply:
                return bool(reply["error"]["data"]["code"] == "REQUEST_CANCELLED")
        return False

    await eventually(cancelled_reply_seen)
    after = await page.evaluate(
        """async () => {
            const echo = await client.call("test:echo", {text: "still here"});
            client.close();
            return {echo, unmatched};
        }"""
    )
    assert after == {"echo": {"text": "still here"}, "unmatched": []}


async def test_timeout_cancels_the_call(harness: Harness) -> None:
    """timeoutMs cancels like an abort: REQUEST_CANCELLED, and the server stops the work."""
    out = await harness.page.evaluate(
        """async ({url, token}) => {
            const client = await strata.StrataClient.connect(url, token);
            try {
                await client.call("test:sleep", {seconds: 30, label: "slow"}, {timeoutMs: 300});
                return null;
            } catch (err) {
                log(`test:sleep timed out -> ${err.dataCode}`, "err");
                return describeError(err);
            } finally {
                // Give the $/cancelRequest time to leave before the socket closes.
                await client.call("test:echo", {text: "x"});
                client.close();
            }
        }""",
        harness.args(),
    )
    assert (out["code"], out["dataCode"]) == (-32800, "REQUEST_CANCELLED")
    assert out["data"]["reason"] == "timeout"
    await eventually(lambda: "sleep-cancelled:slow" in harness.server.seen)


async def test_out_of_order_and_batch_replies_are_routed_by_id(harness: Harness) -> None:
    """Replies are matched by id: a fast call overtakes a slow one, and each entry of a
    batch reply settles its own promise."""
    out = await harness.page.evaluate(
        """async ({url, token}) => {
            const client = await strata.StrataClient.connect(url, token);
            const order = [];
            const slow = client.call("test:sleep", {seconds: 0.4, label: "slow"})
                .then((r) => order.push(r.label));
            const fast = client.call("test:echo", {text: "fast"})
                .then((r) => order.push(r.text));
            await Promise.all([slow, fast]);
            const settled = await Promise.allSettled(client.batch([
                {method: "test:sleep", params: {seconds: 0.1, label: "b1"}},
                {method: "test:echo", params: {text: "b2"}},
                {method: "test:fail", params: {kind: "conflict"}},
            ]));
            const statuses = settled.map((s) => s.status).join(",");
            log(`order ${order.join(" < ")}; batch ${statuses}`, "ok");
            client.close();
            return {
                order,
                batch: settled.map((s) =>
                    s.status === "fulfilled" ? s.value : s.reason.dataCode),
            };
        }""",
        harness.args(),
    )
    assert out["order"] == ["fast", "slow"]
    assert out["batch"] == [{"label": "b1"}, {"text": "b2"}, "TEST_CONFLICT"]
    assert any(frame.startswith("[") for frame in harness.frames), "no batch reply frame"


async def test_close_rejects_pending_calls_and_fires_onclose(harness: Harness) -> None:
    """close() rejects pending calls with StrataConnectionError, fires onclose once, and
    later calls reject as not open; the server cancels the abandoned work."""
    out = await harness.page.evaluate(
        """async ({url, token}) => {
            const client = await strata.StrataClient.connect(url, token);
            const closed = new Promise((resolve) => { client.onclose = resolve; });
            const pending = client.call("test:sleep", {seconds: 30, label: "orphan"})
                .then(() => null, describeError);
            await client.call("test:echo", {text: "sync"});
            client.close();
            const [error, info] = await Promise.all([pending, closed]);
            const later = await client.call("test:echo", {}).then(() => null, describeError);
            log(`closed: code ${info.code}, pending -> ${error.name}`, "ok");
            return {error, info, later, open: client.isOpen};
        }""",
        harness.args(),
    )
    assert out["error"]["isConnectionError"]
    assert not out["error"]["isRpcError"]
    assert out["info"]["code"] == 1000
    assert out["info"]["byClient"] is True
    assert out["later"]["isConnectionError"]
    assert out["open"] is False
    await eventually(lambda: "sleep-cancelled:orphan" in harness.server.seen)


async def test_wrong_token_fails_to_connect(harness: Harness) -> None:
    """connect() with a wrong token rejects with a StrataConnectionError that explains the
    likely causes and does not echo the token; no session is opened."""
    out = await harness.page.evaluate(
        """async ({url}) => {
            try {
                await strata.StrataClient.connect(url, "wrong-token-do-not-echo");
                return null;
            } catch (err) {
                log(`wrong token -> ${err.message}`, "err");
                return describeError(err);
            }
        }""",
        harness.args(),
    )
    assert out is not None, "connected with a wrong token"
    assert out["isConnectionError"]
    assert out["name"] == "StrataConnectionError"
    assert out["closeCode"] == 1006
    assert "Could not connect" in out["message"]
    assert "token" in out["message"]
    assert "wrong-token-do-not-echo" not in out["message"]
    assert harness.server.server.connection_count == 0


# --------------------------------------------------------------------------- server-to-client requests


class AskParams(WireModel):
    text: str = ""
    timeout: float = 10.0


class AskResult(WireModel):
    answer: Any = None
    failure: str | None = None
    client_code: int | None = None


@dataclass
class AskingServer:
    """A server whose handlers ask the page: test:ask, and the completer behind system:capabilities."""

    running: InProcServer
    completions: ClientCompletions


@pytest.fixture
async def asking_server() -> AsyncIterator[AskingServer]:
    seen: list[str] = []
    limits = TransportLimits()
    completions = ClientCompletions(timeout=10)
    registry = Registry()
    holder: list[WebSocketServer] = []
    register_system(
        registry, name="strata", version="test",
        tokenizer=TokenizerDescription(encoding="cl100k_base", source="bundled", exact=True),
        limits=Limits(max_frame_bytes=limits.max_frame_bytes, max_in_flight=limits.session.max_in_flight,
                      max_batch=limits.session.max_batch, max_connections=limits.max_connections),
        connections=lambda: holder[0].connection_count, completions=completions)
    add_test_methods(registry, seen)

    @registry.method("test:ask", params=AskParams, result=AskResult,
                     summary="Ask the caller llm:complete; return its answer (test only).")
    async def ask(params: AskParams, ctx: CallContext) -> AskResult:
        seen.append("ask-start")
        request = {"purpose": "test", "messages": [{"role": "user", "content": params.text}],
                   "maxTokens": 20}
        try:
            answer = await ctx.peer.request("llm:complete", request, params.timeout)
        except ClientRequestError as exc:
            return AskResult(failure=exc.reason, client_code=exc.code)
        except OutboundError as exc:
            return AskResult(failure=exc.reason)
        return AskResult(answer=answer)

    server = WebSocketServer(Dispatcher(registry), token=TOKEN, origin_patterns=origin_patterns(),
                             limits=limits)
    holder.append(server)
    port = await server.start("127.0.0.1", 0)
    try:
        yield AskingServer(InProcServer(server=server, port=port, seen=seen), completions)
    finally:
        await server.shutdown(grace=1.0)


@pytest.fixture
async def asking(asking_server: AskingServer, request: pytest.FixtureRequest) -> AsyncIterator[Harness]:
    async with open_page(asking_server.running, request.node.name) as h:
        yield h


def _server_requests(frames: list[str]) -> list[dict[str, Any]]:
    return [m for m in map(json.loads, frames) if isinstance(m, dict) and "method" in m and "id" in m]


async def test_request_handlers_answer_the_servers_requests(asking: Harness,
                                                            asking_server: AskingServer) -> None:
    """onRequest("llm:complete") answers a real server request: a handler's call reaches the page
    as a request with id s<n> and the page's result comes back to the handler; after
    declareCapabilities({completions: true}) the server's completer gets the page's text."""
    await asking.page.evaluate(
        """async ({url, token}) => {
            const client = await strata.StrataClient.connect(url, token);
            window.client = client;
            window.askedWith = [];
            client.onRequest("llm:complete", async (params, context) => {
                askedWith.push({params, id: context.id, method: context.method,
                                aborted: context.signal.aborted});
                const last = params.messages[params.messages.length - 1].content;
                log(`llm:complete ${context.id} <- ${params.purpose}`, "ok");
                return {content: {type: "text", text: `summary of ${last}`}};
            });
            window.declared = await client.declareCapabilities({completions: true});
        }""",
        asking.args(),
    )
    out = await asking.page.evaluate(
        """async () => {
            const asked = await client.call("test:ask", {text: "第一章"});
            return {asked, declared, askedWith};
        }"""
    )
    assert out["declared"] == {"capabilities": ["completions"]}
    assert out["asked"] == {"answer": {"content": {"type": "text", "text": "summary of 第一章"}},
                            "failure": None, "clientCode": None}
    [first] = out["askedWith"]
    assert first["method"] == "llm:complete"
    assert first["aborted"] is False
    assert first["params"] == {"purpose": "test", "messages": [{"role": "user", "content": "第一章"}],
                               "maxTokens": 20}
    assert [m["id"] for m in _server_requests(asking.frames)] == [first["id"]]
    assert str(first["id"]).startswith("s")

    completion = CompletionRequest(purpose="chat.summary", messages=messages([("user", "林远推开门。")]),
                                   max_tokens=100)
    assert asking_server.completions.connection_ids == ["c1"]
    assert await asking_server.completions.complete(completion) == "summary of 林远推开门。"
    await asking.page.evaluate("() => client.close()")
    await eventually(lambda: asking_server.completions.connection_ids == [])


async def test_handler_errors_and_missing_handlers_are_error_replies(asking: Harness,
                                                                     asking_server: AskingServer) -> None:
    """A throwing handler answers -32603 without its message, as does a result that is not JSON;
    a thrown StrataRpcError answers its own code; a replaced handler's remover leaves the new
    one; once removed, requests answer -32601; the completer turns a client error into
    CompletionUnavailable('error')."""
    out = await asking.page.evaluate(
        """async ({url, token}) => {
            const client = await strata.StrataClient.connect(url, token);
            window.client = client;
            const outcomes = {};
            const off = client.onRequest("llm:complete", () => {
                throw new Error("private-key-in-message");
            });
            outcomes.thrown = await client.call("test:ask", {text: "a"});
            client.onRequest("llm:complete", async () => {
                throw new strata.StrataRpcError(-32050, "Quota exceeded", {code: "QUOTA"});
            });
            off();  // the replaced handler's remover leaves the newer one in place
            outcomes.declined = await client.call("test:ask", {text: "b"});
            client.onRequest("llm:complete", () => 10n);  // a BigInt is not JSON
            outcomes.notJson = await client.call("test:ask", {text: "c"});
            window.offLast = client.onRequest("llm:complete", async () => {
                throw new Error("private-key-in-message");
            });
            outcomes.declared = await client.declareCapabilities({completions: true});
            return outcomes;
        }""",
        asking.args(),
    )
    assert out["thrown"] == {"answer": None, "failure": "error", "clientCode": -32603}
    assert out["declined"] == {"answer": None, "failure": "error", "clientCode": -32050}
    assert out["notJson"] == {"answer": None, "failure": "error", "clientCode": -32603}
    assert out["declared"] == {"capabilities": ["completions"]}
    completion = CompletionRequest(purpose="chat.summary", messages=messages([("user", "x")]), max_tokens=10)
    with pytest.raises(CompletionUnavailable) as raised:
        await asking_server.completions.complete(completion)
    assert raised.value.reason == "error"
    assert not any("private-key" in frame for frame in asking.sent_frames)
    missing = await asking.page.evaluate(
        """async () => {
            offLast();
            const asked = await client.call("test:ask", {text: "d"});
            client.close();
            return asked;
        }"""
    )
    assert missing == {"answer": None, "failure": "error", "clientCode": -32601}
    replies = [m for m in map(json.loads, asking.sent_frames)
               if isinstance(m, dict) and "error" in m and "method" not in m]
    assert [r["error"]["message"] for r in replies] == [
        "Request handler failed", "Quota exceeded", "Request handler failed", "Request handler failed",
        "Method not found"]


async def test_a_server_timeout_aborts_the_handler_and_sends_no_reply(asking: Harness,
                                                                      asking_server: AskingServer) -> None:
    """When the server stops waiting it sends $/cancelRequest: the handler's signal aborts, the
    page sends no reply for that id, and the connection keeps working."""
    out = await asking.page.evaluate(
        """async ({url, token}) => {
            const client = await strata.StrataClient.connect(url, token);
            window.client = client;
            let abortedWith = null;
            client.onRequest("llm:complete", (params, {signal}) => new Promise((resolve) => {
                signal.addEventListener("abort", () => {
                    abortedWith = signal.reason.dataCode;
                    resolve("too late");
                });
            }));
            const asked = await client.call("test:ask", {text: "slow", timeout: 0.3});
            const echo = await client.call("test:echo", {text: "still here"});
            return {asked, echo, abortedWith};
        }""",
        asking.args(),
    )
    assert out == {"asked": {"answer": None, "failure": "timeout", "clientCode": None},
                   "echo": {"text": "still here"}, "abortedWith": "REQUEST_CANCELLED"}
    [asked] = _server_requests(asking.frames)
    cancels = [m for m in map(json.loads, asking.frames)
               if isinstance(m, dict) and m.get("method") == "$/cancelRequest"]
    assert cancels == [{"jsonrpc": "2.0", "method": "$/cancelRequest", "params": {"id": asked["id"]}}]
    assert not any(json.loads(f).get("id") == asked["id"] for f in asking.sent_frames
                   if isinstance(json.loads(f), dict))
    await asking.page.evaluate("() => client.close()")


async def test_the_page_writes_the_chats_rolling_summary(tmp_path: Path) -> None:
    """Against a real ``strata serve`` child: a page that declared completions and answers
    llm:complete with onRequest makes the command chat's rolling summary, which the next
    chat:submit carries, from the client, with no SUMMARY_FALLBACK."""
    with serving(tmp_path / "data", "--debug") as proc:
        # The page needs only the URL; the server here is the child, not an in-process one.
        running = InProcServer(server=None, port=proc.port, seen=[])  # type: ignore[arg-type]
        async with open_page(running, "chat-summary") as h:
            out = await h.page.evaluate(
                """async ({url, token}) => {
                    const client = await strata.StrataClient.connect(url, token);
                    const asked = [];
                    client.onRequest("llm:complete", async (params) => {
                        asked.push(params.purpose);
                        log(`llm:complete <- ${params.purpose}`, "ok");
                        return {content: "User is opening chapters in order."};
                    });
                    await client.declareCapabilities({completions: true});
                    let sessionId;
                    for (let n = 1; n <= 13; n++) {
                        const params = {message: `open chapter ${n}`};
                        if (sessionId) params.sessionId = sessionId;
                        sessionId = (await client.call("chat:submit", params)).sessionId;
                    }
                    let state;
                    for (let i = 0; i < 800; i++) {  // at most about 20 s on a busy machine
                        state = await client.call("chat:state", {sessionId});
                        if (state.summary && !state.summaryPending) break;
                        await new Promise((done) => setTimeout(done, 25));
                    }
                    const next = await client.call("chat:submit", {sessionId, message: "chapter 14"});
                    client.close();
                    return {asked, state, next};
                }""",
                {"url": proc.url, "token": proc.token},
            )
    assert out["asked"] == ["chat.summary"]
    assert out["state"]["summarySource"] == "client"
    assert out["next"]["context"]["summary"] == "User is opening chapters in order."
    assert out["next"]["summarySource"] == "client"
    assert not any(w.startswith("SUMMARY_FALLBACK") for w in out["next"]["warnings"])
