"""What a handler knows about the call it serves, passed explicitly."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from ipc.outbound import ClientClosed

Notify = Callable[[str, dict[str, Any]], Awaitable[None]]
Cancel = Callable[[Any], bool]
Subscribe = Callable[[frozenset[str]], None]
# A server-to-client request: (method, params, timeout in s) -> the client's result.
Request = Callable[[str, dict[str, Any] | list[Any] | None, float], Awaitable[Any]]
Declare = Callable[[frozenset[str]], None]
# Registers a callback run once when the connection closes; returns a function that unregisters it.
OnClose = Callable[[Callable[[], None]], Callable[[], None]]
# Returns once the connection may hold one more reply (its output, and the server's, have room):
# True, or False once the connection is gone (its reply would be dropped unsent).
Room = Callable[[], Awaitable[bool]]


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


async def _no_request(method: str, params: dict[str, Any] | list[Any] | None, timeout: float) -> Any:
    raise ClientClosed()


def _no_declare(capabilities: frozenset[str]) -> None:
    return None


def _nothing() -> None:
    return None


def _no_on_close(callback: Callable[[], None]) -> Callable[[], None]:
    return _nothing


async def room_at_once() -> bool:
    """A :data:`Room` that never waits (no transport holds the replies)."""
    return True


@dataclass(frozen=True, slots=True)
class Peer:
    """One connected client: its identity and how to reach it."""

    connection_id: str
    role: Role = Role.CLIENT
    notify: Notify = _no_notify
    cancel: Cancel = _no_cancel
    subscribe: Subscribe = _no_subscribe  # replaces the topics of server notifications it receives
    # Asks the client and awaits its answer; raises an ipc.outbound.OutboundError.
    request: Request = _no_request
    declare: Declare = _no_declare  # replaces what this client says it can do (system:capabilities)
    on_close: OnClose = _no_on_close
    # Awaited between a handler's result and its reply's text: a result is cheap to hold (a document
    # read shares the text kept for it), the JSON of its reply is not, so it is made only with room.
    room: Room = room_at_once


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
