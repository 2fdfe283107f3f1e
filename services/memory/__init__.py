"""What Strata remembers of the writer: learned rules and past interactions."""

from services.memory.episodic import EpisodicMemoryService
from services.memory.records import EpisodeRecord, SemanticRuleRecord
from services.memory.semantic import SemanticMemoryService

__all__ = ["EpisodeRecord", "EpisodicMemoryService", "SemanticMemoryService", "SemanticRuleRecord"]
