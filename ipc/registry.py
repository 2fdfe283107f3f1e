"""The method registry: each method's name, params and result models, handler."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from typing import Any, TypeVar

from pydantic import BaseModel

from ipc.context import CallContext
from ipc.errors import RpcError

P = TypeVar("P", bound=BaseModel)
R = TypeVar("R", bound=BaseModel)
Handler = Callable[[P, CallContext], Awaitable[R]]


def wire_names(model: type[BaseModel]) -> tuple[str, ...]:
    """Wire names of a params model's fields, in order, for by-position calls."""
    return tuple(f.alias or n for n, f in model.model_fields.items())


@dataclass(frozen=True, slots=True)
class Method:
    """One callable method as the dispatcher and the OpenRPC document see it."""

    name: str
    params: type[BaseModel]
    result: type[BaseModel]
    handler: Callable[[Any, CallContext], Awaitable[BaseModel]]
    summary: str
    errors: tuple[type[RpcError], ...] = ()
    notification: bool = False

    @property
    def param_names(self) -> tuple[str, ...]:
        """Wire names of the params, in order, for by-position calls."""
        return wire_names(self.params)


class Registry:
    """Holds every method; channel adapters add to it at start-up.

    A server may start serving before every channel is registered (:meth:`expect_more`): a call to
    a method not registered yet then waits for :meth:`complete` (:meth:`completed`) before it is
    judged unknown.
    """

    def __init__(self) -> None:
        self._methods: dict[str, Method] = {}
        self._loaded: asyncio.Event | None = None  # set once complete; None: complete from the start

    def expect_more(self) -> None:
        """More methods are coming while the server already serves (call on the event loop)."""
        self._loaded = asyncio.Event()

    def complete(self) -> None:
        """Every method is registered (or none more will be)."""
        if self._loaded is not None:
            self._loaded.set()

    async def completed(self) -> None:
        """Return once every method is registered."""
        if self._loaded is not None and not self._loaded.is_set():
            await self._loaded.wait()

    def method(
        self,
        name: str,
        *,
        params: type[P],
        result: type[R],
        summary: str,
        errors: tuple[type[RpcError], ...] = (),
        notification: bool = False,
    ) -> Callable[[Handler[P, R]], Handler[P, R]]:
        """Decorator registering ``handler`` under ``name``."""

        def register(handler: Handler[P, R]) -> Handler[P, R]:
            if name in self._methods:
                raise ValueError(f"method registered twice: {name}")
            self._methods[name] = Method(
                name=name,
                params=params,
                result=result,
                handler=handler,
                summary=summary,
                errors=errors,
                notification=notification,
            )
            return handler

        return register

    def get(self, name: str) -> Method | None:
        return self._methods.get(name)

    def __iter__(self) -> Iterator[Method]:
        return iter(sorted(self._methods.values(), key=lambda m: m.name))

    def __len__(self) -> int:
        return len(self._methods)
