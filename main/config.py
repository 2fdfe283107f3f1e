"""Settings of one server run: defaults, then STRATA_* variables, then CLI flags."""

from __future__ import annotations

import hmac
import ipaddress
import os
import secrets
from enum import StrEnum
from pathlib import Path
from typing import Annotated
from urllib.parse import urlsplit

from pydantic import Field, ValidationInfo, field_validator, model_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from services.projects.roots import FolderPolicy
from services.retrieval.embedding_spec import DEFAULT_EMBEDDING, check_embedding


class StdinWatch(StrEnum):
    AUTO = "auto"  # watch when stdin is a pipe or socket, i.e. a parent spawned us
    ON = "on"
    OFF = "off"


def default_data_dir() -> Path:
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "strata"


class Config(BaseSettings):
    """Everything a run needs to know; immutable once built."""

    model_config = SettingsConfigDict(env_prefix="STRATA_", frozen=True, extra="forbid")

    data_dir: Path = Field(default_factory=default_data_dir)
    host: str = "127.0.0.1"
    port: int = Field(default=0, ge=0, le=65535)
    debug: bool = False
    token: str = Field(default_factory=lambda: secrets.token_urlsafe(32), min_length=16, repr=False)
    inspector_token: str = Field(default_factory=lambda: secrets.token_urlsafe(32), min_length=16,
                                 repr=False)
    database_url: str | None = None
    chroma_url: str | None = None
    embedding: str = DEFAULT_EMBEDDING
    index_debounce: float = Field(default=0.3, ge=0, le=60)
    # A project's retrieval index in memory is let go after this many minutes without a request that
    # needs it (0: never), and at most this many are kept (the least recently used goes first).
    index_idle_minutes: float = Field(default=10.0, ge=0, le=7 * 24 * 60)
    max_open_indexes: int = Field(default=8, ge=1, le=1000)
    log_level: str = "info"
    allowed_origins: Annotated[tuple[str, ...], NoDecode] = ()
    allow_file_origins: bool = False
    watch_stdin: StdinWatch = StdinWatch.AUTO
    tokenizer_encoding: str = "cl100k_base"
    max_frame_bytes: int = Field(default=4 * 2**20, ge=1024)
    max_in_flight: int = Field(default=64, ge=1)
    max_batch: int = Field(default=64, ge=1)
    max_connections: int = Field(default=32, ge=1)
    ping_interval: float = Field(default=20.0, gt=0)
    ping_timeout: float = Field(default=20.0, gt=0)
    shutdown_grace: float = Field(default=5.0, ge=0)
    # The command chat: how long a client gets to answer llm:complete, when summaries start, how long.
    completion_timeout: float = Field(default=10.0, gt=0, le=600)
    chat_summary_threshold: int = Field(default=12, ge=1, le=10_000)
    chat_summary_chars: int = Field(default=600, ge=400, le=600)
    chat_idle_minutes: float = Field(default=30.0, gt=0, le=7 * 24 * 60)
    chat_max_sessions: int = Field(default=1000, ge=1, le=1_000_000)
    # Where projects may be: when given, only inside one of these folders (docs/protocol.md).
    project_roots: Annotated[tuple[Path, ...], NoDecode] = ()
    # Start even as root (euid 0); refused otherwise, as Jupyter does.
    allow_root: bool = False

    @field_validator("allowed_origins", mode="before")
    @classmethod
    def _split_origins(cls, value: object) -> object:
        if isinstance(value, str):
            return tuple(part.strip() for part in value.split(",") if part.strip())
        return value

    @field_validator("project_roots", mode="before")
    @classmethod
    def _split_roots(cls, value: object) -> object:
        if isinstance(value, str):  # STRATA_PROJECT_ROOTS: separated like PATH (":", or ";" on Windows)
            return tuple(part for part in value.split(os.pathsep) if part.strip())
        return value

    @field_validator("project_roots")
    @classmethod
    def _usable_roots(cls, value: tuple[Path, ...], info: ValidationInfo) -> tuple[Path, ...]:
        if not all(root.is_absolute() for root in value):
            raise ValueError("each project root must be an absolute path")
        data_dir = info.data.get("data_dir")
        policy = FolderPolicy.for_this_machine(data_dir=data_dir)
        for root in value:
            reason = policy.root_problem(str(root))
            if reason is not None:  # no project could ever open there
                raise ValueError(f"a project root cannot be in a place projects are refused ({reason})")
        return value

    @field_validator("log_level")
    @classmethod
    def _known_level(cls, value: str) -> str:
        if value.lower() not in {"debug", "info", "warning", "error"}:
            raise ValueError("log level must be debug, info, warning or error")
        return value.lower()

    @field_validator("host")
    @classmethod
    def _loopback(cls, value: str) -> str:
        # The Host check admits loopback names only, and a name like "localhost"
        # may bind two sockets on different ports: insist on a loopback address.
        try:
            if ipaddress.ip_address(value.strip("[]")).is_loopback:
                return value.strip("[]")
        except ValueError:
            pass
        raise ValueError("host must be a loopback address such as 127.0.0.1 or ::1")

    @field_validator("embedding")
    @classmethod
    def _known_embedding(cls, value: str) -> str:
        check_embedding(value)
        return value

    @field_validator("chroma_url")
    @classmethod
    def _http_url(cls, value: str | None) -> str | None:
        if value is not None and urlsplit(value).scheme not in {"http", "https"}:
            raise ValueError("chroma url must start with http:// or https://")
        return value

    @model_validator(mode="after")
    def _distinct_tokens(self) -> Config:
        if hmac.compare_digest(self.token.encode(), self.inspector_token.encode()):
            raise ValueError("the inspector token must differ from the client token")
        return self

    def folder_policy(self) -> FolderPolicy:
        """Where projects may be on this machine, with this data dir and allow-list."""
        return FolderPolicy.for_this_machine(data_dir=self.data_dir, allowed=self.project_roots)

    @property
    def resolved_database_url(self) -> str:
        return self.database_url or f"sqlite:///{self.database_file}"

    @property
    def database_file(self) -> Path | None:
        """The SQLite file of the default database; None where ``database_url`` names another."""
        return None if self.database_url else self.data_dir / "strata.db"

    @property
    def chroma_path(self) -> Path:
        return self.data_dir / "chroma"

    @property
    def cache_dir(self) -> Path:
        """What is built once and kept between starts (jieba's dictionary in compact form)."""
        return self.data_dir / "cache"

    @property
    def log_path(self) -> Path:
        return self.data_dir / "logs" / "strata.log"
