"""An exact encoding checked at start and built on the first count.

tiktoken's ``cl100k_base`` ranks hold about 40 MiB once built, and a server that nobody has asked
to count yet needs only the encoding's name and kind (``system:info``). So the BPE file is found
and verified when the tokenizer is resolved, which settles :attr:`info`, and the encoding is built
when something first counts.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

import structlog
import tiktoken

from services.tokenizer.base import Tokenizer, TokenizerInfo
from services.tokenizer.tiktoken_backend import TiktokenTokenizer

_log = structlog.get_logger("tokenizer")


class DeferredTokenizer:
    """tiktoken's encoding ``name``, built once on first use (thread-safe).

    ``usable`` says, just before building, whether the file checked at resolve time is still
    there; if it is not, or building fails, ``fallback`` gives the tokenizer that counts instead,
    and :attr:`info` says so from then on.
    """

    def __init__(self, name: str, info: TokenizerInfo, *, usable: Callable[[], bool],
                 fallback: Callable[[], Tokenizer]) -> None:
        self._name = name
        self._info = info
        self._usable = usable
        self._fallback = fallback
        self._built: Tokenizer | None = None
        self._lock = threading.Lock()

    @property
    def built(self) -> bool:
        return self._built is not None

    @property
    def info(self) -> TokenizerInfo:
        built = self._built
        return self._info if built is None else built.info

    def count(self, text: str) -> int:
        return self._tokenizer().count(text)

    def encode(self, text: str) -> list[int]:
        return self._tokenizer().encode(text)

    def decode(self, tokens: list[int]) -> str:
        return self._tokenizer().decode(tokens)

    def resolved(self) -> Tokenizer:
        """The tokenizer that counts (built now if nothing has counted yet): what a caller that
        depends on its kind, such as the line rule of ``services.context.counting``, looks at."""
        return self._tokenizer()

    def _tokenizer(self) -> Tokenizer:
        built = self._built
        if built is None:
            with self._lock:
                if self._built is None:
                    self._built = self._build()
                built = self._built
        return built

    def _build(self) -> Tokenizer:
        if self._usable():
            try:
                return TiktokenTokenizer(_without_python_ranks(tiktoken.get_encoding(self._name)), self._info)
            except (OSError, ValueError) as exc:
                _log.warning("tokenizer.load_failed", encoding=self._name, source=self._info.source,
                             exc_type=type(exc).__name__)
        else:
            _log.warning("tokenizer.file_gone", encoding=self._name, source=self._info.source)
        return self._fallback()


def _without_python_ranks(encoding: tiktoken.Encoding) -> tiktoken.Encoding:
    """``encoding`` without the Python copy of its ranks (11 MiB for cl100k_base).

    tiktoken hands the ranks to its Rust core, which encodes and decodes with its own copy; the
    Python dict is read again only to pickle the encoding, which Strata never does.
    """
    if isinstance(getattr(encoding, "_mergeable_ranks", None), dict):
        encoding._mergeable_ranks = {}
    return encoding
