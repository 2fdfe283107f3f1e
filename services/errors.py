"""Strata's errors: one class per condition a client can be told about.

Each class knows its JSON-RPC ``code`` (a number), its stable string
``data_code`` (``error.data.code`` on the wire) and a default ``message``;
the keyword fields given when it is raised become the other ``data`` fields.
Services raise these and the dispatcher sends them as they are, so there is
one hierarchy and no mapping table. Conditions that only the protocol knows
(parse errors, cancellation, connection limits) are subclasses of the same
base in ``ipc.errors``.

Messages are written for people and never carry exception text, stack
traces, file paths or the writer's text; fields must be equally safe.

Application codes live in -32000..-32099 and are allocated in blocks so that
later channels can add codes without renumbering (see docs/protocol.md):

* -32000..-32009  transport and framework (``ipc.errors``)
* -32010..-32019  projects and documents
* -32020..-32039  context engine
* -32040..-32049  retrieval
* -32050..-32059  profiles
* -32060..-32069  segments
* -32070..-32079  chat
* -32080..-32089  character chat and typed memory
* -32090..-32099  reading companion
"""

from __future__ import annotations

from typing import Any, ClassVar

# The JSON-RPC 2.0 codes and LSP's RequestCancelled; everything else sits in a block.
STANDARD_CODES: frozenset[int] = frozenset({-32700, -32600, -32601, -32602, -32603, -32800})

# (first, last, what) of each allocated block of application codes.
CODE_BLOCKS: tuple[tuple[int, int, str], ...] = (
    (-32000, -32009, "transport and framework"),
    (-32010, -32019, "projects and documents"),
    (-32020, -32039, "context engine"),
    (-32040, -32049, "retrieval"),
    (-32050, -32059, "profiles"),
    (-32060, -32069, "segments"),
    (-32070, -32079, "chat"),
    (-32080, -32089, "character chat and typed memory"),
    (-32090, -32099, "reading companion"),
)


class StrataError(Exception):
    """Base of every error allowed to reach a client.

    The base itself names no condition: raised as is, it is answered as
    ``INTERNAL`` with an error id, like any unexpected exception.
    """

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


# --- JSON-RPC 2.0 standard errors that services raise ------------------------


class InvalidParams(StrataError):
    """Params that do not fit the method, or break a rule the schema cannot express.

    data: ``errors`` (``[{loc, type, msg}]``, never the value sent), or
    ``expected`` and ``got`` for too many positional params, or the fields of
    the rule that was broken.
    """

    code = -32602
    data_code = "INVALID_PARAMS"
    message = "Invalid params"


InvalidInput = InvalidParams  # the name services use for input that breaks a domain rule


# --- Projects and documents (-32010..-32019) ---------------------------------


class ProjectNotFound(StrataError):
    code = -32010
    data_code = "PROJECT_NOT_FOUND"
    message = "No project with this id"


class DocumentNotFound(StrataError):
    code = -32011
    data_code = "DOCUMENT_NOT_FOUND"
    message = "No document with this id in the project"


class ProjectScopeViolation(StrataError):
    code = -32012
    data_code = "PROJECT_SCOPE_VIOLATION"
    message = "The document id leaves the project folder"


class ProjectPathInvalid(StrataError):
    code = -32013
    data_code = "PROJECT_PATH_INVALID"
    message = "The project path is not a readable folder"


class RecordNotFound(StrataError):
    code = -32014
    data_code = "RECORD_NOT_FOUND"
    message = "No record with this id in the project"


class RecordVersionConflict(StrataError):
    """data: ``currentVersion``."""

    code = -32015
    data_code = "RECORD_VERSION_CONFLICT"
    message = "The record was changed since this version was read"


class ConstraintsLimit(StrataError):
    """data: ``limit``."""

    code = -32016
    data_code = "CONSTRAINTS_LIMIT"
    message = "The project has the maximum number of constraints"


class ProjectPathForbidden(StrataError):
    """data: ``reason``: ``root``, ``data_dir``, ``system``, ``other_user`` or ``not_allowed``.

    The folder exists or not, it is refused the same way, and the path is never repeated.
    """

    code = -32017
    data_code = "PROJECT_PATH_FORBIDDEN"
    message = "This folder cannot be a project"


# --- Context engine (-32020..-32039) -----------------------------------------


class Backpressure(StrataError):
    """data: ``retryAfterMs``, ``limit``, ``queue``."""

    code = -32020
    data_code = "CONTEXT_BACKPRESSURE"
    message = "Too many assemblies for this document; retry shortly"


class BudgetConflict(StrataError):
    """data: ``currentVersion``."""

    code = -32021
    data_code = "CONTEXT_BUDGET_CONFLICT"
    message = "The budget profile was changed since this version was read"


class InputTooLarge(StrataError):
    """data: ``limit`` and ``tokens``, or ``total``."""

    code = -32022
    data_code = "CONTEXT_INPUT_TOO_LARGE"
    message = "The context input is too large; narrow the retrieval scope or shorten the instruction"


class ScopeViolation(StrataError):
    """data: ``layer``, ``itemId``."""

    code = -32023
    data_code = "CONTEXT_SCOPE_VIOLATION"
    message = "Context from another project was refused"


class InspectForbidden(StrataError):
    code = -32024
    data_code = "CONTEXT_INSPECT_FORBIDDEN"
    message = "context:inspect needs debug mode and the inspector token"


class SkillNotFound(StrataError):
    """data: ``known``."""

    code = -32025
    data_code = "SKILL_NOT_FOUND"
    message = "No skill with this id"


# --- Profiles (-32050..-32059) -----------------------------------------------


class ProfileNotFound(StrataError):
    code = -32050
    data_code = "PROFILE_NOT_FOUND"
    message = "No profile with this name"


class ProfileInvalid(StrataError):
    """data: ``problems``, ``[{"path": JSON pointer into the profile, "message": ...}]``."""

    code = -32051
    data_code = "PROFILE_INVALID"
    message = "The profile is not valid"


class ProfileConflict(StrataError):
    """data: ``currentVersion``."""

    code = -32052
    data_code = "PROFILE_CONFLICT"
    message = "The profile was changed since this version was read"


class ProfileReadOnly(StrataError):
    code = -32053
    data_code = "PROFILE_READ_ONLY"
    message = "Built-in profiles cannot be changed; save a copy under another name"


# --- Segments (-32060..-32069) -----------------------------------------------


class SegmentsCoreOverbudget(StrataError):
    """data: ``coreTokens`` (core and ruleset blocks, counted exactly) and ``tokenBudget``."""

    code = -32060
    data_code = "SEGMENTS_CORE_OVERBUDGET"
    message = "The core and ruleset segments alone exceed the token budget; they are never dropped"


# --- Chat (-32070..-32079) ---------------------------------------------------


class ChatSessionNotFound(StrataError):
    code = -32070
    data_code = "CHAT_SESSION_NOT_FOUND"
    message = "No chat session with this id (it expired, was never made, or the server restarted)"


class ChatMessageTooLong(StrataError):
    """data: ``length`` and ``limit`` (characters)."""

    code = -32071
    data_code = "CHAT_MESSAGE_TOO_LONG"
    message = "The chat message is too long"


class ChatStateForbidden(StrataError):
    code = -32072
    data_code = "CHAT_STATE_FORBIDDEN"
    message = "chat:state is available in debug mode only"


class ChatBudgetTooSmall(StrataError):
    """data: ``tokenBudget`` and, when known, ``fixedTokens`` (instructions and current message)."""

    code = -32073
    data_code = "CHAT_BUDGET_TOO_SMALL"
    message = "The token budget cannot hold the instructions and the current message"


# --- Character chat and typed memory (-32080..-32089) -------------------------


class ConversationNotFound(StrataError):
    code = -32080
    data_code = "CONVERSATION_NOT_FOUND"
    message = "No conversation with this id in this project"


class CharacterNotFound(StrataError):
    """data: ``characterId``: the id that names no character entity of the project."""

    code = -32081
    data_code = "CHARACTER_NOT_FOUND"
    message = "No character entity with this id in the project"


class MemoryNotFound(StrataError):
    code = -32082
    data_code = "MEMORY_NOT_FOUND"
    message = "No typed memory with this id in this project"


class ConversationFull(StrataError):
    """data: ``limit``: the most messages a conversation holds."""

    code = -32083
    data_code = "CONVERSATION_FULL"
    message = "The conversation holds the most messages it may: start a new one"


# --- Reading companion (-32090..-32099) ----------------------------------------


class ReadingSummaryInvalid(StrataError):
    """data: ``path`` (JSON pointer of the first problem) and ``reason``; never the value."""

    code = -32090
    data_code = "READING_SUMMARY_INVALID"
    message = "The summary does not follow the summary schema"


class ReadingSummaryTooLong(StrataError):
    """data: ``path``, ``tokens`` and ``limit``."""

    code = -32091
    data_code = "READING_SUMMARY_TOO_LONG"
    message = "The summary is over its level's token limit"


class ReadingSpoiler(StrataError):
    """data: ``path`` of the cited page, ``page`` and ``allowed`` ([first, last])."""

    code = -32092
    data_code = "READING_SPOILER"
    message = "The summary cites a page outside the unit it summarises"


class ReadingUnitNotFound(StrataError):
    code = -32093
    data_code = "READING_UNIT_NOT_FOUND"
    message = "No paragraph, page or chapter of this name in the book as it is now"


class ReadingNoCompleter(StrataError):
    """``reading:summaries:run`` with no connected client that declared ``completions``."""

    code = -32094
    data_code = "READING_NO_COMPLETER"
    message = "No connected client runs completions: declare them with system:capabilities first"


class ReadingWindowBreach(StrataError):
    """data: ``part`` (the context part's id), ``pages`` ([first, last]) and ``allowed``. The
    answer prompt would have drawn on a page outside the reader's window; it is withheld."""

    code = -32095
    data_code = "READING_WINDOW_BREACH"
    message = "The answer prompt would draw on pages outside the reading window; it was withheld"


class ReadingRunBusy(StrataError):
    """A roll-up of this project is already running; it must end (or be cancelled) first."""

    code = -32096
    data_code = "READING_RUN_BUSY"
    message = "A roll-up of this project's summaries is already running"
