"""renderer-stub/strata-client.js, driven in real headless Chromium against a real server.

The page ``renderer-stub/client-test.html`` is served from 127.0.0.1, so the
browser sends a loopback Origin that the server's default policy allows. It
imports the client module exactly as a renderer would and exposes it as
``window.strata``; each test runs a scenario with ``page.evaluate`` and checks
what the page saw, and, where it matters, what the server saw.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from playwright.async_api import Page, WebSocket

from tests.support.browser import chromium, serve_folder
from tests.support.inproc import TOKEN, InProcServer

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
    page_errors: list[str] = field(default_factory=list)

    def args(self, **extra: Any) -> dict[str, Any]:
        return {"url": self.server.url, "token": TOKEN, **extra}


@pytest.fixture
async def harness(server: InProcServer, request: pytest.FixtureRequest) -> AsyncIterator[Harness]:
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

            page.on("websocket", watch)
            await page.goto(f"{origin}/client-test.html")
            await page.wait_for_function("window.strataReady === true")
            yield h
            OUTPUT.mkdir(exist_ok=True)
            await page.screenshot(path=str(OUTPUT / f"renderer-client-{request.node.name}.png"))
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
