"""Shared fakes of the chat's tests: a workspace of projects and documents, completers."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, field

from services.errors import ProjectNotFound
from services.summaries.seam import CompletionRequest, CompletionUnavailable


@dataclass
class FakeWorkspace:
    projects_: dict[str, str] = field(default_factory=dict)  # id -> name
    documents_: dict[str, list[tuple[str, str | None]]] = field(default_factory=dict)

    async def require_project(self, project_id: str) -> None:
        if project_id not in self.projects_:
            raise ProjectNotFound()

    async def projects(self) -> Sequence[tuple[str, str]]:
        return list(self.projects_.items())

    async def documents(self, project_id: str) -> Sequence[tuple[str, str | None]]:
        return self.documents_.get(project_id, [])


@dataclass
class ScriptedCompleter:
    """Answers with ``answer`` once ``gate`` is set (set at once by default); records each request."""

    answer: str = "User is opening chapters."
    fail: str | None = None
    gate: asyncio.Event = field(default_factory=asyncio.Event)
    seen: list[CompletionRequest] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.gate.set()

    async def complete(self, request: CompletionRequest) -> str:
        self.seen.append(request)
        await self.gate.wait()
        if self.fail is not None:
            raise CompletionUnavailable(self.fail)
        return self.answer
