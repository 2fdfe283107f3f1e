"""What the writer has said must hold: constraints and knowledge-graph entities."""

from services.knowledge.constraints import ConstraintService
from services.knowledge.kg import KgService
from services.knowledge.records import ConstraintRecord, KgEntityRecord

__all__ = ["ConstraintRecord", "ConstraintService", "KgEntityRecord", "KgService"]
