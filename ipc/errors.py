"""Wire errors: the conditions only the protocol knows, plus every domain error.

There is one hierarchy, rooted at ``services.errors.StrataError`` (also
named ``RpcError`` here): each class knows its JSON-RPC ``code``, its stable
string ``data.code`` and a default message, and ``to_error`` gives the
``error`` member of a reply. The domain's conditions are defined in
``services.errors`` and re-exported here under the same names; this module
adds the JSON-RPC standard errors and the transport and framework block
(-32000..-32009). The allocation of the other blocks is in
``services.errors`` and docs/protocol.md.
"""

from __future__ import annotations

from services.errors import (
    Backpressure,
    BudgetConflict,
    ChatBudgetTooSmall,
    ChatMessageTooLong,
    ChatSessionNotFound,
    ChatStateForbidden,
    ConstraintsLimit,
    DocumentNotFound,
    InputTooLarge,
    InspectForbidden,
    InvalidParams,
    ProfileConflict,
    ProfileInvalid,
    ProfileNotFound,
    ProfileReadOnly,
    ProjectNotFound,
    ProjectPathInvalid,
    ProjectScopeViolation,
    RecordNotFound,
    RecordVersionConflict,
    ScopeViolation,
    SegmentsCoreOverbudget,
    SkillNotFound,
    StrataError,
)

RpcError = StrataError  # the base, under the name the protocol code uses

__all__ = [
    "Backpressure",
    "BatchTooLarge",
    "BudgetConflict",
    "ChatBudgetTooSmall",
    "ChatMessageTooLong",
    "ChatSessionNotFound",
    "ChatStateForbidden",
    "ConstraintsLimit",
    "DocumentNotFound",
    "Forbidden",
    "InputTooLarge",
    "InspectForbidden",
    "InternalError",
    "InvalidParams",
    "InvalidRequest",
    "MethodNotFound",
    "ParseError",
    "ProfileConflict",
    "ProfileInvalid",
    "ProfileNotFound",
    "ProfileReadOnly",
    "ProjectNotFound",
    "ProjectPathInvalid",
    "ProjectScopeViolation",
    "RecordNotFound",
    "RecordVersionConflict",
    "RequestCancelled",
    "ResultTooLarge",
    "RpcError",
    "ScopeViolation",
    "SegmentsCoreOverbudget",
    "ShuttingDown",
    "SkillNotFound",
    "StrataError",
    "TooManyRequests",
    "all_error_classes",
]


# --- JSON-RPC 2.0 standard errors (InvalidParams is in services.errors) ------


class ParseError(StrataError):
    code = -32700
    data_code = "PARSE_ERROR"
    message = "Parse error: the frame is not valid JSON"


class InvalidRequest(StrataError):
    code = -32600
    data_code = "INVALID_REQUEST"
    message = "Invalid Request"


class BatchTooLarge(InvalidRequest):
    data_code = "RPC_BATCH_TOO_LARGE"
    message = "Invalid Request: batch has too many entries"


class MethodNotFound(StrataError):
    code = -32601
    data_code = "METHOD_NOT_FOUND"
    message = "Method not found"


class InternalError(StrataError):
    """An unexpected failure; ``errorId`` links the reply to the server log."""

    code = -32603
    data_code = "INTERNAL"
    message = "Internal error"


class RequestCancelled(StrataError):
    """LSP's RequestCancelled: the client cancelled with ``$/cancelRequest``."""

    code = -32800
    data_code = "REQUEST_CANCELLED"
    message = "Request cancelled"


# --- Application errors: transport and framework (-32000..-32009) -----------


class TooManyRequests(StrataError):
    code = -32000
    data_code = "RPC_TOO_MANY_REQUESTS"
    message = "Too many requests in flight on this connection"


class ShuttingDown(StrataError):
    code = -32001
    data_code = "SERVER_SHUTTING_DOWN"
    message = "The server is shutting down"


class Forbidden(StrataError):
    code = -32002
    data_code = "RPC_FORBIDDEN"
    message = "This connection may not call this method"


class ResultTooLarge(StrataError):
    """A reply larger than one frame, or than the room left in its batch's frame; nothing of it was sent.

    data: ``size``, the reply's UTF-8 bytes as built, and ``limit``, the frame
    limit; in a batch also ``available``, the bytes that were left for it.
    """

    code = -32003
    data_code = "RPC_RESULT_TOO_LARGE"
    message = "The reply is larger than the frame limit and was not sent"


def all_error_classes() -> list[type[StrataError]]:
    """Every concrete error class (the base aside), for docs and tests that keep codes unique."""
    found: list[type[StrataError]] = []
    pending: list[type[StrataError]] = list(StrataError.__subclasses__())
    while pending:
        cls = pending.pop()
        found.append(cls)
        pending.extend(cls.__subclasses__())
    return sorted(found, key=lambda c: (-c.code, c.data_code))
