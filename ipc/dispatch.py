"""Run one validated call against the registry and produce its reply text.

Parameter binding and validation use the method's pydantic model, strictly
and on the JSON as sent (see :func:`bind_params`: no coercion, wire names
only, no lone surrogate in any string or key); every failure becomes a wire
error. An error of the hierarchy (``StrataError``,
raised by a service or by the protocol) goes out as it is: its class carries
its number, ``data.code``, message and fields. Anything else, and the bare
base which names no condition, is logged with a fresh error id (exception
type and code locations only, never its message, which may hold the
writer's text) and answered as ``INTERNAL`` with that id.
"""

from __future__ import annotations

import asyncio
import time
import traceback
import uuid
from typing import Any, TypeVar

import structlog
from pydantic import BaseModel, ValidationError

from ipc.context import CallContext
from ipc.errors import InternalError, InvalidParams, MethodNotFound, StrataError
from ipc.protocol import Call, NotText, error_reply, success_reply, utf8_json
from ipc.registry import Method, Registry

M = TypeVar("M", bound=BaseModel)

_MAX_LOC_PART = 64
_MAX_REPORTED_ERRORS = 20


def bind_params(method: Method, params: dict[str, Any] | list[Any] | None) -> BaseModel:
    """Validate by-name or by-position params into the method's model (:func:`bind_model`)."""
    return bind_model(method.params, method.param_names, params)


def bind_model(model: type[M], names: tuple[str, ...], params: dict[str, Any] | list[Any] | None) -> M:
    """Validate by-name or by-position params into ``model``, strictly, as the JSON they were;
    ``names``: the wire names positional params stand for, in order.

    One rule for every method, before its model sees anything: a string or an
    object key holding a lone surrogate is INVALID_PARAMS naming where it is
    (``string_unicode``). Then the params are validated as JSON in pydantic's
    strict mode, by wire name only: no number from a string, no integer from
    ``true`` or ``2.0``, no snake_case name; enums, datetimes and arrays for
    tuples are read from their JSON forms, and a field's own validator (a
    priority's "low"/"medium"/"high") still runs first.
    """
    if params is None:
        params = {}
    elif isinstance(params, list):
        if len(params) > len(names):
            raise InvalidParams(
                "Invalid params: too many positional params", expected=len(names), got=len(params)
            )
        params = dict(zip(names, params, strict=False))
    try:
        data = utf8_json(params)
    except NotText as exc:
        raise InvalidParams(errors=[_not_text(place) for place in exc.places]) from None
    except RecursionError:
        raise InvalidParams(errors=[_too_deep()]) from None
    try:
        return model.model_validate_json(data, strict=True, by_alias=True, by_name=False)
    except ValidationError as exc:
        raise InvalidParams(errors=describe_validation(exc)) from None


def _too_deep() -> dict[str, Any]:
    return {"loc": [], "type": "too_deep", "msg": "params are nested too deeply"}


def _not_text(place: list[str]) -> dict[str, Any]:
    return {"loc": [part[:_MAX_LOC_PART] for part in place], "type": "string_unicode",
            "msg": "must be valid Unicode text (no lone surrogates)"}


def describe_validation(exc: ValidationError) -> list[dict[str, Any]]:
    """Location, type and message of each problem; never the offending input."""
    return [
        _too_deep() if err["type"] == "json_invalid" else {  # only the parser's depth limit: the JSON is ours
            "loc": [str(part)[:_MAX_LOC_PART] for part in err["loc"]],
            "type": err["type"],
            "msg": err["msg"],
        }
        for err in exc.errors(include_url=False, include_input=False, include_context=False)[
            :_MAX_REPORTED_ERRORS
        ]
    ]


def code_locations(exc: BaseException) -> list[str]:
    """Where an exception came from, as ``module:function:line`` strings."""
    frames = traceback.extract_tb(exc.__traceback__)
    return [f"{f.filename.rsplit('/', 1)[-1]}:{f.name}:{f.lineno}" for f in frames[-8:]]


class Dispatcher:
    """Maps calls to handlers; knows nothing of sockets."""

    def __init__(self, registry: Registry, *, trace: bool = False) -> None:
        self.registry = registry
        self._trace = trace  # per-call debug events cost a few µs each; only when asked
        self._log = structlog.get_logger("ipc.dispatch")

    async def dispatch(self, call: Call, ctx: CallContext) -> str | None:
        """Run ``call``; return its reply text, or None for a notification or a connection gone."""
        started = time.perf_counter()
        try:
            reply = await self._run(call, ctx)
        except StrataError as err:
            if err.data_code == InternalError.data_code:  # the bare base: no condition to tell
                reply = error_reply(call.id, self._internal(call, err))
            else:
                reply = error_reply(call.id, err)
                if self._trace:
                    self._log.debug("rpc.error", method=self._name(call), code=err.data_code)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            reply = error_reply(call.id, self._internal(call, exc))
        if self._trace:
            self._log.debug("rpc.call", method=self._name(call), reply_bytes=len(reply or ""),
                            ms=round((time.perf_counter() - started) * 1000, 3))
        return None if call.is_notification else reply

    async def _run(self, call: Call, ctx: CallContext) -> str | None:
        """The call's reply; None when nobody gets one (a notification, a connection gone)."""
        method = self.registry.get(call.method)
        if method is None:
            await self.registry.completed()  # right after the ready line, it may still be coming
            method = self.registry.get(call.method)
        if method is None:
            raise MethodNotFound()
        params = bind_params(method, call.params)
        result = await method.handler(params, ctx)
        if call.is_notification or not await ctx.peer.room():
            return None  # nobody gets a reply (the connection is gone): nothing to serialise
        return success_reply(call.id, result.model_dump(mode="json", by_alias=True))

    def _name(self, call: Call) -> str:
        """The method name for logs: only names we serve, never arbitrary client text."""
        return call.method if self.registry.get(call.method) is not None else "<unknown>"

    def _internal(self, call: Call, exc: Exception) -> InternalError:
        error_id = uuid.uuid4().hex[:16]
        self._log.error(
            "rpc.internal_error",
            error_id=error_id,
            method=self._name(call),
            exc_type=type(exc).__name__,
            where=code_locations(exc),
        )
        return InternalError(errorId=error_id)
