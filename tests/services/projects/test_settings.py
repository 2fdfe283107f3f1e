"""Settings rules: model -> encoding, what a patch changes, which tokenizer files are accepted."""

from __future__ import annotations

from pathlib import Path

import pytest

from services.errors import InvalidInput
from services.projects.settings import SettingsPatch, check_tokenizer_file
from services.tokenizer.registry import encoding_for_model


@pytest.mark.parametrize(("model", "encoding"), [
    ("gpt-4", "cl100k_base"), ("gpt-4o", "o200k_base"), ("gpt-4o-2024-05-13", "o200k_base"),
    ("gpt-3.5-turbo", "cl100k_base"), ("claude-3-5-sonnet", "cl100k_base"), ("", "cl100k_base"),
])
def test_encoding_follows_the_model(model: str, encoding: str) -> None:
    """Known models get tiktoken's encoding; unknown ones fall back to cl100k_base."""
    assert encoding_for_model(model) == encoding


def test_patch_changes_only_what_was_given() -> None:
    """Left-out fields and None keep their value, except tokenizerPath, which None clears."""
    assert SettingsPatch.model_validate({"language": "en"}).changes() == {"language": "en"}
    patch = SettingsPatch.model_validate({"model": None, "tokenizer_path": None, "style_notes": ""})
    assert patch.changes() == {"tokenizer_path": None, "style_notes": ""}
    assert SettingsPatch().changes() == {}


def test_patch_bounds() -> None:
    """Skill prompt ids are short ASCII ids, at most 100 of them; the model is stripped."""
    assert SettingsPatch(model="  gpt-4o ").model == "gpt-4o"
    with pytest.raises(ValueError, match="skill_prompts"):
        SettingsPatch.model_validate({"skill_prompts": {f"s{i}": "" for i in range(101)}})
    with pytest.raises(ValueError, match="skill_prompts"):
        SettingsPatch.model_validate({"skill_prompts": {"续写": "x"}})


def test_tokenizer_file_must_be_a_readable_absolute_json_file(tmp_path: Path) -> None:
    """Only an absolute path of an existing regular .json file passes; folders and others fail."""
    good = tmp_path / "tokenizer.json"
    good.write_text("{}")
    check_tokenizer_file(str(good))
    (tmp_path / "folder.json").mkdir()
    for bad in ("tokenizer.json", str(tmp_path / "missing.json"), str(tmp_path / "folder.json"),
                str(tmp_path), f"{good}\x00"):
        with pytest.raises(InvalidInput) as raised:
            check_tokenizer_file(bad)
        assert raised.value.fields["errors"][0]["loc"] == ["tokenizerPath"]
        assert str(tmp_path) not in str(raised.value.fields)
