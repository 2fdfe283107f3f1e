"""Records: frozen, read from rows by attribute, times always in UTC."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest
from pydantic import ValidationError

from services.projects.records import ProjectRecord, as_utc
from services.store.tables import ProjectRow


def test_naive_times_are_read_as_utc_and_aware_ones_converted() -> None:
    """SQLite drops the zone of a UTC time; records put it back, and convert other zones."""
    naive = datetime(2026, 1, 2, 3, 4, 5)
    assert as_utc(naive) == naive.replace(tzinfo=UTC)
    east = datetime(2026, 1, 2, 11, 4, 5, tzinfo=timezone(timedelta(hours=8)))
    assert as_utc(east) == datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)


def test_records_read_rows_and_are_frozen() -> None:
    """A record is built from a row's attributes and cannot be changed afterwards."""
    row = ProjectRow(id="abc", path="/p", name="n", created_at=datetime(2026, 1, 1))
    record = ProjectRecord.model_validate(row)
    assert record.created_at.tzinfo is UTC
    with pytest.raises(ValidationError):
        record.name = "other"  # type: ignore[misc]
