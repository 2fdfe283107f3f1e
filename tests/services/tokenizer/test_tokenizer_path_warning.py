"""A project tokenizer file that does not load: the default encoding counts, and the problem is told.

The registry names why (``missing``, ``unreadable``, ``not_a_tokenizer``) and
what counts instead; it keeps each project's problem for ``system:info``;
the context service adds a ``TOKENIZER_INVALID`` warning to the assembly.
None of them names the path.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest
from structlog.testing import capture_logs
from tokenizers import Tokenizer as HfTokenizer
from tokenizers import models, pre_tokenizers, trainers

from ipc.channels.system import problem_reports
from services.assembly.service import AssembleRequest
from services.context.models import BudgetProfile
from services.tokenizer.registry import HuggingFaceTokenizer, TokenizerRegistry
from services.tokenizer.resolve import resolve_tokenizer
from tests.services.assembly.fakes import World

WAIT = 10.0  # seconds a load may take here; a FIFO opened to read without a writer never returns


def save_tokenizer(path: Path) -> None:
    hf = HfTokenizer(models.WordLevel(unk_token="[UNK]"))
    hf.pre_tokenizer = pre_tokenizers.Whitespace()
    hf.train_from_iterator(["the keeper hid the key"], trainer=trainers.WordLevelTrainer(
        special_tokens=["[UNK]"]))
    hf.save(str(path))


def replace_file(path: Path, data: bytes) -> None:
    """A new file at ``path`` (a new inode, as an editor or a download leaves it)."""
    path.unlink(missing_ok=True)
    path.write_bytes(data)


@pytest.mark.parametrize(("broken", "reason"), [
    ("missing", "missing"), ("empty", "not_a_tokenizer"), ("json", "not_a_tokenizer"),
    ("latin1", "unreadable"), ("folder", "unreadable"), ("fifo", "unreadable")])
async def test_each_kind_of_broken_file_has_its_reason(tmp_path: Path, broken: str, reason: str) -> None:
    """Missing, not a tokenizer (empty, other JSON), unreadable (not UTF-8, a folder, a FIFO with no
    writer, which must not block the load): the default encoding counts, and problem() says why."""
    path = tmp_path / "tokenizer.json"
    if broken == "empty":
        path.write_text("")
    elif broken == "json":
        path.write_text('{"model": "none"}')
    elif broken == "latin1":
        path.write_bytes('{"é": 1}'.encode("latin-1"))
    elif broken == "folder":
        path.mkdir()
    elif broken == "fifo":
        os.mkfifo(path)
    tokens = TokenizerRegistry(default_encoding="cl100k_base")
    tokenizer = await asyncio.wait_for(asyncio.to_thread(tokens.for_model, "qwen", str(path)), WAIT)
    assert tokenizer.count("the sea wind") == resolve_tokenizer("cl100k_base").count("the sea wind")
    problem = tokens.problem(str(path))
    assert problem is not None
    assert (problem.code, problem.reason, problem.fallback_encoding) == ("TOKENIZER_INVALID", reason,
                                                                          "cl100k_base")


def test_a_failed_file_is_tried_again_only_when_it_changes(tmp_path: Path) -> None:
    """A broken file is read once (one log line, no path in it) however often it is asked for; made a
    tokenizer (a new file), it is loaded and its problem is gone; broken again, the problem is back."""
    path = tmp_path / "tokenizer.json"
    path.write_text("{}")
    tokens = TokenizerRegistry()
    with capture_logs() as logs:
        for _ in range(5):
            tokens.for_model("qwen", str(path))
    failed = [entry for entry in logs if entry["event"] == "tokenizer.file_failed"]
    assert [entry["reason"] for entry in failed] == ["not_a_tokenizer"]
    assert str(tmp_path) not in repr(failed)

    save_tokenizer(tmp_path / "fixed.json")
    os.replace(tmp_path / "fixed.json", path)
    assert isinstance(tokens.for_model("qwen", str(path)), HuggingFaceTokenizer)
    assert tokens.problem(str(path)) is None

    replace_file(path, b"[1, 2")
    assert tokens.for_model("qwen", str(path)).info.encoding == "cl100k_base"
    assert tokens.problem(str(path)) is not None


def test_problems_are_kept_per_project_for_system_info(tmp_path: Path) -> None:
    """for_project remembers which projects count without their tokenizer file, since when (the
    first time this problem was found), and forgets a project whose path is cleared or works; the
    system:info reports carry id, code, reason, encoding and time, and no path."""
    broken, good = tmp_path / "secret-broken" / "tokenizer.json", tmp_path / "tokenizer.json"
    broken.parent.mkdir()
    broken.write_text("not json")
    save_tokenizer(good)
    tokens = TokenizerRegistry()
    tokens.for_project("b", "qwen", str(broken))
    first = tokens.problems()["b"]
    tokens.for_project("a", "qwen", str(broken))
    tokens.for_project("b", "qwen", str(broken))
    tokens.for_project("c", "qwen", str(good))
    tokens.for_project("d", "gpt-4o", None)
    assert list(tokens.problems()) == ["a", "b"]
    assert tokens.problems()["b"] is first
    reports = [report.model_dump(by_alias=True, mode="json") for report in problem_reports(tokens.problems())]
    assert [(r["projectId"], r["code"], r["reason"], r["fallbackEncoding"]) for r in reports] == [
        ("a", "TOKENIZER_INVALID", "not_a_tokenizer", "cl100k_base"),
        ("b", "TOKENIZER_INVALID", "not_a_tokenizer", "cl100k_base")]
    assert "secret-broken" not in repr(reports)
    tokens.for_project("a", "qwen", None)
    tokens.for_project("b", "qwen", str(good))
    assert tokens.problems() == {}


@pytest.mark.parametrize(("language", "expected"), [
    ("en", "TOKENIZER_INVALID: the project's tokenizer file is not a valid tokenizer.json; "
           "counted with cl100k_base instead"),
    ("zh", "TOKENIZER_INVALID: 项目设置的分词器文件不是有效的 tokenizer.json，已改用 cl100k_base 计数")])
async def test_assembly_warns_and_keeps_the_projects_budget(tmp_path: Path, language: str,
                                                            expected: str) -> None:
    """An assembly of a project whose tokenizer file is no tokenizer carries one TOKENIZER_INVALID
    warning in the project's language, counts exactly with the default encoding, and keeps the
    project's own budget profile (only a failing tokenizer falls back to the default budget)."""
    path = tmp_path / "private" / "tokenizer.json"
    path.parent.mkdir()
    path.write_text('{"not": "a tokenizer"}')
    world = World(documents={"c.md": "the keeper hid the key. " * 50},
                  profile=BudgetProfile(context_window=6000, output_reserve=500))
    world.settings.language = language
    world.settings.tokenizer_path = str(path)
    service = world.service()
    outcome = await service.assemble(AssembleRequest("p1", "c.md", 100, "continue"))
    assert [w for w in outcome.assembly.warnings if w.startswith("TOKENIZER")] == [expected]
    assert not any(w.startswith("CONTEXT_BUDGET_FALLBACK") for w in outcome.assembly.warnings)
    assert (outcome.tokenizer, outcome.exact) == ("cl100k_base", True)
    assert outcome.assembly.budget.total <= 6000 - 500
    assert "private" not in repr(outcome.assembly.warnings)

    save_tokenizer(tmp_path / "new.json")
    os.replace(tmp_path / "new.json", path)
    outcome = await service.assemble(AssembleRequest("p1", "c.md", 100, "continue"))
    assert [w for w in outcome.assembly.warnings if w.startswith("TOKENIZER")] == []
    assert outcome.tokenizer == "hf:tokenizer.json"


def test_at_most_max_files_tokenizer_files_are_held(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Tokenizer files are held up to MAX_FILES, the least recently used dropped first (and loaded
    again when next asked for): a client cycling through paths cannot pile up vocabularies."""
    monkeypatch.setattr(TokenizerRegistry, "MAX_FILES", 2)
    paths = [tmp_path / f"t{n}.json" for n in range(3)]
    for path in paths:
        save_tokenizer(path)
    tokens = TokenizerRegistry()
    first = tokens.for_model("m", str(paths[0]))
    second = tokens.for_model("m", str(paths[1]))
    assert tokens.for_model("m", str(paths[0])) is first  # used again: now the most recent
    tokens.for_model("m", str(paths[2]))  # drops paths[1]
    assert tokens.for_model("m", str(paths[0])) is first
    assert tokens.for_model("m", str(paths[1])) is not second
