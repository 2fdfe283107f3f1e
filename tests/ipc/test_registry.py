"""The method registry."""

from __future__ import annotations

import pytest
from pydantic import Field

from ipc.context import CallContext
from ipc.models import Ack, WireModel
from ipc.registry import Registry


class Params(WireModel):
    project_id: str
    cursor_position: int = Field(default=0, ge=0)


def test_param_names_are_wire_names_in_order() -> None:
    """By-position params bind to the camelCase names in declaration order."""
    registry = Registry()

    @registry.method("x:y", params=Params, result=Ack, summary="s")
    async def handler(params: Params, ctx: CallContext) -> Ack:
        return Ack()

    method = registry.get("x:y")
    assert method is not None
    assert method.param_names == ("projectId", "cursorPosition")
    assert len(registry) == 1


def test_duplicate_names_are_refused() -> None:
    """Registering a name twice is a programming error caught at start-up."""
    registry = Registry()

    @registry.method("dup", params=Params, result=Ack, summary="s")
    async def first(params: Params, ctx: CallContext) -> Ack:
        return Ack()

    with pytest.raises(ValueError, match="twice"):

        @registry.method("dup", params=Params, result=Ack, summary="s")
        async def second(params: Params, ctx: CallContext) -> Ack:
            return Ack()


def test_iteration_is_sorted_by_name() -> None:
    """Methods iterate in name order, so generated documents are stable."""
    registry = Registry()
    for name in ("b", "a", "c"):
        registry.method(name, params=Params, result=Ack, summary=name)(_ack)
    assert [m.name for m in registry] == ["a", "b", "c"]


async def _ack(params: Params, ctx: CallContext) -> Ack:
    return Ack()
