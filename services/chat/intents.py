"""From the intent the model parsed to what the app should do (``chat:resolve``).

The model answers one of the chat-navigation profile's intents. An
``unsupported`` answer is turned into a clarifying question when the
conversation implies a target ("Do you want to open chapter 5?"), else into
"not supported yet" and what is; an intent that names a document or project is
resolved against the writer's real documents and projects, with the
candidates when several fit. Every reply is in the language the user writes in.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from services.chat.numerals import parse_number
from services.chat.resolve import (
    SUPPORTED_INTENTS,
    DocumentCandidate,
    Resolution,
    clarification,
    implied_target,
    not_supported,
    resolve_document,
    resolve_project,
)
from services.chat.targets import Language, Target, describe, find_target, messages_language
from services.chat.workspace import Workspace

Outcome = Literal["document", "project", "ambiguous", "not_found", "clarify", "unsupported", "search",
                  "create", "no_project"]
IntentName = Literal["open_project", "open_document", "search", "create_document", "unsupported"]


@dataclass(frozen=True, slots=True)
class Intent:
    """The model's parsed intent (fields it does not use are absent)."""

    intent: IntentName
    number: int | None = None
    name: str | None = None
    relative: Literal["next", "previous"] | None = None
    query: str | None = None


@dataclass(frozen=True, slots=True)
class Candidate:
    project_id: str
    document_id: str | None
    title: str | None
    score: float


@dataclass(frozen=True, slots=True)
class Resolved:
    """What to do; ``reply`` is what to tell the user when there is something to say (a question
    when it ends with one)."""

    outcome: Outcome
    reply: str | None = None
    project_id: str | None = None
    document_id: str | None = None
    title: str | None = None
    name: str | None = None
    query: str | None = None
    candidates: tuple[Candidate, ...] = ()
    supported_intents: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Conversation:
    """What the resolution may read of the session: its user messages (oldest first) and summary."""

    user_messages: Sequence[str]
    summary: str | None
    project_id: str | None

    @property
    def language(self) -> Language:
        recent = list(self.user_messages[-3:])
        return messages_language(recent, messages_language(list(self.user_messages)))


async def resolve_intent(intent: Intent, conversation: Conversation, workspace: Workspace,
                         current_document_id: str | None = None) -> Resolved:
    language = conversation.language
    if intent.intent == "unsupported":
        return _unsupported(conversation, language)
    if intent.intent == "search":
        query = intent.query or intent.name or ""
        return Resolved("search", project_id=conversation.project_id, query=query)
    if intent.intent == "create_document":
        return Resolved("create", project_id=conversation.project_id, name=intent.name)
    if intent.intent == "open_project":
        if not intent.name:
            return Resolved("not_found", reply=_NO_NAME[language])
        resolution = resolve_project(intent.name, await workspace.projects())
        return _decided(resolution, Target("open", "project", name=intent.name, language=language), None)
    project_id = conversation.project_id
    if project_id is None:
        return Resolved("no_project", reply=_NO_PROJECT[language])
    await workspace.require_project(project_id)
    target = _document_target(intent, language)
    if target is None:
        return Resolved("not_found", reply=_NO_NAME[language], project_id=project_id)
    documents = [DocumentCandidate(document_id, title) for document_id, title in
                 await workspace.documents(project_id)]
    resolution = resolve_document(target, documents, current_document_id)
    numbered = _numbered_name(target)
    if resolution.status == "none" and numbered is not None:
        # A name that spells a chapter's number ("第五章", "chapter five", "ch05") in another
        # script than the project's titles: it names that number.
        resolution = resolve_document(numbered, documents, current_document_id)
    return _decided(resolution, target, project_id)


def _numbered_name(target: Target) -> Target | None:
    """``target`` by the chapter number its name spells, when it spells one."""
    if target.number is not None or target.name is None:
        return None
    found = find_target(target.name)
    if found is None or found.number is None or found.name is not None or found.relative is not None:
        return None
    return Target("open", "chapter", number=found.number, language=target.language)


def _document_target(intent: Intent, language: Language) -> Target | None:
    number = intent.number
    name = (intent.name or "").strip() or None
    if number is None and name is not None:
        number = parse_number(name) if name.strip().isdigit() else None
    if number is None and name is None and intent.relative is None:
        return None
    kind: Literal["chapter", "document"] = "chapter" if number is not None else "document"
    return Target("open", kind, number=number, name=name, relative=intent.relative, language=language)


def _unsupported(conversation: Conversation, language: Language) -> Resolved:
    target = implied_target(conversation.user_messages, conversation.summary)
    if target is not None:
        return Resolved("clarify", reply=clarification(target, language))
    return Resolved("unsupported", reply=not_supported(language), supported_intents=SUPPORTED_INTENTS)


def _decided(resolution: Resolution, target: Target, project_id: str | None) -> Resolved:
    language = target.language
    project = target.kind == "project"
    if resolution.status == "none":
        return Resolved("not_found", reply=_NOT_FOUND[language].format(what=describe(target, language)),
                        project_id=project_id)
    if resolution.status == "match":
        match = resolution.matches[0]
        if project:
            return Resolved("project", project_id=match.document_id, name=match.title)
        return Resolved("document", project_id=project_id, document_id=match.document_id, title=match.title)
    candidates = tuple(
        Candidate(project_id=m.document_id if project else project_id or "",
                  document_id=None if project else m.document_id, title=m.title, score=round(m.score, 3))
        for m in resolution.matches)
    labels = [c.title or c.document_id or c.project_id for c in candidates]
    return Resolved("ambiguous", reply=_WHICH[language].format(options=_SEP[language].join(labels)),
                    project_id=project_id, candidates=candidates)


_NO_PROJECT = {"en": "Open a project first, then I can open its chapters.",
               "zh": "请先打开一个项目，然后我才能打开其中的章节。"}
_NO_NAME = {"en": "Which one do you want to open?", "zh": "你想打开哪一个？"}
_NOT_FOUND = {"en": "I could not find {what}.", "zh": "没有找到{what}。"}
_WHICH = {"en": "Which one do you mean: {options}?", "zh": "你指的是哪一个：{options}？"}
_SEP = {"en": ", ", "zh": "、"}
