"""Every example exchange of the JSON-RPC 2.0 specification, in memory and over a socket."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.support.wire import Wire, expect_no_reply


def _codes(replies: list[dict[str, Any]]) -> list[tuple[Any, int]]:
    return sorted(((r["id"], r["error"]["code"]) for r in replies), key=repr)


async def _exchange(wire: Wire, text: str) -> Any:
    await wire.send(text)
    return await wire.recv()


@pytest.mark.parametrize(
    ("request_text", "expected"),
    [
        ('{"jsonrpc": "2.0", "method": "subtract", "params": [42, 23], "id": 1}',
         {"jsonrpc": "2.0", "result": 19, "id": 1}),
        ('{"jsonrpc": "2.0", "method": "subtract", "params": [23, 42], "id": 2}',
         {"jsonrpc": "2.0", "result": -19, "id": 2}),
        ('{"jsonrpc": "2.0", "method": "subtract", "params": {"subtrahend": 23, "minuend": 42}, "id": 3}',
         {"jsonrpc": "2.0", "result": 19, "id": 3}),
        ('{"jsonrpc": "2.0", "method": "subtract", "params": {"minuend": 42, "subtrahend": 23}, "id": 4}',
         {"jsonrpc": "2.0", "result": 19, "id": 4}),
    ],
)
async def test_params_by_position_and_by_name(wire: Wire, request_text: str,
                                              expected: dict[str, Any]) -> None:
    """Positional params bind in declaration order; named params bind by name."""
    assert await _exchange(wire, request_text) == expected


@pytest.mark.parametrize(
    "notification",
    ['{"jsonrpc": "2.0", "method": "update", "params": [1,2,3,4,5]}',
     '{"jsonrpc": "2.0", "method": "foobar"}'],
)
async def test_notifications_get_no_reply(wire: Wire, notification: str) -> None:
    """A notification, even to an unknown method, is never answered."""
    await wire.send(notification)
    await expect_no_reply(wire)


async def test_unknown_method(wire: Wire) -> None:
    """An unknown method answers -32601 with the request's id."""
    reply = await _exchange(wire, '{"jsonrpc": "2.0", "method": "foobar", "id": "1"}')
    assert reply["id"] == "1"
    assert reply["error"]["code"] == -32601
    assert reply["error"]["data"]["code"] == "METHOD_NOT_FOUND"


async def test_invalid_json(wire: Wire) -> None:
    """Unparseable JSON answers -32700 with a null id."""
    reply = await _exchange(wire, '{"jsonrpc": "2.0", "method": "foobar, "params": "bar", "baz]')
    assert reply["id"] is None
    assert reply["error"]["code"] == -32700
    assert reply["error"]["data"]["code"] == "PARSE_ERROR"


async def test_invalid_request_object(wire: Wire) -> None:
    """A request whose method is not a string answers -32600 with a null id."""
    reply = await _exchange(wire, '{"jsonrpc": "2.0", "method": 1, "params": "bar"}')
    assert reply["id"] is None
    assert reply["error"]["code"] == -32600


async def test_batch_with_invalid_json(wire: Wire) -> None:
    """A batch that is not valid JSON answers one -32700, not an array."""
    reply = await _exchange(wire, """[
      {"jsonrpc": "2.0", "method": "sum", "params": [1,2,4], "id": "1"},
      {"jsonrpc": "2.0", "method"
    ]""")
    assert isinstance(reply, dict)
    assert reply["error"]["code"] == -32700
    assert reply["id"] is None


async def test_empty_batch(wire: Wire) -> None:
    """An empty array answers one -32600, not an array."""
    reply = await _exchange(wire, "[]")
    assert isinstance(reply, dict)
    assert reply["error"]["code"] == -32600
    assert reply["id"] is None


@pytest.mark.parametrize(("batch", "size"), [("[1]", 1), ("[1,2,3]", 3)])
async def test_batch_of_invalid_entries(wire: Wire, batch: str, size: int) -> None:
    """Each invalid entry of a batch gets its own -32600."""
    reply = await _exchange(wire, batch)
    assert isinstance(reply, list)
    assert len(reply) == size
    assert all(r == {"jsonrpc": "2.0", "id": None, "error": r["error"]} for r in reply)
    assert {r["error"]["code"] for r in reply} == {-32600}


async def test_mixed_batch(wire: Wire) -> None:
    """Calls, notifications and invalid entries of one batch are answered independently."""
    reply = await _exchange(wire, """[
        {"jsonrpc": "2.0", "method": "sum", "params": [1,2,4], "id": "1"},
        {"jsonrpc": "2.0", "method": "notify_hello", "params": [7]},
        {"jsonrpc": "2.0", "method": "subtract", "params": [42,23], "id": "2"},
        {"foo": "boo"},
        {"jsonrpc": "2.0", "method": "foo.get", "params": {"name": "myself"}, "id": "5"},
        {"jsonrpc": "2.0", "method": "get_data", "id": "9"}
    ]""")
    assert isinstance(reply, list)
    results = {r["id"]: r["result"] for r in reply if "result" in r}
    assert results == {"1": 7, "2": 19, "9": ["hello", 5]}
    assert _codes([r for r in reply if "error" in r]) == [("5", -32601), (None, -32600)]


async def test_batch_of_notifications(wire: Wire) -> None:
    """A batch of only notifications gets no reply at all."""
    await wire.send("""[
        {"jsonrpc": "2.0", "method": "notify_sum", "params": [1,2,4]},
        {"jsonrpc": "2.0", "method": "notify_hello", "params": [7]}
    ]""")
    await expect_no_reply(wire)


@pytest.mark.parametrize(
    ("text", "code"),
    [
        ('{"jsonrpc": "2.0", "method": "subtract", "params": [1, NaN], "id": 1}', -32700),
        ('{"jsonrpc": "2.0", "method": "subtract", "params": [1, Infinity], "id": 1}', -32700),
        ('{"jsonrpc": "1.0", "method": "subtract", "params": [1, 2], "id": 1}', -32600),
        ('{"method": "subtract", "params": [1, 2], "id": 1}', -32600),
        ('{"jsonrpc": "2.0", "method": "subtract", "params": 3, "id": 1}', -32600),
        ('{"jsonrpc": "2.0", "method": "subtract", "params": [1, 2, 3], "id": 1}', -32602),
        ('{"jsonrpc": "2.0", "method": "subtract", "params": {"minuend": "x"}, "id": 1}', -32602),
        ('{"jsonrpc": "2.0", "method": "subtract", "params": {"minuend": 1, "subtrahend": 2, "x": 3}, "id": 1}',
         -32602),
        ('"just a string"', -32600),
    ],
)
async def test_strict_validation(wire: Wire, text: str, code: int) -> None:
    """Non-standard JSON, wrong versions and bad params are refused with the right code."""
    reply = await _exchange(wire, text)
    assert reply["error"]["code"] == code
    assert reply["error"]["data"]["code"]


@pytest.mark.parametrize("bad_id", ["true", "[1]", '{"a": 1}'])
async def test_invalid_id_types(wire: Wire, bad_id: str) -> None:
    """An id that is not a string, number or null is an invalid request with a null id."""
    reply = await _exchange(wire, f'{{"jsonrpc": "2.0", "method": "get_data", "id": {bad_id}}}')
    assert reply["error"]["code"] == -32600
    assert reply["id"] is None


async def test_null_id_is_a_request(wire: Wire) -> None:
    """"id": null is a request (answered with id null), not a notification."""
    assert await _exchange(wire, '{"jsonrpc": "2.0", "method": "get_data", "id": null}') == {
        "jsonrpc": "2.0", "result": ["hello", 5], "id": None}


async def test_invalid_params_name_the_field_not_the_value(wire: Wire) -> None:
    """-32602 lists where and what is wrong, never the value that was sent."""
    secret = "林远 hid the key under the third step"
    reply = await _exchange(wire, json.dumps(
        {"jsonrpc": "2.0", "method": "subtract", "params": {"minuend": secret}, "id": 7}))
    errors = reply["error"]["data"]["errors"]
    assert {tuple(e["loc"]) for e in errors} == {("minuend",), ("subtrahend",)}
    assert secret not in json.dumps(reply, ensure_ascii=False)
