"""Prompt segments: the stored scopes a game master's prompt is built from (seed 001)."""

from services.segments.active import ActiveSegments
from services.segments.records import SCOPES, SegmentInput, SegmentRecord
from services.segments.service import SegmentService

__all__ = ["SCOPES", "ActiveSegments", "SegmentInput", "SegmentRecord", "SegmentService"]
