"""What a handler knows about the call it serves, passed explicitly."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

Notify = Callable[[str, dict[str, Any]], Awaitable[None]]
Cancel = Callable[[Any], bool]
Subscribe = Callable[[frozenset[str]], None]


class Role(StrEnum):
    """Which token a connection authenticated with."""

    CLIENT = "client"
    INSPECTOR = "inspector"


async def _no_notify(method: str, params: dict[str, Any]) -> None:
    return None


def _no_cancel(request_id: Any) -> bool:
    return False


def _no_subscribe(topics: frozenset[str]) -> None:
    return None


@dataclass(frozen=True, slots=True)
class Peer:
    """One connected client: its identity and how to reach it."""

    connection_id: str
    role: Role = Role.CLIENT
    notify: Notify = _no_notify
    cancel: Cancel = _no_cancel
    subscribe: Subscribe = _no_subscribe  # replaces the topics of server notifications it receives


@dataclass(frozen=True, slots=True)
class CallContext:
    """Handed to every handler: the caller, the request id and the server mode."""

    peer: Peer
    request_id: Any = None
    debug: bool = False
    extras: dict[str, Any] = field(default_factory=dict)

    @property
    def is_inspector(self) -> bool:
        return self.debug and self.peer.role is Role.INSPECTOR
