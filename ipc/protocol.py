"""JSON-RPC 2.0 framing and validation on strings and objects; no I/O.

A text frame holds one message: a request object or a batch array. This
module turns a frame into validated :class:`Call` objects or ready-made
error replies, and turns replies back into text. It is strict where the
specification is: standard JSON only (no ``NaN``/``Infinity``, no object
naming a member twice), ``jsonrpc`` must be exactly ``"2.0"``, ids are null,
strings of text up to 256 characters or numbers within +-(2^53-1) (never
booleans), and an invalid entry of a batch gets its own error without
spoiling the rest.

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

from ipc.errors import BatchTooLarge, InvalidParams, InvalidRequest, ParseError, RpcError

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


class DuplicateKey(ValueError):
    """An object names one member twice: which one was meant cannot be known."""


def _unique_members(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    obj = dict(pairs)
    if len(obj) != len(pairs):  # "a" and "\\u0061" are one name: compared after unescaping
        raise DuplicateKey()
    return obj


# Built once: json.loads/dumps with keyword arguments build a new coder per call.
_DECODER = json.JSONDecoder(parse_constant=_reject_constant, parse_float=_finite_float,
                            object_pairs_hook=_unique_members)
_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False)
_ASCII_ENCODER = json.JSONEncoder(separators=(",", ":"), allow_nan=False)


def loads_strict(text: str) -> Any:
    """Parse standard JSON; anything else raises :class:`ParseError`.

    An object that repeats a member name (even spelt differently, ``"a"`` and
    ``"\\u0061"``) is a parse error too, never last-wins: the frame is refused whole.
    """
    try:
        return _DECODER.decode(text)
    except DuplicateKey as exc:
        raise ParseError("Parse error: duplicate key in an object") from exc
    except (ValueError, RecursionError) as exc:  # JSONDecodeError is a ValueError
        raise ParseError() from exc


def dumps(obj: Any) -> str:
    """Compact JSON text; lone surrogates fall back to ASCII escapes."""
    text = _ENCODER.encode(obj)
    try:
        utf8_size(text)
    except UnicodeEncodeError:
        # A lone surrogate cannot be sent as UTF-8; \\uXXXX escapes can.
        text = _ASCII_ENCODER.encode(obj)
    return text


_MEASURE_CHARS = 2**16


def utf8_size(text: str) -> int:
    """How many bytes ``text`` takes as UTF-8 (as a frame carries it), without a copy of it all.

    ASCII text (every reply whose strings are ASCII or escaped) is its length, at
    no cost; other text is encoded 64k characters at a time. Raises
    UnicodeEncodeError for a lone surrogate, which no frame can carry.
    """
    if text.isascii():
        return len(text)
    return sum(len(text[i:i + _MEASURE_CHARS].encode("utf-8")) for i in range(0, len(text), _MEASURE_CHARS))


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


# Request ids: integers a JavaScript client holds exactly, and short strings of text.
MAX_ID_MAGNITUDE = 2**53 - 1  # Number.MAX_SAFE_INTEGER
MAX_ID_CHARS = 256
KEY = "[key]"  # in a loc, after an object's path: one of that object's keys (never shown itself)


def is_text(value: str) -> bool:
    """Whether ``value`` is Unicode text: no lone surrogate (a JSON ``\\ud800`` escape can make one)."""
    if value.isascii():
        return True
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


_BAD_KEY: Any = object()  # stands in, during the walk below, for a key that is not text


def lone_surrogates(value: Any, limit: int = 20) -> list[list[str]]:
    """Where ``value`` holds a string or an object key with a lone surrogate, in document order.

    A place is the path of keys and list indexes down to the string; a bad key is
    its object's path followed by :data:`KEY`. At most ``limit`` places. Iterative:
    parsed JSON may be nested as deep as the parser allows.
    """
    found: list[list[str]] = []
    pending: list[tuple[Any, tuple[str, ...]]] = [(value, ())]
    while pending and len(found) < limit:
        item, path = pending.pop()
        if item is _BAD_KEY or (isinstance(item, str) and not is_text(item)):
            found.append(list(path))
        elif isinstance(item, dict):
            pending.extend(reversed([(child, (*path, key)) if is_text(key) else (_BAD_KEY, (*path, KEY))
                                     for key, child in item.items()]))
        elif isinstance(item, list):
            pending.extend(reversed([(child, (*path, str(i))) for i, child in enumerate(item)]))
    return found


class NotText(ValueError):
    """Params holding a lone surrogate; ``places`` as :func:`lone_surrogates` gives them."""

    def __init__(self, places: list[list[str]]) -> None:
        super().__init__("lone surrogates")
        self.places = places


def utf8_json(value: Any) -> bytes:
    """``value`` (parsed JSON) as compact UTF-8 JSON, to be validated as the JSON it came as.

    Raises :class:`NotText` if a string or key holds a lone surrogate (one pass in C
    finds out; only then is ``value`` walked for the places), RecursionError if it
    is nested too deep to encode here.
    """
    text = _ENCODER.encode(value)
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        raise NotText(lone_surrogates(value)) from None


def _valid_id(value: Any) -> bool:
    if value is None:
        return True
    if isinstance(value, str):
        return len(value) <= MAX_ID_CHARS and is_text(value)
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    return -MAX_ID_MAGNITUDE <= value <= MAX_ID_MAGNITUDE  # an int of 4,000 digits too; never inf or NaN


_ID_RULE = (f"Invalid Request: id must be null, a string of up to {MAX_ID_CHARS} characters of text "
            f"or a number within +-{MAX_ID_MAGNITUDE}")
_NOT_TEXT_ANSWER = {"code": InvalidParams.code, "message": "the answer holds a lone surrogate",
                    "data": {"code": InvalidParams.data_code}}


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
    if lone_surrogates(obj["result"], limit=1):  # text is text in answers too: taken as an error answer
        return Response(id=id_, error=dict(_NOT_TEXT_ANSWER))
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
        return error_reply(None, InvalidRequest(_ID_RULE))
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
