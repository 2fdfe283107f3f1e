"""JSON-RPC 2.0 framing and validation on strings and objects; no I/O.

A text frame holds one message: a request object or a batch array. This
module turns a frame into validated :class:`Call` objects or ready-made
error replies, and turns replies back into text. It is strict where the
specification is: standard JSON only (no ``NaN``/``Infinity``), ``jsonrpc``
must be exactly ``"2.0"``, ids are strings, numbers or null (never booleans),
and an invalid entry of a batch gets its own error without spoiling the rest.

A client also answers the server's own requests (server-to-client calls such
as ``llm:complete``): an entry with no ``"method"``, ``"jsonrpc": "2.0"``, a
string or number id and exactly one of ``"result"`` and ``"error"`` (an
object) is a :class:`Response`, alone or inside a batch. A response never
gets a reply; anything else that is not a request is an Invalid Request as
before.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any

from ipc.errors import BatchTooLarge, InvalidRequest, ParseError, RpcError

JSONRPC = "2.0"

# Marks the absence of "id" (a notification), distinct from "id": null.
NO_ID: Any = type("NoId", (), {"__repr__": lambda self: "NO_ID"})()


@dataclass(frozen=True, slots=True)
class Call:
    """One valid request or notification."""

    method: str
    params: dict[str, Any] | list[Any] | None
    id: Any = NO_ID

    @property
    def is_notification(self) -> bool:
        return self.id is NO_ID


@dataclass(frozen=True, slots=True)
class Response:
    """A client's answer to a server-to-client request.

    ``error`` is the error object when the client answered with one (then
    ``result`` is None), else None; ``result`` may itself be null.
    """

    id: str | int | float
    result: Any = None
    error: dict[str, Any] | None = None


Entry = Call | Response | str


@dataclass(frozen=True, slots=True)
class Frame:
    """A parsed frame: its entries, each a Call, a Response or an error reply text."""

    entries: tuple[Entry, ...]
    is_batch: bool


def _reject_constant(name: str) -> Any:
    raise ValueError(name)


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):  # 1e400 parses to inf, which no reply could carry
        raise ValueError("number out of range")
    return value


# Built once: json.loads/dumps with keyword arguments build a new coder per call.
_DECODER = json.JSONDecoder(parse_constant=_reject_constant, parse_float=_finite_float)
_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False)
_ASCII_ENCODER = json.JSONEncoder(separators=(",", ":"), allow_nan=False)


def loads_strict(text: str) -> Any:
    """Parse standard JSON; anything else raises :class:`ParseError`."""
    try:
        return _DECODER.decode(text)
    except (ValueError, RecursionError) as exc:  # JSONDecodeError is a ValueError
        raise ParseError() from exc


def dumps(obj: Any) -> str:
    """Compact JSON text; lone surrogates fall back to ASCII escapes."""
    text = _ENCODER.encode(obj)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        # A lone surrogate cannot be sent as UTF-8; \\uXXXX escapes can.
        text = _ASCII_ENCODER.encode(obj)
    return text


_LAST_RESORT = ('{"jsonrpc":"2.0","error":{"code":-32603,"message":"Internal error",'
                '"data":{"code":"INTERNAL"}},"id":null}')


def error_reply(id_: Any, error: RpcError) -> str:
    """An error reply; never raises, even if an error's fields are not JSON."""
    try:
        return dumps({"jsonrpc": JSONRPC, "error": error.to_error(), "id": _reply_id(id_)})
    except (TypeError, ValueError):
        return _LAST_RESORT


def success_reply(id_: Any, result: Any) -> str:
    """May raise ValueError/TypeError if ``result`` is not JSON-serializable."""
    return dumps({"jsonrpc": JSONRPC, "result": result, "id": id_})


def batch_reply(parts: list[str]) -> str | None:
    """Join the replies of a batch; a batch of notifications gets no reply."""
    return "[" + ",".join(parts) + "]" if parts else None


def _valid_id(value: Any) -> bool:
    if value is None or isinstance(value, str):
        return True
    if isinstance(value, float):
        return math.isfinite(value)
    return isinstance(value, int) and not isinstance(value, bool)


def _reply_id(id_: Any) -> Any:
    return id_ if id_ is not NO_ID and _valid_id(id_) else None


def _as_response(obj: dict[str, Any]) -> Response | None:
    """``obj`` as a client's :class:`Response`, or None if it is not a well-formed one."""
    if "method" in obj or obj.get("jsonrpc") != JSONRPC or ("result" in obj) == ("error" in obj):
        return None
    id_ = obj.get("id")
    if id_ is None or not _valid_id(id_):
        return None
    if "error" in obj:
        error = obj["error"]
        return Response(id=id_, error=error) if isinstance(error, dict) else None
    return Response(id=id_, result=obj["result"])


def validate_entry(obj: Any) -> Entry:
    """Validate one entry: a :class:`Call`, a client's :class:`Response`, or an error reply text."""
    if not isinstance(obj, dict):
        return error_reply(None, InvalidRequest("Invalid Request: expected an object"))
    response = _as_response(obj)
    if response is not None:
        return response
    id_ = obj.get("id", NO_ID)
    if id_ is not NO_ID and not _valid_id(id_):
        return error_reply(None, InvalidRequest("Invalid Request: id must be a string, number or null"))
    if obj.get("jsonrpc") != JSONRPC:
        return error_reply(id_, InvalidRequest('Invalid Request: "jsonrpc" must be "2.0"'))
    method = obj.get("method")
    if not isinstance(method, str):
        return error_reply(id_, InvalidRequest('Invalid Request: "method" must be a string'))
    params = obj.get("params")
    if "params" in obj and not isinstance(params, dict | list):
        return error_reply(id_, InvalidRequest('Invalid Request: "params" must be an object or array'))
    return Call(method=method, params=params, id=id_)


def parse_frame(text: str, max_batch: int) -> Frame:
    """Split a frame into validated entries. Never raises."""
    try:
        message = loads_strict(text)
    except ParseError as err:
        return Frame(entries=(error_reply(None, err),), is_batch=False)
    if not isinstance(message, list):
        return Frame(entries=(validate_entry(message),), is_batch=False)
    if not message:
        empty = InvalidRequest("Invalid Request: empty batch")
        return Frame(entries=(error_reply(None, empty),), is_batch=False)
    if len(message) > max_batch:
        too_large = BatchTooLarge(limit=max_batch, size=len(message))
        return Frame(entries=(error_reply(None, too_large),), is_batch=False)
    return Frame(entries=tuple(validate_entry(item) for item in message), is_batch=True)
