"""Why a server-to-client request has no result: the exceptions of ``Session.request``.

Each names a condition and carries nothing the client wrote: a client's error
reply keeps only its numeric code, never its message or data.
"""

from __future__ import annotations


class OutboundError(Exception):
    """A server-to-client request gave no result; ``reason`` names why."""

    reason = "error"


class ClientRequestError(OutboundError):
    """The client answered with an error; only its code is kept (None if it was not an integer)."""

    reason = "error"

    def __init__(self, code: int | None) -> None:
        super().__init__(f"the client answered with error {code}")
        self.code = code


class ClientTimeout(OutboundError, TimeoutError):
    """No answer within the request's timeout."""

    reason = "timeout"

    def __init__(self, timeout: float) -> None:
        super().__init__(f"no answer within {timeout:g} s")
        self.timeout = timeout


class ClientClosed(OutboundError):
    """The connection closed, or began closing, before an answer came."""

    reason = "closed"

    def __init__(self) -> None:
        super().__init__("the connection is closed")


class ClientBusy(OutboundError):
    """Refused before sending: too many requests already wait on this connection, or it lags."""

    reason = "busy"

    def __init__(self, why: str) -> None:
        super().__init__(f"not sent: {why}")
        self.why = why
