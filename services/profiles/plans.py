"""Plans by profile name: the built-in profiles, shipped as JSON files inside the package."""

from __future__ import annotations

import json
from collections.abc import Mapping
from importlib import resources
from typing import Any, Protocol

from services.context.plan import Plan
from services.errors import ProfileNotFound
from services.profiles.catalog import DEFAULT_CATALOG, Catalog
from services.profiles.resolve import Resolved, resolve

DEFAULT_PROFILE_NAME = "novel"


class PlanSource(Protocol):
    async def plan(self, project_id: str, name: str) -> Plan:
        """The plan of profile ``name`` as project ``project_id`` sees it (PROFILE_NOT_FOUND if none)."""
        ...


def built_in_documents() -> dict[str, dict[str, Any]]:
    """Every built-in profile document, by name: the default first, then by name."""
    found: dict[str, dict[str, Any]] = {}
    for entry in sorted(
        resources.files("services.profiles").joinpath("builtin").iterdir(), key=lambda e: e.name
    ):
        if entry.name.endswith(".json"):
            document = json.loads(entry.read_text(encoding="utf-8"))
            found[document["name"]] = document
    # The default first, then by name.
    return dict(sorted(found.items(), key=lambda kv: (kv[0] != DEFAULT_PROFILE_NAME, kv[0])))


class BuiltInPlans:
    """The built-in profiles, resolved once."""

    def __init__(self, catalog: Catalog = DEFAULT_CATALOG) -> None:
        self.documents: Mapping[str, dict[str, Any]] = built_in_documents()
        self.catalog = catalog
        self.resolved: dict[str, Resolved] = {
            name: resolve(document, self.documents.get, catalog) for name, document in self.documents.items()
        }

    async def plan(self, project_id: str, name: str) -> Plan:
        found = self.resolved.get(name)
        if found is None:
            raise ProfileNotFound()
        return found.plan
