"""The methods used by the examples of the JSON-RPC 2.0 specification."""

from __future__ import annotations

from typing import Any

from pydantic import RootModel

from ipc.context import CallContext
from ipc.models import Ack, WireModel
from ipc.registry import Registry


class SubtractParams(WireModel):
    minuend: int
    subtrahend: int


class SumParams(WireModel):
    a: int = 0
    b: int = 0
    c: int = 0
    d: int = 0
    e: int = 0


class Number(RootModel[int]):
    pass


class Data(RootModel[list[Any]]):
    pass


class NoArgs(WireModel):
    pass


def add_spec_methods(registry: Registry) -> None:
    @registry.method("subtract", params=SubtractParams, result=Number, summary="minuend - subtrahend")
    async def subtract(params: SubtractParams, ctx: CallContext) -> Number:
        return Number(params.minuend - params.subtrahend)

    @registry.method("sum", params=SumParams, result=Number, summary="Sum of up to five numbers.")
    async def sum_(params: SumParams, ctx: CallContext) -> Number:
        return Number(params.a + params.b + params.c + params.d + params.e)

    @registry.method("get_data", params=NoArgs, result=Data, summary="Fixed data.")
    async def get_data(params: NoArgs, ctx: CallContext) -> Data:
        return Data(["hello", 5])

    for name in ("update", "notify_hello", "notify_sum"):

        @registry.method(name, params=SumParams, result=Ack, summary="A notification target.",
                         notification=True)
        async def accept(params: SumParams, ctx: CallContext) -> Ack:
            return Ack()
