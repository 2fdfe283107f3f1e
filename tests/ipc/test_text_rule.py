"""Text is text everywhere: one rule for lone surrogates, in every text field of every method.

The real app's registry (``main.wiring.build_registry`` over real services) behind a Dispatcher,
driven from a loop of its own so that hypothesis drives plain functions. Every method is read
from its params' JSON schema: each place a string may go (fields, list items, dict values and
dict keys, ``Any`` values) is a text field. A lone surrogate in any of them is ``INVALID_PARAMS``
whose one error names that place (``string_unicode``) and never echoes the text; NUL, bidi
controls and combining marks in plausible params never give ``INTERNAL`` and never raise.
"""

from __future__ import annotations

import asyncio
import json
import re
import threading
from collections.abc import Callable, Coroutine, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import pytest
from hypothesis import HealthCheck, given, note, settings
from hypothesis import strategies as st

from ipc.context import CallContext, Peer, Role
from ipc.dispatch import Dispatcher
from ipc.errors import all_error_classes
from ipc.protocol import Call
from ipc.registry import Method
from main.config import Config
from main.stores import Services, open_services
from main.wiring import build_registry
from tests.support.projects import make_folder

T = TypeVar("T")

CTX = CallContext(peer=Peer(connection_id="text-rule", role=Role.INSPECTOR), debug=True)
DOCUMENTED = {(cls.code, cls.data_code) for cls in all_error_classes()}
WILD = "k"  # the key used where a schema allows any key
KEY = "[key]"  # a loc ending so names an object key (docs/protocol.md: the key itself is never shown)
MAX_DEPTH = 6  # profiles' conditions are recursive: a text field deeper than this is not needed
PROPERTY = settings(deadline=None, database=None, suppress_health_check=list(HealthCheck))

SURROGATES = ["\ud800", "\udbff", "\udc00", "\udfff", "\ud83d"]  # \ud83d: half of an emoji
# Carried safely, never refused for being what they are: NUL, bidi controls, combining marks.
ODD = ["\x00", "\u202e", "\u202d", "\u202a", "\u202c", "\u2066", "\u2067", "\u2068", "\u2069", "\u200f",
       "\u061c", "\u0301", "\u0308", "\u20dd", "\u0489", "\ufe0f", "\u200d"]
PLAIN = ["a", "Z", "中", "林", " ", "e", "1", ".", "\n"]


class LoopThread:
    """An event loop in its own thread: the services live on it; ``run`` waits for a coroutine."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name="text-rule", daemon=True)
        self._thread.start()

    def run(self, coro: Coroutine[Any, Any, T], timeout: float = 60) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(10)
        self.loop.close()


@dataclass
class App:
    loop: LoopThread
    dispatcher: Dispatcher
    root: Path
    project_id: str
    outcomes: dict[str, set[str]] = field(default_factory=dict)

    def reply(self, method: str, params: Any) -> dict[str, Any]:
        text = self.loop.run(self.dispatcher.dispatch(Call(method, params, 7), CTX))
        assert text is not None
        reply: dict[str, Any] = json.loads(text)
        assert reply["id"] == 7
        return reply

    def methods(self) -> list[Method]:
        return list(self.dispatcher.registry)


@pytest.fixture(scope="module")
def app(tmp_path_factory: pytest.TempPathFactory) -> Iterator[App]:
    loop = LoopThread()
    base = tmp_path_factory.mktemp("text-rule")
    config = Config(data_dir=base / "data")
    opened: Services = loop.run(asyncio.to_thread(open_services, config))
    try:
        dispatcher = Dispatcher(build_registry(config, opened, lambda: 0))
        root = (base / "projects").resolve()
        folder = make_folder(root / "novel")
        probe = App(loop, dispatcher, root, "")
        project = probe.reply("project:open", {"path": str(folder)})["result"]["project"]["projectId"]
        probe.reply("document:write", {"projectId": project, "documentId": "第一章.md",
                                       "text": "# 第一章\n\n林远数到第三级台阶。\n" * 20})
        yield App(loop, dispatcher, root, project)
    finally:
        loop.run(opened.aclose())
        loop.close()


# --------------------------------------------------------------------------- the schema's text fields


Path_ = tuple[str | int, ...]  # str: an object member (KEY: the key itself), int: a list item


def _resolve(schema: dict[str, Any], defs: dict[str, Any]) -> dict[str, Any]:
    while "$ref" in schema:
        schema = defs[schema["$ref"].rsplit("/", 1)[1]]
    return schema


def text_places(schema: dict[str, Any], defs: dict[str, Any], path: Path_ = (), *,
                enums: bool = True) -> list[Path_]:
    """Every place in values of ``schema`` where a string may go (with ``enums``, fixed words too)."""
    schema = _resolve(schema, defs)
    if len(path) > MAX_DEPTH:
        return []
    branches = schema.get("anyOf", schema.get("oneOf", []))
    if branches:
        found: list[Path_] = []
        for branch in branches:
            found += [p for p in text_places(branch, defs, path, enums=enums) if p not in found]
        return found
    kind = schema.get("type", "object" if "properties" in schema else None)
    if "enum" in schema or "const" in schema:
        return [path] if enums and kind in (None, "string") else []
    if kind in ("string", None):
        return [path]  # a string, or Any: it may be one
    if kind == "array":
        return text_places(schema.get("items", {}), defs, (*path, 0), enums=enums)
    if kind == "object":
        found = []
        for name, member in schema.get("properties", {}).items():
            found += text_places(member, defs, (*path, name), enums=enums)
        extra = schema.get("additionalProperties", {} if not schema.get("properties") else False)
        if extra is True or isinstance(extra, dict):
            found += [(*path, KEY), *text_places({} if extra is True else extra, defs, (*path, WILD),
                                                 enums=enums)]
        for member in schema.get("patternProperties", {}).values():
            found += [(*path, KEY), *text_places(member, defs, (*path, WILD), enums=enums)]
        return found
    return []


def params_schema(method: Method) -> tuple[dict[str, Any], dict[str, Any]]:
    schema = method.params.model_json_schema(by_alias=True)
    return schema, schema.get("$defs", {})


def place(path: Path_, text: str) -> Any:
    """A value holding ``text`` at ``path`` and nothing else."""
    if not path:
        return text
    head, rest = path[0], path[1:]
    if head == KEY:
        return {text: "v"}
    if isinstance(head, int):
        return [place(rest, text)]
    return {head: place(rest, text)}


def expected_loc(path: Path_) -> list[str]:
    return [str(part) for part in path]


def text_methods(app: App, *, enums: bool = True) -> list[tuple[str, list[Path_]]]:
    found = []
    for method in app.methods():
        schema, defs = params_schema(method)
        places = list(dict.fromkeys(text_places(schema, defs, enums=enums)))
        if places:
            found.append((method.name, places))
    return found


def test_the_registry_has_text_everywhere_it_should(app: App) -> None:
    """Pins the enumeration itself: the text fields found include the ones the findings named
    (additionalInput, variables' names and values, a segment's content, a document's text)."""
    places = dict(text_methods(app))
    assert len(places) >= 50
    assert ("additionalInput",) in places["context:assemble"]
    assert {("variables", KEY), ("variables", WILD)} <= set(places["context:assemble"])
    assert ("segment", "content") in places["segments:upsert"]
    assert ("text",) in places["document:write"]
    assert ("aliases", 0) in places["kg:entity:upsert"]
    assert "system:info" not in places
    assert "project:list" not in places


# --------------------------------------------------------------------------- lone surrogates


def with_surrogate(draw: st.DrawFn) -> str:
    before = draw(st.text(st.sampled_from(PLAIN + ODD), max_size=8))
    after = draw(st.text(st.sampled_from(PLAIN), max_size=8))
    return before + draw(st.sampled_from(SURROGATES)) + after


@st.composite
def surrogate_calls(draw: st.DrawFn, methods: list[tuple[str, list[Path_]]]) -> tuple[str, Any, list[str]]:
    name, places = draw(st.sampled_from(methods))
    path = draw(st.sampled_from(places))
    text = with_surrogate(draw)
    return name, place(path, text), expected_loc(path)


def test_a_lone_surrogate_in_any_text_field_of_any_method_is_invalid_params(app: App) -> None:
    """Pins the rule: for every method and every text field (values, list items, dict values and
    keys, enums and ids alike), a string holding a lone surrogate is INVALID_PARAMS with exactly one
    error, ``string_unicode`` at that field's loc (a key: its object's loc then "[key]"), and the
    text is never echoed. Checked before the method's own validation: other fields may be missing."""
    methods = text_methods(app)
    covered: set[str] = set()

    @settings(PROPERTY, max_examples=600)
    @given(call=surrogate_calls(methods))
    def check(call: tuple[str, Any, list[str]]) -> None:
        name, params, loc = call
        note(f"{name} {params!r}")
        covered.add(name)
        reply = app.reply(name, params)
        error = reply.get("error")
        assert error is not None, reply
        assert (error["code"], error["data"]["code"]) == (-32602, "INVALID_PARAMS"), error
        assert [(e["loc"], e["type"]) for e in error["data"]["errors"]] == [(loc, "string_unicode")]
        assert not re.search(r"\\ud[89a-f]", json.dumps(error).lower()), error  # never echoed

    check()
    for name, places in methods:  # and every field once, whatever hypothesis drew
        for path in places:
            reply = app.reply(name, place(path, "x\ud800y"))
            assert [(e["loc"], e["type"]) for e in reply["error"]["data"]["errors"]] == [
                (expected_loc(path), "string_unicode")], (name, path)
    assert covered


def test_surrogates_in_positional_params_name_the_param(app: App) -> None:
    """Pins: by position the rule is the same, the loc being the param's wire name."""
    for method in app.methods():
        names = method.param_names
        if not names:
            continue
        params: list[Any] = [None] * (len(names) - 1) + ["\udfff"]
        reply = app.reply(method.name, params)
        assert [e["loc"] for e in reply["error"]["data"]["errors"]] == [[names[-1]]], method.name


# --------------------------------------------------------------------------- NUL, bidi, combining


odd_text = st.lists(st.sampled_from(PLAIN), max_size=6).flatmap(
    lambda plain: st.lists(st.sampled_from(ODD), min_size=1, max_size=4).map(
        lambda odd: "".join(plain[: len(plain) // 2] + odd + plain[len(plain) // 2:])))


def plausible(schema: dict[str, Any], defs: dict[str, Any], app: App, name: str = "",
              depth: int = 0) -> st.SearchStrategy[Any]:
    """Values that mostly fit ``schema``; every free text holds NUL, bidi controls or combining marks."""
    schema = _resolve(schema, defs)
    special = {
        "projectId": st.just(app.project_id),
        "documentId": st.sampled_from(["第一章.md"]) | odd_text.map(lambda t: f"odd{t}.md"),
        "currentDocumentId": st.just("第一章.md") | odd_text.map(lambda t: f"{t}.md"),
        "path": st.just(str(app.root / "novel")) | odd_text.map(lambda t: str(app.root / f"p{t}")),
        "tokenizerPath": odd_text.map(lambda t: str(app.root / f"t{t}.json")),
        "profileId": st.just("novel") | odd_text,
        "skillId": st.just("continue") | odd_text,
        "templateName": st.just("base-roleplay") | odd_text,
    }
    if name in special:
        return special[name]
    branches = schema.get("anyOf", schema.get("oneOf", []))
    if branches:
        return st.one_of([plausible(b, defs, app, name, depth) for b in branches])
    if "enum" in schema:
        return st.sampled_from(schema["enum"])
    if "const" in schema:
        return st.just(schema["const"])
    kind = schema.get("type")
    if kind == "string":
        return odd_text
    if kind == "integer":
        low = schema.get("minimum", schema.get("exclusiveMinimum", -1) + 1)
        return st.integers(low, min(schema.get("maximum", low + 40), low + 40))
    if kind == "number":
        return st.floats(schema.get("minimum", 0.0), schema.get("maximum", 1.0), allow_nan=False)
    if kind == "boolean":
        return st.booleans()
    if kind == "null":
        return st.none()
    if kind == "array" and depth < 3:
        return st.lists(plausible(schema.get("items", {}), defs, app, "", depth + 1),
                        min_size=schema.get("minItems", 0), max_size=min(schema.get("maxItems", 3), 3))
    if kind == "object" and depth < 3:
        properties = schema.get("properties", {})
        required = set(schema.get("required", []))
        if properties:
            return st.fixed_dictionaries(
                {k: plausible(v, defs, app, k, depth + 1) for k, v in properties.items() if k in required},
                optional={k: plausible(v, defs, app, k, depth + 1) for k, v in properties.items()
                          if k not in required})
        extra = schema.get("additionalProperties")
        if isinstance(extra, dict):
            names = st.sampled_from(["who", "place"]) | odd_text  # names are often patterned
            return st.dictionaries(names, plausible(extra, defs, app, "", depth + 1), max_size=3)
    return odd_text | st.integers(0, 3) | st.booleans()


GROUPS = ("chat:", "constraints:", "context:", "document:", "index:", "kg:", "memory:", "profile:",
          "project:", "reading:", "segments:", "system:", "rpc.", "$/", "debug:")


def test_every_method_is_in_a_group(app: App) -> None:
    """Pins the grouping the NUL/bidi property runs by: every registered method is in one."""
    assert all(method.name.startswith(GROUPS) for method in app.methods())


def odd_property(app: App, method: Method) -> Callable[[], None]:
    """The hypothesis test of one method with NUL, bidi controls and combining marks in its text."""
    schema, defs = params_schema(method)

    @settings(PROPERTY, max_examples=20)
    @given(params=plausible(schema, defs, app))
    def check(params: Any) -> None:
        note(f"{method.name} {params!r}")
        reply = app.reply(method.name, params)
        outcome = "result"
        if "error" in reply:
            error = reply["error"]
            assert (error["code"], error["data"]["code"]) in DOCUMENTED, error
            assert error["data"]["code"] != "INTERNAL", (method.name, error)
            outcome = error["data"]["code"]
        app.outcomes.setdefault(method.name, set()).add(outcome)

    return check


@pytest.mark.parametrize("group", GROUPS)
def test_nul_bidi_and_combining_marks_never_break_a_method(app: App, group: str) -> None:
    """Pins: plausible params whose every free text holds NUL, bidi controls (U+202E...) or
    combining marks are carried: the method answers a result or a documented domain error, never
    INTERNAL, and the dispatcher never raises. Project ids, document ids and paths stay inside the
    test's project so that writes land there."""
    for method in app.methods():
        if method.name.startswith(group) and text_places(*params_schema(method), enums=False):
            odd_property(app, method)()


def test_odd_text_round_trips_and_assembles(app: App) -> None:
    """Pins: NUL, a bidi override and combining marks are stored and read back exactly, and an
    assembly with them in additionalInput and a variable answers a prompt without any source
    failing (no *_UNAVAILABLE warning)."""
    text = "# 第二章\n\n林远\x00停下\u202e来听\u202c海浪e\u0301\u20dd。\n" * 10
    app.reply("document:write", {"projectId": app.project_id, "documentId": "第二章.md", "text": text})
    read = app.reply("document:read", {"projectId": app.project_id, "documentId": "第二章.md"})
    assert read["result"]["text"] == text
    result = app.reply("context:assemble", {
        "projectId": app.project_id, "documentId": "第二章.md", "cursorPosition": len(text) // 2,
        "skillId": "continue", "additionalInput": "\u202e写\x00下去\u0301",
        "variables": {"who": "林\u0308远"}})
    assert "result" in result, result
    assert not [w for w in result["result"]["warnings"] if "_UNAVAILABLE" in w]
