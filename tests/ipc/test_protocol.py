"""Framing and validation on plain strings, without any socket."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ipc.errors import ParseError
from ipc.protocol import NO_ID, Call, Response, dumps, loads_strict, parse_frame, validate_entry

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda children: st.lists(children, max_size=5) | st.dictionaries(st.text(max_size=8), children,
                                                                     max_size=5),
    max_leaves=20,
)


@pytest.mark.parametrize("text", ["NaN", "[Infinity]", '{"a": -Infinity}', "", "{", "[1,]",
                                  "1" * 5000, "[" * 100_000])
def test_loads_strict_rejects_non_standard_json(text: str) -> None:
    """NaN/Infinity, truncated text, huge integers and absurd nesting are parse errors."""
    with pytest.raises(ParseError):
        loads_strict(text)


def test_dumps_escapes_lone_surrogates_only_when_needed() -> None:
    """Text is sent as UTF-8 when it can be; a lone surrogate falls back to \\u escapes."""
    assert dumps({"t": "林远"}) == '{"t":"林远"}'
    assert dumps({"t": "a\ud800"}) == '{"t":"a\\ud800"}'


@given(json_values)
def test_dumps_always_produces_utf8_json(value: Any) -> None:
    """Whatever a handler returns (standard JSON), the reply encodes as UTF-8 and round-trips."""
    text = dumps(value)
    text.encode("utf-8")
    assert json.loads(text) == value


def test_validate_entry_distinguishes_notifications_from_null_ids() -> None:
    """A missing id is a notification; "id": null is a request."""
    notification = validate_entry({"jsonrpc": "2.0", "method": "m"})
    request = validate_entry({"jsonrpc": "2.0", "method": "m", "id": None})
    assert isinstance(notification, Call)
    assert notification.is_notification
    assert notification.id is NO_ID
    assert isinstance(request, Call)
    assert not request.is_notification


@pytest.mark.parametrize(
    ("entry", "expected_id"),
    [
        ({"jsonrpc": "2.0", "method": 5, "id": 3}, 3),
        ({"jsonrpc": "2.0", "method": "m", "id": True}, None),
        ({"jsonrpc": "2.0", "method": "m", "params": "x", "id": "a"}, "a"),
        ({"method": "m", "id": 1.5}, 1.5),
    ],
)
def test_invalid_entries_echo_a_valid_id(entry: dict[str, Any], expected_id: Any) -> None:
    """An invalid request echoes its id when the id itself is valid, else null."""
    reply = validate_entry(entry)
    assert isinstance(reply, str)
    parsed = json.loads(reply)
    assert parsed["id"] == expected_id
    assert parsed["error"]["code"] == -32600


@given(json_values)
def test_parse_frame_never_raises(value: Any) -> None:
    """Any JSON value yields entries that are Calls or well-formed error replies."""
    frame = parse_frame(json.dumps(value), max_batch=64)
    assert frame.entries
    for entry in frame.entries:
        if isinstance(entry, str):
            reply = json.loads(entry)
            assert reply["jsonrpc"] == "2.0"
            assert reply["error"]["code"] in (-32700, -32600)
            assert reply["error"]["data"]["code"]
        elif isinstance(entry, Response):
            assert entry.id is not None
        else:
            assert isinstance(entry.method, str)


@given(st.text())
def test_parse_frame_survives_any_text(text: str) -> None:
    """Arbitrary text, lone surrogates included, never raises."""
    frame = parse_frame(text, max_batch=64)
    assert frame.entries


def test_batch_size_limit() -> None:
    """A batch over max_batch is one error, not a batch of errors."""
    frame = parse_frame(json.dumps([{"jsonrpc": "2.0", "method": "m", "id": i} for i in range(3)]),
                        max_batch=2)
    assert not frame.is_batch
    assert isinstance(frame.entries[0], str)
    assert json.loads(frame.entries[0])["error"]["data"]["code"] == "RPC_BATCH_TOO_LARGE"


@pytest.mark.parametrize(
    ("entry", "expected"),
    [
        ({"jsonrpc": "2.0", "result": {"content": "x"}, "id": "s1"}, Response("s1", {"content": "x"})),
        ({"jsonrpc": "2.0", "result": None, "id": 7}, Response(7, None)),
        ({"jsonrpc": "2.0", "error": {"code": -32601, "message": "m"}, "id": "s2"},
         Response("s2", error={"code": -32601, "message": "m"})),
        ({"jsonrpc": "2.0", "error": {}, "id": 1.5}, Response(1.5, error={})),
    ],
)
def test_responses_are_recognised(entry: dict[str, Any], expected: Response) -> None:
    """An object with no method, jsonrpc 2.0, a non-null id and exactly one of result/error
    (an object) is a Response; a null result is still a result."""
    assert validate_entry(entry) == expected


@pytest.mark.parametrize(
    "entry",
    [
        {"jsonrpc": "2.0", "result": 1, "id": None},
        {"jsonrpc": "2.0", "result": 1},
        {"jsonrpc": "2.0", "result": 1, "id": True},
        {"jsonrpc": "2.0", "result": 1, "id": [1]},
        {"jsonrpc": "1.0", "result": 1, "id": 1},
        {"result": 1, "id": 1},
        {"jsonrpc": "2.0", "result": 1, "error": {"code": 1}, "id": 1},
        {"jsonrpc": "2.0", "id": 1},
        {"jsonrpc": "2.0", "error": "broken", "id": 1},
        {"jsonrpc": "2.0", "method": "m", "result": 1, "id": 1},
    ],
)
def test_everything_else_keeps_its_invalid_request_error(entry: dict[str, Any]) -> None:
    """Null or invalid ids, a wrong or missing jsonrpc, both or neither of result/error, an error
    that is not an object: still -32600 as before (a method makes it a request, checked as one)."""
    reply = validate_entry(entry)
    if "method" in entry:
        assert isinstance(reply, Call)
        return
    assert isinstance(reply, str)
    assert json.loads(reply)["error"]["code"] == -32600


def test_a_batch_may_mix_calls_responses_and_errors() -> None:
    """Each entry of a batch is classified on its own: a call, a response and an invalid entry."""
    frame = parse_frame(json.dumps([{"jsonrpc": "2.0", "method": "m", "id": 1},
                                    {"jsonrpc": "2.0", "result": "ok", "id": "s3"},
                                    {"jsonrpc": "2.0", "id": 2}]), max_batch=8)
    assert frame.is_batch
    call, response, error = frame.entries
    assert isinstance(call, Call)
    assert response == Response("s3", "ok")
    assert isinstance(error, str)
    single = parse_frame('{"jsonrpc":"2.0","result":[1],"id":"s4"}', max_batch=8)
    assert single.entries == (Response("s4", [1]),)
    assert not single.is_batch
