"""The tokenizer a project's model uses, built once per model and shared."""

from __future__ import annotations

import threading
from pathlib import Path

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

    def __init__(self, path: Path) -> None:
        from tokenizers import Tokenizer as HfTokenizer

        self._tokenizer = HfTokenizer.from_file(str(path))
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


class TokenizerRegistry:
    """One tokenizer per encoding or tokenizer file, loaded on first use."""

    def __init__(self, default_encoding: str = "cl100k_base") -> None:
        self.default_encoding = default_encoding
        self._loaded: dict[str, Tokenizer] = {}
        self._lock = threading.Lock()

    def for_model(self, model: str, tokenizer_path: str | None = None) -> Tokenizer:
        key = f"file:{tokenizer_path}" if tokenizer_path else encoding_for_model(model, self.default_encoding)
        with self._lock:
            if key not in self._loaded:
                self._loaded[key] = self._load(key, tokenizer_path)
            return self._loaded[key]

    def _load(self, key: str, tokenizer_path: str | None) -> Tokenizer:
        if tokenizer_path:
            try:
                return HuggingFaceTokenizer(Path(tokenizer_path))
            except Exception as exc:  # a missing or broken file: fall back, labelled
                _log.warning("tokenizer.file_failed", exc_type=type(exc).__name__)
                return resolve_tokenizer(self.default_encoding)
        return resolve_tokenizer(key)
