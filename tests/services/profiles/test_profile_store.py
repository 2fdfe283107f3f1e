"""The profile table: compact JSON text with a size limit, single-statement writes, the migration."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from sqlalchemy import inspect, text

from services.errors import InvalidInput, ProfileConflict, ProfileNotFound
from services.profiles import store
from services.projects import ProjectRecord
from services.store import Database, open_database
from services.store.precheck import SCHEMA_VERSION

DOC = {"schema": "strata.profile/1", "name": "notes", "description": "短", "sections": {}}


def test_encode_is_compact_utf8_json_and_keeps_the_order() -> None:
    """A document is stored as compact JSON, non-ASCII text unescaped, keys in the order sent."""
    encoded = store.encode(DOC)
    assert encoded == '{"schema":"strata.profile/1","name":"notes","description":"短","sections":{}}'
    assert store.StoredProfile.of("notes", encoded).document() == DOC


def test_encode_allows_exactly_the_limit_and_refuses_one_byte_more() -> None:
    """256 KiB of JSON is accepted; one byte more is INVALID_PARAMS naming the limit and the size."""
    base = len(json.dumps({"description": ""}, separators=(",", ":")))
    at_limit = {"description": "x" * (store.MAX_DOCUMENT_BYTES - base)}
    assert len(store.encode(at_limit).encode()) == store.MAX_DOCUMENT_BYTES
    with pytest.raises(InvalidInput) as raised:
        store.encode({"description": "x" * (store.MAX_DOCUMENT_BYTES - base + 1)})
    assert raised.value.fields == {"limit": 262_144, "size": 262_145}
    assert "256 KiB" in raised.value.text


def test_encode_refuses_what_json_cannot_hold() -> None:
    """NaN, a non-JSON value or a lone surrogate is INVALID_PARAMS, never stored as broken JSON."""
    for bad in ({"x": float("nan")}, {"x": object()}, {"x": "\ud800"}):
        with pytest.raises(InvalidInput):
            store.encode(bad)


def test_stored_profile_reads_description_and_extends() -> None:
    """The listing fields come from the document; anything but a string counts as absent."""
    stored = store.StoredProfile.of("a", json.dumps({"description": "d", "extends": "novel"}), 3)
    assert (stored.description, stored.extends, stored.version) == ("d", "novel", 3)
    odd = store.StoredProfile.of("b", json.dumps({"description": {"en": "d"}, "extends": 5}))
    assert (odd.description, odd.extends) == (None, None)


async def test_insert_decides_on_the_limit_and_the_name_in_sql(database: Database,
                                                               project: ProjectRecord) -> None:
    """insert_new adds a row only below the limit and when the name is free; explain_create says
    which: PROFILE_CONFLICT with the current version, or INVALID_PARAMS with the limit."""
    with database.session() as session:
        assert store.insert_new(session, project.id, "a", "{}", limit=2)
        assert not store.insert_new(session, project.id, "a", "{}", limit=2)
        with pytest.raises(ProfileConflict) as taken:
            store.explain_create(session, project.id, "a", 2)
        assert taken.value.fields == {"currentVersion": 1}
        assert store.insert_new(session, project.id, "b", "{}", limit=2)
        assert not store.insert_new(session, project.id, "c", "{}", limit=2)
        with pytest.raises(InvalidInput) as full:
            store.explain_create(session, project.id, "c", 2)
        assert full.value.fields == {"limit": 2}
        session.commit()
    with database.session() as session:
        assert list(store.load(session, project.id)) == ["a", "b"]


async def test_update_and_remove_apply_only_at_the_version(database: Database,
                                                           project: ProjectRecord) -> None:
    """update_at bumps the version only from the one named; remove honours a version too;
    explain_change tells a missing profile from a stale version."""
    with database.session() as session:
        store.insert_new(session, project.id, "a", "{}", limit=64)
        assert store.update_at(session, project.id, "a", '{"v":2}', 1)
        assert not store.update_at(session, project.id, "a", '{"v":3}', 1)
        with pytest.raises(ProfileConflict) as stale:
            store.explain_change(session, project.id, "a", 1)
        assert stale.value.fields == {"currentVersion": 2}
        assert not store.remove(session, project.id, "a", 1)
        assert store.remove(session, project.id, "a", 2)
        with pytest.raises(ProfileNotFound):
            store.explain_change(session, project.id, "a", 2)
        session.commit()


def test_a_version_3_database_gains_the_profile_table(tmp_path: Path) -> None:
    """Opening a database of schema 3 migrates it (step 4 adds the profile table)."""
    url = f"sqlite:///{tmp_path / 'strata.db'}"
    first = open_database(url)
    with first.engine.begin() as conn:
        conn.execute(text("DROP TABLE profile"))
        conn.execute(text("UPDATE strata_meta SET value = '3' WHERE key = 'schema_version'"))
    first.close()
    again = open_database(url)
    try:
        assert again.schema_version == SCHEMA_VERSION >= 4
        columns = {c["name"] for c in inspect(again.engine).get_columns("profile")}
        assert columns == {"project_id", "name", "document", "version", "created_at", "updated_at"}
    finally:
        again.close()
