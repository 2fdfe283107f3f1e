"""The tokenizer a project's model uses, built once per model and shared."""

from __future__ import annotations

import os
import stat
import threading
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal

import structlog
import tiktoken.model

from services.tokenizer.base import Tokenizer, TokenizerInfo
from services.tokenizer.resolve import resolve_tokenizer

_log = structlog.get_logger("tokenizer")


def encoding_for_model(model: str, default: str = "cl100k_base") -> str:
    """The tiktoken encoding of ``model`` (tiktoken's own table); ``default`` if it has none."""
    try:
        return str(tiktoken.model.encoding_name_for_model(model.strip().lower()))
    except KeyError:
        return default


class HuggingFaceTokenizer:
    """Exact counts for open models from a local ``tokenizer.json`` (Qwen, Llama, ...)."""

    def __init__(self, path: Path, text: str | None = None) -> None:
        """Load the tokenizer file at ``path``, or, given ``text``, that file's text read already."""
        from tokenizers import Tokenizer as HfTokenizer

        self._tokenizer = HfTokenizer.from_file(str(path)) if text is None else HfTokenizer.from_str(text)
        self._info = TokenizerInfo(encoding=f"hf:{path.name}", source="bundled", exact=True)

    @property
    def info(self) -> TokenizerInfo:
        return self._info

    def encode(self, text: str) -> list[int]:
        try:
            encoded = self._tokenizer.encode(text, add_special_tokens=False)
        except TypeError:
            # A lone surrogate (legal in a JSON string) is refused by tokenizers; count it as
            # U+FFFD, as tiktoken does.
            text = text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
            encoded = self._tokenizer.encode(text, add_special_tokens=False)
        return list(encoded.ids)

    def count(self, text: str) -> int:
        return len(self.encode(text))

    def decode(self, tokens: list[int]) -> str:
        return str(self._tokenizer.decode(tokens))


# Largest tokenizer.json read (the big open-model vocabularies are 10-30 MB).
MAX_TOKENIZER_FILE_BYTES = 128 * 2**20
TOKENIZER_INVALID = "TOKENIZER_INVALID"
_READ_FLAGS = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0) \
    | getattr(os, "O_CLOEXEC", 0)

ProblemReason = Literal["missing", "unreadable", "not_a_tokenizer"]


@dataclass(frozen=True, slots=True)
class TokenizerProblem:
    """Why a project's tokenizer file is not what counts, and what counts instead.

    ``reason``: ``missing`` (no file there any more), ``unreadable`` (not a
    regular file, no permission, too large or not UTF-8) or ``not_a_tokenizer``
    (read, but the tokenizers library would not load it). Never the path.
    """

    reason: ProblemReason
    fallback_encoding: str
    since: datetime
    code: str = TOKENIZER_INVALID


class TokenizerFileError(Exception):
    """A tokenizer file that could not be loaded, and why (one of :data:`ProblemReason`)."""

    def __init__(self, reason: ProblemReason) -> None:
        super().__init__(reason)
        self.reason: ProblemReason = reason


_Signature = tuple[int, int, int, int] | None  # (device, inode, size, mtime_ns), None when missing


def _signature(path: str) -> _Signature:
    try:
        info = os.stat(path)
    except (OSError, ValueError):
        return None
    return info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns


def read_tokenizer_file(path: str) -> str:
    """The text of the tokenizer file at ``path``, or TokenizerFileError.

    Links are resolved first; the real file is then opened without following
    a link swapped in since and without blocking (a FIFO put there must not
    hang the caller), and read only if it is a regular file, up to
    :data:`MAX_TOKENIZER_FILE_BYTES`.
    """
    try:
        fd = os.open(os.path.realpath(path), _READ_FLAGS)
    except (FileNotFoundError, NotADirectoryError):
        raise TokenizerFileError("missing") from None
    except (OSError, ValueError):
        raise TokenizerFileError("unreadable") from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise TokenizerFileError("unreadable")
        chunks: list[bytes] = []
        remaining = MAX_TOKENIZER_FILE_BYTES + 1
        while remaining > 0 and (chunk := os.read(fd, min(remaining, 1 << 20))):
            chunks.append(chunk)
            remaining -= len(chunk)
    except OSError:
        raise TokenizerFileError("unreadable") from None
    finally:
        os.close(fd)
    data = b"".join(chunks)
    if len(data) > MAX_TOKENIZER_FILE_BYTES:
        raise TokenizerFileError("unreadable")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise TokenizerFileError("unreadable") from None


@dataclass(frozen=True, slots=True)
class _FileEntry:
    signature: _Signature
    tokenizer: Tokenizer
    problem: TokenizerProblem | None


class TokenizerRegistry:
    """One tokenizer per encoding or tokenizer file, loaded on first use.

    A tokenizer file is loaded again when it changes on disk (another inode,
    size or modification time); one that does not load leaves the default
    encoding counting, and a :class:`TokenizerProblem` that callers report.
    The problems of the projects that counted last are kept (at most
    :data:`MAX_PROJECT_PROBLEMS`) for ``system:info``; at most
    :data:`MAX_FILES` tokenizer files are held, the least recently used
    dropped first.
    """

    MAX_PROJECT_PROBLEMS = 256
    MAX_FILES = 16

    def __init__(self, default_encoding: str = "cl100k_base") -> None:
        self.default_encoding = default_encoding
        self._loaded: dict[str, Tokenizer] = {}
        self._files: dict[str, _FileEntry] = {}
        self._projects: dict[str, TokenizerProblem] = {}
        self._lock = threading.RLock()  # held while loading, so each file or encoding loads once
        self._projects_lock = threading.Lock()  # never held while loading: problems() answers at once

    def for_model(self, model: str, tokenizer_path: str | None = None) -> Tokenizer:
        if tokenizer_path:
            return self._file(tokenizer_path).tokenizer
        return self._encoding(encoding_for_model(model, self.default_encoding))

    def ready(self, model: str, tokenizer_path: str | None = None) -> bool:
        """Whether :meth:`for_model` would answer without loading anything (an encoding is built in
        about 0.3 s, a tokenizer file read and parsed in up to seconds): callers on the event loop
        load what is not ready on a worker thread first."""
        if tokenizer_path:
            entry = self._files.get(tokenizer_path)
            return entry is not None and entry.signature == _signature(tokenizer_path)
        return encoding_for_model(model, self.default_encoding) in self._loaded

    def problem(self, tokenizer_path: str | None) -> TokenizerProblem | None:
        """Why the tokenizer file at ``tokenizer_path`` is not counting (as it is on disk now), if so."""
        return self._file(tokenizer_path).problem if tokenizer_path else None

    def for_project(self, project_id: str, model: str,
                    tokenizer_path: str | None) -> tuple[Tokenizer, TokenizerProblem | None]:
        """The tokenizer ``project_id`` counts with and its file's problem, remembered for
        :meth:`problems` (and forgotten once the project counts without one)."""
        if not tokenizer_path:
            tokenizer, problem = self.for_model(model), None
        else:
            entry = self._file(tokenizer_path)
            tokenizer, problem = entry.tokenizer, entry.problem
        with self._projects_lock:
            known = self._projects.pop(project_id, None)
            if problem is not None:
                if known is not None and known.reason == problem.reason:
                    problem = known  # the same problem: it started when it was first found
                self._projects[project_id] = problem
                while len(self._projects) > self.MAX_PROJECT_PROBLEMS:
                    del self._projects[next(iter(self._projects))]
        return tokenizer, problem

    def problems(self) -> dict[str, TokenizerProblem]:
        """Project id -> the problem of its tokenizer file, as its last count found it."""
        with self._projects_lock:
            return dict(sorted(self._projects.items()))

    def _encoding(self, key: str) -> Tokenizer:
        with self._lock:
            if key not in self._loaded:
                self._loaded[key] = resolve_tokenizer(key)
            return self._loaded[key]

    def _file(self, tokenizer_path: str) -> _FileEntry:
        signature = _signature(tokenizer_path)
        with self._lock:
            entry = self._files.pop(tokenizer_path, None)
            if entry is None or entry.signature != signature:
                entry = self._load_file(tokenizer_path, signature)
            self._files[tokenizer_path] = entry  # the most recently used last
            while len(self._files) > self.MAX_FILES:
                del self._files[next(iter(self._files))]
            return entry

    def _load_file(self, tokenizer_path: str, signature: _Signature) -> _FileEntry:
        try:
            text = read_tokenizer_file(tokenizer_path)
            try:
                tokenizer: Tokenizer = HuggingFaceTokenizer(Path(tokenizer_path), text)
            except Exception:  # the tokenizers library's own errors: the file is no tokenizer
                raise TokenizerFileError("not_a_tokenizer") from None
        except TokenizerFileError as exc:  # fall back, labelled
            _log.warning("tokenizer.file_failed", reason=exc.reason)
            problem = TokenizerProblem(reason=exc.reason, fallback_encoding=self.default_encoding,
                                       since=datetime.now(UTC))
            return _FileEntry(signature, self._encoding(self.default_encoding), problem)
        return _FileEntry(signature, tokenizer, None)
