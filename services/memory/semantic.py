"""Semantic memory: preferences learned from the writer ("action scenes: short sentences").

A rule is identified by its id, or else by its exact text within the project,
so learning the same rule twice updates it instead of adding a copy.
"""

from __future__ import annotations

import asyncio
from typing import Any

import structlog
from sqlalchemy import exists
from sqlmodel import Session, col, select

from services.errors import RecordNotFound
from services.memory.records import Category, Confidence, RuleText, SemanticRuleRecord
from services.projects.inputs import Input, invalid, validated
from services.projects.scope import (
    delete_scoped,
    explain_missed_update,
    insert_where,
    load_scoped,
    require_project,
    scoped,
    table_of,
    update_where,
)
from services.store.database import Database
from services.store.tables import SemanticRuleRow

_log = structlog.get_logger("memory")
_TABLE = "semantic_rules"


class RulePatch(Input):
    """Fields to set; None keeps the current value (or the default, for a new rule)."""

    text: RuleText | None = None
    category: Category | None = None
    confidence: Confidence | None = None
    confirmed: bool | None = None


class SemanticMemoryService:
    """List, upsert and delete a project's semantic rules."""

    def __init__(self, database: Database) -> None:
        self._db = database
        self._snapshots = database.snapshots

    async def list(self, project_id: str, *, confirmed_only: bool = False) -> list[SemanticRuleRecord]:
        """The rules, most confident first (the order the Settings layer keeps them in).

        Read once and then kept until the next write to the project's rules.
        """
        return list(await self._snapshots.read(_TABLE, project_id, confirmed_only,
                                               lambda: self._list(project_id, confirmed_only)))

    async def upsert(self, project_id: str, *, rule_id: int | None = None, version: int | None = None,
                     **fields: Any) -> tuple[SemanticRuleRecord, bool]:
        """Update rule ``rule_id``, or else the rule with this exact text, or create it.

        Fields: text, category, confidence (0..1), confirmed. Returns the rule
        and whether it was created. ``version`` (with an id) makes the update
        conditional.
        """
        patch = validated(RulePatch, fields)
        if rule_id is None and patch.text is None:
            raise invalid("text", "is required without an id")
        if version is not None and rule_id is None:
            raise invalid("version", "applies only to an update by id")
        record, created = await asyncio.to_thread(
            self._snapshots.write, _TABLE, project_id,
            lambda: self._upsert(project_id, patch, rule_id, version))
        _log.info("memory.rule_upserted", project_id=project_id, id=record.id, created=created,
                  version=record.version, confirmed=record.confirmed)
        return record, created

    async def delete(self, project_id: str, rule_id: int) -> None:
        await asyncio.to_thread(self._snapshots.write, _TABLE, project_id,
                                lambda: self._delete(project_id, rule_id))
        _log.info("memory.rule_deleted", project_id=project_id, id=rule_id)

    def _list(self, project_id: str, confirmed_only: bool) -> tuple[SemanticRuleRecord, ...]:
        with self._db.session() as session:
            require_project(session, project_id)
            query = select(SemanticRuleRow).where(SemanticRuleRow.project_id == project_id)
            if confirmed_only:
                query = query.where(col(SemanticRuleRow.confirmed).is_(True))
            rows = session.exec(query.order_by(col(SemanticRuleRow.confidence).desc(),
                                               col(SemanticRuleRow.id)))
            return tuple(SemanticRuleRecord.model_validate(row) for row in rows)

    def _upsert(self, project_id: str, patch: RulePatch, rule_id: int | None,
                version: int | None) -> tuple[SemanticRuleRecord, bool]:
        with self._db.session() as session:
            require_project(session, project_id)
            changes: dict[str, Any] = patch.model_dump(exclude_none=True)
            if rule_id is not None:
                found, created = self._update_by_id(session, project_id, changes, rule_id, version), False
            else:
                found, created = self._upsert_by_text(session, project_id, changes)
            record = SemanticRuleRecord.model_validate(
                load_scoped(session, SemanticRuleRow, project_id, found))
            session.commit()
            return record, created

    @staticmethod
    def _update_by_id(session: Session, project_id: str, changes: dict[str, Any], rule_id: int,
                      version: int | None) -> int:
        if update_where(session, SemanticRuleRow, changes,
                        *scoped(SemanticRuleRow, project_id, rule_id, version)) is None:
            explain_missed_update(session, SemanticRuleRow, project_id, rule_id, version)
        return rule_id

    @staticmethod
    def _upsert_by_text(session: Session, project_id: str,
                        changes: dict[str, Any]) -> tuple[int, bool]:
        table = table_of(SemanticRuleRow)
        same_text = [table.c.project_id == project_id, table.c.text == changes["text"]]
        for _attempt in range(2):  # a concurrent delete between the two statements: try again
            row = SemanticRuleRow(project_id=project_id, **changes)
            new_id = insert_where(session, row, ~exists().where(*same_text))
            if new_id is not None:
                return new_id, True
            updated = update_where(session, SemanticRuleRow, changes, *same_text)
            if updated is not None:
                return int(updated), False
        raise RecordNotFound()

    def _delete(self, project_id: str, rule_id: int) -> None:
        with self._db.session() as session:
            require_project(session, project_id)
            delete_scoped(session, SemanticRuleRow, project_id, rule_id)
            session.commit()
