"""Knowledge records and their shared bounds."""

from __future__ import annotations

from datetime import datetime

from pydantic import TypeAdapter

from services.knowledge.records import Aliases, ConstraintRecord, distinct
from services.store.tables import ConstraintRow


def test_distinct_keeps_first_occurrences_in_order() -> None:
    """Each value once, where it first appeared."""
    assert distinct(["b", "a", "b", "c", "a"]) == ["b", "a", "c"]


def test_aliases_type_strips_then_deduplicates() -> None:
    """Aliases are stripped before duplicates are dropped."""
    assert TypeAdapter(Aliases).validate_python(["a ", " a", "b"]) == ["a", "b"]


def test_constraint_record_reads_a_row() -> None:
    """A record is read from a row's attributes, with UTC times."""
    row = ConstraintRow(id=3, project_id="p", kind="plot", text="t",
                        created_at=datetime(2026, 1, 1), updated_at=datetime(2026, 1, 1))
    record = ConstraintRecord.model_validate(row)
    assert (record.id, record.source, record.priority, record.version) == (3, "user", 0, 1)
    assert record.created_at.utcoffset() is not None
