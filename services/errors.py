"""Domain errors: what went wrong, as a stable string code plus safe fields.

Services raise these; ``ipc.errors`` maps each code to its JSON-RPC number.
Messages and fields must never hold the writer's text or file paths.
"""

from __future__ import annotations

from typing import Any, ClassVar


class StrataError(Exception):
    code: ClassVar[str] = "INTERNAL"
    message: ClassVar[str] = "Internal error"

    def __init__(self, message: str | None = None, **fields: Any) -> None:
        self.text = message or self.message
        self.fields = fields
        super().__init__(self.text)


class InvalidInput(StrataError):
    """Input that passed the schema but not the domain's rules (JSON-RPC -32602)."""

    code = "INVALID_PARAMS"
    message = "Invalid params"


class ProjectNotFound(StrataError):
    code = "PROJECT_NOT_FOUND"
    message = "No project with this id"


class DocumentNotFound(StrataError):
    code = "DOCUMENT_NOT_FOUND"
    message = "No document with this id in the project"


class ProjectScopeViolation(StrataError):
    code = "PROJECT_SCOPE_VIOLATION"
    message = "The document id leaves the project folder"


class ProjectPathInvalid(StrataError):
    code = "PROJECT_PATH_INVALID"
    message = "The project path is not a readable folder"


class RecordNotFound(StrataError):
    code = "RECORD_NOT_FOUND"
    message = "No record with this id in the project"


class RecordVersionConflict(StrataError):
    code = "RECORD_VERSION_CONFLICT"
    message = "The record was changed since this version was read"


class ConstraintsLimit(StrataError):
    code = "CONSTRAINTS_LIMIT"
    message = "The project has the maximum number of constraints"


class SkillNotFound(StrataError):
    code = "SKILL_NOT_FOUND"
    message = "No skill with this id"


class BudgetConflict(StrataError):
    code = "CONTEXT_BUDGET_CONFLICT"
    message = "The budget profile was changed since this version was read"


class InputTooLarge(StrataError):
    code = "CONTEXT_INPUT_TOO_LARGE"
    message = "The context input is too large; narrow the retrieval scope or shorten the instruction"


class ScopeViolation(StrataError):
    code = "CONTEXT_SCOPE_VIOLATION"
    message = "Context from another project was refused"


class InspectForbidden(StrataError):
    code = "CONTEXT_INSPECT_FORBIDDEN"
    message = "context:inspect needs debug mode and the inspector token"


class Backpressure(StrataError):
    code = "CONTEXT_BACKPRESSURE"
    message = "Too many assemblies for this document; retry shortly"


class ProfileNotFound(StrataError):
    code = "PROFILE_NOT_FOUND"
    message = "No profile with this name"


class ProfileInvalid(StrataError):
    code = "PROFILE_INVALID"
    message = "The profile is not valid"


class ProfileConflict(StrataError):
    code = "PROFILE_CONFLICT"
    message = "The profile was changed since this version was read"


class ProfileReadOnly(StrataError):
    code = "PROFILE_READ_ONLY"
    message = "Built-in profiles cannot be changed; save a copy under another name"
