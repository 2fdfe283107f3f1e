"""Helpers for the context-engine scenario tests: Chinese fixtures and a project seeded over JSON-RPC.

Everything here speaks only the protocol (``RpcClient`` over the real
websocket), so a scenario test reads like what a renderer or the AI service
would do.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.support.client import RpcCallError, RpcClient

# Section headers of the Chinese prompt (docs/budget.md, services/context/render.py).
CONSTRAINTS_HEADER = "[创作约束 - 不可违反]"
NARRATIVE_HEADER = "[叙述设定]"
ENTITIES_HEADER = "[角色与世界设定]"
PREFERENCES_HEADER = "[写作偏好]"
STYLE_HEADER = "[风格说明]"
HISTORY_HEADER = "[历史交互参考]"
WINDOW_HEADER = "[当前正文]"
INSTRUCTION_HEADER = "[用户指令]"
CURSOR_MARK = "【光标】"
# A fact planted in an early chapter, and an instruction that asks for it in other words: the
# retrieval tests' probe that the Retrieved layer finds earlier text.
KEY_FACT = "林远把铜钥匙藏在灯塔第三级台阶下的砖缝里，又用青苔盖住了缝隙。"
KEY_INSTRUCTION = "写林远想起那把铜钥匙藏在哪里"
LAYERS = ("rules", "settings", "retrieved", "immediate")
SKILLS = ("continue", "polish", "expand", "rewrite")

# Prose for chapters: every sentence carries its index, so any window is recognisable.
_TEMPLATES = (
    "我数到第{n}级台阶，停下来听了一会儿海浪。",
    "灯室里的钟敲了{n}下，风从窗缝里钻进来。",
    "第{n}盏马灯挂在墙上，火苗晃了一下。",
    "我在日志上写下第{n}行字，字迹被潮气洇开。",
    "远处第{n}艘渔船亮着灯，慢慢靠向港口。",
    "林远把第{n}块木板钉回原处，没有说话。",
)

# Names for the knowledge graph: none of them occurs in chapter prose unless put there on purpose.
_SURNAMES = "赵钱孙李吴郑王冯陈褚卫蒋沈韩杨朱秦尤许何"
_GIVEN = ("子墨", "若雪", "青山", "明轩", "婉清")


def zh_sentence(n: int) -> str:
    return _TEMPLATES[n % len(_TEMPLATES)].format(n=n)


def zh_chapter(title: str, sentences: int, start: int = 1, per_paragraph: int = 5) -> str:
    """A chapter of ``sentences`` distinct sentences, in paragraphs, under a Markdown title."""
    paragraphs = []
    for first in range(start, start + sentences, per_paragraph):
        last = min(first + per_paragraph, start + sentences)
        paragraphs.append("".join(zh_sentence(n) for n in range(first, last)))
    return f"# {title}\n\n" + "\n\n".join(paragraphs) + "\n"


def zh_names(count: int) -> list[str]:
    """``count`` distinct two- or three-character Chinese names."""
    names = [s + g for g in _GIVEN for s in _SURNAMES]
    assert count <= len(names)
    return names[:count]


def sha256_hex(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def joined_layers(layer_texts: dict[str, str]) -> str:
    """The prompt docs/budget.md promises: the non-empty layers in order, joined by a blank line."""
    return "\n\n".join(layer_texts[name] for name in LAYERS if layer_texts[name])


def log_events(stderr: str, event: str) -> list[dict[str, Any]]:
    """The server's JSON log lines (stderr) with this ``event``."""
    found = []
    for line in stderr.splitlines():
        if line.startswith("{"):
            record = json.loads(line)
            if record.get("event") == event:
                found.append(record)
    return found


def _make_folder(folder: Path) -> str:
    folder.mkdir(parents=True, exist_ok=True)
    return str(folder.resolve())


async def rpc_error(rpc: RpcClient, method: str, params: dict[str, Any]) -> dict[str, Any]:
    """Call ``method`` expecting an error; return the JSON-RPC error object."""
    try:
        result = await rpc.call(method, params)
    except RpcCallError as exc:
        return exc.error
    raise AssertionError(f"{method} succeeded, an error was expected: {sorted(result)}")


@dataclass
class Project:
    """A project folder opened over the protocol, with seeding and assembly shortcuts."""

    rpc: RpcClient
    project_id: str
    folder: Path

    @classmethod
    async def open(cls, rpc: RpcClient, folder: Path, *, narrative_person: str | None = None,
                   style_notes: str | None = None, language: str | None = None) -> Project:
        path = await asyncio.to_thread(_make_folder, folder)
        opened = await rpc.call("project:open", {"path": path})
        project = cls(rpc, str(opened["project"]["projectId"]), folder)
        changes = {key: value for key, value in (("narrativePerson", narrative_person),
                                                 ("styleNotes", style_notes), ("language", language))
                   if value is not None}
        if changes:
            await project.update_settings(**changes)
        return project

    async def update_settings(self, **changes: Any) -> dict[str, Any]:
        current = await self.rpc.call("project:settings:get", {"projectId": self.project_id})
        updated = await self.rpc.call("project:settings:update", {
            "projectId": self.project_id, "version": current["settings"]["version"], **changes})
        return dict(updated["settings"])

    async def write(self, document_id: str, text: str) -> str:
        await self.rpc.call("document:write", {"projectId": self.project_id, "documentId": document_id,
                                               "text": text})
        return text

    async def constraint(self, text: str, *, kind: str = "narrative", priority: int = 0,
                         source: str = "user") -> dict[str, Any]:
        created = await self.rpc.call("constraints:create", {
            "projectId": self.project_id, "kind": kind, "text": text, "priority": priority,
            "source": source})
        return dict(created["constraint"])

    async def entity(self, name: str, description: str, *, kind: str = "character",
                     aliases: Sequence[str] = ()) -> dict[str, Any]:
        upserted = await self.rpc.call("kg:entity:upsert", {
            "projectId": self.project_id, "kind": kind, "name": name, "aliases": list(aliases),
            "description": description})
        return dict(upserted["entity"])

    async def rule(self, text: str, *, confidence: float, confirmed: bool = True) -> dict[str, Any]:
        upserted = await self.rpc.call("memory:semantic:upsert", {
            "projectId": self.project_id, "text": text, "confidence": confidence, "confirmed": confirmed})
        return dict(upserted["rule"])

    async def episode(self, instruction: str, output: str, *, skill_id: str = "continue") -> dict[str, Any]:
        added = await self.rpc.call("memory:episodic:add", {
            "projectId": self.project_id, "instruction": instruction, "output": output,
            "skillId": skill_id})
        return dict(added["episode"])

    async def budget(self, **patch: Any) -> dict[str, Any]:
        """Update the budget profile from its current version; return the new profile."""
        current = await self.rpc.call("context:budget:get", {"projectId": self.project_id})
        return dict(await self.rpc.call("context:budget:update", {
            "projectId": self.project_id, "version": current["version"], **patch}))

    def params(self, document_id: str, cursor: int, skill: str = "continue",
               additional_input: str | None = None) -> dict[str, Any]:
        params: dict[str, Any] = {"projectId": self.project_id, "documentId": document_id,
                                  "cursorPosition": cursor, "skillId": skill}
        if additional_input is not None:
            params["additionalInput"] = additional_input
        return params

    async def assemble(self, document_id: str, cursor: int, skill: str = "continue",
                       additional_input: str | None = None, *, rpc: RpcClient | None = None
                       ) -> dict[str, Any]:
        result = await (rpc or self.rpc).call(
            "context:assemble", self.params(document_id, cursor, skill, additional_input))
        return dict(result)

    async def inspect(self, inspector: RpcClient, document_id: str, cursor: int, skill: str = "continue",
                      additional_input: str | None = None) -> dict[str, Any]:
        result = await inspector.call(
            "context:inspect", self.params(document_id, cursor, skill, additional_input))
        return dict(result)


def candidates(inspected: dict[str, Any], *, layer: str | None = None, section: str | None = None,
               fate: str | None = None) -> list[dict[str, Any]]:
    """The inspect candidates matching every filter given."""
    return [c for c in inspected["candidates"]
            if (layer is None or c["layer"] == layer) and (section is None or c["section"] == section)
            and (fate is None or c["fate"] == fate)]
