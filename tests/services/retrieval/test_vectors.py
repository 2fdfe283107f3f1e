"""Opening and closing Chroma: a local folder in tests, never a server, telemetry off."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import chromadb
import pytest

from services.retrieval.vectors import (
    VectorIndex,
    _settings,
    chunk_of_sentence,
    close_vector_store,
    open_vector_store,
)


@pytest.fixture
def store_path(tmp_path: Path) -> Path:
    return tmp_path / "data" / "chroma"


@pytest.fixture
def client(store_path: Path) -> Iterator[Any]:
    opened = open_vector_store(path=store_path)
    try:
        yield opened
    finally:
        close_vector_store(opened)


def test_persistent_client_opens_in_a_new_folder(client: Any, store_path: Path) -> None:
    """A PersistentClient opens in a folder that did not exist, persists there, answers heartbeat."""
    heartbeat = client.heartbeat()
    assert isinstance(heartbeat, int)
    assert heartbeat > 0
    settings = client.get_settings()
    assert (settings.is_persistent, settings.persist_directory) == (True, str(store_path))
    assert (store_path / "chroma.sqlite3").is_file()


def test_telemetry_is_off(client: Any) -> None:
    """The settings the client runs with have anonymized telemetry disabled, reset refused."""
    settings = client.get_settings()
    assert (settings.anonymized_telemetry, settings.allow_reset) == (False, False)


def test_telemetry_stays_off_whatever_the_environment(
    store_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """ANONYMIZED_TELEMETRY=TRUE in the environment does not turn telemetry back on."""
    monkeypatch.setenv("ANONYMIZED_TELEMETRY", "TRUE")
    assert _settings().anonymized_telemetry is False
    opened = open_vector_store(path=store_path)
    try:
        assert opened.get_settings().anonymized_telemetry is False
    finally:
        close_vector_store(opened)


def test_data_survives_close_and_reopen(store_path: Path) -> None:
    """What is written before close() is there when the same folder is opened again."""
    first = open_vector_store(path=store_path)
    try:
        collection = first.get_or_create_collection("probe", embedding_function=None)
        collection.add(ids=["a", "b"], embeddings=[[0.1, 0.2, 0.3], [0.3, 0.2, 0.1]])
    finally:
        close_vector_store(first)
    second = open_vector_store(path=store_path)
    try:
        assert second.get_collection("probe").count() == 2
    finally:
        close_vector_store(second)


def test_closing_twice_is_harmless(store_path: Path) -> None:
    """close_vector_store may be called again on a closed client, and the folder reopens."""
    opened = open_vector_store(path=store_path)
    close_vector_store(opened)
    close_vector_store(opened)
    reopened = open_vector_store(path=store_path)
    try:
        assert reopened.heartbeat() > 0
    finally:
        close_vector_store(reopened)


def test_closing_a_client_without_close_is_harmless() -> None:
    """A client object that has no close() (older Chroma) is simply let go."""
    close_vector_store(object())
    closed: list[bool] = []

    class Closable:
        def close(self) -> None:
            closed.append(True)

    close_vector_store(Closable())
    assert closed == [True]


def test_neither_path_nor_url_is_an_error() -> None:
    """With no folder and no server URL there is nothing to open."""
    with pytest.raises(ValueError, match="a path or a url is required"):
        open_vector_store()


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("http://chroma.local:9000", {"host": "chroma.local", "port": 9000, "ssl": False}),
        ("https://chroma.example", {"host": "chroma.example", "port": 443, "ssl": True}),
        ("http://10.0.0.5", {"host": "10.0.0.5", "port": 8000, "ssl": False}),
        ("https://[::1]:8443", {"host": "::1", "port": 8443, "ssl": True}),
    ],
)
def test_url_opens_an_http_client_with_telemetry_off(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, url: str, expected: dict[str, Any],
) -> None:
    """A URL wins over a path and maps to host, port (scheme default) and TLS; no server is hit."""
    calls: list[dict[str, Any]] = []

    def fake_http_client(**kwargs: Any) -> str:
        calls.append(kwargs)
        return "http-client"

    monkeypatch.setattr(chromadb, "HttpClient", fake_http_client)
    assert open_vector_store(path=tmp_path / "unused", url=url) == "http-client"
    assert len(calls) == 1
    settings = calls[0].pop("settings")
    assert calls[0] == expected
    assert settings.anonymized_telemetry is False
    assert not (tmp_path / "unused").exists()


def test_a_query_reads_the_labels_of_its_head_and_places_the_rest_by_id(client: Any) -> None:
    """The nearest ``labelled`` hits carry the labels stored with them (a foreign one included, for
    the scope check); the rest are the queried project's, each in the chunk its id names."""
    index = VectorIndex(client, None)
    chunk = "c" * 32
    index.add("p1", [(f"{chunk}-{n}", "a.md", chunk, [1.0, n / 10, 0.0]) for n in range(4)])
    collection = index._collection("p1")
    collection.upsert(ids=[f"{chunk}-0"], embeddings=[[1.0, 0.0, 0.0]],
                      metadatas=[{"project_id": "intruder", "document_id": "a.md", "chunk": chunk}])
    hits = index.query("p1", [1.0, 0.0, 0.0], 4, labelled=2)
    assert [(h.chunk_id, h.project_id, h.document_id) for h in hits] == [
        (chunk, "intruder", "a.md"), (chunk, "p1", "a.md"), (chunk, "p1", ""), (chunk, "p1", "")]
    assert [h.project_id for h in index.query("p1", [1.0, 0.0, 0.0], 4)] == ["intruder", "p1", "p1", "p1"]
    assert hits[0].similarity > hits[-1].similarity


def test_a_sentence_id_names_its_chunk() -> None:
    """``<chunk>-<n>`` belongs to ``<chunk>``; an id of another shape is its own chunk."""
    assert chunk_of_sentence("ab12-3") == "ab12"
    assert chunk_of_sentence("ab12") == "ab12"
    assert chunk_of_sentence("ab12-x") == "ab12-x"
    assert chunk_of_sentence("-3") == "-3"
