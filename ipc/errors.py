"""Wire errors: one class per JSON-RPC error condition.

Each class knows its JSON-RPC ``code``, its stable string ``data.code`` and a
default message. Messages are written for people and never carry exception
text, stack traces, file paths or the writer's text; extra fields go in
``data`` and must be equally safe.

Application codes live in -32000..-32099 and are allocated in blocks so that
later channels can add codes without renumbering (see docs/protocol.md):

* -32000..-32009  transport and framework
* -32010..-32019  projects and documents
* -32020..-32039  context engine
* -32040..-32049  retrieval
"""

from __future__ import annotations

from typing import Any, ClassVar


class RpcError(Exception):
    """Base class of every error that is allowed to reach a client."""

    code: ClassVar[int] = -32603
    data_code: ClassVar[str] = "INTERNAL"
    message: ClassVar[str] = "Internal error"

    def __init__(self, message: str | None = None, **fields: Any) -> None:
        self.text = message or self.message
        self.fields = fields
        super().__init__(self.text)

    def to_error(self) -> dict[str, Any]:
        """The ``error`` member of a JSON-RPC response."""
        return {
            "code": self.code,
            "message": self.text,
            "data": {"code": self.data_code, **self.fields},
        }


# --- JSON-RPC 2.0 standard errors -------------------------------------------


class ParseError(RpcError):
    code = -32700
    data_code = "PARSE_ERROR"
    message = "Parse error: the frame is not valid JSON"


class InvalidRequest(RpcError):
    code = -32600
    data_code = "INVALID_REQUEST"
    message = "Invalid Request"


class BatchTooLarge(InvalidRequest):
    data_code = "RPC_BATCH_TOO_LARGE"
    message = "Invalid Request: batch has too many entries"


class MethodNotFound(RpcError):
    code = -32601
    data_code = "METHOD_NOT_FOUND"
    message = "Method not found"


class InvalidParams(RpcError):
    code = -32602
    data_code = "INVALID_PARAMS"
    message = "Invalid params"


class InternalError(RpcError):
    """An unexpected failure; ``errorId`` links the reply to the server log."""

    code = -32603
    data_code = "INTERNAL"
    message = "Internal error"


class RequestCancelled(RpcError):
    """LSP's RequestCancelled: the client cancelled with ``$/cancelRequest``."""

    code = -32800
    data_code = "REQUEST_CANCELLED"
    message = "Request cancelled"


# --- Application errors: transport and framework (-32000..-32009) -----------


class TooManyRequests(RpcError):
    code = -32000
    data_code = "RPC_TOO_MANY_REQUESTS"
    message = "Too many requests in flight on this connection"


class ShuttingDown(RpcError):
    code = -32001
    data_code = "SERVER_SHUTTING_DOWN"
    message = "The server is shutting down"


class Forbidden(RpcError):
    code = -32002
    data_code = "RPC_FORBIDDEN"
    message = "This connection may not call this method"


# --- Application errors: projects and documents (-32010..-32019) -------------


class ProjectNotFound(RpcError):
    code = -32010
    data_code = "PROJECT_NOT_FOUND"
    message = "No project with this id"


class DocumentNotFound(RpcError):
    code = -32011
    data_code = "DOCUMENT_NOT_FOUND"
    message = "No document with this id in the project"


class ProjectScopeViolation(RpcError):
    code = -32012
    data_code = "PROJECT_SCOPE_VIOLATION"
    message = "The document id leaves the project folder"


class ProjectPathInvalid(RpcError):
    code = -32013
    data_code = "PROJECT_PATH_INVALID"
    message = "The project path is not a readable folder"


class RecordNotFound(RpcError):
    code = -32014
    data_code = "RECORD_NOT_FOUND"
    message = "No record with this id in the project"


class RecordVersionConflict(RpcError):
    code = -32015
    data_code = "RECORD_VERSION_CONFLICT"
    message = "The record was changed since this version was read"


class ConstraintsLimit(RpcError):
    code = -32016
    data_code = "CONSTRAINTS_LIMIT"
    message = "The project has the maximum number of constraints"


# --- Application errors: context engine (-32020..-32039) ---------------------


class Backpressure(RpcError):
    code = -32020
    data_code = "CONTEXT_BACKPRESSURE"
    message = "Too many assemblies for this document; retry shortly"


class BudgetConflict(RpcError):
    code = -32021
    data_code = "CONTEXT_BUDGET_CONFLICT"
    message = "The budget profile was changed since this version was read"


class InputTooLarge(RpcError):
    code = -32022
    data_code = "CONTEXT_INPUT_TOO_LARGE"
    message = "The context input is too large; narrow the retrieval scope or shorten the instruction"


class ScopeViolation(RpcError):
    code = -32023
    data_code = "CONTEXT_SCOPE_VIOLATION"
    message = "Context from another project was refused"


class InspectForbidden(RpcError):
    code = -32024
    data_code = "CONTEXT_INSPECT_FORBIDDEN"
    message = "context:inspect needs debug mode and the inspector token"


class SkillNotFound(RpcError):
    code = -32025
    data_code = "SKILL_NOT_FOUND"
    message = "No skill with this id"


def from_domain(code: str, text: str, fields: dict[str, Any]) -> RpcError | None:
    """The wire error for a domain error's string code; None if it has none (treat as internal)."""
    if code == InternalError.data_code:
        return None
    for cls in all_error_classes():
        if cls.data_code == code:
            return cls(text, **fields)
    return None


def all_error_classes() -> list[type[RpcError]]:
    """Every concrete wire error, for docs and tests that keep codes unique."""
    found: list[type[RpcError]] = []
    pending: list[type[RpcError]] = list(RpcError.__subclasses__())
    while pending:
        cls = pending.pop()
        found.append(cls)
        pending.extend(cls.__subclasses__())
    return sorted(found, key=lambda c: (-c.code, c.data_code))


# --- Application errors: profiles (-32050..-32059) ---------------------------


class ProfileNotFound(RpcError):
    code = -32050
    data_code = "PROFILE_NOT_FOUND"
    message = "No profile with this name"


class ProfileInvalid(RpcError):
    code = -32051
    data_code = "PROFILE_INVALID"
    message = "The profile is not valid"


class ProfileConflict(RpcError):
    code = -32052
    data_code = "PROFILE_CONFLICT"
    message = "The profile was changed since this version was read"


class ProfileReadOnly(RpcError):
    code = -32053
    data_code = "PROFILE_READ_ONLY"
    message = "Built-in profiles cannot be changed; save a copy under another name"
