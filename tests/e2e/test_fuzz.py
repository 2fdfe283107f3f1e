"""Fuzz the wire: random params for every method of ``rpc.discover``, and random whole frames.

One ``python -m main serve --debug`` child serves the whole module. Every
method it lists gets random params (hypothesis): values shaped by the
method's own schema, wrong types, huge strings, deep nesting, lone
surrogates and other unicode edge cases, negative and huge numbers, unknown
names, by name and by position, as requests and as notifications, over a
connection with the client token or with the inspector token. Then random
whole frames: text, JSON values, request-like objects and batches.

Every reply must be a well-formed JSON-RPC 2.0 response (none for a
notification): a result that fits the method's result schema, or an error
whose (code, data.code) is one of ``ipc.errors``; no error carries a
traceback, a path of this machine or the text that was sent; a second
connection's ``system:info`` keeps answering; the server process lives on.
Text fields get lone surrogates, NUL, bidi controls and combining marks
spliced in: params holding a lone surrogate anywhere must be ``INVALID_PARAMS``
(``string_unicode``), and an id out of bounds a -32600 answered with null.
Batches of reads of pathological documents (control characters, each escaped as six bytes, and
2 MiB of plain text) get one reply frame within the frame limit, over-large entries answering
``RPC_RESULT_TOO_LARGE``.

Fuzzed writes stay in a scratch project under pytest's tmp folder: every
absolute path in fuzzed params is mapped into the scratch folder
(:func:`confine`), so ``project:open`` never sees a real system path, and
``debug:faults:set`` is only called with valid params. The websocket clients
run on an event loop in a thread of their own so that hypothesis drives plain
functions and the connections live for the whole module.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Coroutine, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import pytest
from hypothesis import HealthCheck, Phase, assume, given, note, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator
from websockets.asyncio.client import ClientConnection, connect

from ipc.errors import all_error_classes
from tests.support.process import REPO, ServerProcess, start_server

T = TypeVar("T")

# Huge strings and deep nesting are the point; hypothesis warns when it has to show one.
pytestmark = pytest.mark.filterwarnings(
    "ignore:Generating overly large repr:hypothesis.errors.HypothesisWarning")

# More for a longer hunt: STRATA_FUZZ_SCALE=10 runs ten times as many examples.
SCALE = float(os.environ.get("STRATA_FUZZ_SCALE", "1"))
EXAMPLES_PER_METHOD = max(1, int(80 * SCALE))
FRAME_EXAMPLES = max(1, int(300 * SCALE))
MAX_FRAME = 4 * 2**20  # the server's default --max-frame-bytes
FRAME_BUDGET = 3 * 2**20  # what a fuzzed frame may use, leaving room under MAX_FRAME
REPLY_TIMEOUT = 10.0
BYSTANDER_TIMEOUT = 5.0
ONLY_VALID_PARAMS = {"debug:faults:set"}  # global switches: fuzzed with valid params only
FAULTS = ("kg", "memory", "retrieval", "tokenizer", "foreign_item")
# Every wire error the server may answer with (test-only subclasses elsewhere excluded).
DOCUMENTED = {(cls.code, cls.data_code) for cls in all_error_classes()
              if not cls.__module__.startswith("tests.")}
MIN_ECHO = 12  # a sent string this long must not come back in an error
# No "explain" phase: it replays every example many times against the live server.
FUZZ_SETTINGS = settings(deadline=None, database=None, suppress_health_check=list(HealthCheck),
                         phases=[Phase.explicit, Phase.generate, Phase.shrink])


# --------------------------------------------------------------------------- the client side


class LoopThread:
    """An event loop in its own thread; ``run`` waits for a coroutine on it."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name="fuzz-loop", daemon=True)
        self._thread.start()

    def run(self, coro: Coroutine[Any, Any, T], timeout: float = 120) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(10)
        self.loop.close()


CLOSED = object()  # queued when the connection ends


class Connection:
    """A websocket whose every incoming message is queued, parsed, for the test to account for."""

    def __init__(self, ws: ClientConnection) -> None:
        self.ws = ws
        self.messages: asyncio.Queue[Any] = asyncio.Queue()
        self._reader = asyncio.ensure_future(self._read())

    @classmethod
    async def open(cls, url: str, token: str) -> Connection:
        # No keepalive pings from this side: websockets draws their payload from the global
        # random module, on this thread, while hypothesis watches that state on the other.
        ws = await connect(url, additional_headers={"Authorization": f"Bearer {token}"},
                           compression=None, max_size=None, ping_interval=None)
        return cls(ws)

    async def _read(self) -> None:
        try:
            async for raw in self.ws:
                await self.messages.put(json.loads(raw))
        finally:
            await self.messages.put(CLOSED)

    async def exchange(self, frame: str, expected_id: Any, *, replies: bool) -> list[Any]:
        """Send ``frame`` then a sentinel request; return every message up to the sentinel's reply.

        With ``replies``, the reply to ``frame`` (matched by ``expected_id``) is awaited too,
        as replies may overtake each other.
        """
        sentinel = f"sentinel-{uuid.uuid4().hex}"
        await self.ws.send(frame)
        await self.ws.send(json.dumps({"jsonrpc": "2.0", "method": "system:info", "id": sentinel}))
        received: list[Any] = []
        seen_sentinel = seen_reply = False
        while not seen_sentinel or (replies and not seen_reply):
            message = await asyncio.wait_for(self.messages.get(), REPLY_TIMEOUT)
            assert message is not CLOSED, f"the server closed the connection ({self.ws.close_code})"
            if isinstance(message, dict) and message.get("id") == sentinel:
                assert "result" in message, message
                seen_sentinel = True
                continue
            received.append(message)
            seen_reply = seen_reply or (isinstance(message, dict) and "id" in message
                                        and same_json(message["id"], expected_id))
        return received

    async def close(self) -> None:
        await self.ws.close()
        self._reader.cancel()
        await asyncio.gather(self._reader, return_exceptions=True)


def same_json(a: Any, b: Any) -> bool:
    return type(a) is type(b) and a == b


@dataclass(repr=False)
class Fuzz:
    """Everything the fuzz tests share: one server, its scratch project, and three connections."""

    server: ServerProcess
    loop: LoopThread
    root: Path  # every path a fuzzed call may name is under here
    project_id: str
    methods: dict[str, dict[str, Any]]
    components: dict[str, Any]
    client: Connection
    inspector: Connection
    bystander: Connection
    leak_markers: tuple[str, ...]
    vocabulary: str = ""  # the server's own words: sent strings found here may be in errors anyway
    latencies: list[float] = field(default_factory=list)
    outcomes: Counter[tuple[str, str]] = field(default_factory=Counter)

    def __repr__(self) -> str:  # hypothesis shows strategies' arguments; keep this one short
        return f"Fuzz({self.server.url})"

    def call(self, connection: Connection, method: str, params: Any) -> Any:
        message: dict[str, Any] = {"jsonrpc": "2.0", "method": method, "id": 1}
        if params is not None:
            message["params"] = params
        frame = json.dumps(message)
        [reply] = self.loop.run(connection.exchange(frame, 1, replies=True))
        assert "result" in reply, reply
        return reply["result"]

    def bystander_answers(self) -> None:
        """A second connection's system:info still answers, and quickly."""
        started = time.perf_counter()
        frame = json.dumps({"jsonrpc": "2.0", "method": "system:info", "id": "bystander"})
        [reply] = self.loop.run(self.bystander.exchange(frame, "bystander", replies=True),
                                timeout=BYSTANDER_TIMEOUT * 2)
        self.latencies.append(time.perf_counter() - started)
        assert reply["result"]["name"] == "strata"
        assert self.latencies[-1] < BYSTANDER_TIMEOUT


@pytest.fixture(scope="module")
def fuzz(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Fuzz]:
    base = tmp_path_factory.mktemp("fuzz")
    root = (base / "projects").resolve()
    scratch = root / "scratch"
    (scratch / "sub").mkdir(parents=True)
    (scratch / "第一章.md").write_text("# 第一章\n\n我数到第三级台阶，停下来听了一会儿海浪。\n" * 20,
                                     encoding="utf-8")
    (scratch / "sub" / "two.md").write_text("Chapter two.\n" * 50, encoding="utf-8")
    server = start_server(base / "data", "--debug")
    loop = LoopThread()
    connections: list[Connection] = []
    try:
        for token in (server.token, str(server.ready["inspectorToken"]), server.token):
            connections.append(loop.run(Connection.open(server.url, token)))
        client, inspector, bystander = connections
        probe = Fuzz(server, loop, root, "", {}, {}, client, inspector, bystander, ())
        document = probe.call(client, "rpc.discover", None)
        project_id = probe.call(client, "project:open", {"path": str(scratch)})["project"]["projectId"]
        home = str(Path.home())
        markers = tuple(sorted({str(base), str(base.resolve()), str(REPO), "/work/", "Traceback", 'File "',
                                '.py"', ".py:", *([home] if len(home) > 1 else [])}, key=len, reverse=True))
        yield Fuzz(server, loop, root, project_id, {m["name"]: m for m in document["methods"]},
                   document["components"]["schemas"], client, inspector, bystander, markers,
                   vocabulary=server_vocabulary(document))
    finally:
        for connection in connections:
            loop.run(connection.close())
        loop.close()
        server.terminate()
        server.kill()


def server_vocabulary(document: dict[str, Any]) -> str:
    """Every word the server could say on its own: its source and its OpenRPC document.

    Hypothesis draws string constants from the code under test, so a sent string may equal a
    data.code or part of a message; that is not an echo of the input.
    """
    sources = [path.read_text(encoding="utf-8") for package in ("ipc", "services", "main")
               for path in sorted((REPO / package).rglob("*.py"))]
    return "\0".join([*sources, json.dumps(document, ensure_ascii=False)])


# --------------------------------------------------------------------------- keeping paths in tmp


def inside(path: str, root: Path) -> bool:
    real = os.path.realpath(path)
    return real == str(root) or real.startswith(str(root) + os.sep)


def confine(value: Any, root: Path) -> Any:  # recursion: RecursionError on deep input is caught
    """``value`` with every absolute path mapped into ``root`` (links and ``..`` resolved).

    A path that would still resolve outside (``/x/../../etc``) becomes a missing folder under
    ``root``. Keys are left alone: no method takes a path as a key.
    """
    if isinstance(value, str):
        if not os.path.isabs(value) or "\x00" in value or holds_lone_surrogate(value) or inside(value, root):
            return value  # NUL or a lone surrogate names no file (os refuses either)
        try:
            moved = os.path.join(str(root), value.lstrip("/"))
            if inside(moved, root):
                return moved
        except ValueError:  # NUL in the path
            pass
        return str(root / f"missing-{hashlib.sha256(value.encode('utf-8', 'surrogatepass')).hexdigest()[:8]}")
    if isinstance(value, list):
        return [confine(v, root) for v in value]
    if isinstance(value, dict):
        return {k: confine(v, root) for k, v in value.items()}
    return value


# --------------------------------------------------------------------------- values


@dataclass(frozen=True)
class Raw:
    """JSON text spliced into a frame as is: nesting or numbers json.dumps cannot produce."""

    text: str


EDGE_STRINGS = ("", " ", "\x00", "\ud800", "\udfff", "a\udc00b", "\ud83d", "\ufeff", "\u202e",
                "\U0010ffff", "𠮷野家", "e\u0301", "\r\n", "..", "../x.md", "a/../../b.md", "\\", "C:\\x.md",
                "%2e%2e/", "null", "NaN", "-0", "第一章.md", "sub/two.md", "new/新.md", ".hidden.md",
                "a/./b.md", "x.MD", "dir/", "con.txt", "continue", "polish", "zh", "en", "\u0085",
                "'\"<>&", "{}", "[]", "$/cancelRequest")
EDGE_INTS = (0, -1, 1, 2**31 - 1, -2**31, 2**53 + 1, 2**63 - 1, 2**63, -2**63 - 1, 2**64, 10**30, -10**30)
EDGE_FLOATS = (0.0, -0.0, 0.5, 1.0, 1e-300, 5e-324, 1.7976931348623157e308, -1e308, 1e16)

unicode_text = st.text(st.characters(codec=None, exclude_categories=()), max_size=40)
edge_numbers = st.sampled_from(EDGE_INTS) | st.sampled_from(EDGE_FLOATS) | st.integers() \
    | st.floats(allow_nan=False, allow_infinity=False)
scalars = st.none() | st.booleans() | edge_numbers | unicode_text | st.sampled_from(EDGE_STRINGS)


def _huge(unit: str, limit: int = 2**20) -> st.SearchStrategy[str]:
    return st.integers(1, limit // len(json.dumps(unit))).map(lambda n: unit * n)


huge_strings = st.sampled_from(["a", "中", "𠮷", "\ud800", "\\", '"', "\n", "é"]).flatmap(_huge)


def _deep(kind: str, depth: int) -> Raw:
    if kind == "list":
        return Raw("[" * depth + "1" + "]" * depth)
    return Raw('{"a":' * depth + "1" + "}" * depth)


# Shallow enough to parse anywhere, or far past any recursion limit: never in between, where
# whether it parses depends on the stack depth of the parser's caller.
deep_nesting = st.builds(_deep, st.sampled_from(["list", "object"]),
                         st.integers(1, 200) | st.integers(3000, 20000))
raw_numbers = st.sampled_from(["1" + "0" * 4299, "1" + "0" * 4300, "-" + "9" * 5000, "1e400", "-1e400",
                               "1E+2", "-0", "0.000000000000000000000001", "123456789012345678901234567890"]
                              ).map(Raw)
json_values = st.recursive(scalars, lambda children: st.lists(children, max_size=5)
                           | st.dictionaries(unicode_text, children, max_size=5), max_leaves=12)
junk = json_values | huge_strings | deep_nesting | raw_numbers


# Put into any text field of a value that otherwise fits: lone surrogates (always INVALID_PARAMS),
# NUL, bidi controls and combining marks (carried; never INTERNAL).
TEXT_EDGES = ("\ud800", "\udbff", "\udc00", "\udfff", "\ud83d", "\x00", "\u202e", "\u2066", "\u200f",
              "\u0301", "\u20dd", "e\u0301\u0308")


def edged(text: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    """``text``, or one time in four that text with a :data:`TEXT_EDGES` character spliced in."""
    spliced = st.tuples(text, st.sampled_from(TEXT_EDGES), st.integers(0, 40)).map(
        lambda t: t[0][:t[2]] + t[1] + t[0][t[2]:])
    return st.integers(0, 3).flatmap(lambda k: spliced if k == 0 else text)


def holds_lone_surrogate(value: Any) -> bool:
    """Whether a string or key anywhere in ``value`` (parsed JSON) holds a lone surrogate."""
    try:
        json.dumps(value, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def bounded_id(value: Any) -> bool:
    """docs/protocol.md: an id is null, text of up to 256 characters or a number within +-(2^53-1)."""
    if value is None:
        return True
    if isinstance(value, str):
        return len(value) <= 256 and not holds_lone_surrogate(value)
    return isinstance(value, int | float) and not isinstance(value, bool) and abs(value) <= 2**53 - 1


def from_schema(schema: dict[str, Any], components: dict[str, Any], depth: int = 0) -> st.SearchStrategy[Any]:
    """Values that mostly fit ``schema`` (a small JSON Schema subset: what pydantic emits)."""
    if "$ref" in schema:
        return from_schema(components[schema["$ref"].rsplit("/", 1)[1]], components, depth)
    if "anyOf" in schema:
        return st.one_of([from_schema(s, components, depth) for s in schema["anyOf"]])
    if "enum" in schema:
        return st.sampled_from(schema["enum"])
    kind = schema.get("type")
    if kind == "string":
        if "pattern" in schema:
            return edged(st.from_regex(schema["pattern"], fullmatch=True))
        low = schema.get("minLength", 0)
        return edged(st.text(min_size=low, max_size=max(low, min(schema.get("maxLength", 40), 40))))
    if kind == "integer":
        low = schema.get("minimum", schema.get("exclusiveMinimum", -10**6 - 1) + 1)
        return st.integers(low, schema.get("maximum", low + 10**6))
    if kind == "number":
        return st.floats(schema.get("minimum", -1e6), schema.get("maximum", 1e6))
    if kind == "boolean":
        return st.booleans()
    if kind == "null":
        return st.none()
    if kind == "array" and depth < 3:
        return st.lists(from_schema(schema.get("items", {}), components, depth + 1),
                        max_size=min(schema.get("maxItems", 5), 5))
    if kind == "object" and depth < 3:
        properties = schema.get("properties", {})
        if properties:
            return st.fixed_dictionaries({}, optional={k: from_schema(v, components, depth + 1)
                                                       for k, v in properties.items()})
        patterns = schema.get("patternProperties", {})
        if patterns:
            [(pattern, value)] = list(patterns.items())[:1]
            return st.dictionaries(st.from_regex(pattern, fullmatch=True),
                                   from_schema(value, components, depth + 1), max_size=3)
    return json_values


SPECIAL_NAMES = {"projectId", "documentId", "path", "tokenizerPath", "cursorPosition", "skillId", "id",
                 "version"}


def named_values(name: str, fuzz: Fuzz) -> st.SearchStrategy[Any]:
    """Values that reach past validation for params whose meaning the schema cannot say."""
    scratch = fuzz.root / "scratch"
    special: dict[str, st.SearchStrategy[Any]] = {
        "projectId": st.just(fuzz.project_id),
        "documentId": st.sampled_from(["第一章.md", "sub/two.md"])
        | st.sampled_from(["new/新.md", "../up.md", "/etc/x.md", "a\\b.md", "x\x00.md", ".hidden.md",
                           "sub/../第一章.md", "x.json", "sub", "第一章.MD"]),
        "path": st.sampled_from([str(scratch), str(scratch / "sub"), str(scratch / "不存在"), "relative",
                                 str(scratch) + "/../scratch", str(scratch / "第一章.md")]),
        "tokenizerPath": st.sampled_from([str(scratch / "tokenizer.json"), str(scratch / "第一章.md"),
                                          "tokenizer.json"]),
        "cursorPosition": st.integers(0, 500) | st.integers(-3, 10**6),
        "skillId": st.sampled_from(["continue", "polish", "expand", "rewrite", "missing", "Continue"]),
        "id": st.integers(-1, 40),
        "version": st.integers(0, 40),
    }
    assert set(special) == SPECIAL_NAMES
    return special.get(name, st.nothing())


def param_values(param: dict[str, Any], fuzz: Fuzz, *, corrupt: bool = False) -> st.SearchStrategy[Any]:
    """A value for ``param``: one that fits (or a meaningful edge case), or with ``corrupt`` any junk."""
    if corrupt:
        return junk
    plausible = from_schema(param["schema"], fuzz.components)
    if param["name"] not in SPECIAL_NAMES:
        return plausible
    special = named_values(param["name"], fuzz)
    return st.integers(0, 3).flatmap(lambda k: plausible if k == 0 else special)


@st.composite
def params_for(draw: st.DrawFn, method: str, fuzz: Fuzz) -> Any:
    """Params for ``method``: by name or by position, with at most one junk value, or missing,
    extra or of the wrong shape altogether."""
    declared = fuzz.methods[method]["params"]
    if method in ONLY_VALID_PARAMS:
        faults = draw(st.lists(st.sampled_from(FAULTS), max_size=3, unique=True))
        return draw(st.sampled_from([{"faults": faults}, [faults]]))
    shape = draw(st.sampled_from(["named", "named", "named", "positional", "positional", "absent", "junk"]))
    if shape == "absent":
        return None
    if shape == "junk":
        return draw(st.lists(junk, max_size=4) | st.dictionaries(unicode_text, junk, max_size=4))
    corrupt = draw(st.integers(0, 2 * len(declared)))  # past the end: every value fits
    values = {p["name"]: draw(param_values(p, fuzz, corrupt=i == corrupt)) for i, p in enumerate(declared)
              if p.get("required") or i == corrupt or draw(st.booleans())}
    if draw(st.integers(0, 9)) == 0:
        values[draw(unicode_text)] = draw(junk)  # an unknown name
    if shape == "named":
        return values
    count = draw(st.just(len(declared)) | st.integers(0, len(declared) + 1))
    positional = [values.get(p["name"], draw(param_values(p, fuzz))) for p in declared][:count]
    return positional + [draw(junk)] * (count - len(positional))


ids = st.integers(-2**63, 2**63) | st.text(max_size=20) | st.none() | st.just(1.5) | st.just(10**40) \
    | st.sampled_from([2**53 - 1, 2**53, -(2**53), 10**4298, "x" * 256, "x" * 257, "a\ud800", 1e300])


def frame_text(message: Any) -> str:
    """``message`` as a frame, with :class:`Raw` values spliced in as JSON text."""
    raws: dict[str, str] = {}

    def swap(value: Any) -> Any:
        if isinstance(value, Raw):
            key = f"raw-{uuid.uuid4().hex}"
            raws[key] = value.text
            return key
        if isinstance(value, list):
            return [swap(v) for v in value]
        if isinstance(value, dict):
            return {k: swap(v) for k, v in value.items()}
        return value

    text = json.dumps(swap(message), ensure_ascii=True)
    for key, raw in raws.items():
        text = text.replace(f'"{key}"', raw, 1)
    return text


def _no_constant(name: str) -> Any:
    raise ValueError(name)


def _finite(text: str) -> float:
    value = float(text)
    if value in (float("inf"), float("-inf")):
        raise ValueError(text)
    return value


def is_standard_json(frame: str) -> bool:
    """Whether docs/protocol.md calls ``frame`` JSON: no NaN or Infinity, no number over 4,300
    digits, no nesting past the recursion limit."""
    try:
        json.loads(frame, parse_constant=_no_constant, parse_float=_finite)
    except (ValueError, RecursionError):
        return False
    return True


def strings_in(value: Any) -> tuple[set[str], set[str]]:
    """(string values, keys) anywhere in ``value`` (iteratively: it may be nested deep)."""
    values: set[str] = set()
    keys: set[str] = set()
    pending = [value]
    while pending:
        item = pending.pop()
        if isinstance(item, str):
            values.add(item)
        elif isinstance(item, list):
            pending.extend(item)
        elif isinstance(item, dict):
            keys.update(item)
            pending.extend(item.values())
    return values, keys


# --------------------------------------------------------------------------- checks


def check_response(reply: Any, fuzz: Fuzz, sent: Any, result_schema: dict[str, Any] | None) -> None:
    """One JSON-RPC 2.0 response: a result (fitting its schema) or a documented error that leaks nothing."""
    assert isinstance(reply, dict), reply
    assert reply.get("jsonrpc") == "2.0"
    assert "id" in reply
    assert ("result" in reply) != ("error" in reply), sorted(reply)
    assert set(reply) <= {"jsonrpc", "id", "result", "error"}
    if "result" in reply:
        if result_schema is not None:
            Draft202012Validator({**result_schema, "components": {"schemas": fuzz.components}}).validate(
                reply["result"])
        return
    error = reply["error"]
    assert isinstance(error, dict)
    assert set(error) <= {"code", "message", "data"}
    assert isinstance(error["code"], int)
    assert isinstance(error["message"], str)
    assert isinstance(error.get("data"), dict)
    assert (error["code"], error["data"].get("code")) in DOCUMENTED, error
    assert error["data"]["code"] != "INTERNAL", f"an unexpected failure: {error}"
    shown = json.dumps(error, ensure_ascii=False) + "\0" + "\0".join(sorted(strings_in(error)[0]))
    for marker in fuzz.leak_markers:
        assert marker not in shown, f"{marker!r} in {shown[:500]}"
    values, keys = strings_in(sent)
    for value in values:
        if len(value) >= MIN_ECHO and value not in keys and value.strip() and value not in fuzz.vocabulary:
            assert value not in shown, f"sent text came back in {shown[:500]}"


def result_schema_of(fuzz: Fuzz, method: str) -> dict[str, Any] | None:
    entry = fuzz.methods.get(method)
    return None if entry is None or "result" not in entry else dict(entry["result"]["schema"])


# --------------------------------------------------------------------------- tests


def method_property(fuzz: Fuzz, method: str) -> Callable[[], None]:
    """The hypothesis test of one method: each example is one call and its checks."""

    @settings(FUZZ_SETTINGS, max_examples=EXAMPLES_PER_METHOD)
    @given(params=params_for(method, fuzz), request_id=ids, notification=st.integers(0, 7),
           inspector=st.booleans())
    def fuzz_method(params: Any, request_id: Any, notification: int, inspector: bool) -> None:
        params = confine(params, fuzz.root)
        message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            message["params"] = params
        is_notification = notification == 0
        if not is_notification:
            message["id"] = request_id
        frame = frame_text(message)
        assume(len(frame.encode()) < FRAME_BUDGET)
        note(f"{method}: {frame[:300]}")
        standard = is_standard_json(frame)
        connection = fuzz.inspector if inspector else fuzz.client
        expected_id = request_id if standard and bounded_id(request_id) else None
        replies = fuzz.loop.run(connection.exchange(frame, expected_id,
                                                    replies=not (is_notification and standard)))
        if not standard:  # a parse error can only be answered with a null id
            assert len(replies) == 1, str(replies)[:500]
            check_response(replies[0], fuzz, params, None)
            assert (replies[0]["id"], replies[0]["error"]["code"]) == (None, -32700)
        elif is_notification:
            assert replies == [], f"a notification was answered: {str(replies)[:300]}"
        elif not bounded_id(request_id):  # an id out of bounds: Invalid Request, answered with null
            assert len(replies) == 1, str(replies)[:500]
            check_response(replies[0], fuzz, params, None)
            assert (replies[0]["id"], replies[0]["error"]["code"]) == (None, -32600)
        else:
            assert len(replies) == 1, str(replies)[:500]
            check_response(replies[0], fuzz, params, result_schema_of(fuzz, method))
            assert same_json(replies[0]["id"], request_id)
            reply = replies[0]
            fuzz.outcomes[method, reply["error"]["data"]["code"] if "error" in reply else "result"] += 1
            # Text is text: a lone surrogate anywhere in params is refused by every method (a lone
            # $/cancelRequest is answered by the session itself: its id can name no request anyway).
            if method != "$/cancelRequest" and holds_lone_surrogate(json.loads(frame).get("params")):
                error = reply.get("error", {})
                assert error.get("data", {}).get("code") == "INVALID_PARAMS", str(reply)[:500]
                assert all(e["type"] == "string_unicode" for e in error["data"].get("errors", [])), error
                fuzz.outcomes[method, "lone surrogate refused"] += 1
        fuzz.bystander_answers()

    return fuzz_method


def test_every_method_answers_random_params_well_formed(fuzz: Fuzz) -> None:
    """Every method of rpc.discover, fuzzed: well-formed replies, documented codes, no leaks, server alive.

    Per method, EXAMPLES_PER_METHOD random calls (by name, by position, absent, junk; request or
    notification; client or inspector token). A request gets exactly one response with its id, a
    notification none; errors have a documented (code, data.code), never INTERNAL, and carry no
    traceback, machine path or sent text; results fit the method's result schema. After every
    call another connection's system:info answers within seconds.
    """
    assert len(fuzz.methods) >= 25
    for method in sorted(fuzz.methods):
        method_property(fuzz, method)()
    fuzz.call(fuzz.inspector, "debug:faults:set", {"faults": []})
    assert fuzz.server.process.poll() is None
    # The fuzz reaches past validation: many methods ran to a result, with domain errors besides.
    assert len({method for method, outcome in fuzz.outcomes if outcome == "result"}) >= 12
    assert {"PROJECT_NOT_FOUND", "RECORD_NOT_FOUND", "PROJECT_PATH_INVALID"} <= {
        outcome for _, outcome in fuzz.outcomes}
    # Lone surrogates reached the text fields of many methods, and each was refused.
    assert len({method for method, outcome in fuzz.outcomes if outcome == "lone surrogate refused"}) >= 12


methods_in_frames = st.sampled_from(["system:info", "rpc.discover", "project:list", "constraints:list",
                                     "document:read", "context:assemble", "$/cancelRequest", "no:such"])
request_like = st.fixed_dictionaries({}, optional={
    "jsonrpc": st.just("2.0") | scalars, "method": methods_in_frames | scalars,
    "params": json_values | deep_nesting, "id": ids | json_values,
})
frames = st.one_of(
    st.text(st.characters(codec="utf-8"), max_size=60),  # text, mostly not JSON (sendable as UTF-8)
    json_values.map(frame_text),
    request_like.map(frame_text),
    st.lists(request_like | json_values, max_size=70).map(frame_text),
    deep_nesting.map(frame_text),
    raw_numbers.map(frame_text),
)


@settings(FUZZ_SETTINGS, max_examples=FRAME_EXAMPLES)
@given(frame=frames)
def test_random_frames_get_well_formed_replies(fuzz: Fuzz, frame: str) -> None:
    """A random frame gets nothing but well-formed responses (or batches of them); the server lives on.

    Text that is not JSON, JSON that is not a request, request-like objects with random members,
    batches of up to 70 entries (past maxBatch), deep nesting and numbers of over 4,300 digits.
    """
    sent: Any = frame
    try:
        sent = json.loads(frame)
        frame = frame_text(confine(sent, fuzz.root))  # a request naming a path must not leave tmp either
    except (ValueError, RecursionError):
        pass  # not JSON, or nested deeper than anything a path could hide in
    assume(len(frame.encode()) < FRAME_BUDGET)
    note(frame[:300])
    replies = fuzz.loop.run(fuzz.client.exchange(frame, None, replies=False))
    for reply in replies:
        assert not isinstance(reply, list) or reply, "an empty batch reply"
        for entry in reply if isinstance(reply, list) else [reply]:
            check_response(entry, fuzz, sent, None)
    fuzz.bystander_answers()


CONTROLS, PLAIN = "pathological-controls.md", "pathological-plain.md"
PATHOLOGICAL = {CONTROLS: "\x01" * (1536 * 1024),  # each escaped as six bytes: a 9 MiB reply
                PLAIN: "a" * (2 * 2**20 - 16)}


@settings(FUZZ_SETTINGS, max_examples=max(1, int(12 * SCALE)),
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(reads=st.lists(st.sampled_from([CONTROLS, PLAIN, "sub/two.md", None]), min_size=1,
                      max_size=16))
def test_batches_of_large_reads_stay_within_a_frame(fuzz: Fuzz, reads: list[str | None]) -> None:
    """Batches of reads of a control-character document and a 2 MiB one (and small calls): the reply
    is one frame within the frame limit; each entry is its result or RPC_RESULT_TOO_LARGE with its
    size; a second connection keeps answering."""
    for name, text in PATHOLOGICAL.items():  # written afresh: other fuzz calls may write any document
        (fuzz.root / "scratch" / name).write_text(text, encoding="utf-8")
    batch = [{"jsonrpc": "2.0", "id": n, "method": "document:read",
              "params": {"projectId": fuzz.project_id, "documentId": name}} if name is not None else
             {"jsonrpc": "2.0", "id": n, "method": "system:info"} for n, name in enumerate(reads)]
    reply = fuzz.loop.run(_batch_reply(fuzz.client, json.dumps(batch)), timeout=REPLY_TIMEOUT * 12)
    assert len(json.dumps(reply, ensure_ascii=False).encode()) <= MAX_FRAME
    assert sorted(entry["id"] for entry in reply) == list(range(len(reads)))
    for entry in reply:
        name = reads[entry["id"]]
        if name == CONTROLS or "error" in entry:
            assert entry["error"]["data"]["code"] == "RPC_RESULT_TOO_LARGE", entry
            assert entry["error"]["data"]["size"] > 0
        elif name == PLAIN:
            assert entry["result"]["text"] == PATHOLOGICAL[PLAIN]
        elif name is not None:
            assert isinstance(entry["result"]["text"], str)  # earlier fuzz calls may have rewritten it
    fuzz.bystander_answers()


async def _batch_reply(connection: Connection, frame: str) -> list[Any]:
    """Send a batch frame and wait for its reply (a list), however long large reads take."""
    await connection.ws.send(frame)
    while True:
        message = await asyncio.wait_for(connection.messages.get(), REPLY_TIMEOUT * 6)
        assert message is not CLOSED, f"the server closed the connection ({connection.ws.close_code})"
        if isinstance(message, list):
            return message


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(path=unicode_text | st.sampled_from(["/", "/etc", "/..", "//", "/var/../etc", "/proc/self/cwd"])
       | st.text(alphabet="/.a", max_size=20).map(lambda t: "/" + t))
def test_confined_paths_never_leave_tmp(tmp_path: Path, path: str) -> None:
    """The fuzz never sends a real system path: every absolute path it sends resolves inside tmp."""
    root = tmp_path.resolve()
    confined = confine({"path": [path]}, root)["path"][0]
    assert not os.path.isabs(confined) or inside(confined, root)


def test_no_folder_outside_tmp_was_registered(fuzz: Fuzz) -> None:
    """After all the fuzzing, project:list holds only folders under the fuzz tmp folder, not / or the repo.

    Also: the server process is alive and every bystander system:info answered within seconds.
    """
    projects = fuzz.call(fuzz.client, "project:list", None)["projects"]
    assert projects
    for project in projects:
        assert inside(project["path"], fuzz.root), project["path"]
    assert fuzz.server.process.poll() is None
    assert max(fuzz.latencies, default=0.0) < BYSTANDER_TIMEOUT
