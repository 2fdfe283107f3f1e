"""Binding params and mapping failures, without a socket."""

from __future__ import annotations

import asyncio
import json

import pytest
from structlog.testing import capture_logs

from ipc.context import CallContext, Peer
from ipc.dispatch import Dispatcher, bind_params
from ipc.errors import InvalidParams, ProfileInvalid, StrataError, all_error_classes
from ipc.models import Ack, NoParams, WireModel
from ipc.protocol import NO_ID, Call
from ipc.registry import Registry
from ipc.server import TransportLimits
from tests.support.inproc import build_test_registry

CTX = CallContext(peer=Peer(connection_id="t"))


@pytest.fixture
def dispatcher() -> Dispatcher:
    return Dispatcher(build_test_registry(TransportLimits(), []))


def test_bind_by_position_and_name(dispatcher: Dispatcher) -> None:
    """Positional params fill fields in order; named params may be given in any order."""
    method = dispatcher.registry.get("test:echo")
    assert method is not None
    assert bind_params(method, ["ab", 2]).model_dump() == {"text": "ab", "count": 2}
    assert bind_params(method, {"count": 3}).model_dump() == {"text": "", "count": 3}
    assert bind_params(method, None).model_dump() == {"text": "", "count": 1}


def test_bind_rejects_extra_positional(dispatcher: Dispatcher) -> None:
    """More positional params than fields is -32602 with the counts."""
    method = dispatcher.registry.get("test:echo")
    assert method is not None
    with pytest.raises(InvalidParams) as raised:
        bind_params(method, ["a", 1, 2])
    assert raised.value.fields == {"expected": 2, "got": 3}


async def test_success_reply(dispatcher: Dispatcher) -> None:
    """A call returns its reply text with the result in camelCase."""
    reply = await dispatcher.dispatch(Call("system:info", None, 1), CTX)
    assert reply is not None
    result = json.loads(reply)["result"]
    assert result["limits"]["maxFrameBytes"] == TransportLimits().max_frame_bytes


async def test_notification_returns_nothing_even_on_error(dispatcher: Dispatcher) -> None:
    """A notification's outcome, error or not, produces no reply."""
    assert await dispatcher.dispatch(Call("nope", None, NO_ID), CTX) is None
    assert await dispatcher.dispatch(Call("test:fail", {"kind": "crash"}, NO_ID), CTX) is None


async def test_a_notification_that_succeeds_runs_and_logs_no_error(dispatcher: Dispatcher) -> None:
    """A notification of a method that succeeds runs its handler and gets no reply, and no error is
    logged for the reply nobody gets."""
    with capture_logs() as logs:
        assert await dispatcher.dispatch(Call("system:info", None, NO_ID), CTX) is None
        assert await dispatcher.dispatch(Call("test:echo", {"text": "x"}, NO_ID), CTX) is None
    assert [e for e in logs if e["log_level"] in ("error", "warning")] == []


async def test_a_reply_is_waited_for_room_and_not_made_once_the_connection_is_gone() -> None:
    """The handler runs, then the reply's JSON waits for the connection's room; a connection that
    closed meanwhile gets no reply made at all."""
    seen: list[str] = []
    dispatcher = Dispatcher(build_test_registry(TransportLimits(), seen))
    asked: list[str] = []

    async def gone() -> bool:
        asked.append("room")
        return False

    ctx = CallContext(peer=Peer(connection_id="t", room=gone))
    assert await dispatcher.dispatch(Call("test:sleep", {"seconds": 0, "label": "z"}, 1), ctx) is None
    assert seen == ["sleep-start:z", "sleep-end:z"]
    assert asked == ["room"]


async def test_internal_error_is_logged_with_its_id_and_no_text(dispatcher: Dispatcher) -> None:
    """An unexpected exception is logged by type and code location, with the reply's error id."""
    with capture_logs() as logs:
        reply = await dispatcher.dispatch(Call("test:fail", {"kind": "crash"}, 2), CTX)
    assert reply is not None
    error_id = json.loads(reply)["error"]["data"]["errorId"]
    (event,) = [e for e in logs if e["event"] == "rpc.internal_error"]
    assert event["error_id"] == error_id
    assert event["method"] == "test:fail"
    assert any(":fail:" in where for where in event["where"])
    assert "林远" not in json.dumps(event, ensure_ascii=False)
    error = json.loads(reply)["error"]
    assert error == {"code": -32603, "message": "Internal error",
                     "data": {"code": "INTERNAL", "errorId": error_id}}


async def test_unserializable_result_is_internal() -> None:
    """A result that is not standard JSON (NaN) is an INTERNAL error, not a broken frame."""
    registry = Registry()

    @registry.method("nan", params=NoParams, result=Reading, summary="s")
    async def nan(params: NoParams, ctx: CallContext) -> Reading:
        return Reading(value=float("nan"))

    reply = await Dispatcher(registry).dispatch(Call("nan", None, 3), CTX)
    assert reply is not None
    assert json.loads(reply)["error"]["data"]["code"] == "INTERNAL"


class Reading(WireModel):
    value: float


def raising(error: BaseException) -> Registry:
    """A registry whose one method, ``raise``, raises ``error``."""
    registry = Registry()

    @registry.method("raise", params=NoParams, result=Ack, summary="s")
    async def raise_(params: NoParams, ctx: CallContext) -> Ack:
        raise error

    return registry


CONDITIONS = [c for c in all_error_classes()
              if not c.__module__.startswith("tests.") and c.data_code != "INTERNAL"]


@pytest.mark.parametrize("cls", CONDITIONS, ids=lambda c: c.data_code)
async def test_every_condition_goes_to_the_wire_as_it_is(cls: type[StrataError]) -> None:
    """Any error of the hierarchy, domain or protocol, is answered with its own to_error; none is internal."""
    with capture_logs() as logs:
        reply = await Dispatcher(raising(cls(n=1))).dispatch(Call("raise", None, 5), CTX)
    assert reply is not None
    assert json.loads(reply)["error"] == {"code": cls.code, "message": cls.message,
                                          "data": {"code": cls.data_code, "n": 1}}
    assert not [e for e in logs if e["event"] == "rpc.internal_error"]


async def test_a_service_error_keeps_its_message_and_data() -> None:
    """A service's ProfileInvalid reaches the client as -32051 with data.problems as raised."""
    problems = [{"path": "/sections/2/budget", "message": "ratio must be at most 1"}]
    reply = await Dispatcher(raising(ProfileInvalid(problems=problems))).dispatch(Call("raise", None, 6), CTX)
    assert reply is not None
    assert json.loads(reply)["error"] == {
        "code": -32051,
        "message": "The profile is not valid",
        "data": {"code": "PROFILE_INVALID", "problems": problems},
    }


async def test_the_bare_base_is_internal() -> None:
    """StrataError itself names no condition: INTERNAL with an errorId, its text neither sent nor logged."""
    with capture_logs() as logs:
        reply = await Dispatcher(raising(StrataError("林远 hid the key", path="/home/writer"))).dispatch(
            Call("raise", None, 7), CTX)
    assert reply is not None
    assert "林远" not in reply
    assert "/home/writer" not in reply
    error = json.loads(reply)["error"]
    assert error == {"code": -32603, "message": "Internal error",
                     "data": {"code": "INTERNAL", "errorId": error["data"]["errorId"]}}
    (event,) = [e for e in logs if e["event"] == "rpc.internal_error"]
    assert event["error_id"] == error["data"]["errorId"]
    assert event["exc_type"] == "StrataError"
    assert "林远" not in json.dumps(event, ensure_ascii=False)


async def test_a_call_to_a_method_still_being_registered_waits_for_it() -> None:
    """While the registry expects more methods, a call to one not registered yet waits until the
    registry is complete and then runs (or is refused as unknown); a registered one runs at once."""
    registry = Registry()

    @registry.method("test:first", params=NoParams, result=Ack, summary="here from the start")
    async def first(params: NoParams, ctx: CallContext) -> Ack:
        return Ack(ok=True)

    registry.expect_more()
    dispatcher = Dispatcher(registry)
    later = asyncio.ensure_future(dispatcher.dispatch(Call("test:later", None, 1), CTX))
    unknown = asyncio.ensure_future(dispatcher.dispatch(Call("test:never", None, 2), CTX))
    now = await dispatcher.dispatch(Call("test:first", None, 3), CTX)
    assert json.loads(now or "")["result"] == {"ok": True}
    await asyncio.sleep(0.05)
    assert not later.done()
    assert not unknown.done()

    @registry.method("test:later", params=NoParams, result=Ack, summary="registered after the start")
    async def late(params: NoParams, ctx: CallContext) -> Ack:
        return Ack(ok=True)

    registry.complete()
    assert json.loads(await later or "")["result"] == {"ok": True}
    assert json.loads(await unknown or "")["error"]["code"] == -32601
