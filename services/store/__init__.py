"""SQLModel tables and the database they live in.

``Database`` and ``open_database`` load with SQLAlchemy on first use: :mod:`services.store.precheck`
is read before the server's ready line, without them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from services.store.database import Database, open_database


def __getattr__(name: str) -> Any:
    if name not in __all__:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from services.store import database

    return getattr(database, name)


__all__ = ["Database", "open_database"]
