"""ContextService with in-memory collaborators: resolution, providers, prefixes, faults."""

from __future__ import annotations

import asyncio
import threading
from dataclasses import replace
from pathlib import Path

import pytest
from structlog.testing import capture_logs
from tokenizers import Tokenizer as HfTokenizer
from tokenizers import models, pre_tokenizers, trainers

from services.assembly.faults import Fault
from services.assembly.service import AssembleRequest, Collaborators, ContextService
from services.concurrency.limiter import KeyedLimiter
from services.context.models import Layer
from services.errors import Backpressure, InvalidInput, ScopeViolation, SkillNotFound
from services.retrieval.provider import RetrievalProvider
from services.retrieval.search import Hit
from services.tokenizer.registry import TokenizerRegistry
from tests.services.assembly.fakes import Constraint, Entity, Rule, World

CHAPTER = "我推开灯塔的门，海风灌进来。林远站在台阶上，没有说话。" * 30


def _world() -> World:
    world = World(documents={"ch10.md": CHAPTER})
    world.settings.narrative_person = "第一人称"
    world.constraints.append(Constraint(1, "p1", "严格第一人称叙述", priority=5))
    world.entities.append(Entity(1, "p1", "林远", "灯塔看守人，性格冷静。", aliases=["小远"]))
    world.rules.append(Rule(1, "p1", "动作场景偏好短句", confidence=0.9))
    world.episode(1, "续写林远开门", "他推开门，风很冷。")
    return world


def _request(cursor: int = len(CHAPTER), skill: str = "continue", extra: str = "") -> AssembleRequest:
    return AssembleRequest("p1", "ch10.md", cursor, skill, extra)


async def test_unknown_skill() -> None:
    """An unknown skill is SKILL_NOT_FOUND."""
    with pytest.raises(SkillNotFound):
        await _world().service().assemble(_request(skill="sing"))


async def test_cursor_out_of_range() -> None:
    """A cursor beyond the document is invalid input."""
    with pytest.raises(InvalidInput):
        await _world().service().assemble(_request(cursor=len(CHAPTER) + 1))


async def test_cursor_counts_code_points() -> None:
    """cursorPosition is a code-point offset: text before it ends exactly there."""
    world = World(documents={"ch10.md": "𝔸𝔹林远。" * 10})
    outcome = await world.service().assemble(AssembleRequest("p1", "ch10.md", 3, "continue"))
    assert outcome.assembly.layers[Layer.IMMEDIATE].text.endswith("𝔸𝔹林")


async def test_kg_unavailable_degrades() -> None:
    """With the kg fault, Rules keeps only user constraints and a KG_UNAVAILABLE warning is added."""
    service = _world().service()
    service.faults.set(frozenset({Fault.KG}))
    outcome = await service.assemble(_request())
    rules = outcome.assembly.layers[Layer.RULES].text
    assert "严格第一人称叙述" in rules
    assert "林远（角色" not in rules
    assert "KG_UNAVAILABLE: 知识图谱数据未注入" in outcome.assembly.warnings


async def test_tokenizer_failure_falls_back() -> None:
    """A tokenizer failure uses the default profile and a conservative estimate, with a warning."""
    service = _world().service()
    service.faults.set(frozenset({Fault.TOKENIZER}))
    outcome = await service.assemble(_request())
    assert any(w.startswith("CONTEXT_BUDGET_FALLBACK") for w in outcome.assembly.warnings)
    assert not outcome.exact
    assert outcome.assembly.token_count <= outcome.assembly.budget.total


async def test_foreign_item_is_refused_and_logged() -> None:
    """An item from another project fails the request with a security log line."""
    service = _world().service()
    service.faults.set(frozenset({Fault.FOREIGN_ITEM}))
    with capture_logs() as logs, pytest.raises(ScopeViolation):
        await service.assemble(_request())
    assert any(e["event"] == "security.scope_violation" for e in logs)


async def test_neighbouring_cursors_reuse_line_features_and_give_the_lone_prompt() -> None:
    """The window's relevance features are kept per line and project, and the union of the lines
    between its cut ends per window: a second assembly a few characters on adds only the lines it had
    not seen and reuses the union, and its prompt is byte-identical to the one
    a fresh service builds at that cursor."""
    world = _world()
    lines = (f"第{n}行：林远在灯塔里等了{n}个夜晚，小远没有回来。" for n in range(60))
    world.documents["lines.md"] = "\n".join(lines)
    warm = world.service()
    first = AssembleRequest("p1", "lines.md", 900, "continue")
    await warm.assemble(first)
    seen = warm._line_features.entries("p1")
    assert seen > 10
    neighbour = AssembleRequest("p1", "lines.md", 903, "continue")
    again = await warm.assemble(neighbour)
    assert warm._line_features.entries("p1") - seen <= 3  # the cursor's line, the window's cut ends
    assert warm._window_features.entries("p1") == 1  # the lines between the cut ends, the same
    lone = await world.service().assemble(neighbour)
    assert again.assembly.prompt == lone.assembly.prompt
    assert again.assembly.reports == lone.assembly.reports


async def test_stable_prefix_across_calls_and_after_a_new_rule() -> None:
    """Unchanged rules and settings keep the prefix; a newly confirmed rule changes it."""
    world = _world()
    service = world.service()
    first = await service.assemble(_request(cursor=500))
    second = await service.assemble(_request(cursor=600))
    third = await service.assemble(_request(cursor=700))
    assert not first.stable_prefix_unchanged
    assert second.stable_prefix_unchanged
    assert third.stable_prefix_unchanged
    world.rules.append(Rule(2, "p1", "对话中少用感叹号", confidence=0.95))
    fourth = await service.assemble(_request(cursor=700))
    assert not fourth.stable_prefix_unchanged
    assert fourth.divergence is not None
    assert fourth.divergence.layer == "settings"


async def test_backpressure_past_the_queue() -> None:
    """Past 4 running and the queue bound, assemblies of one document are refused at once."""
    world = _world()
    service = world.service()
    release = asyncio.Event()
    original = world.read

    async def slow_read(project_id: str, document_id: str) -> str:
        await release.wait()
        return await original(project_id, document_id)

    world.read = slow_read  # type: ignore[method-assign]
    service = world.service()
    tasks = [asyncio.ensure_future(service.assemble(_request())) for _ in range(20)]
    await asyncio.sleep(0.05)
    refused = [t for t in tasks if t.done()]
    assert len(refused) == 20 - service.limiter.per_key - service.limiter.queue
    assert all(isinstance(t.exception(), Backpressure) for t in refused)
    release.set()
    finished = await asyncio.gather(*(t for t in tasks if t not in refused))
    assert all(o.assembly.token_count <= o.assembly.budget.total for o in finished)


async def test_requests_started_together_are_judged_together_however_fast_the_first_ones_run() -> None:
    """20 assemblies of one document started in the same turn of the loop, with reads that never
    block and the work on the loop: 12 are held (4 run, 8 wait) and 8 are refused, as when the
    first ones are slow."""
    service = _world().service()
    results = await asyncio.gather(*(service.assemble(_request()) for _ in range(20)),
                                   return_exceptions=True)
    refused = [r for r in results if isinstance(r, Backpressure)]
    assert len(refused) == 20 - service.limiter.per_key - service.limiter.queue
    assert all(not isinstance(r, BaseException) for r in results if r not in refused)


async def test_a_wait_that_would_pass_the_deadline_is_refused_at_once() -> None:
    """When assemblies are taking 1.5 s each, of 20 requests for one document 4 run, the 4 that
    would get a slot after one of them (1.5 s) queue, and the other 12, which would wait 3 s or
    more, are refused at once with that wait as retryAfterMs, doing no work at all."""
    world, release, inside = _gated_world(1)
    reads = [0]
    gated_read = world.read

    async def counting_read(project_id: str, document_id: str) -> str:
        reads[0] += 1
        return await gated_read(project_id, document_id)

    world.read = counting_read  # type: ignore[method-assign]
    service = world.service()
    service.gate.recent = 1.5  # seconds per assembly, as the gate measured lately
    # A clock that stands still, so that the expected waits are exact.
    service.limiter = KeyedLimiter(pace=service.gate.expected, clock=lambda: 100.0)
    tasks = [asyncio.ensure_future(service.assemble(AssembleRequest("p1", "ch0.md", 100, "continue")))
             for _ in range(20)]
    for _ in range(5):
        await asyncio.sleep(0)
    refused = [t for t in tasks if t.done()]
    assert len(refused) == 12
    errors = [t.exception() for t in refused]
    assert all(isinstance(e, Backpressure) for e in errors)
    assert {e.fields["retryAfterMs"] for e in errors if isinstance(e, Backpressure)} == {3000}
    assert (reads[0], inside[0]) == (4, 4)  # only the running ones have started any work
    release.set()
    finished = await asyncio.gather(*(t for t in tasks if t not in refused))
    assert len(finished) == 8
    assert reads[0] == 8


def _gated_world(documents: int) -> tuple[World, asyncio.Event, list[int]]:
    """A world whose document reads block until released, counting how many are inside at once."""
    world = World(documents={f"ch{n}.md": CHAPTER for n in range(documents)})
    release = asyncio.Event()
    inside = [0, 0]  # now, most at once
    original = world.read

    async def slow_read(project_id: str, document_id: str) -> str:
        inside[0] += 1
        inside[1] = max(inside[1], inside[0])
        try:
            await release.wait()
            return await original(project_id, document_id)
        finally:
            inside[0] -= 1

    world.read = slow_read  # type: ignore[method-assign]
    return world, release, inside


async def test_at_most_concurrency_assemblies_work_at_once_across_documents() -> None:
    """One request for each of 12 documents: only ``concurrency`` do work at once, the rest wait
    their turn (none is refused), and every one completes once the first are done."""
    world, release, inside = _gated_world(12)
    service = world.service()
    tasks = [asyncio.ensure_future(service.assemble(AssembleRequest("p1", f"ch{n}.md", 100, "continue")))
             for n in range(12)]
    await asyncio.sleep(0.05)
    assert inside == [service.concurrency, service.concurrency]
    assert not any(t.done() for t in tasks)
    release.set()
    outcomes = await asyncio.gather(*tasks)
    assert len(outcomes) == 12
    assert inside[1] == service.concurrency


async def test_cancelling_a_request_waiting_for_the_gate_frees_its_turn() -> None:
    """Requests cancelled while waiting for the global gate never run and take no place: the ones
    behind them still get in, and afterwards the gate admits ``concurrency`` again."""
    world, release, inside = _gated_world(8)
    service = world.service()

    def start(n: int) -> asyncio.Future[object]:
        return asyncio.ensure_future(service.assemble(AssembleRequest("p1", f"ch{n}.md", 100, "continue")))

    running = [start(n) for n in range(service.concurrency)]
    waiting = [start(n) for n in range(service.concurrency, 8)]
    await asyncio.sleep(0.05)
    for task in waiting[:2]:
        task.cancel()
    await asyncio.sleep(0)
    release.set()
    results = await asyncio.gather(*running, *waiting, return_exceptions=True)
    assert [type(r).__name__ for r in results[service.concurrency:][:2]] == ["CancelledError"] * 2
    assert not any(isinstance(r, BaseException) for r in results[:service.concurrency] + results[
        service.concurrency + 2:])
    release.clear()
    inside[1] = 0
    again = [start(n) for n in range(8)]
    await asyncio.sleep(0.05)
    assert inside[0] == service.concurrency
    release.set()
    await asyncio.gather(*again)


async def test_project_tokenizer_file_is_used(tmp_path: Path) -> None:
    """A project whose settings name a local tokenizer.json counts with it, exactly."""
    hf = HfTokenizer(models.WordLevel(unk_token="[UNK]"))
    hf.pre_tokenizer = pre_tokenizers.Whitespace()
    hf.train_from_iterator(["the keeper hid the key under the third step"],
                           trainer=trainers.WordLevelTrainer(special_tokens=["[UNK]"]))
    path = tmp_path / "tokenizer.json"
    hf.save(str(path))
    world = World(documents={"c.md": "the keeper hid the key. " * 50})
    world.settings.language = "en"
    world.settings.tokenizer_path = str(path)
    outcome = await world.service().assemble(AssembleRequest("p1", "c.md", 100, "continue"))
    assert (outcome.tokenizer, outcome.exact) == ("hf:tokenizer.json", True)
    encoded = hf.encode(outcome.assembly.prompt, add_special_tokens=False)
    assert outcome.assembly.token_count == len(encoded.ids)


async def test_settings_items_are_kept_until_the_settings_record_changes() -> None:
    """The narrative and style items are made once per settings record (a kept snapshot, replaced by
    an update): while the record is the same, every assembly gets the very same item objects (so the
    engine's memo knows them); a new record brings its own text at once."""
    world = _world()
    world.settings.style_notes = "冷静克制。"
    service = world.service()
    first = await service.assemble(_request())
    again = await service.assemble(_request(cursor=len(CHAPTER) - 3))
    assert first.assembly.layers[Layer.RULES].text.count("叙述人称：第一人称") == 1
    assert again.assembly.layers[Layer.SETTINGS].text == first.assembly.layers[Layer.SETTINGS].text
    kept = service._kept.get("p1", ("settings", ("rules", "narrative"), ("settings", "style"),
                                    await service.counter("p1")))
    assert kept is not None
    assert kept[0] == (world.settings,)
    assert [i.id for i in kept[1]] == ["settings:narrative", "settings:style"]
    world.settings = replace(world.settings, narrative_person="第三人称", style_notes="华丽。")
    updated = await service.assemble(_request())
    assert "叙述人称：第三人称" in updated.assembly.layers[Layer.RULES].text
    assert "华丽。" in updated.assembly.layers[Layer.SETTINGS].text


async def test_a_tokenizer_not_loaded_yet_loads_off_the_event_loop(monkeypatch: pytest.MonkeyPatch) -> None:
    """Building an encoding takes a fraction of a second and reading a tokenizer file up to
    seconds: the first assembly that needs one loads it on a worker thread, so the loop answers
    other requests meanwhile; once it is ready, nothing is loaded again."""
    loads: list[int] = []
    real = TokenizerRegistry._encoding

    def watched(self: TokenizerRegistry, key: str) -> object:
        if key not in self._loaded:
            loads.append(threading.get_ident())
        return real(self, key)

    monkeypatch.setattr(TokenizerRegistry, "_encoding", watched)
    service = _world().service()
    first = await service.assemble(_request())
    again = await service.assemble(_request())
    assert len(loads) == 1
    assert loads[0] != threading.get_ident()
    assert first.assembly.prompt == again.assembly.prompt


async def test_retrieval_waits_for_its_project_to_be_prepared_apart_from_the_search_deadline() -> None:
    """A project's index and jieba's dictionary load when it first opens (seconds): the assembly
    waits for the searcher's ``prepared`` before the provider's deadline starts, so the first
    assembly after a restart keeps its Retrieved layer however slow the loading is."""
    passage = "林远把铜钥匙藏在灯塔第三级台阶下。"
    prepared: list[str] = []

    class Slow:
        async def prepared(self, project_id: str) -> None:
            await asyncio.sleep(0.6)  # past the 0.25 s deadline below
            prepared.append(project_id)

        async def search(self, project_id: str, query: str, **_: object) -> list[Hit]:
            assert prepared == [project_id]
            return [Hit(project_id, "ch02.md", 0, 0, len(passage), passage, 20, 0.8, 0, None)]

    world = _world()
    service = ContextService(Collaborators(
        settings=world.get_settings, read_document=world.read, profiles=world.get_profile,
        providers=(RetrievalProvider(Slow(), "cl100k_base"),), tokenizers=TokenizerRegistry()),
        deadline=0.25)
    outcome = await service.assemble(_request())
    assert prepared == ["p1"]
    assert passage in outcome.assembly.prompt
    assert not [w for w in outcome.assembly.warnings if w.startswith("RETRIEVAL_UNAVAILABLE")]
