"""The offline multilingual embedders: Chroma's EmbeddingFunction protocol, registration, quality."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from chromadb.utils.embedding_functions import known_embedding_functions

from services.retrieval.embedding_spec import DEFAULT_EMBEDDING, parse_embedding
from services.retrieval.embeddings import MultilingualE5, MultilingualUse, make_embedding
from services.retrieval.vectors import close_vector_store, open_vector_store


def test_the_default_is_e5_and_both_bundled_encoders_are_registered_with_chroma() -> None:
    """The default config string builds e5; e5 and use-multilingual are each known to Chroma by name and
    rebuilt from their config."""
    assert DEFAULT_EMBEDDING == "multilingual-e5-small"
    assert isinstance(make_embedding(DEFAULT_EMBEDDING), MultilingualE5)
    for cls, spec in ((MultilingualE5, "multilingual-e5-small"), (MultilingualUse, "use-multilingual")):
        embedding = make_embedding(spec)
        assert isinstance(embedding, cls)
        assert known_embedding_functions[cls.name()] is cls
        assert isinstance(cls.build_from_config(embedding.get_config()), cls)
        assert not embedding.is_legacy()


def test_vectors_are_512_normalized_and_rank_paraphrases_first_in_both_languages() -> None:
    """Each text gives a unit vector of 512 floats; a Chinese or English paraphrase is nearer than an
    unrelated sentence."""
    embedding = MultilingualUse()
    texts = ["林远把铜钥匙藏在灯塔第三级台阶下。", "钥匙被藏在灯塔的台阶下面。", "今天的早饭是豆浆和油条。",
             "Mara hid the key under the lighthouse stairs.", "The key was hidden beneath the steps.",
             "The market sells fresh fish every morning."]
    vectors = np.array(embedding(texts))
    assert vectors.shape == (6, 512)
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-3)
    similarity = vectors @ vectors.T
    assert similarity[0, 1] > similarity[0, 2]
    assert similarity[3, 4] > similarity[3, 5]


def test_a_collection_made_with_it_reopens_without_naming_it(tmp_path: Path) -> None:
    """A collection created with the encoder reopens in a new client from its stored config alone."""
    client = open_vector_store(path=tmp_path / "chroma")
    try:
        client.create_collection("reopen-test", embedding_function=MultilingualUse())
        reopened = client.get_collection("reopen-test")
        reopened.add(ids=["a"], documents=["灯塔下的钥匙"])
        assert reopened.count() == 1
        assert reopened.query(query_texts=["钥匙"], n_results=1)["ids"] == [["a"]]
    finally:
        close_vector_store(client)


@pytest.mark.parametrize(("spec", "kind"), [
    ("multilingual-e5-small", "multilingual-e5-small"), ("use-multilingual", "use-multilingual"),
    ("chroma-default", "chroma-default"),
    ("sentence-transformers:paraphrase-multilingual-MiniLM-L12-v2", "sentence-transformers"),
    ("openai:http://127.0.0.1:8080/v1#bge-m3", "openai")])
def test_config_strings_name_their_kind(spec: str, kind: str) -> None:
    """Each documented config form parses to its kind; nothing is loaded to check it."""
    assert parse_embedding(spec)[0] == kind


def test_an_unknown_config_string_is_refused() -> None:
    """Anything else is a ValueError that lists the accepted forms."""
    with pytest.raises(ValueError, match="multilingual-e5-small, use-multilingual, chroma-default"):
        make_embedding("word2vec")
