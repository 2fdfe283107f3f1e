"""Episodic memory: past interactions (instruction and the output the writer accepted).

The Retrieved layer draws on recent episodes as examples, so listing is
newest first with a bounded limit.
"""

from __future__ import annotations

import asyncio

import structlog
from sqlmodel import col, select

from services.memory.records import (
    DEFAULT_EPISODES_LISTED,
    EpisodeLimit,
    EpisodeRecord,
    Instruction,
    Output,
)
from services.projects.document_ids import document_segments
from services.projects.inputs import Input, SkillId, validated
from services.projects.scope import delete_scoped, load_scoped, require_project
from services.store.database import Database
from services.store.tables import EpisodicMemoryRow

_log = structlog.get_logger("memory")
_TABLE = "episodes"


class EpisodeDraft(Input):
    instruction: Instruction = ""
    output: Output
    document_id: str | None = None
    skill_id: SkillId | None = None


class EpisodeQuery(Input):
    limit: EpisodeLimit = DEFAULT_EPISODES_LISTED
    document_id: str | None = None
    skill_id: SkillId | None = None


class EpisodicMemoryService:
    """Add, list and delete a project's episodes."""

    def __init__(self, database: Database) -> None:
        self._db = database
        self._snapshots = database.snapshots

    async def add(self, project_id: str, *, output: str, instruction: str = "",
                  document_id: str | None = None, skill_id: str | None = None) -> EpisodeRecord:
        """Record one accepted output and the instruction that produced it."""
        draft = validated(EpisodeDraft, {"instruction": instruction, "output": output,
                                         "document_id": document_id, "skill_id": skill_id})
        if draft.document_id is not None:
            document_segments(draft.document_id)  # the same ids documents use, nothing else
        record = await asyncio.to_thread(self._snapshots.write, _TABLE, project_id,
                                         lambda: self._add(project_id, draft))
        _log.info("memory.episode_added", project_id=project_id, id=record.id,
                  skill_id=record.skill_id, chars=len(record.output))
        return record

    async def list(self, project_id: str, *, limit: int = DEFAULT_EPISODES_LISTED,
                   document_id: str | None = None, skill_id: str | None = None) -> list[EpisodeRecord]:
        """The newest ``limit`` episodes, newest first, optionally of one document or skill.

        Read once and then kept until the next write to the project's episodes.
        """
        query = validated(EpisodeQuery, {"limit": limit, "document_id": document_id,
                                         "skill_id": skill_id})
        key = (query.limit, query.document_id, query.skill_id)
        return list(await self._snapshots.read(_TABLE, project_id, key,
                                               lambda: self._list(project_id, query)))

    async def delete(self, project_id: str, episode_id: int) -> None:
        await asyncio.to_thread(self._snapshots.write, _TABLE, project_id,
                                lambda: self._delete(project_id, episode_id))
        _log.info("memory.episode_deleted", project_id=project_id, id=episode_id)

    def _add(self, project_id: str, draft: EpisodeDraft) -> EpisodeRecord:
        with self._db.session() as session:
            require_project(session, project_id)
            row = EpisodicMemoryRow(project_id=project_id, **draft.model_dump())
            session.add(row)
            session.flush()
            assert row.id is not None  # set by the flush
            record = EpisodeRecord.model_validate(load_scoped(session, EpisodicMemoryRow,
                                                              project_id, row.id))
            session.commit()
            return record

    def _list(self, project_id: str, query: EpisodeQuery) -> tuple[EpisodeRecord, ...]:
        with self._db.session() as session:
            require_project(session, project_id)
            select_rows = select(EpisodicMemoryRow).where(EpisodicMemoryRow.project_id == project_id)
            if query.document_id is not None:
                select_rows = select_rows.where(EpisodicMemoryRow.document_id == query.document_id)
            if query.skill_id is not None:
                select_rows = select_rows.where(EpisodicMemoryRow.skill_id == query.skill_id)
            rows = session.exec(select_rows.order_by(col(EpisodicMemoryRow.created_at).desc(),
                                                     col(EpisodicMemoryRow.id).desc())
                                .limit(query.limit))
            return tuple(EpisodeRecord.model_validate(row) for row in rows)

    def _delete(self, project_id: str, episode_id: int) -> None:
        with self._db.session() as session:
            require_project(session, project_id)
            delete_scoped(session, EpisodicMemoryRow, project_id, episode_id)
            session.commit()
