"""A conversation's options (seed 003, appendix B, as far as a prompt uses them) and the template
variables they give.

Options are checked when the conversation is made; fields of the seed's chat configuration that do
not shape a prompt (``model``, ``stream``, ``serverUrl``, ...) are accepted and ignored, and the
answer names them, so a client that sends a whole configuration is not refused for it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, model_validator
from pydantic.alias_generators import to_camel

Rating = Literal["E", "T", "M", "AO", "RC"]
MPA: dict[str, str] = {"E": "G", "T": "PG-13", "M": "R", "AO": "NC-17", "RC": "NC-17"}
ShortText = Annotated[str, StringConstraints(max_length=200)]
LongText = Annotated[str, StringConstraints(max_length=4000)]


class _Model(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, frozen=True,
                              allow_inf_nan=False, extra="forbid")


class Episode(_Model):
    name: ShortText
    theme: LongText = ""
    stages: list[LongText] = Field(default_factory=list, max_length=16)


class ConversationOptions(_Model):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, frozen=True,
                              allow_inf_nan=False, extra="ignore")

    rating: Rating = "T"
    rating_mpa: Annotated[str, StringConstraints(max_length=16)] | None = None
    scene: LongText = ""
    include_scene: bool | None = Field(default=None, description="default: whether a scene is given")
    episodes: list[Episode | Annotated[LongText, StringConstraints(pattern=r"\S")]] = Field(
        default_factory=list, max_length=32)
    perspective: LongText = Field(default="", description="style guidance; default: from the character")
    image_tokens: bool = False
    audio_tokens: bool = False
    token_budget: int = Field(default=8192, ge=256, le=2_000_000)
    output_reserve: int = Field(default=1024, ge=0, le=1_000_000)
    memory_budget: int = Field(default=500, ge=0, le=20_000)
    memory_format: Literal["plain", "mcp"] = "plain"
    min_similarity: float = Field(default=0.2, ge=-1.0, le=1.0)
    keyframe_every: int = Field(default=20, ge=0, le=10_000, description="0: no keyframes")
    remind_every: int = Field(default=6, ge=0, le=10_000, description="0: no reminders")
    extract_memories: bool = True
    memory_extraction_every: int = Field(default=5, ge=0, le=10_000, description="exchanges; 0: never")

    @model_validator(mode="after")
    def _room_for_context(self) -> ConversationOptions:
        # Otherwise every assembly of the conversation fails: the reserve leaves no room.
        if self.output_reserve >= self.token_budget:
            raise ValueError("outputReserve must be below tokenBudget")
        return self

    def variables(self, language: str, call: Mapping[str, str] | None = None) -> dict[str, str]:
        """The template variables these options set, under ``call``'s own (one call's values): a
        rating or a scene given for the call brings its MPA rating and shows the scene, unless the
        call says otherwise."""
        call = call or {}
        episode, rule = _episode(self.episodes[0], language) if self.episodes else ("", "")
        scene = call.get("scene", self.scene)
        include = self.include_scene if self.include_scene is not None and "scene" not in call \
            else bool(scene.strip())
        rating = call.get("rating", self.rating)
        mpa = self.rating_mpa if "rating" not in call else None
        values = {
            "rating": self.rating, "ratingMpa": mpa or MPA.get(rating.strip().upper(), ""),
            "scene": self.scene, "includeScene": _flag(include and bool(scene.strip())),
            "episode": episode, "episodeRule": rule, "hasEpisodes": _flag(bool(self.episodes)),
            "supportsMedia": _flag(self.image_tokens or self.audio_tokens),
            "tokenBudget": str(self.token_budget), "outputReserve": str(self.output_reserve),
        }
        if self.perspective.strip():
            values["perspective"] = self.perspective
        return {**values, **call}


def ignored(raw: dict[str, Any]) -> list[str]:
    """The option names ``raw`` holds that no prompt uses (options are known by wire name only)."""
    known = {f.alias or name for name, f in ConversationOptions.model_fields.items()}
    return sorted(k for k in raw if k not in known)


def _flag(value: bool) -> str:
    return "true" if value else ""


def _episode(episode: Episode | str, language: str) -> tuple[str, str]:
    zh = language == "zh"
    if isinstance(episode, str):
        return (f"剧集指引：{episode}" if zh else f"EPISODE GUIDANCE: {episode}"), ""
    lines = [f"剧集指引：{episode.name}" if zh else f"EPISODE GUIDANCE: {episode.name}"]
    if episode.theme:
        lines.append(f"主题：{episode.theme}" if zh else f"Theme: {episode.theme}")
    lines += [f"{n}. {stage}" for n, stage in enumerate(episode.stages, start=1)]
    rule = ("按顺序完成各阶段，不要跳过。" if zh else "Play the stages in order; do not skip ahead.") \
        if episode.stages else ""
    return "\n".join(lines), rule
