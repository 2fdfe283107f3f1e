"""Tokenizer registry: model -> encoding, local tokenizer.json files, fallbacks, load-once."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from structlog.testing import capture_logs
from tokenizers import Tokenizer as HfTokenizer
from tokenizers import models, pre_tokenizers, processors, trainers

from services.tokenizer import Tokenizer, TokenizerInfo, registry
from services.tokenizer.registry import HuggingFaceTokenizer, TokenizerRegistry, encoding_for_model
from services.tokenizer.resolve import resolve_tokenizer

SENTENCES = ["the lighthouse door opens", "the sea wind blows in", "she climbs the stairs"]


@pytest.fixture
def tokenizer_json(tmp_path: Path) -> Path:
    """A tiny word-level tokenizer trained on three sentences, with a [CLS] ... [SEP] template."""
    hf = HfTokenizer(models.WordLevel(unk_token="[UNK]"))
    hf.pre_tokenizer = pre_tokenizers.Whitespace()
    hf.train_from_iterator(SENTENCES, trainer=trainers.WordLevelTrainer(
        special_tokens=["[UNK]", "[CLS]", "[SEP]"]))
    hf.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", special_tokens=[("[CLS]", hf.token_to_id("[CLS]")),
                                                ("[SEP]", hf.token_to_id("[SEP]"))])
    path = tmp_path / "tokenizer.json"
    hf.save(str(path))
    return path


@pytest.mark.parametrize(("model", "encoding"), [
    ("gpt-4o", "o200k_base"),
    ("gpt-4o-mini-2024-07-18", "o200k_base"),
    ("GPT-4O", "o200k_base"),
    ("gpt-4.1-nano", "o200k_base"),
    ("gpt-4", "cl100k_base"),
    ("gpt-4-turbo", "cl100k_base"),
    ("gpt-3.5-turbo", "cl100k_base"),
    ("gpt-5", "o200k_base"),
    ("o1-preview", "o200k_base"),
    ("o3-mini", "o200k_base"),
    ("text-embedding-3-small", "cl100k_base"),
    ("qwen2.5-7b", "cl100k_base"),
    ("", "cl100k_base"),
])
def test_model_maps_to_encoding(model: str, encoding: str) -> None:
    """tiktoken's own model table decides; unknown models get the default encoding."""
    assert encoding_for_model(model) == encoding


def test_unknown_model_uses_the_given_default() -> None:
    """The default is a parameter, and only used for models tiktoken does not know."""
    assert encoding_for_model("llama-3", default="o200k_base") == "o200k_base"
    assert encoding_for_model("gpt-4", default="o200k_base") == "cl100k_base"


def test_tokenizer_json_counts_exactly_without_special_tokens(tokenizer_json: Path) -> None:
    """A local tokenizer.json counts words as its vocabulary does; template special tokens are not counted."""
    tokenizer = HuggingFaceTokenizer(tokenizer_json)
    assert isinstance(tokenizer, Tokenizer)
    assert tokenizer.info == TokenizerInfo(encoding="hf:tokenizer.json", source="bundled", exact=True)
    assert tokenizer.count("the sea wind") == 3
    assert tokenizer.count("the whale sings loudly") == 4  # three unknown words, one [UNK] each
    assert tokenizer.count("") == 0
    ids = tokenizer.encode("the door opens")
    assert len(ids) == 3
    assert tokenizer.decode(ids) == "the door opens"


def test_tokenizer_json_counts_a_lone_surrogate_instead_of_failing(tokenizer_json: Path) -> None:
    """A lone surrogate (valid in a JSON string) counts as one unknown character, as tiktoken does,
    instead of raising."""
    tokenizer = HuggingFaceTokenizer(tokenizer_json)
    assert tokenizer.count("the \ud800 door") == 3
    assert resolve_tokenizer().count("\ud800") == resolve_tokenizer().count("\ufffd")


def test_registry_loads_a_tokenizer_file_per_path(tokenizer_json: Path) -> None:
    """A tokenizer path wins over the model name and is loaded once per path."""
    tokens = TokenizerRegistry()
    first = tokens.for_model("qwen2.5", str(tokenizer_json))
    assert isinstance(first, HuggingFaceTokenizer)
    assert tokens.for_model("llama-3", str(tokenizer_json)) is first
    assert first.count("she climbs the stairs") == 4


@pytest.mark.parametrize("broken", ["missing", "garbage"])
def test_broken_tokenizer_file_falls_back_to_the_default_encoding(tmp_path: Path, broken: str) -> None:
    """A missing or unreadable tokenizer.json falls back to the default encoding, with one log line
    that names the error type but not the path."""
    path = tmp_path / "tokenizer.json"
    if broken == "garbage":
        path.write_text("{not json")
    with capture_logs() as logs:
        tokenizer = TokenizerRegistry(default_encoding="cl100k_base").for_model("qwen", str(path))
    assert tokenizer.info.encoding == "cl100k_base"
    assert tokenizer.count("the sea wind") == resolve_tokenizer("cl100k_base").count("the sea wind")
    failed = [entry for entry in logs if entry["event"] == "tokenizer.file_failed"]
    assert len(failed) == 1
    assert failed[0]["log_level"] == "warning"
    assert str(tmp_path) not in repr(failed[0])


def test_registry_loads_each_encoding_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """Models sharing an encoding share one tokenizer, loaded once even under concurrent first use."""
    loads: list[str] = []
    lock = threading.Lock()

    def counting_resolve(encoding: str = "cl100k_base") -> Tokenizer:
        with lock:
            loads.append(encoding)
        return resolve_tokenizer(encoding)

    monkeypatch.setattr(registry, "resolve_tokenizer", counting_resolve)
    tokens = TokenizerRegistry()
    models_ = ["gpt-4", "gpt-3.5-turbo", "gpt-4o", "gpt-4o-mini", "o3", "unknown"] * 10
    with ThreadPoolExecutor(max_workers=8) as pool:
        loaded = list(pool.map(tokens.for_model, models_))
    assert sorted(loads) == ["cl100k_base", "o200k_base"]
    assert loaded[0] is loaded[1] is loaded[5]
    assert loaded[2] is loaded[3] is loaded[4]
    assert loaded[0].info.encoding == "cl100k_base"
    assert loaded[2].info.encoding == "o200k_base"


def test_ready_says_whether_a_tokenizer_is_loaded_and_its_file_unchanged(tokenizer_json: Path) -> None:
    """``ready`` is false until the model's encoding or the tokenizer file is loaded, then true for
    every model sharing it, and false again once the file changes on disk (it will load again)."""
    tokens = TokenizerRegistry()
    assert not tokens.ready("gpt-4")
    tokens.for_model("gpt-4")
    assert tokens.ready("gpt-4")
    assert tokens.ready("gpt-3.5-turbo")
    assert not tokens.ready("gpt-4o")
    assert not tokens.ready("qwen", str(tokenizer_json))
    tokens.for_model("qwen", str(tokenizer_json))
    assert tokens.ready("llama-3", str(tokenizer_json))
    tokenizer_json.write_text(tokenizer_json.read_text() + " ")
    assert not tokens.ready("qwen", str(tokenizer_json))
