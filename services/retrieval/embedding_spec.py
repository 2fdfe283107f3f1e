"""Embedding config strings, checked without importing any model or Chroma."""

from __future__ import annotations

DEFAULT_EMBEDDING = "use-multilingual"
EXPECTED = ("use-multilingual, chroma-default, sentence-transformers:<model> "
            "or openai:<base url>#<model>")


def parse_embedding(spec: str) -> tuple[str, str]:
    """``(kind, argument)`` for a config string, or ValueError naming the accepted forms."""
    if spec in (DEFAULT_EMBEDDING, "chroma-default"):
        return spec, ""
    kind, _, rest = spec.partition(":")
    if kind == "sentence-transformers" and rest:
        return kind, rest
    if kind == "openai" and rest.startswith(("http://", "https://")) and "#" in rest:
        return kind, rest
    raise ValueError(f"unknown embedding; expected {EXPECTED}")


def check_embedding(spec: str) -> None:
    parse_embedding(spec)
