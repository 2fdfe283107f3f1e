"""Every scenario of the context-engine spec, black-box, over the real websocket.

One ``python -m main serve --debug`` child serves the whole module; each test
opens its own project folder and seeds it through JSON-RPC only
(``project:open``, ``document:write``, ``constraints:create``,
``kg:entity:upsert``, ``memory:*``, ``project:settings:update``,
``context:budget:update``). Fixtures are Chinese, as the spec is.

The error-matrix rows 层数据格式非法 and token 统计为负值 cannot be reached
through the protocol (every record is validated on the way in: text is
trimmed and non-empty, counts come from the server's own tokenizer); they are
pinned by the unit tests of ``services/context/screening.py``.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from tests.support.client import RpcClient, connected
from tests.support.process import ServerProcess, start_server
from tests.support.scenarios import (
    CONSTRAINTS_HEADER,
    CURSOR_MARK,
    ENTITIES_HEADER,
    HISTORY_HEADER,
    INSTRUCTION_HEADER,
    LAYERS,
    NARRATIVE_HEADER,
    PREFERENCES_HEADER,
    SKILLS,
    STYLE_HEADER,
    WINDOW_HEADER,
    Project,
    candidates,
    joined_layers,
    log_events,
    rpc_error,
    sha256_hex,
    zh_chapter,
    zh_names,
    zh_sentence,
)

SetFaults = Callable[[list[str]], Awaitable[None]]

RESULT_FIELDS = {"prompt", "tokenCount", "stablePrefixHash", "stablePrefixUnchanged", "layers", "warnings"}


pytestmark = pytest.mark.server_flags("--debug")


@pytest.fixture
async def inspector(proc: ServerProcess) -> AsyncIterator[RpcClient]:
    """The debug inspector's connection (may call context:inspect and debug:faults:set)."""
    async with connected(proc.url, str(proc.ready["inspectorToken"])) as client:
        yield client


@pytest.fixture
async def faults(inspector: RpcClient) -> AsyncIterator[SetFaults]:
    """Switch injected faults on; they are switched off again after the test."""
    async def set_faults(names: list[str]) -> None:
        assert (await inspector.call("debug:faults:set", {"faults": names}))["faults"] == sorted(names)

    try:
        yield set_faults
    finally:
        await set_faults([])


# ---------------------------------------------------------------------------------------------
# Fixtures shared by several scenarios


async def seed_lighthouse(project: Project) -> dict[str, dict[str, Any]]:
    """The sample novel's records: constraints (one kg-derived), entities, rules, past interactions."""
    return {
        "narrative": await project.constraint("严格第一人称叙述，不出现主角不在场的场景", kind="narrative",
                                              priority=10),
        "world": await project.constraint("本世界没有魔法，所有能力基于科技", kind="world", priority=9),
        "kg_character": await project.constraint("林远性格冷静，不会大声喊叫", kind="character",
                                                 priority=8, source="kg"),
        "lin": await project.entity("林远", "灯塔看守人，四十岁，沉默，习惯提着旧马灯。",
                                    aliases=["灯塔看守人"]),
        "su": await project.entity("苏晴", "林远失散多年的妹妹，在港口的医院工作。"),
        "lighthouse": await project.entity("灯塔", "海角尽头的旧灯塔，螺旋台阶通往灯室。", kind="location"),
        "short": await project.rule("动作场景偏好短句", confidence=0.92),
        "adverbs": await project.rule("对白前后少用副词修饰", confidence=0.81),
        "unconfirmed": await project.rule("喜欢用天气映衬人物情绪", confidence=0.55, confirmed=False),
        "episode_key": await project.episode("续写林远藏钥匙的场景",
                                             "他把钥匙放进台阶下，木板合上时没有一点声音。"),
        "episode_storm": await project.episode("润色暴风雨的开头", "雨来得很急。灯室的玻璃在风里发抖。",
                                               skill_id="polish"),
    }


def cursor_after(text: str, sentence: int) -> int:
    """The code-point offset just after sentence number ``sentence`` of a ``zh_chapter``."""
    marker = zh_sentence(sentence)
    return text.index(marker) + len(marker)


def immediate_body(prompt: str) -> str:
    """The window text of the Immediate layer (without its header or an instruction)."""
    body = prompt.split(WINDOW_HEADER + "\n", 1)[1]
    return body.split("\n\n" + INSTRUCTION_HEADER, 1)[0]


def layer_sum(result: dict[str, Any]) -> int:
    return sum(int(result["layers"][name]["tokens"]) for name in LAYERS)


async def total_of_6k(project: Project, document_id: str, **patch: Any) -> dict[str, Any]:
    """Budget an 8K window so that total = 6000: the output reserve absorbs the system prompt."""
    probe = await project.assemble(document_id, 0)
    system_tokens = probe["budget"]["systemPromptTokens"]
    return await project.budget(contextWindow=8192, outputReserve=8192 - 6000 - system_tokens, **patch)


# ---------------------------------------------------------------------------------------------
# Requirement: 四层上下文架构


async def test_four_layer_normal_assembly(rpc: RpcClient, inspector: RpcClient, tmp_path: Path) -> None:
    """「四层上下文正常组装」：第十章续写，知识图谱与语义记忆齐全。

    Rules carries 叙述人称「第一人称」 and 角色「林远」's sheet; Settings the confirmed rule
    「动作场景偏好短句」 (not the unconfirmed one); Retrieved the past interactions (document-chunk
    retrieval is a later issue, so for now Retrieved is filled from episodic memory); Immediate the
    chapter text just before the cursor, 2000 tokens of it (a 4K model: the Immediate share is below
    its 2000-token minimum, so the minimum is the window); and the prompt is the four layers, in
    that order, joined by blank lines.
    """
    project = await Project.open(rpc, tmp_path / "灯塔", narrative_person="第一人称")
    records = await seed_lighthouse(project)
    await project.budget(contextWindow=4096)
    chapter = await project.write("第十章.md", zh_chapter("第十章 归航", 200))
    cursor = cursor_after(chapter, 180)

    result = await project.assemble("第十章.md", cursor)

    prompt = result["prompt"]
    assert result["warnings"] == []
    rules = prompt.split("\n\n" + PREFERENCES_HEADER, 1)[0]
    assert f"{NARRATIVE_HEADER}\n叙述人称：第一人称" in rules
    assert f"- 林远（角色；别名：灯塔看守人）：{records['lin']['description']}" in rules
    assert "1. 严格第一人称叙述，不出现主角不在场的场景" in rules
    assert f"{PREFERENCES_HEADER}\n- 动作场景偏好短句\n- 对白前后少用副词修饰\n\n" in prompt
    assert "喜欢用天气映衬人物情绪" not in prompt
    assert f"{HISTORY_HEADER}\n" in prompt
    assert "采纳：他把钥匙放进台阶下，木板合上时没有一点声音。" in prompt
    assert "采纳：雨来得很急。灯室的玻璃在风里发抖。" in prompt
    assert result["layers"]["retrieved"]["chunks"] == 2

    order = [prompt.index(header) for header in (CONSTRAINTS_HEADER, PREFERENCES_HEADER, HISTORY_HEADER,
                                                 WINDOW_HEADER)]
    assert order == sorted(order)
    assert prompt.startswith(CONSTRAINTS_HEADER)
    window = immediate_body(prompt)
    assert prompt.endswith(WINDOW_HEADER + "\n" + window)
    assert chapter[:cursor].endswith(window)
    assert zh_sentence(181) not in prompt  # 续写 only looks back from the cursor
    assert len(window) < cursor  # a window, not the whole chapter

    inspected = await project.inspect(inspector, "第十章.md", cursor)
    assert inspected["prompt"] == prompt
    assert joined_layers(inspected["layerTexts"]) == prompt
    [window_item] = candidates(inspected, section="window")
    assert window_item["fate"] == "included"
    assert 1950 <= window_item["tokens"] <= 2000
    assert all(inspected["layerTexts"][name] for name in LAYERS)
    assert all(not result["layers"][name]["truncated"] for name in LAYERS)
    assert result["tokenCount"] <= result["budget"]["total"]


async def test_new_project_has_empty_rules_and_settings(rpc: RpcClient, tmp_path: Path) -> None:
    """「新项目——Rules 和 Settings 为空」：无创作规则、无语义记忆、无历史内容。

    Rules, Settings and Retrieved are empty (0 tokens, not in the prompt); the prompt is only the
    Immediate layer holding the text being edited; the skill's own base system prompt is returned
    beside it; no warnings: the generic mode works.
    """
    project = await Project.open(rpc, tmp_path / "新项目")
    text = await project.write("第一章.md", "# 第一章\n\n我推开灯塔的门，海风一下子灌了进来。")

    result = await project.assemble("第一章.md", len(text))

    assert result["warnings"] == []
    for name in ("rules", "settings", "retrieved"):
        assert result["layers"][name]["tokens"] == 0
        assert result["layers"][name]["truncated"] is False
    assert result["layers"]["retrieved"]["chunks"] == 0
    assert result["prompt"] == f"{WINDOW_HEADER}\n{text}"
    assert result["stablePrefixHash"] == sha256_hex("")
    assert "续写" in result["systemPrompt"]
    assert 0 < result["tokenCount"] <= result["budget"]["total"]
    assert result["layers"]["immediate"]["tokens"] == result["tokenCount"]


# ---------------------------------------------------------------------------------------------
# Requirement: Token 预算管理


async def seed_budget_project(project: Project, *, constraints: int, entities: int, rules: int,
                              episodes: int) -> None:
    """Many small records of every layer source, for the budget scenarios."""
    for n in range(constraints):
        await project.constraint(f"第{n + 1}条约束：{zh_sentence(500 + n)}", kind="plot", priority=100 - n)
    for n, name in enumerate(zh_names(entities)):
        await project.entity(name, f"港口镇的居民，{zh_sentence(600 + n)}")
    for n in range(rules):
        await project.rule(f"偏好{n + 1}：{zh_sentence(700 + n)}", confidence=round(0.9 - n / 100, 2))
    for n in range(episodes):
        output = "".join(zh_sentence(1000 + 10 * n + k) for k in range(9))
        await project.episode(f"续写第{n + 1}段", output)


async def test_within_budget_nothing_is_trimmed(rpc: RpcClient, inspector: RpcClient,
                                                tmp_path: Path) -> None:
    """「Token 预算内——不裁剪」：8K 窗口，总预算 6K，四层合计约 5500 tokens。

    Everything is injected whole: no layer is truncated, every candidate is "included", the
    whole chapter before the cursor is in the window, no warnings, and tokenCount stays under 6K.
    """
    project = await Project.open(rpc, tmp_path / "预算内", narrative_person="第一人称",
                                 style_notes="；".join(zh_sentence(800 + n) for n in range(7)))
    chapter = await project.write("第三章.md", zh_chapter("第三章 雾", 105))
    profile = await total_of_6k(project, "第三章.md")
    assert profile["contextWindow"] == 8192
    await seed_budget_project(project, constraints=10, entities=8, rules=10, episodes=6)

    result = await project.assemble("第三章.md", len(chapter))
    inspected = await project.inspect(inspector, "第三章.md", len(chapter))

    assert result["budget"]["total"] == 6000
    assert 5200 <= result["tokenCount"] <= 5800
    assert result["warnings"] == []
    assert all(result["layers"][name]["truncated"] is False for name in LAYERS)
    assert {(c["fate"], c["reason"]) for c in inspected["candidates"]} == {("included", None)}
    assert all(c["keptTokens"] == c["tokens"] for c in inspected["candidates"])
    assert result["prompt"].endswith(f"{WINDOW_HEADER}\n{chapter}")
    assert f"{STYLE_HEADER}\n" in result["prompt"]
    assert result["layers"]["retrieved"]["chunks"] == 6
    assert len(candidates(inspected, layer="rules")) == 1 + 10 + 8


async def test_over_budget_trims_retrieved(rpc: RpcClient, inspector: RpcClient, tmp_path: Path) -> None:
    """「Token 超出预算——裁剪 Retrieved 层」：总预算 6K，四层约 7500（Retrieved 约 2500）。

    Retrieved is cut first, lowest score first, whole chunks, only until the prompt fits 6K (putting
    back the best dropped chunk would not fit); Rules, Settings and Immediate stay complete.
    """
    project = await Project.open(rpc, tmp_path / "超预算", narrative_person="第一人称",
                                 style_notes="；".join(zh_sentence(800 + n) for n in range(10)))
    chapter = await project.write("第四章.md", zh_chapter("第四章 潮", 200))
    await total_of_6k(project, "第四章.md",
                      ratios={"rules": 0.15, "settings": 0.10, "retrieved": 0.15, "immediate": 0.60})
    await seed_budget_project(project, constraints=12, entities=8, rules=12, episodes=10)

    result = await project.assemble("第四章.md", len(chapter))
    inspected = await project.inspect(inspector, "第四章.md", len(chapter))

    total = result["budget"]["total"]
    assert total == 6000
    assert result["tokenCount"] <= total
    assert inspected["prompt"] == result["prompt"]
    retrieved = candidates(inspected, layer="retrieved")
    gathered = sum(c["tokens"] for c in inspected["candidates"])
    assert 7000 <= gathered <= 8000
    assert 2200 <= sum(c["tokens"] for c in retrieved) <= 2800

    assert result["layers"]["retrieved"]["truncated"] is True
    assert [result["layers"][name]["truncated"] for name in ("rules", "settings", "immediate")] == [False] * 3
    assert all(c["fate"] == "included" for c in inspected["candidates"] if c["layer"] != "retrieved")
    kept = [c for c in retrieved if c["fate"] == "included"]
    cut = [c for c in retrieved if c["fate"] == "dropped"]
    assert kept
    assert cut
    assert {c["reason"] for c in cut} == {"budget"}
    assert min(c["key"] for c in kept) >= max(c["key"] for c in cut)
    assert result["layers"]["retrieved"]["chunks"] == len(kept)
    best_cut = max(cut, key=lambda c: c["key"])
    assert result["tokenCount"] + best_cut["tokens"] > total
    assert result["warnings"] == []


async def test_rules_alone_over_budget(rpc: RpcClient, inspector: RpcClient, proc: ServerProcess,
                                       tmp_path: Path) -> None:
    """「极端场景——Rules 层单独超出预算」：知识图谱有 100 个角色，Rules 约 2000+ tokens。

    The answer warns CONTEXT_RULES_OVERBUDGET (and the server logs context.rules_overbudget); Rules
    keeps only the entity sheets most relevant to the text being edited — the characters named near
    the cursor (林远, 苏晴, 周岚) survive, and every kept unnamed sheet is at least as relevant as every
    dropped one (reason rules_relevance) — so Rules fits its 15% share; the other layers are normal.
    """
    project = await Project.open(rpc, tmp_path / "百人", narrative_person="第一人称")
    await project.constraint("严格第一人称叙述", priority=10)
    names = zh_names(97)
    chapter = zh_chapter("第八章 码头", 150) + "苏晴站在码头上，周岚举着灯跟在她身后。\n"
    assert not any(name in chapter for name in names)
    ids: dict[int, str] = {}
    for n, name in enumerate(names):
        description = ("常在灯室和台阶附近出没，熟悉渔船。" if n % 3 == 0 else "住在山那边的镇子上。")
        ids[(await project.entity(name, description))["id"]] = name
    for name in ("林远", "苏晴", "周岚"):
        ids[(await project.entity(name, "主要人物。"))["id"]] = name
    await project.rule("动作场景偏好短句", confidence=0.9)
    await project.episode("续写码头的场景", "码头上的灯一盏一盏亮了。")
    await project.write("第八章.md", chapter)

    result = await project.assemble("第八章.md", len(chapter))
    inspected = await project.inspect(inspector, "第八章.md", len(chapter))

    assert any(w.startswith("CONTEXT_RULES_OVERBUDGET") for w in result["warnings"])
    assert [e for e in log_events(proc.stderr_text(), "context.rules_overbudget")
            if e["project_id"] == project.project_id]
    sheets = candidates(inspected, section="entities")
    assert len(sheets) == 100
    assert sum(c["tokens"] for c in candidates(inspected, layer="rules")) >= 2000
    fates = {ids[int(c["id"].split(":")[1])]: c for c in sheets}
    for name in ("林远", "苏晴", "周岚"):
        assert fates[name]["fate"] == "included"
        assert f"- {name}（角色）：主要人物。" in result["prompt"]
    dropped = [c for c in sheets if c["fate"] == "dropped"]
    assert len(dropped) > 50
    assert {c["reason"] for c in dropped} == {"rules_relevance"}
    unnamed_kept = [c for name, c in fates.items()
                    if c["fate"] == "included" and name not in ("林远", "苏晴", "周岚")]
    assert min(c["key"] for c in unnamed_kept) >= max(c["key"] for c in dropped)
    assert result["layers"]["rules"]["tokens"] <= inspected["arithmetic"]["shares"]["rules"]
    assert "1. 严格第一人称叙述" in result["prompt"]
    assert "叙述人称：第一人称" in result["prompt"]
    assert [c["fate"] for c in inspected["candidates"] if c["layer"] != "rules"] == ["included"] * 3
    assert [result["layers"][name]["truncated"] for name in ("settings", "retrieved", "immediate")] \
        == [False] * 3
    assert result["tokenCount"] <= result["budget"]["total"]


# ---------------------------------------------------------------------------------------------
# Requirement: Stable Prefix Hash


async def test_consecutive_continues_hit_the_prefix_cache(rpc: RpcClient, inspector: RpcClient,
                                                         tmp_path: Path) -> None:
    """「连续续写——Stable Prefix 命中缓存」：连续 3 次续写，Rules 与 Settings 不变。

    Between the calls the writer accepts each continuation (the chapter grows, a past interaction
    is recorded), so Immediate changes; the 2nd and 3rd assemblies report the same
    stablePrefixHash (the SHA-256 of the Rules + Settings text that opens the prompt) and
    stablePrefixUnchanged: true, while the Immediate prefix hash moves. The recorded interactions
    repeat what the window now holds, so they are duplicates and Retrieved stays as it was.
    """
    project = await Project.open(rpc, tmp_path / "连续", narrative_person="第一人称")
    await seed_lighthouse(project)
    chapter = await project.write("第九章.md", zh_chapter("第九章 夜航", 60))

    results = []
    for n in range(3):
        results.append(await project.assemble("第九章.md", len(chapter), additional_input="继续写"))
        accepted = zh_sentence(900 + n)
        chapter = await project.write("第九章.md", chapter + accepted)
        await project.episode("继续写", accepted)

    assert [r["stablePrefixUnchanged"] for r in results] == [False, True, True]
    assert len({r["stablePrefixHash"] for r in results}) == 1
    assert len({r["prefixHashes"]["rules"] for r in results}) == 1
    assert len({r["prefixHashes"]["settings"] for r in results}) == 1
    assert len({r["prefixHashes"]["retrieved"] for r in results}) == 1
    assert len({r["prefixHashes"]["immediate"] for r in results}) == 3
    assert all(r["prefixDivergence"] is None for r in results)

    inspected = await project.inspect(inspector, "第九章.md", len(chapter))
    texts = inspected["layerTexts"]
    stable = texts["rules"] + "\n\n" + texts["settings"]
    assert inspected["prompt"].startswith(stable + "\n\n")
    assert inspected["stablePrefixHash"] == sha256_hex(stable) == results[0]["stablePrefixHash"]


async def test_settings_change_invalidates_the_prefix(rpc: RpcClient, tmp_path: Path) -> None:
    """「Settings 变更导致缓存失效」：用户在记忆面板确认了一条新的语义记忆规则。

    Learning an unconfirmed rule changes nothing; once the writer confirms it, the next assembly
    has the rule in Settings, a different stablePrefixHash, stablePrefixUnchanged: false and
    prefixDivergence in the "settings" layer (after the unchanged Rules bytes); the assembly
    after that is cached again.
    """
    project = await Project.open(rpc, tmp_path / "记忆", narrative_person="第一人称")
    await seed_lighthouse(project)
    chapter = await project.write("第六章.md", zh_chapter("第六章 来信", 40))
    first = await project.assemble("第六章.md", len(chapter))

    learned = await project.rule("雨夜场景多写声音", confidence=0.85, confirmed=False)
    unconfirmed = await project.assemble("第六章.md", len(chapter))
    assert unconfirmed["stablePrefixUnchanged"] is True
    assert "雨夜场景多写声音" not in unconfirmed["prompt"]

    await rpc.call("memory:semantic:upsert", {"projectId": project.project_id, "id": learned["id"],
                                              "confirmed": True})
    second = await project.assemble("第六章.md", len(chapter))
    third = await project.assemble("第六章.md", len(chapter))

    assert f"{PREFERENCES_HEADER}\n- 动作场景偏好短句\n- 雨夜场景多写声音\n- 对白前后少用副词修饰" \
        in second["prompt"]
    assert second["stablePrefixHash"] != first["stablePrefixHash"]
    assert second["stablePrefixUnchanged"] is False
    assert second["prefixHashes"]["rules"] == first["prefixHashes"]["rules"]
    divergence = second["prefixDivergence"]
    assert divergence["layer"] == "settings"
    rules_bytes = len(second["prompt"].split("\n\n" + PREFERENCES_HEADER, 1)[0].encode("utf-8"))
    assert divergence["byteOffset"] > rules_bytes
    assert first["prompt"].encode()[:divergence["byteOffset"]] == \
        second["prompt"].encode()[:divergence["byteOffset"]]
    assert third["stablePrefixUnchanged"] is True
    assert third["stablePrefixHash"] == second["stablePrefixHash"]


# ---------------------------------------------------------------------------------------------
# Requirement: Constraints


async def test_user_adds_a_constraint(rpc: RpcClient, proc: ServerProcess, tmp_path: Path) -> None:
    """「用户添加创作约束」：用户添加约束「主角在第五章之前不知道真相」。

    constraints:create persists it (another connection lists it); from then on every prompt — every
    skill, every document — has it in Rules under 「[创作约束 - 不可违反]」, numbered; a second,
    more important constraint is numbered before it, and the change shows as a Rules divergence.
    """
    project = await Project.open(rpc, tmp_path / "约束", narrative_person="第一人称")
    first = await project.write("第三章.md", zh_chapter("第三章 雾", 30))
    second = await project.write("第四章.md", zh_chapter("第四章 潮", 30, start=31))
    before = await project.assemble("第三章.md", len(first))
    assert CONSTRAINTS_HEADER not in before["prompt"]

    created = await project.constraint("主角在第五章之前不知道真相", kind="plot", priority=7)
    assert created["source"] == "user"

    other = await RpcClient.open(proc.url, proc.token)
    try:
        listed = (await other.call("constraints:list", {"projectId": project.project_id}))["constraints"]
    finally:
        await other.close()
    assert [(c["id"], c["kind"], c["text"], c["source"]) for c in listed] == \
        [(created["id"], "plot", "主角在第五章之前不知道真相", "user")]

    for document, text in (("第三章.md", first), ("第四章.md", second)):
        for skill in SKILLS:
            result = await project.assemble(document, len(text) // 2, skill)
            assert result["prompt"].startswith(f"{CONSTRAINTS_HEADER}\n1. 主角在第五章之前不知道真相\n\n")

    await project.constraint("严格第一人称叙述", kind="narrative", priority=10)
    after = await project.assemble("第三章.md", len(first))
    assert after["prompt"].startswith(
        f"{CONSTRAINTS_HEADER}\n1. 严格第一人称叙述\n2. 主角在第五章之前不知道真相\n\n{NARRATIVE_HEADER}")
    assert after["stablePrefixUnchanged"] is False
    assert after["prefixDivergence"]["layer"] == "rules"


async def test_user_constraints_numbered_in_list_order(rpc: RpcClient, tmp_path: Path) -> None:
    """「用户添加创作约束」：Rules 中的编号顺序与 constraints:list 一致。

    Constraints of equal priority are numbered oldest first, the order constraints:list gives
    (docs/protocol.md), also when their ids pass a power of ten (…, 9, 10, … or …, 99, 100, …),
    so the numbers the writer sees in the list are the numbers in the prompt.
    """
    scratch = await Project.open(rpc, tmp_path / "填充")
    probe = await scratch.constraint("探针", priority=0)
    # Record ids are global: move the next id to just below a power of ten so the run straddles it.
    boundary = 10 ** len(str(probe["id"] + 7))
    filler = boundary - 6 - (probe["id"] + 1)
    for start in range(0, filler, 50):
        await asyncio.gather(*(scratch.constraint(f"填充{n}") for n in range(start, min(start + 50, filler))))
    project = await Project.open(rpc, tmp_path / "编号")
    made = [await project.constraint(f"同级约束{n + 1}", kind="style", priority=5) for n in range(12)]
    assert min(c["id"] for c in made) < boundary <= max(c["id"] for c in made)
    chapter = await project.write("第一章.md", zh_chapter("第一章", 5))

    listed = (await rpc.call("constraints:list", {"projectId": project.project_id}))["constraints"]
    assert [c["id"] for c in listed] == [c["id"] for c in made]
    result = await project.assemble("第一章.md", len(chapter))
    numbered = "\n".join(f"{n}. {c['text']}" for n, c in enumerate(listed, start=1))
    assert result["prompt"].startswith(f"{CONSTRAINTS_HEADER}\n{numbered}\n\n")


async def test_engine_gives_the_judge_the_constraints(rpc: RpcClient, inspector: RpcClient,
                                                      tmp_path: Path) -> None:
    """「AI 生成违反约束时的处理」：Rules 层包含约束「严格第一人称叙述」。

    The Judge that spots third-person output and regenerates or flags it lives in the AI service,
    outside this process. What the engine owes it is pinned here: the constraint is in the prompt's
    Rules verbatim, first, under the 「[创作约束 - 不可违反]」 header, for every skill; the system
    prompt tells the model to obey the constraints; and constraints:list returns the constraint
    with its id (matching the inspect candidate "constraint:<id>") so a verdict can cite it.
    """
    project = await Project.open(rpc, tmp_path / "裁判", narrative_person="第一人称")
    await seed_lighthouse(project)
    rule = await project.constraint("严格第一人称叙述", kind="narrative", priority=100)
    chapter = await project.write("第五章.md", zh_chapter("第五章 暴风雨", 40))

    listed = (await rpc.call("constraints:list", {"projectId": project.project_id}))["constraints"]
    assert listed[0] == rule
    assert (listed[0]["text"], listed[0]["kind"], listed[0]["source"]) == \
        ("严格第一人称叙述", "narrative", "user")

    for skill in SKILLS:
        result = await project.assemble("第五章.md", len(chapter) // 2, skill)
        assert result["prompt"].startswith(f"{CONSTRAINTS_HEADER}\n1. 严格第一人称叙述\n2. ")
        assert "遵守所有创作约束" in result["systemPrompt"]

    inspected = await project.inspect(inspector, "第五章.md", len(chapter))
    [item] = [c for c in inspected["candidates"] if c["id"] == f"constraint:{rule['id']}"]
    assert (item["layer"], item["section"], item["fate"], item["key"]) == \
        ("rules", "constraints", "included", 100)


async def test_too_many_constraints_bloat_rules(rpc: RpcClient, inspector: RpcClient, proc: ServerProcess,
                                                tmp_path: Path) -> None:
    """「约束过多导致 Rules 层膨胀」：30 条用户约束加上知识图谱设定，Rules 约 3000 tokens。

    The answer warns CONTEXT_RULES_OVERBUDGET; Rules sheds knowledge-graph content (entity sheets,
    then kg-derived constraints, lowest priority first) and never a user constraint: all 30 stay,
    numbered first; each cut constraint is listed by context:inspect with reason rules_overbudget
    and logged by id (context.constraints_cut).
    """
    project = await Project.open(rpc, tmp_path / "膨胀", narrative_person="第一人称")
    user = [await project.constraint(f"用户约束{n + 1}：{zh_sentence(300 + n)}", kind="plot", priority=n % 5)
            for n in range(30)]
    kg = [await project.constraint(f"图谱约束{n + 1}：{zh_sentence(400 + n)}{zh_sentence(450 + n)}",
                                   kind="character", priority=50 + n, source="kg") for n in range(16)]
    for n, name in enumerate(zh_names(24)):
        await project.entity(name, "；".join(zh_sentence(600 + 3 * n + k) for k in range(2)))
    chapter = await project.write("第十二章.md", zh_chapter("第十二章 审判", 60))

    result = await project.assemble("第十二章.md", len(chapter))
    inspected = await project.inspect(inspector, "第十二章.md", len(chapter))

    assert any(w.startswith("CONTEXT_RULES_OVERBUDGET") for w in result["warnings"])
    assert 2500 <= sum(c["tokens"] for c in candidates(inspected, layer="rules")) <= 3500
    fate = {c["id"]: c for c in inspected["candidates"]}
    assert all(fate[f"constraint:{c['id']}"]["fate"] == "included" for c in user)
    rules_text = inspected["layerTexts"]["rules"]
    for n, constraint in enumerate(sorted(user, key=lambda c: (-c["priority"], c["id"])), start=1):
        assert f"\n{n}. {constraint['text']}\n" in rules_text
    kg_fates = [fate[f"constraint:{c['id']}"] for c in kg]
    cut = [c for c in kg_fates if c["fate"] == "dropped"]
    kept = [c for c in kg_fates if c["fate"] == "included"]
    assert cut
    assert {c["reason"] for c in cut} == {"rules_overbudget"}
    if kept:
        assert min(c["key"] for c in kept) >= max(c["key"] for c in cut)
    assert {c["reason"] for c in candidates(inspected, section="entities")} == {"rules_relevance"}
    assert result["layers"]["rules"]["tokens"] <= inspected["arithmetic"]["shares"]["rules"]

    logged = {constraint for e in log_events(proc.stderr_text(), "context.constraints_cut")
              if e["project_id"] == project.project_id for constraint in e["constraints"]}
    assert logged == {c["id"] for c in cut}


# ---------------------------------------------------------------------------------------------
# Requirement: 上下文组装 API


async def test_skill_call_assembles_context(rpc: RpcClient, tmp_path: Path) -> None:
    """「AI 技能调用时组装上下文」：用户在第七章触发续写技能，AI Service 调用 context:assemble。

    The answer is a ContextAssembleResult (prompt, tokenCount, stablePrefixHash,
    stablePrefixUnchanged, layers with tokens/truncated and retrieved.chunks, warnings) whose
    per-layer tokens add up to tokenCount (give or take the blank lines between layers), within
    total = window - reserve - system prompt; the skill's system prompt comes with it. 润色, expand
    and rewrite assemble too, with text after the cursor in the skill's share; an unknown skill is
    SKILL_NOT_FOUND listing the known ones.
    """
    project = await Project.open(rpc, tmp_path / "技能", narrative_person="第一人称")
    await seed_lighthouse(project)
    chapter = await project.write("第七章.md", zh_chapter("第七章 灯火", 240))
    cursor = cursor_after(chapter, 120)

    result = await project.assemble("第七章.md", cursor)

    assert set(result) >= RESULT_FIELDS
    assert isinstance(result["prompt"], str)
    assert len(result["stablePrefixHash"]) == 64
    assert int(result["stablePrefixHash"], 16) >= 0
    assert result["stablePrefixUnchanged"] is False
    assert set(result["layers"]) == set(LAYERS)
    for name in LAYERS:
        assert result["layers"][name]["tokens"] > 0
        assert isinstance(result["layers"][name]["truncated"], bool)
    assert result["layers"]["retrieved"]["chunks"] == 2
    assert abs(result["tokenCount"] - layer_sum(result)) <= 6
    budget = result["budget"]
    assert budget["total"] == budget["contextWindow"] - budget["outputReserve"] - budget["systemPromptTokens"]
    assert result["tokenCount"] <= budget["total"]
    assert "续写" in result["systemPrompt"]
    assert CURSOR_MARK not in result["prompt"]

    shares = {"polish": 0.3, "expand": 0.2, "rewrite": 0.4}
    prompts = {result["systemPrompt"]}
    for skill, share in shares.items():
        other = await project.assemble("第七章.md", cursor, skill)
        assert set(other) >= RESULT_FIELDS
        assert other["tokenCount"] <= other["budget"]["total"]
        before, after = immediate_body(other["prompt"]).split(CURSOR_MARK)
        assert chapter[:cursor].endswith(before)
        assert chapter[cursor:].startswith(after)
        assert abs(len(after) / (len(before) + len(after)) - share) < 0.05
        prompts.add(other["systemPrompt"])
    assert len(prompts) == 4
    assert "润色" in (await project.assemble("第七章.md", cursor, "polish"))["systemPrompt"]

    error = await rpc_error(rpc, "context:assemble", project.params("第七章.md", cursor, "translate"))
    assert error["code"] == -32025
    assert error["data"] == {"code": "SKILL_NOT_FOUND", "known": sorted(SKILLS)}


async def test_kg_unavailable_degrades(rpc: RpcClient, faults: SetFaults, tmp_path: Path) -> None:
    """「上下文组装中某层数据源不可用」：知识图谱服务暂时不可用。

    The KG part is skipped — no entity sheets, no kg-derived constraints — so Rules holds only the
    writer's own constraints; warnings is exactly ["KG_UNAVAILABLE: 知识图谱数据未注入"]; the
    assembly goes on (Settings, Retrieved, Immediate as usual) and recovers when the KG does.
    """
    project = await Project.open(rpc, tmp_path / "降级")
    await seed_lighthouse(project)
    chapter = await project.write("第二章.md", zh_chapter("第二章 钥匙", 40))
    healthy = await project.assemble("第二章.md", len(chapter))

    await faults(["kg"])
    degraded = await project.assemble("第二章.md", len(chapter))

    assert degraded["warnings"] == ["KG_UNAVAILABLE: 知识图谱数据未注入"]
    rules = (f"{CONSTRAINTS_HEADER}\n1. 严格第一人称叙述，不出现主角不在场的场景\n"
             "2. 本世界没有魔法，所有能力基于科技")
    assert degraded["prompt"].startswith(rules + "\n\n" + PREFERENCES_HEADER)
    assert ENTITIES_HEADER not in degraded["prompt"]
    assert "林远性格冷静" not in degraded["prompt"]
    assert degraded["prompt"].split("\n\n" + PREFERENCES_HEADER, 1)[1] == \
        healthy["prompt"].split("\n\n" + PREFERENCES_HEADER, 1)[1]
    assert degraded["layers"]["retrieved"]["chunks"] == 2

    await faults([])
    recovered = await project.assemble("第二章.md", len(chapter))
    assert recovered["warnings"] == []
    assert recovered["prompt"] == healthy["prompt"]


@pytest.mark.parametrize(("fault", "warning"), [
    ("memory", "MEMORY_UNAVAILABLE: 记忆数据未注入"),
    ("retrieval", "RETRIEVAL_UNAVAILABLE: 检索数据未注入"),
])
async def test_memory_or_retrieval_unavailable_degrades(rpc: RpcClient, faults: SetFaults, tmp_path: Path,
                                                        fault: str, warning: str) -> None:
    """异常矩阵「网络/IO 失败：检索层读取失败、记忆层读取失败」。

    A failing memory store drops what it feeds (the confirmed rules of Settings and the past
    interactions of Retrieved) with one MEMORY_UNAVAILABLE warning; a failing retrieval source
    adds RETRIEVAL_UNAVAILABLE. Either way Rules and Immediate are untouched and the request succeeds.
    """
    project = await Project.open(rpc, tmp_path / fault, narrative_person="第一人称")
    await seed_lighthouse(project)
    chapter = await project.write("第二章.md", zh_chapter("第二章 钥匙", 40))
    healthy = await project.assemble("第二章.md", len(chapter))

    await faults([fault])
    degraded = await project.assemble("第二章.md", len(chapter))

    assert degraded["warnings"] == [warning]
    assert degraded["prefixHashes"]["rules"] == healthy["prefixHashes"]["rules"]
    assert degraded["prompt"].endswith(immediate_body(healthy["prompt"]))
    if fault == "memory":
        assert degraded["layers"]["settings"]["tokens"] == 0
        assert degraded["layers"]["retrieved"]["chunks"] == 0
        assert PREFERENCES_HEADER not in degraded["prompt"]
        assert HISTORY_HEADER not in degraded["prompt"]
    else:
        assert degraded["prompt"] == healthy["prompt"]


# ---------------------------------------------------------------------------------------------
# Requirement: 模块级可验收标准


async def test_assembly_performance_and_budget_consistency(proc: ServerProcess, rpc: RpcClient,
                                                           tmp_path: Path) -> None:
    """「组装性能与预算一致性达标」：同时执行 500 次 context:assemble，四层俱全。

    500 concurrent requests over 10 connections, 125 documents × 4 (the per-document limit, so
    none is refused): every one succeeds and every tokenCount is within the budget total, with
    trimming actually needed for many. Latency (p95 < 250 ms) is measured by the benchmark
    (scripts/bench_rpc.py), not asserted here.
    """
    project = await Project.open(rpc, tmp_path / "性能", narrative_person="第一人称",
                                 style_notes="短句为主，少用形容词。")
    await seed_lighthouse(project)
    for n in range(12):
        await project.episode(f"续写第{n + 1}段", "".join(zh_sentence(2000 + 5 * n + k) for k in range(5)))
    await project.budget(contextWindow=4096)
    documents = {}
    for n in range(125):
        document = f"卷一/第{n + 1:03d}章.md"
        documents[document] = await project.write(document, zh_chapter(f"第{n + 1}章", 20 + (n % 5) * 30))

    clients = [await RpcClient.open(proc.url, proc.token) for _ in range(10)]
    try:
        calls = [clients[k % 10].request("context:assemble", project.params(
            document, len(text) - k % 3, ("continue", "polish")[k % 2]))
            for k, (document, text) in enumerate(list(documents.items()) * 4)]
        replies = await asyncio.gather(*calls)
    finally:
        for client in clients:
            await client.close()

    assert len(replies) == 500
    assert [r.get("error") for r in replies if "error" in r] == []
    results = [r["result"] for r in replies]
    assert all(r["tokenCount"] <= r["budget"]["total"] for r in results)
    assert {r["budget"]["contextWindow"] for r in results} == {4096}
    assert all(r["layers"][name]["tokens"] > 0 for r in results for name in LAYERS)
    assert sum(r["layers"]["retrieved"]["truncated"] for r in results) >= 100


async def test_tokenizer_failure_falls_back_to_default_budget(rpc: RpcClient, faults: SetFaults,
                                                             tmp_path: Path) -> None:
    """「预算计算器异常自动回退」：tokenizer 组件返回异常。

    The assembly still answers a prompt, on the default budget profile (8192 / 1024) instead of the
    project's, counted by a conservative estimate (tokenizer.exact false), with a
    CONTEXT_BUDGET_FALLBACK warning; once the tokenizer works the project's profile is back.
    """
    project = await Project.open(rpc, tmp_path / "回退", narrative_person="第一人称")
    await seed_lighthouse(project)
    chapter = await project.write("第一章.md", zh_chapter("第一章 灯塔", 60))
    await project.budget(contextWindow=16384, outputReserve=2048)

    await faults(["tokenizer"])
    fallback = await project.assemble("第一章.md", len(chapter))

    assert [w.split(":")[0] for w in fallback["warnings"]] == ["CONTEXT_BUDGET_FALLBACK"]
    assert (fallback["budget"]["contextWindow"], fallback["budget"]["outputReserve"]) == (8192, 1024)
    assert fallback["tokenizer"]["exact"] is False
    assert fallback["prompt"].startswith(CONSTRAINTS_HEADER)
    assert fallback["prompt"].endswith(zh_sentence(60) + "\n")
    assert 0 < fallback["tokenCount"] <= fallback["budget"]["total"]

    await faults([])
    normal = await project.assemble("第一章.md", len(chapter))
    assert normal["warnings"] == []
    assert (normal["budget"]["contextWindow"], normal["budget"]["outputReserve"]) == (16384, 2048)
    assert normal["tokenizer"]["exact"] is True


async def test_counts_that_are_estimates_say_so(rpc: RpcClient, tmp_path: Path) -> None:
    """A project whose model's encoding is not on the machine (only cl100k_base is bundled) is
    counted by an estimate: the assembly says so with CONTEXT_TOKENIZER_ESTIMATE, naming the
    encoding, exactly when ``tokenizer.exact`` is false; back on a bundled model it is exact again
    and silent."""
    project = await Project.open(rpc, tmp_path / "估算")
    chapter = await project.write("第一章.md", zh_chapter("第一章 灯塔", 20))
    await project.update_settings(model="gpt-4o")
    estimated = await project.assemble("第一章.md", len(chapter))
    notes = [w for w in estimated["warnings"] if w.startswith("CONTEXT_TOKENIZER_ESTIMATE")]
    assert estimated["tokenizer"]["encoding"] == "o200k_base"
    assert len(notes) == (0 if estimated["tokenizer"]["exact"] else 1)  # exact where o200k is cached
    assert all("o200k_base" in note for note in notes)
    await project.update_settings(model="gpt-4")
    exact = await project.assemble("第一章.md", len(chapter))
    assert (exact["tokenizer"]["exact"], exact["warnings"]) == (True, [])


# ---------------------------------------------------------------------------------------------
# Requirement: 异常与边界覆盖矩阵


async def test_concurrent_budget_updates_are_version_checked(proc: ServerProcess, rpc: RpcClient,
                                                            tmp_path: Path) -> None:
    """「并发更新预算配置的版本校验」：两个请求同时以同一版本号更新预算比例。

    Exactly one wins (the profile at version + 1); the other answers CONTEXT_BUDGET_CONFLICT with
    the current version and changes nothing: the stored profile is the winner's. Repeated a few
    times, on two connections.
    """
    project = await Project.open(rpc, tmp_path / "并发预算")
    other = await RpcClient.open(proc.url, proc.token)
    try:
        for _ in range(3):
            current = await rpc.call("context:budget:get", {"projectId": project.project_id})
            version = current["version"]
            ratios = [{"rules": 0.2, "settings": 0.1, "retrieved": 0.2, "immediate": 0.5},
                      {"rules": 0.1, "settings": 0.1, "retrieved": 0.3, "immediate": 0.5}]
            replies = await asyncio.gather(*(
                client.request("context:budget:update", {"projectId": project.project_id,
                                                         "version": version, "ratios": r})
                for client, r in zip((rpc, other), ratios, strict=True)))
            won = [(r["result"], ratio) for r, ratio in zip(replies, ratios, strict=True) if "result" in r]
            lost = [r["error"] for r in replies if "error" in r]
            assert len(won) == 1
            assert len(lost) == 1
            winner, winning_ratios = won[0]
            assert winner["version"] == version + 1
            assert lost[0]["code"] == -32021
            assert lost[0]["data"] == {"code": "CONTEXT_BUDGET_CONFLICT", "currentVersion": version + 1}
            stored = await other.call("context:budget:get", {"projectId": project.project_id})
            assert stored == winner
            assert stored["ratios"] == pytest.approx(winning_ratios)
    finally:
        await other.close()


async def test_cross_project_injection_is_blocked(proc: ServerProcess, rpc: RpcClient, faults: SetFaults,
                                                  tmp_path: Path) -> None:
    """「跨项目上下文注入被阻断」：请求 projectId=A，但 Retrieved 数据来自 projectId=B。

    Every layer source is read by projectId, so B's records never reach A's prompt. When an item
    of another project does reach the assembly (injected fault), nothing is returned: the request
    fails with CONTEXT_SCOPE_VIOLATION naming the layer and item, and a security.scope_violation
    line is logged (ids only, no text).
    """
    a = await Project.open(rpc, tmp_path / "甲", narrative_person="第一人称")
    b = await Project.open(rpc, tmp_path / "乙", narrative_person="第三人称")
    await a.constraint("甲项目的约束")
    await b.constraint("乙项目的秘密约束")
    await b.entity("乙角色", "只属于乙项目。")
    await b.rule("乙项目的偏好", confidence=0.99)
    await b.episode("乙项目的指令", "乙项目的输出。")
    chapter = await a.write("第一章.md", zh_chapter("第一章", 20))
    clean = await a.assemble("第一章.md", len(chapter))
    assert "甲项目的约束" in clean["prompt"]
    assert "乙" not in clean["prompt"]

    await faults(["foreign_item"])
    error = await rpc_error(rpc, "context:assemble", a.params("第一章.md", len(chapter)))

    assert error["code"] == -32023
    assert error["data"] == {"code": "CONTEXT_SCOPE_VIOLATION", "layer": "retrieved", "itemId": "foreign:1"}
    assert "foreign passage" not in str(error)
    # The line is written (and flushed) before the error is sent.
    logged = [e for e in log_events(proc.stderr_text(), "security.scope_violation")
              if e["project_id"] == a.project_id]
    assert len(logged) == 1
    assert logged[-1]["item_id"] == "foreign:1"
    assert logged[-1]["layer"] == "retrieved"
    assert "foreign passage" not in proc.stderr_text()


async def test_oversized_context_input_is_refused(rpc: RpcClient, tmp_path: Path) -> None:
    """「超大上下文输入保护」：输入 token 预估为 90k。

    A ~90k-token additionalInput, or ~90k tokens of past interactions gathered for Retrieved,
    answers CONTEXT_INPUT_TOO_LARGE with the 64k limit, and the message asks to narrow the
    retrieval scope.
    """
    project = await Project.open(rpc, tmp_path / "超大")
    chapter = await project.write("第一章.md", zh_chapter("第一章", 20))
    huge = "".join(zh_sentence(n) for n in range(3500))

    error = await rpc_error(rpc, "context:assemble",
                            project.params("第一章.md", len(chapter), additional_input=huge))
    assert error["code"] == -32022
    assert error["data"]["code"] == "CONTEXT_INPUT_TOO_LARGE"
    assert error["data"]["limit"] == 65536
    assert error["data"]["tokens"] > 65536  # counted until it passed the limit: a lower bound
    assert "retrieval scope" in error["message"]

    for part in range(2):
        sentences = range(part * 1750, (part + 1) * 1750)
        await project.episode("长篇参考", "".join(zh_sentence(n) for n in sentences))
    error = await rpc_error(rpc, "context:assemble", project.params("第一章.md", len(chapter)))
    assert error["code"] == -32022
    assert error["data"]["limit"] == 65536
    assert error["data"]["tokens"] >= 85000
    assert "retrieval scope" in error["message"]


async def test_the_instruction_is_never_cut(rpc: RpcClient, tmp_path: Path) -> None:
    """additionalInput is never cut (docs/budget.md): a long one that fits is sent whole, the window
    cut around it; one over the whole budget (under the 64k limit) is refused with
    CONTEXT_INPUT_TOO_LARGE, ``uncutTokens`` saying how much was left that nothing may cut."""
    project = await Project.open(rpc, tmp_path / "指令")
    chapter = await project.write("第一章.md", zh_chapter("第一章", 40))
    fits = "".join(f"要求{k}：林远必须保持沉默。" for k in range(300))
    result = await project.assemble("第一章.md", len(chapter), additional_input=fits)
    assert fits in result["prompt"]
    assert result["tokenCount"] <= result["budget"]["total"]
    over = "".join(f"要求{k}：林远必须保持沉默。" for k in range(1500))
    error = await rpc_error(rpc, "context:assemble", project.params("第一章.md", len(chapter),
                                                                     additional_input=over))
    assert error["data"]["code"] == "CONTEXT_INPUT_TOO_LARGE"
    assert error["data"]["uncutTokens"] > error["data"]["total"] == 7108


async def test_rules_truncated_for_the_budget_leave_their_room_to_the_window(rpc: RpcClient,
                                                                                tmp_path: Path) -> None:
    """Rules alone over the whole budget are truncated (CONTEXT_RULES_TRUNCATED) after the window
    was cut for them; the room that truncation leaves goes back to the window, which must be in the
    prompt: the text before the cursor is there, and the prompt is within its total."""
    project = await Project.open(rpc, tmp_path / "规则")
    chapter = await project.write("第一章.md", zh_chapter("第一章", 200))
    assert len(chapter) > 2000
    for n in range(20):
        await project.constraint(f"约束{n}：" + "林远在任何场景里都不能提起他的妹妹苏晴。" * 75)
    result = await project.assemble("第一章.md", 2000)
    assert any(w.startswith("CONTEXT_RULES_TRUNCATED") for w in result["warnings"])
    assert result["layers"]["immediate"]["tokens"] > 0
    assert chapter[1960:2000] in result["prompt"]
    assert result["tokenCount"] <= result["budget"]["total"]
    assert result["budget"]["total"] - result["tokenCount"] < 40  # the room went to the window


async def test_concurrent_assembly_backpressure(rpc: RpcClient, tmp_path: Path) -> None:
    """「并发组装背压」：同一文档同时有 20 个组装请求，超过并发上限 4。

    4 run, up to 8 wait their turn, the rest answer CONTEXT_BACKPRESSURE at once with
    retryAfterMs (limit 4, queue 8); the others succeed; nothing times out; a refused request
    retried after retryAfterMs succeeds.
    """
    project = await Project.open(rpc, tmp_path / "背压", narrative_person="第一人称")
    await seed_lighthouse(project)
    chapter = await project.write("第十一章.md", zh_chapter("第十一章 风暴", 300))
    params = project.params("第十一章.md", len(chapter))

    replies = await asyncio.wait_for(
        asyncio.gather(*(rpc.request("context:assemble", params) for _ in range(20))), 15)

    refused = [r["error"] for r in replies if "error" in r]
    succeeded = [r["result"] for r in replies if "result" in r]
    assert refused
    assert len(succeeded) >= 12
    assert len(refused) + len(succeeded) == 20
    for error in refused:
        assert error["code"] == -32020
        assert error["data"]["code"] == "CONTEXT_BACKPRESSURE"
        assert (error["data"]["limit"], error["data"]["queue"]) == (4, 8)
        assert error["data"]["retryAfterMs"] > 0
    assert len({r["prompt"] for r in succeeded}) == 1

    await asyncio.sleep(max(e["data"]["retryAfterMs"] for e in refused) / 1000)
    retried = await asyncio.wait_for(
        asyncio.gather(*(rpc.call("context:assemble", params) for _ in range(min(len(refused), 4)))), 15)
    assert all(r["prompt"] == succeeded[0]["prompt"] for r in retried)


async def test_concurrent_assemblies_at_different_cursors(rpc: RpcClient, tmp_path: Path) -> None:
    """异常矩阵「并发冲突：并发组装同文档不同光标」。

    Four simultaneous assemblies of one document at four cursors (and skills) each get their own
    window, ending (or centred) at their own cursor; Rules and Settings are the same for all.
    """
    project = await Project.open(rpc, tmp_path / "多光标", narrative_person="第一人称")
    await seed_lighthouse(project)
    chapter = await project.write("第十三章.md", zh_chapter("第十三章 航标", 400))
    cursors = [cursor_after(chapter, n) for n in (50, 150, 250, 390)]
    skills = ["continue", "polish", "continue", "rewrite"]

    results = await asyncio.gather(*(project.assemble("第十三章.md", cursor, skill)
                                     for cursor, skill in zip(cursors, skills, strict=True)))

    for cursor, skill, result, n in zip(cursors, skills, results, (50, 150, 250, 390), strict=True):
        body = immediate_body(result["prompt"])
        before, _, after = body.partition(CURSOR_MARK)
        assert chapter[:cursor].endswith(before)
        assert before.endswith(zh_sentence(n))
        if skill == "continue":
            assert after == ""
            assert CURSOR_MARK not in body
        else:
            assert after.lstrip("\n").startswith(zh_sentence(n + 1))
            assert chapter[cursor:].startswith(after)
    assert len({r["stablePrefixHash"] for r in results}) == 1


async def test_inspect_requires_debug_mode_and_inspector_token(rpc: RpcClient, inspector: RpcClient,
                                                               tmp_path: Path) -> None:
    """异常矩阵「权限/安全：未授权 inspect」；NFR「context:inspect 仅限调试模式与授权用户」。

    With the client token context:inspect answers CONTEXT_INSPECT_FORBIDDEN (the inspector token
    works); a server started without --debug refuses it to every client, and refuses
    debug:faults:set with RPC_FORBIDDEN.
    """
    project = await Project.open(rpc, tmp_path / "检查")
    chapter = await project.write("第一章.md", zh_chapter("第一章", 10))
    params = project.params("第一章.md", len(chapter))

    error = await rpc_error(rpc, "context:inspect", params)
    assert (error["code"], error["data"]) == (-32024, {"code": "CONTEXT_INSPECT_FORBIDDEN"})
    assert "candidates" in await inspector.call("context:inspect", params)

    plain = start_server(tmp_path / "plain-data")
    try:
        client = await RpcClient.open(plain.url, plain.token)
        try:
            other = await Project.open(client, tmp_path / "检查")
            assert other.project_id != ""
            error = await rpc_error(client, "context:inspect", other.params("第一章.md", len(chapter)))
            assert (error["code"], error["data"]) == (-32024, {"code": "CONTEXT_INSPECT_FORBIDDEN"})
            error = await rpc_error(client, "debug:faults:set", {"faults": ["kg"]})
            assert error["data"]["code"] == "RPC_FORBIDDEN"
            assert "prompt" in await other.assemble("第一章.md", len(chapter))
        finally:
            await client.close()
    finally:
        assert "inspectorToken" not in plain.ready
        await asyncio.to_thread(plain.terminate)


async def test_single_layer_token_explosion(rpc: RpcClient, inspector: RpcClient, tmp_path: Path) -> None:
    """异常矩阵「容量溢出：单层 token 爆炸」。

    A 300,000-character chapter assembles like a short one: only a window near the cursor is used
    (cut to its budget), and tokenCount stays within the total. A single past interaction far
    larger than the whole budget (yet under the 64k input limit) is dropped by the budget, with
    reason "budget", and the rest of the prompt is intact.
    """
    project = await Project.open(rpc, tmp_path / "爆炸", narrative_person="第一人称")
    await project.constraint("严格第一人称叙述", priority=10)
    sentences = "".join(zh_sentence(n) for n in range(15_000))
    title = "# 长章\n\n"
    chapter = await project.write("长章.md", title + sentences[:300_000 - len(title)])
    assert len(chapter) == 300_000

    for cursor in (len(chapter), len(chapter) // 2):
        started = time.perf_counter()
        result = await project.assemble("长章.md", cursor)
        elapsed = time.perf_counter() - started
        assert result["tokenCount"] <= result["budget"]["total"]
        window = immediate_body(result["prompt"])
        assert chapter[:cursor].endswith(window)
        assert len(window) < 10_000
        assert elapsed < 10

    await project.episode("整章参考", "".join(zh_sentence(n) for n in range(5000, 6000)))
    inspected = await project.inspect(inspector, "长章.md", len(chapter))
    [episode] = candidates(inspected, layer="retrieved")
    assert episode["tokens"] > inspected["budget"]["total"]
    assert (episode["fate"], episode["reason"]) == ("dropped", "budget")
    assert inspected["layers"]["retrieved"] == {"tokens": 0, "truncated": True, "chunks": 0}
    assert inspected["tokenCount"] <= inspected["budget"]["total"]
    assert "1. 严格第一人称叙述" in inspected["prompt"]


async def test_cursor_position_out_of_range(rpc: RpcClient, tmp_path: Path) -> None:
    """Request validation: cursorPosition counts code points; past the end (or negative) is INVALID_PARAMS."""
    project = await Project.open(rpc, tmp_path / "光标")
    text = await project.write("第一章.md", "我在𠮷野家门口等她。")
    assert len(text) == 10

    at_end = await project.assemble("第一章.md", len(text))
    assert at_end["prompt"] == f"{WINDOW_HEADER}\n{text}"
    for cursor in (len(text) + 1, -1):
        error = await rpc_error(rpc, "context:assemble", project.params("第一章.md", cursor))
        assert (error["code"], error["data"]["code"]) == (-32602, "INVALID_PARAMS")
    middle = await project.assemble("第一章.md", 4, "polish")
    assert immediate_body(middle["prompt"]) == f"我在𠮷野{CURSOR_MARK}家门口等她。"
