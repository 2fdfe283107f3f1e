"""SQLModel tables and the database they live in."""

from services.store.database import Database, open_database

__all__ = ["Database", "open_database"]
