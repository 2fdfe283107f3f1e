"""The shapes providers read, as Protocols: any store returning these attributes fits."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from datetime import datetime
from typing import Protocol, TypeVar


class ConstraintLike(Protocol):
    @property
    def id(self) -> int: ...
    @property
    def project_id(self) -> str: ...
    @property
    def kind(self) -> str: ...
    @property
    def text(self) -> str: ...
    @property
    def source(self) -> str: ...
    @property
    def priority(self) -> int: ...


class EntityLike(Protocol):
    @property
    def id(self) -> int: ...
    @property
    def project_id(self) -> str: ...
    @property
    def kind(self) -> str: ...
    @property
    def name(self) -> str: ...
    @property
    def aliases(self) -> Sequence[str]: ...
    @property
    def description(self) -> str: ...


class SemanticRuleLike(Protocol):
    @property
    def id(self) -> int: ...
    @property
    def project_id(self) -> str: ...
    @property
    def text(self) -> str: ...
    @property
    def confidence(self) -> float: ...
    @property
    def confirmed(self) -> bool: ...


class EpisodeLike(Protocol):
    @property
    def id(self) -> int: ...
    @property
    def project_id(self) -> str: ...
    @property
    def instruction(self) -> str: ...
    @property
    def output(self) -> str: ...
    @property
    def created_at(self) -> datetime: ...


R = TypeVar("R", covariant=True)
Fetch = Callable[[str], Awaitable[Sequence[R]]]


def shared(fetch: Fetch[R]) -> Fetch[R]:
    """``fetch`` with concurrent calls for the same project answered by one read.

    Two providers read constraints (user and kg-derived) for the same
    assembly; they share the query instead of running it twice.
    """
    in_flight: dict[str, asyncio.Future[Sequence[R]]] = {}

    def forget(project_id: str, future: asyncio.Future[Sequence[R]]) -> None:
        if in_flight.get(project_id) is future:
            del in_flight[project_id]

    async def call(project_id: str) -> Sequence[R]:
        future = in_flight.get(project_id)
        if future is None:
            future = asyncio.ensure_future(fetch(project_id))
            in_flight[project_id] = future
            future.add_done_callback(lambda f: forget(project_id, f))
        # A caller that times out must not cancel the read the other caller awaits.
        return await asyncio.shield(future)

    return call
