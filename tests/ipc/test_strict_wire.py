"""Strict wire types, as documented: params are checked as the JSON they are, by wire name only.

Over the real app's registry (see tests/ipc/test_text_rule.py for the fixture): every integer,
number, boolean and string field of every method, found from its params' JSON schema, refuses
the JSON types it does not declare (no "3" or true or 2.0 for an integer), every snake_case
name is unknown, and the alternatives a field declares on purpose (a segment priority's
"low"/"medium"/"high", enums and datetimes as their JSON strings) still work. Then the framing:
duplicate keys, bounded ids, client answers holding lone surrogates, params too deep to check.
"""

from __future__ import annotations

import json
from types import UnionType
from typing import Annotated, Any, Union, get_args, get_origin

import pytest
from pydantic import BaseModel

from ipc.dispatch import bind_params
from ipc.errors import InvalidParams, ParseError
from ipc.models import WireModel
from ipc.protocol import Call, Response, loads_strict, parse_frame, validate_entry
from ipc.registry import Method, Registry
from tests.ipc.test_text_rule import App, app, params_schema, place

__all__ = ["app"]  # the module fixture, shared with the text rule's tests

Path_ = tuple[str | int, ...]


def json_types(schema: dict[str, Any], defs: dict[str, Any], path: Path_ = (),
               found: dict[Path_, set[str]] | None = None, depth: int = 0) -> dict[Path_, set[str]]:
    """For each place in values of ``schema`` (fields, list items), the JSON types it declares."""
    found = {} if found is None else found
    while "$ref" in schema:
        schema = defs[schema["$ref"].rsplit("/", 1)[1]]
    if depth > 5:
        return found
    branches = schema.get("anyOf", schema.get("oneOf"))
    if branches:
        for branch in branches:
            json_types(branch, defs, path, found, depth)
        return found
    kind = schema.get("type", "object" if "properties" in schema else None)
    if "enum" in schema:
        names = {str: "string", int: "integer", bool: "boolean"}
        kinds = {names.get(type(value), "other") for value in schema["enum"]}
        found.setdefault(path, set()).update(kinds)
        return found
    found.setdefault(path, set()).add(kind or "any")
    if kind == "array":
        json_types(schema.get("items", {}), defs, (*path, 0), found, depth + 1)
    elif kind == "object":
        for name, member in schema.get("properties", {}).items():
            json_types(member, defs, (*path, name), found, depth + 1)
    return found


# Params that are JSON values to the wire model and documents to their service, which validates
# them itself (a profile, an import's entries, a conversation's options, reported ignored): the
# dispatcher's strictness stops at them.
SERVICE_DOCUMENTS = {("profile:put", "profile"), ("profile:validate", "profile"),
                     ("segments:import", "segments"), ("chat:conversation:create", "options")}


def places_of(app: App, declared: str, refused: set[str]) -> list[tuple[str, Path_]]:
    """(method, place) for every place declaring ``declared`` and none of ``refused`` (nor Any)."""
    out = []
    for method in app.methods():
        for path, kinds in json_types(*params_schema(method)).items():
            if (path and declared in kinds and not kinds & (refused | {"any"})
                    and (method.name, path[0]) not in SERVICE_DOCUMENTS):
                out.append((method.name, path))
    return out


def assert_refused_at(app: App, method: str, path: Path_, value: Any) -> None:
    reply = app.reply(method, place(path, value))
    assert "error" in reply, (method, path, value, reply)
    error = reply["error"]
    assert (error["code"], error["data"]["code"]) == (-32602, "INVALID_PARAMS")
    loc = [str(part) for part in path]
    assert loc in [e["loc"] for e in error["data"]["errors"]], (method, path, value, error)


# --------------------------------------------------------------------------- no coercion


def test_integer_fields_refuse_strings_booleans_and_floats(app: App) -> None:
    """Pins: every integer field of every method (nested ones too) refuses "3", true and 2.0
    (before: all three were read as integers), naming the field."""
    places = places_of(app, "integer", {"string", "boolean", "number"})
    assert ("context:assemble", ("cursorPosition",)) in places
    assert ("segments:upsert", ("segment", "metadata", "tier")) in places
    assert len(places) >= 40
    for method, path in places:
        for value in ("3", True, 2.0):
            assert_refused_at(app, method, path, value)


def test_number_fields_refuse_strings_and_booleans_but_take_integers(app: App) -> None:
    """Pins: a number field refuses "0.5" and true; a JSON integer is a number (1 for 1.0)."""
    places = places_of(app, "number", {"string", "boolean"})
    assert ("memory:semantic:upsert", ("confidence",)) in places
    for method, path in places:
        for value in ("0.5", True):
            assert_refused_at(app, method, path, value)
    reply = app.reply("memory:semantic:upsert", {"projectId": app.project_id, "text": "整数也是数字",
                                                 "confidence": 1})
    assert reply["result"]["rule"]["confidence"] == 1.0


def test_boolean_fields_refuse_strings_and_numbers(app: App) -> None:
    """Pins: a boolean field refuses "true", 1 and 0 (before: read as booleans)."""
    places = places_of(app, "boolean", {"string", "integer", "number"})
    assert ("memory:semantic:list", ("confirmedOnly",)) in places
    for method, path in places:
        for value in ("true", 1, 0):
            assert_refused_at(app, method, path, value)


def test_string_fields_refuse_numbers_and_booleans(app: App) -> None:
    """Pins: a text field refuses 3 and true (a string is never made from another type)."""
    places = places_of(app, "string", {"integer", "number", "boolean"})
    assert ("context:assemble", ("additionalInput",)) in places
    for method, path in places:
        for value in (3, True):
            assert_refused_at(app, method, path, value)


def _models(annotation: Any) -> list[tuple[Path_, type[BaseModel]]]:
    """The models a field holds directly, in an Optional, a union or a list (with the list's index)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [((), annotation)]
    origin, args = get_origin(annotation), get_args(annotation)
    if origin is list:
        return [((0, *suffix), model) for arg in args for suffix, model in _models(arg)]
    if origin in (Union, UnionType, Annotated):
        return [found for arg in args for found in _models(arg)]
    return []


def snake_names(model: type[BaseModel], path: Path_ = (), depth: int = 0) -> list[tuple[Path_, str]]:
    """(place of the object, Python name) for every field whose Python name is not its wire name."""
    found: list[tuple[Path_, str]] = []
    for name, info in model.model_fields.items():
        wire = info.alias or name
        if wire != name:
            found.append((path, name))
        if depth < 3:
            for suffix, inner in _models(info.annotation):
                found += snake_names(inner, (*path, wire, *suffix), depth + 1)
    return found


def test_python_names_are_not_wire_names(app: App) -> None:
    """Pins: every field's Python (snake_case) name is unknown on the wire, at the top and in nested
    objects: INVALID_PARAMS with extra_forbidden naming it (before: project_id was accepted)."""
    checked = 0
    for method in app.methods():
        for path, name in snake_names(method.params):
            if path and (method.name, path[0]) in SERVICE_DOCUMENTS:
                continue
            reply = app.reply(method.name, place((*path, name), "x"))
            errors = reply["error"]["data"]["errors"]
            assert {"loc": [*map(str, path), name], "type": "extra_forbidden",
                    "msg": "Extra inputs are not permitted"} in errors, (method.name, name, errors)
            checked += 1
    assert checked >= 60


# --------------------------------------------------------------------------- alternatives kept


def test_declared_alternatives_still_work_in_strict_mode(app: App) -> None:
    """Pins: what a field declares on purpose survives strictness: a segment priority as "high",
    enums as their strings, datetimes as ISO strings (segments:import), a float request id for
    $/cancelRequest, by-position params."""
    base = {"projectId": app.project_id}
    upserted = app.reply("segments:upsert", {**base, "segment": {
        "scope": "core", "content": "灯塔在北岸。", "metadata": {"tier": 1, "priority": "high"}}})
    assert upserted["result"]["metadata"]["priority"] == 2
    imported = app.reply("segments:import", {**base, "segments": [{
        "scope": "core", "content": "规则一。", "metadata": {"priority": "low"},
        "createdAt": "2024-05-01T08:00:00Z", "updatedAt": "2024-05-01T09:30:00+02:00"}]})
    assert "result" in imported, imported
    created = app.reply("constraints:create", {**base, "kind": "world", "text": "海是咸的。"})
    assert created["result"]["constraint"]["kind"] == "world"
    assert app.reply("$/cancelRequest", {"id": 1.5})["result"] == {"ok": False}
    assert app.reply("document:read", [app.project_id, "第一章.md"])["result"]["documentId"] == "第一章.md"
    assert app.reply("memory:episodic:list", {**base, "limit": 5})["result"] is not None


def test_strings_for_numbers_stay_refused_where_an_alternative_is_declared(app: App) -> None:
    """Pins: a declared alternative is only itself: priority "3" or "HIGH" is still refused."""
    for priority in ("3", "HIGH", 2.0, True):
        reply = app.reply("segments:upsert", {"projectId": app.project_id, "segment": {
            "scope": "core", "content": "x", "metadata": {"priority": priority}}})
        assert [e["loc"][:3] for e in reply["error"]["data"]["errors"]] == [
            ["segment", "metadata", "priority"]] * len(reply["error"]["data"]["errors"]), reply


# --------------------------------------------------------------------------- too deep to check


class Anything(WireModel):
    value: Any = None


def _anything_method() -> Method:
    registry = Registry()

    @registry.method("t:any", params=Anything, result=Anything, summary="s")
    async def handler(params: Anything, ctx: Any) -> Anything:
        return params

    method = registry.get("t:any")
    assert method is not None
    return method


def test_params_nested_too_deep_to_check_are_invalid_params_not_internal() -> None:
    """Pins: params the parser took but strict validation cannot walk (an Any value nested
    hundreds deep) are INVALID_PARAMS "too_deep", never INTERNAL; shallow ones pass."""
    method = _anything_method()
    assert bind_params(method, {"value": [[[1]]]}).model_dump() == {"value": [[[1]]]}
    deep = loads_strict('{"value":' + "[" * 900 + "]" * 900 + "}")
    with pytest.raises(InvalidParams) as raised:
        bind_params(method, deep)
    assert raised.value.fields["errors"] == [{"loc": [], "type": "too_deep",
                                              "msg": "params are nested too deeply"}]


# --------------------------------------------------------------------------- framing


@pytest.mark.parametrize("text", [
    '{"a":1,"a":1}',
    '{"a":1,"\\u0061":2}',
    '[{"x":{"y":1,"y":2}}]',
    '{"jsonrpc":"2.0","method":"m","params":{"p":[{"q":1,"q":null}]},"id":1}',
])
def test_duplicate_keys_are_parse_errors(text: str) -> None:
    """Pins: an object repeating a name, at any depth and however spelt, is a ParseError (before:
    the last value won silently); as a frame, one -32700 with id null."""
    with pytest.raises(ParseError, match="duplicate key"):
        loads_strict(text)
    [reply] = parse_frame(text, max_batch=8).entries
    assert isinstance(reply, str)
    parsed = json.loads(reply)
    assert (parsed["id"], parsed["error"]["code"], parsed["error"]["data"]) == (
        None, -32700, {"code": "PARSE_ERROR"})


def test_distinct_keys_and_equal_values_are_fine() -> None:
    """Pins the other side: equal values under distinct names, or one name in sibling objects."""
    assert loads_strict('{"a":1,"b":1,"c":{"a":1},"d":[{"a":1},{"a":2}]}') == {
        "a": 1, "b": 1, "c": {"a": 1}, "d": [{"a": 1}, {"a": 2}]}


@pytest.mark.parametrize("request_id", [2**53, -(2**53), 10**4298, 1e300, -1e17, "x" * 257, "a\ud800",
                                        "\udfff"], ids=lambda value: ascii(value)[:24])
def test_out_of_bound_ids_are_invalid_requests_answered_with_null(request_id: Any) -> None:
    """Pins: ids are integers (or numbers) within +-(2^53-1) or text of up to 256 characters;
    others are -32600 with id null."""
    reply = validate_entry({"jsonrpc": "2.0", "method": "m", "id": request_id})
    assert isinstance(reply, str)
    parsed = json.loads(reply)
    assert (parsed["id"], parsed["error"]["code"], parsed["error"]["data"]) == (
        None, -32600, {"code": "INVALID_REQUEST"})


@pytest.mark.parametrize("request_id", [2**53 - 1, -(2**53 - 1), 0, 1.5, "", "x" * 256, "林远", None])
def test_ids_within_bounds_are_kept(request_id: Any) -> None:
    """Pins: the bounds are inclusive; null, the empty string and fractions stay ids."""
    assert validate_entry({"jsonrpc": "2.0", "method": "m", "id": request_id}) == Call("m", None, request_id)


def test_a_client_answer_holding_a_lone_surrogate_is_taken_as_an_error_answer() -> None:
    """Pins: text is text in a client's answers too: a result with a lone surrogate anywhere
    settles its request as an error answer (-32602), so the server falls back as for any error;
    a clean answer is a result."""
    bad = validate_entry({"jsonrpc": "2.0", "result": {"content": "摘要\ud800"}, "id": "s1"})
    assert isinstance(bad, Response)
    assert bad.result is None
    assert bad.error is not None
    assert bad.error["code"] == -32602
    good = validate_entry({"jsonrpc": "2.0", "result": {"content": "摘要\u202e\x00"}, "id": "s1"})
    assert good == Response(id="s1", result={"content": "摘要\u202e\x00"})
