"""A project's active segments, kept between reads and grouped the way a prompt asks for them.

One :class:`ActiveSegments` is read per project and kept (``database.snapshots``)
until the next write to the project's segments, so an assembly finds its
ruleset's, world's or NPC's segments by (scope, refId) without a query.
Immutable: every reader shares it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from types import MappingProxyType

from services.segments.records import SCOPE_ORDER, SegmentRecord

GroupKey = tuple[str, str | None]  # (scope, refId)


def list_order(record: SegmentRecord) -> tuple[int, bool, str, int, int]:
    """How listings and exports order segments: by scope (prompt order), refId (none first),
    tier, then id."""
    return (SCOPE_ORDER[record.scope], record.ref_id is not None, record.ref_id or "", record.tier,
            record.id)


def prompt_order(record: SegmentRecord) -> tuple[int, int]:
    """How a prompt orders the segments of one scope and refId: by tier, then id."""
    return record.tier, record.id


@dataclass(frozen=True, slots=True)
class ActiveSegments:
    """Active segments by (scope, refId) and by scope, each in prompt order."""

    groups: Mapping[GroupKey, tuple[SegmentRecord, ...]]
    scopes: Mapping[str, tuple[SegmentRecord, ...]]
    chars: int = 0  # of every active segment's content: how much an assembly may read

    @classmethod
    def of(cls, records: Iterable[SegmentRecord]) -> ActiveSegments:
        """Group ``records``; inactive ones are left out."""
        groups: dict[GroupKey, list[SegmentRecord]] = {}
        scopes: dict[str, list[SegmentRecord]] = {}
        for record in records:
            if record.active:
                groups.setdefault((record.scope, record.ref_id), []).append(record)
                scopes.setdefault(record.scope, []).append(record)
        return cls(
            groups=MappingProxyType({key: tuple(sorted(found, key=prompt_order))
                                     for key, found in groups.items()}),
            scopes=MappingProxyType({scope: tuple(sorted(found, key=prompt_order))
                                     for scope, found in scopes.items()}),
            chars=sum(len(r.content) for found in scopes.values() for r in found),
        )

    def group(self, scope: str, ref_id: str | None) -> tuple[SegmentRecord, ...]:
        """The active segments of ``scope`` that belong to ``ref_id``."""
        return self.groups.get((scope, ref_id), ())

    def scope(self, scope: str) -> tuple[SegmentRecord, ...]:
        """Every active segment of ``scope``, whatever it belongs to."""
        return self.scopes.get(scope, ())

    def listed(self, scope: str | None = None, ref_id: str | None = None) -> list[SegmentRecord]:
        """The active segments (of ``scope``, of ``ref_id``, if given) in listing order."""
        found = [record for (group_scope, group_ref), records in self.groups.items()
                 if (scope is None or group_scope == scope) and (ref_id is None or group_ref == ref_id)
                 for record in records]
        return sorted(found, key=list_order)

    def __len__(self) -> int:
        return sum(len(records) for records in self.scopes.values())
