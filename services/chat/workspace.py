"""What the chat needs to know of the writer's projects: that one exists, their names, document titles."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

# Bytes read from the start of each document to find its title.
TITLE_BYTES = 2048


class Workspace(Protocol):
    async def require_project(self, project_id: str) -> None:
        """Return if the project exists, else raise PROJECT_NOT_FOUND."""
        ...

    async def projects(self) -> Sequence[tuple[str, str]]:
        """Every project's id and name."""
        ...

    async def documents(self, project_id: str) -> Sequence[tuple[str, str | None]]:
        """Every document's id and title (its first heading or first line; None if empty)."""
        ...


def title_of(head: str) -> str | None:
    """The first non-empty line, without Markdown heading marks; None for an empty document."""
    for line in head.splitlines():
        text = line.strip().lstrip("#").strip()
        if text:
            return text[:200]
    return None


@dataclass(frozen=True)
class ProjectWorkspace:
    """A :class:`Workspace` over the project service and the document store."""

    get_project: Callable[[str], Awaitable[Any]]
    list_projects: Callable[[], Awaitable[Sequence[Any]]]
    document_heads: Callable[[str, int], Awaitable[Sequence[tuple[str, str]]]]

    async def require_project(self, project_id: str) -> None:
        await self.get_project(project_id)

    async def projects(self) -> Sequence[tuple[str, str]]:
        return [(p.project_id, p.name) for p in await self.list_projects()]

    async def documents(self, project_id: str) -> Sequence[tuple[str, str | None]]:
        return [(document_id, title_of(head)) for document_id, head in
                await self.document_heads(project_id, TITLE_BYTES)]
