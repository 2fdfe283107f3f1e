"""The debug inspector page, driven in real headless Chromium against a real main process.

A ``python -m main serve --debug`` child serves the page itself at
``/inspector`` (plain HTTP answered before the websocket handshake) and its
websocket at ``/``. Each test seeds its own bilingual sample project over
JSON-RPC, opens ``/inspector#token=INSPECTOR_TOKEN`` like a developer would,
and works the page through clicks and form fields only; where it matters the
test asks the server directly (a second connection) what really happened.
Screenshots go to ``test-output/``.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from playwright.async_api import ConsoleMessage, Page

from scripts.sample_data import ZH_CHAPTERS, seed
from tests.support.browser import chromium
from tests.support.client import RpcClient
from tests.support.process import ServerProcess, serving

pytestmark = [pytest.mark.browser, pytest.mark.server_flags("--debug")]

ROOT = Path(__file__).resolve().parents[2]
OUTPUT = ROOT / "test-output"
CHAPTER = "第五章.md"
ASTRAL_DOC = "附录.md"
# Astral characters (two UTF-16 units each) before the click target: the cursor must count code points.
ASTRAL_TEXT = "# 附录 𠮷\n\n𠀋𠀋𠀋 林远说：“钥匙在台阶下。”苏晴点头。\n"


@dataclass
class Inspector:
    """A loaded inspector page, the server behind it and the project seeded for this test."""

    page: Page
    server: ServerProcess
    project_id: str
    rpc: RpcClient
    errors: list[str] = field(default_factory=list)

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.server.port}"

    @property
    def inspector_token(self) -> str:
        return str(self.server.ready["inspectorToken"])


@pytest.fixture
async def inspector(proc: ServerProcess, rpc: RpcClient, tmp_path: Path,
                    request: pytest.FixtureRequest) -> AsyncIterator[Inspector]:
    folder = tmp_path / "灯塔"
    project_id = await seed(rpc.call, folder, "zh")
    await rpc.call("document:write", {"projectId": project_id, "documentId": ASTRAL_DOC, "text": ASTRAL_TEXT})
    async with chromium() as browser:
        page = await browser.new_page(viewport={"width": 1280, "height": 800})
        page.set_default_timeout(15_000)
        ins = Inspector(page=page, server=proc, project_id=project_id, rpc=rpc)
        page.on("pageerror", lambda exc: ins.errors.append(f"pageerror: {exc}"))

        def console(message: ConsoleMessage) -> None:
            if message.type == "error":
                ins.errors.append(f"console: {message.text}")

        page.on("console", console)
        yield ins
        OUTPUT.mkdir(exist_ok=True)
        await page.screenshot(path=str(OUTPUT / f"inspector-{request.node.name}.png"))
        await page.close()
    assert ins.errors == [], "errors in the page"


async def open_page(ins: Inspector) -> None:
    """Load /inspector with the token in the fragment and wait until connected."""
    await ins.page.goto(f"{ins.base}/inspector#token={ins.inspector_token}")
    await ins.page.wait_for_selector("body[data-connected='true']")


async def pick(ins: Inspector, document_id: str = CHAPTER) -> str:
    """Choose this test's project and a document; return the document's text as the page shows it."""
    page = ins.page
    await page.wait_for_selector(f"#project option[value='{ins.project_id}']", state="attached")
    await page.select_option("#project", ins.project_id)
    await page.wait_for_selector(f"#document option[value='{document_id}']", state="attached")
    await page.select_option("#document", document_id)
    await page.wait_for_selector("#doc-view[data-cursor]", state="attached")
    await idle(page)
    return str(await page.evaluate("document.querySelector('#doc-view').textContent"))


async def idle(page: Page) -> None:
    await page.wait_for_selector("body[data-busy='0']", state="attached")


async def click_before(page: Page, needle: str) -> None:
    """Click the left edge of the first character of ``needle`` in the document view."""
    box = await page.evaluate(
        """(needle) => {
            const view = document.querySelector('#doc-view');
            const walker = document.createTreeWalker(view, NodeFilter.SHOW_TEXT);
            for (let node = walker.nextNode(); node; node = walker.nextNode()) {
                const at = node.data.indexOf(needle);
                if (at < 0) continue;
                const range = document.createRange();
                range.setStart(node, at);
                range.setEnd(node, at + 1);
                view.scrollIntoView({block: 'nearest'});
                const frame = view.getBoundingClientRect();
                view.scrollTop += range.getClientRects()[0].top - frame.top - frame.height / 2;
                const r = range.getClientRects()[0];
                return {x: r.left + 1, y: r.top + r.height / 2};
            }
            return null;
        }""",
        needle,
    )
    assert box is not None, f"{needle!r} not shown"
    await page.mouse.click(box["x"], box["y"])


async def assemble(ins: Inspector) -> int:
    """Press Assemble; wait for the rendered result; return its render sequence number."""
    page = ins.page
    before = await result_seq(page)
    await page.click("#assemble")
    await rerendered(page, before)
    return await result_seq(page)


async def rerendered(page: Page, seq: int) -> None:
    """Wait until the result was rendered again after render number ``seq`` and the page is idle."""
    await page.wait_for_function(
        "(n) => Number(document.querySelector('#result').dataset.seq || 0) > n", arg=seq)
    await idle(page)


async def result_seq(page: Page) -> int:
    return int(await page.evaluate("Number(document.querySelector('#result').dataset.seq || 0)"))


async def rows(page: Page, layer: str) -> list[dict[str, str]]:
    """The candidate rows of one layer table: id, fate and the cells' text."""
    out = await page.evaluate(
        """(layer) => [...document.querySelectorAll(`table.layer-table[data-layer='${layer}'] tbody tr`)]
            .map((tr) => ({id: tr.dataset.id, fate: tr.dataset.fate,
                           cells: [...tr.cells].map((td) => td.textContent)}))""",
        layer,
    )
    return list(out)


async def system_tokens(page: Page) -> int:
    """The system prompt's tokens, as the budget bar shows them."""
    return int(await page.evaluate(
        "Number(document.querySelector('#budget-bar .seg-system').dataset.tokens)"))


async def error_codes(page: Page) -> list[str]:
    return list(await page.evaluate(
        "[...document.querySelectorAll('#error-list li')].map((li) => li.dataset.code)"))


async def prompt_text(page: Page, layer: str) -> str:
    return str(await page.evaluate(
        f"document.querySelector(\".prompt-block[data-layer='{layer}'] .prompt-text\").textContent"))


async def inspect_directly(ins: Inspector, params: dict[str, Any]) -> dict[str, Any]:
    """What the server answers the same inspection, over a second (inspector) connection."""
    other = await RpcClient.open(ins.server.url, ins.inspector_token)
    try:
        result: dict[str, Any] = await other.call("context:inspect", {"projectId": ins.project_id, **params})
        return result
    finally:
        await other.close()


async def test_assemble_shows_every_layer_for_a_clicked_cursor(inspector: Inspector) -> None:
    """Load /inspector with the token in the fragment (removed from the address bar at once),
    pick the seeded Chinese chapter, click in the text to place the cursor, type an instruction
    and assemble: the budget bar, the stable prefix, every candidate of every layer with its
    fate and the final prompt with layer boundaries show, matching what the server computes."""
    page = inspector.page
    await open_page(inspector)
    assert page.url == f"{inspector.base}/inspector/", "the token must not stay in the URL"
    text = await pick(inspector)
    assert text == ZH_CHAPTERS[CHAPTER]

    target = "苏晴敲着门"
    await click_before(page, target)
    cursor = ZH_CHAPTERS[CHAPTER].index(target)
    assert await page.input_value("#cursor") == str(cursor)
    await page.fill("#instruction", "写苏晴进门后的第一句话")
    await assemble(inspector)

    expected = await inspect_directly(inspector, {
        "documentId": CHAPTER, "cursorPosition": cursor, "skillId": "continue",
        "additionalInput": "写苏晴进门后的第一句话"})
    assert await page.text_content("#prefix-hash") == expected["stablePrefixHash"]
    summary = await page.text_content("#summary") or ""
    assert f"{expected['tokenCount']:,} of {expected['budget']['total']:,} tokens" in summary

    rules = await rows(page, "rules")
    assert {r["id"] for r in rules} == {c["id"] for c in expected["candidates"] if c["layer"] == "rules"}
    assert {"constraint:1", "entity:1", "settings:narrative"} <= {r["id"] for r in rules}
    first = next(r for r in rules if r["id"] == "constraint:1")
    assert "严格第一人称叙述" in first["cells"][1]
    assert "priority 10" in first["cells"][3]
    assert first["fate"] == "included"
    for layer in ("settings", "retrieved", "immediate"):
        assert [r["id"] for r in await rows(page, layer)] == [
            c["id"] for c in expected["candidates"] if c["layer"] == layer]
    window = (await rows(page, "immediate"))[0]
    assert window["id"] == "window"
    assert "distance" in window["cells"][3]

    segments = await page.evaluate(
        "Object.fromEntries([...document.querySelectorAll('#budget-bar .seg')]"
        ".map((s) => [s.dataset.segment, Number(s.dataset.tokens)]))")
    budget = expected["budget"]
    assert segments["reserve"] == budget["outputReserve"]
    assert segments["system"] == budget["systemPromptTokens"]
    for layer in ("rules", "settings", "retrieved", "immediate"):
        assert segments[layer] == expected["layers"][layer]["tokens"]
    assert segments["free"] == budget["total"] - expected["tokenCount"]
    assert sum(segments.values()) == budget["contextWindow"]

    blocks = await page.evaluate(
        "[...document.querySelectorAll('#prompt .prompt-block')].map((b) => b.dataset.layer)")
    assert blocks == ["rules", "settings", "retrieved", "immediate"]
    shown = [await prompt_text(page, layer) for layer in blocks]
    assert "\n\n".join(shown) == expected["prompt"]
    assert "end of the stable prefix" in (await page.text_content("#prompt .boundary") or "")
    assert "first inspection" in (await page.text_content("#prefix-local") or "")

    await page.screenshot(path=str(OUTPUT / "inspector-1280x800.png"))
    await page.screenshot(path=str(OUTPUT / "inspector-1280-full.png"), full_page=True)
    assert inspector.inspector_token not in inspector.server.stderr_text()


async def test_click_counts_code_points_not_utf16_units(inspector: Inspector) -> None:
    """Characters outside the BMP are one code point each: a click after them sets the
    cursor the server expects, and the window ends exactly there."""
    page = inspector.page
    await open_page(inspector)
    assert await pick(inspector, ASTRAL_DOC) == ASTRAL_TEXT
    await click_before(page, "苏晴点头")
    cursor = ASTRAL_TEXT.index("苏晴点头")
    assert cursor != len(ASTRAL_TEXT[:cursor].encode("utf-16-le")) // 2
    assert await page.input_value("#cursor") == str(cursor)
    await assemble(inspector)
    immediate = await prompt_text(page, "immediate")
    assert immediate.endswith("林远说：“钥匙在台阶下。”")


async def test_budget_edit_conflict_and_reapply(inspector: Inspector) -> None:
    """Saving the profile bumps its version and re-inspects; when a second client saves in
    between, the page shows CONTEXT_BUDGET_CONFLICT and both profiles and saves nothing;
    reapplying sends only the user's changes on the newer version, keeping the other's."""
    page, rpc, project = inspector.page, inspector.rpc, inspector.project_id
    await open_page(inspector)
    await pick(inspector)
    await assemble(inspector)
    assert await page.get_attribute("#budget-version", "data-version") == "1"

    await page.fill("#b-contextWindow", "6000")
    seq = await result_seq(page)
    await page.click("#budget-save")
    await page.wait_for_selector("#budget-version[data-version='2']")
    await rerendered(page, seq)
    profile = await rpc.call("context:budget:get", {"projectId": project})
    assert (profile["version"], profile["contextWindow"]) == (2, 6000)
    summary = await page.text_content("#summary") or ""
    system = await system_tokens(page)
    assert f"of {6000 - 1024 - system:,} tokens" in summary

    # Another client saves version 3 while the page still holds version 2.
    await rpc.call("context:budget:update", {"projectId": project, "version": 2, "outputReserve": 512})
    await page.fill("#b-min-immediate", "1500")
    await page.click("#budget-save")
    await page.wait_for_selector("#budget-conflict:not([hidden])")
    await idle(page)
    assert "CONTEXT_BUDGET_CONFLICT" in await error_codes(page)
    error = await page.text_content("#error-list li[data-code='CONTEXT_BUDGET_CONFLICT']") or ""
    assert '"currentVersion": 3' in error
    conflict = await page.evaluate(
        """Object.fromEntries([...document.querySelectorAll('#conflict-table tbody tr')]
            .map((tr) => [tr.dataset.field, [...tr.cells].slice(1, 4).map((c) => c.textContent)]))""")
    assert conflict == {"outputReserve": ["1024", "", "512"], "minimums.immediate": ["2000", "1500", "2000"]}
    unchanged = await rpc.call("context:budget:get", {"projectId": project})
    assert (unchanged["version"], unchanged["minimums"]["immediate"],
            unchanged["outputReserve"]) == (3, 2000, 512)
    OUTPUT.mkdir(exist_ok=True)
    await page.locator("#budget-conflict").screenshot(path=str(OUTPUT / "inspector-budget-conflict.png"))

    await page.click("#conflict-reapply")
    await page.wait_for_selector("#budget-version[data-version='4']")
    await idle(page)
    assert await page.is_hidden("#budget-conflict")
    final = await rpc.call("context:budget:get", {"projectId": project})
    assert (final["version"], final["contextWindow"], final["outputReserve"],
            final["minimums"]["immediate"]) == (4, 6000, 512, 1500)
    assert await page.input_value("#b-outputReserve") == "512"


async def test_what_if_total_budget_shows_changes_without_saving(inspector: Inspector) -> None:
    """A what-if re-runs the same inspection with a smaller total through budgetOverride:
    per-layer token deltas and the candidates whose fate changed show, the result view can
    switch between the two, and the saved profile stays as it was."""
    page, project = inspector.page, inspector.project_id
    await open_page(inspector)
    await pick(inspector)
    await assemble(inspector)
    base_rows = {r["id"]: r["fate"] for r in await rows(page, "retrieved")}
    assert "included" in set(base_rows.values())

    await page.fill("#whatif-total", "420")
    seq = await result_seq(page)
    await page.click("#whatif-run")
    await rerendered(page, seq)
    assert await page.get_attribute("#result", "data-view") == "whatif"

    profile = await inspector.rpc.call("context:budget:get", {"projectId": project})
    assert profile["version"] == 1
    system = await system_tokens(page)
    window = 420 + profile["outputReserve"] + system
    # A minimum above the what-if window would make the profile invalid: the page lowers it.
    lowered = {layer: window for layer, minimum in profile["minimums"].items() if minimum > window}
    assert lowered == {"immediate": window}
    assert f"immediate 2,000 → {window:,}" in (await page.text_content("#whatif-note") or "")
    expected = await inspect_directly(inspector, {
        "documentId": CHAPTER, "cursorPosition": len(ZH_CHAPTERS[CHAPTER]), "skillId": "continue",
        "budgetOverride": {"contextWindow": window, "minimums": lowered}})
    assert expected["budget"]["total"] == 420
    deltas = await page.evaluate(
        """Object.fromEntries([...document.querySelectorAll('#whatif-deltas tbody tr')]
            .map((tr) => [tr.dataset.layer, [...tr.cells].slice(1).map((c) => c.textContent)]))""")
    assert deltas["total budget"][1] == "420"
    assert deltas["prompt"][1] == f"{expected['tokenCount']:,}"
    changes = await page.evaluate(
        """[...document.querySelectorAll('#whatif-changes tbody tr')]
            .map((tr) => ({id: tr.dataset.id, after: tr.cells[2].textContent}))""")
    changed = {c["id"]: c["after"] for c in changes}
    assert changed, "a smaller budget must change some fates"
    for c in expected["candidates"]:
        if c["layer"] == "retrieved" and c["fate"] != base_rows[c["id"]]:
            assert changed[c["id"]].startswith(c["fate"])
    what_rows = {r["id"]: r["fate"] for r in await rows(page, "retrieved")}
    assert what_rows == {c["id"]: c["fate"] for c in expected["candidates"] if c["layer"] == "retrieved"}

    await page.click("#view-base")
    assert await page.get_attribute("#result", "data-view") == "base"
    assert {r["id"]: r["fate"] for r in await rows(page, "retrieved")} == base_rows
    await page.click("#view-whatif")
    await page.locator("#whatif-result").screenshot(path=str(OUTPUT / "inspector-whatif.png"))


async def test_added_constraint_lands_at_the_top_of_rules(inspector: Inspector) -> None:
    """A constraint added in the page (highest priority) is listed, the page re-inspects and
    it is rule 1 of the Rules layer, marked new, with the stable prefix reported changed in
    Rules; deleting it takes it out again."""
    page = inspector.page
    await open_page(inspector)
    await pick(inspector)
    await assemble(inspector)
    assert "5" in (await page.text_content("#constraints-count") or "")

    text = "林远从不在夜里离开灯塔"
    await page.select_option("#c-kind", "plot")
    await page.fill("#c-priority", "100")
    await page.fill("#c-text", text)
    seq = await result_seq(page)
    await page.click("#c-add")
    await rerendered(page, seq)

    listed = await page.evaluate(
        "[...document.querySelectorAll('#constraint-list .ctext')].map((n) => n.textContent)")
    assert listed[0] == text
    rules_text = await prompt_text(page, "rules")
    assert rules_text.startswith(f"[创作约束 - 不可违反]\n1. {text}\n2. 严格第一人称叙述")
    new_rows = [r for r in await rows(page, "rules") if "new" in r["cells"][1]]
    assert len(new_rows) == 1
    assert text in new_rows[0]["cells"][1]
    assert new_rows[0]["fate"] == "included"
    local = await page.text_content("#prefix-local") or ""
    assert re.search(r"changed · first differs in rules at byte \d+", local), local
    assert await page.locator("#prompt mark.diverge").count() == 1

    listing = await inspector.rpc.call("constraints:list", {"projectId": inspector.project_id})
    added = next(c for c in listing["constraints"] if c["text"] == text)
    seq = await result_seq(page)
    await page.click(f"#constraint-list li[data-id='{added['id']}'] button")
    await rerendered(page, seq)
    assert text not in await prompt_text(page, "rules")
    listing = await inspector.rpc.call("constraints:list", {"projectId": inspector.project_id})
    assert len(listing["constraints"]) == 5


async def test_server_errors_show_their_data_code(inspector: Inspector) -> None:
    """Every failure is listed with its data.code and data: ratios that do not sum to 1
    (INVALID_PARAMS with the field errors), a cursor past the end is refused by the page
    only to the end, and a wrong token is a connection error that never echoes the token."""
    page = inspector.page
    await open_page(inspector)
    await pick(inspector)
    await page.fill("#b-ratio-rules", "0.5")
    assert await page.text_content("#ratio-sum") == "1.35"
    await page.click("#budget-save")
    await page.wait_for_selector("#error-list li[data-code='INVALID_PARAMS']")
    item = await page.text_content("#error-list li[data-code='INVALID_PARAMS']") or ""
    assert "(-32602)" in item
    assert '"code": "INVALID_PARAMS"' in item
    profile = await inspector.rpc.call("context:budget:get", {"projectId": inspector.project_id})
    assert profile["version"] == 1

    await page.fill("#cursor", "999999")
    await page.press("#cursor", "Enter")
    assert await page.input_value("#cursor") == str(len(ZH_CHAPTERS[CHAPTER]))

    await page.click("#disconnect")
    await page.wait_for_selector("body[data-connected='false']")
    await page.fill("#token", "not-the-token-0123456789")
    await page.click("#connect")
    await page.wait_for_selector("#error-list li[data-code='CONNECTION']")
    assert "not-the-token" not in (await page.text_content("#errors") or "")
    inspector.errors[:] = [e for e in inspector.errors if "WebSocket connection" not in e]


async def test_narrow_window_stacks_without_horizontal_scrolling(inspector: Inspector) -> None:
    """At 420 px wide the panels stack in one column, nothing but the tables' own scrollers
    overflows, and the Chinese text of the document and the prompt is laid out."""
    page = inspector.page
    await page.set_viewport_size({"width": 420, "height": 860})
    await open_page(inspector)
    await pick(inspector)
    await click_before(page, "苏晴敲着门")
    await assemble(inspector)
    width = await page.evaluate("document.documentElement.scrollWidth")
    assert width <= 420
    columns = await page.evaluate("getComputedStyle(document.querySelector('.layout')).gridTemplateColumns")
    assert len(str(columns).split()) == 1
    await page.screenshot(path=str(OUTPUT / "inspector-420.png"))
    await page.evaluate("document.querySelector('#results').scrollIntoView()")
    await page.screenshot(path=str(OUTPUT / "inspector-420-results.png"))
    await open_in_editor(inspector, "novel")
    assert await page.evaluate("document.documentElement.scrollWidth") <= 420
    await page.locator("#h-editor").scroll_into_view_if_needed()
    await page.screenshot(path=str(OUTPUT / "inspector-420-editor.png"))


# --- profiles -------------------------------------------------------------------------------

# Three sections in two roles and no document window: a persona and the project's constraints
# speak as the system (stable), the caller's question as the user. The constraints have a cap
# small enough that a reduction step must run.
TUTOR: dict[str, Any] = {
    "schema": "strata.profile/1",
    "name": "tutor",
    "description": "A tutor on the project: persona, canon and a question.",
    "variables": {
        "topic": {"description": "what the tutoring is about", "default": "the story"},
        "question": {"description": "the reader's question"},
    },
    "sections": {
        "persona": {"order": 10, "stable": True, "role": "system",
                    "content": ["You are a patient tutor on ${topic}. Answer from the canon only."]},
        "canon": {"order": 20, "stable": True, "role": "system", "source": "constraints",
                  "format": {"header": "[Canon]", "list": "numbered"},
                  "budget": {"ratio": 0.2, "max": 40},
                  "reduce": [{"id": "shed", "step": "drop_lowest", "target": "cap", "floor": "none"}]},
        "question": {"order": 30, "role": "user", "source": "request.question"},
    },
}


async def choose_project(ins: Inspector) -> None:
    """Choose this test's project (no document) and wait until its profiles are listed."""
    page = ins.page
    await page.wait_for_selector(f"#project option[value='{ins.project_id}']", state="attached")
    await page.select_option("#project", ins.project_id)
    await page.wait_for_selector("#profile-id option[value='novel']", state="attached")
    await idle(page)


async def choose_profile(ins: Inspector, name: str) -> None:
    page = ins.page
    await page.wait_for_selector(f"#profile-id option[value='{name}']", state="attached")
    await page.select_option("#profile-id", name)
    await page.wait_for_selector("#profile-note[data-window]", state="attached")
    await idle(page)


async def set_editor(page: Page, text: str) -> None:
    await page.fill("#pe-json", text)


async def editor_selection(page: Page) -> str:
    """The text selected in the profile editor."""
    return str(await page.evaluate(
        "(() => { const t = document.querySelector('#pe-json');"
        " return t.value.slice(t.selectionStart, t.selectionEnd); })()"))


async def problems(page: Page) -> list[dict[str, str]]:
    return list(await page.evaluate(
        "[...document.querySelectorAll('#pe-problems li')]"
        ".map((li) => ({path: li.dataset.path, text: li.textContent}))"))


async def open_in_editor(ins: Inspector, name: str) -> None:
    page = ins.page
    await page.wait_for_selector(f"#pe-name option[value='{name}']", state="attached")
    await page.select_option("#pe-name", name)
    await page.click("#pe-open")
    await page.wait_for_function(
        "(n) => document.querySelector('#pe-json').dataset.name === n", arg=name)
    await idle(page)


async def test_novel_profile_is_the_default_and_shows_its_four_sections(inspector: Inspector) -> None:
    """Without a choice the picker says novel: it needs the document, and the result shows
    the four sections in order, each in the user role, with the arithmetic table, the hashes
    of each section end, the prompt blocks and one system and one user message."""
    page = inspector.page
    await open_page(inspector)
    await pick(inspector)
    assert await page.input_value("#profile-id") == "novel"
    assert await page.get_attribute("#profile-note", "data-window") == "true"
    assert await page.is_hidden("#doc-optional")
    await assemble(inspector)
    expected = await inspect_directly(inspector, {
        "documentId": CHAPTER, "cursorPosition": len(ZH_CHAPTERS[CHAPTER]), "skillId": "continue"})
    four = ["rules", "settings", "retrieved", "immediate"]
    assert [s["id"] for s in expected["sections"]] == four
    layers = await page.evaluate(
        "[...document.querySelectorAll('#layers section.layer')].map((s) => [s.dataset.layer, s.dataset.role])")
    assert layers == [[layer, "user"] for layer in four]
    arithmetic = await page.evaluate(
        """[...document.querySelectorAll('#arithmetic-table tbody tr')]
            .map((tr) => [tr.dataset.section, [...tr.cells].map((c) => c.textContent)])""")
    assert [row[0] for row in arithmetic] == four
    for section, cells in arithmetic:
        assert cells[3] == f"{round(expected['arithmetic']['shares'][section]):,}"
        assert cells[5] == f"{round(expected['arithmetic']['used'][section]):,}"
    assert [row[1][2] for row in arithmetic] == ["stable", "stable", "", ""]
    hashes = await page.text_content("#prefix-hashes") or ""
    for section in four:
        assert f"{section} {expected['prefixHashes'][section][:12]}" in hashes
    assert await page.text_content("#summary-profile") == "novel"
    # The novel four keep their colours from the stylesheet.
    colours = await page.evaluate(
        """Object.fromEntries([...document.querySelectorAll('#budget-bar .seg[data-section]')]
            .map((s) => [s.dataset.section, getComputedStyle(s).backgroundColor]))""")
    assert colours == {"rules": "rgb(63, 91, 216)", "settings": "rgb(21, 149, 163)",
                       "retrieved": "rgb(217, 138, 0)", "immediate": "rgb(46, 155, 77)"}
    messages = await page.evaluate(
        "[...document.querySelectorAll('#message-list .message')]"
        ".map((m) => [m.dataset.role, m.querySelector('pre').textContent])")
    assert messages == [[m["role"], m["content"]] for m in expected["messages"]]
    assert [m[0] for m in messages] == ["system", "user"]


async def test_project_profile_without_a_document_window(inspector: Inspector) -> None:
    """A project profile of three sections in two roles and no document window assembles with
    no document picked: the page shows exactly its sections (bar, arithmetic, candidates, prompt),
    their roles, the reduction step taken and the two messages, as the server computes them;
    its declared variables are offered as rows and sent."""
    page, rpc, project = inspector.page, inspector.rpc, inspector.project_id
    saved = await rpc.call("profile:put", {"projectId": project, "name": "tutor", "profile": TUTOR})
    assert saved["version"] == 1
    await open_page(inspector)
    await choose_project(inspector)
    assert await page.is_disabled("#assemble"), "novel needs a document"
    await choose_profile(inspector, "tutor")
    assert await page.get_attribute("#profile-note", "data-window") == "false"
    assert await page.is_visible("#doc-optional")
    assert await page.is_enabled("#assemble")
    assert await page.is_disabled("#skill")
    names = await page.evaluate(
        "[...document.querySelectorAll('#variables .var-row')].map((r) => r.querySelector('.var-name').value)")
    assert names == ["topic", "question"]
    question = "林远为什么不离开灯塔？"
    await page.fill("#variables .var-row:nth-child(2) .var-value", question)
    await page.fill("#variables .var-row:nth-child(1) .var-value", "灯塔")
    await assemble(inspector)

    variables = {"topic": "灯塔", "question": question}
    expected = await inspect_directly(inspector, {"profileId": "tutor", "variables": variables})
    ids = ["persona", "canon", "question"]
    assert expected["profileId"] == "tutor"
    assert [s["id"] for s in expected["sections"]] == ids
    assert await page.text_content("#summary-profile") == "tutor"
    assert "no document window" in (await page.text_content("#summary") or "")
    assert await page.text_content("#prefix-hash") == expected["stablePrefixHash"]

    layers = await page.evaluate(
        "[...document.querySelectorAll('#layers section.layer')].map((s) => [s.dataset.layer, s.dataset.role])")
    assert layers == [["persona", "system"], ["canon", "system"], ["question", "user"]]
    segments = await page.evaluate(
        "[...document.querySelectorAll('#budget-bar .seg[data-section]')].map((s) => s.dataset.section)")
    assert segments == [s["id"] for s in expected["sections"] if s["tokens"] > 0]
    assert await page.evaluate(
        "[...document.querySelectorAll('#arithmetic-table tbody tr')].map((tr) => tr.dataset.section)") == ids
    assert await page.evaluate(
        "[...document.querySelectorAll('#arithmetic-table tbody tr')].map((tr) => tr.dataset.role)") == [
        "system", "system", "user"]
    assert (await page.text_content("#prefix-sections") or "") == "persona, canon"
    # Sections outside the novel four get distinct colours of their own.
    colours = await page.evaluate(
        "[...document.querySelectorAll('#arithmetic-table tbody tr .swatch')]"
        ".map((s) => getComputedStyle(s).backgroundColor)")
    assert len(set(colours)) == 3

    steps = {s["id"]: s["steps"] for s in expected["sections"]}
    assert [st["step"] for st in steps["canon"]] == ["shed"]
    shown_steps = await page.evaluate(
        """Object.fromEntries([...document.querySelectorAll('#arithmetic-table tbody tr')]
            .map((tr) => [tr.dataset.section, [...tr.querySelectorAll('.step')].map((s) => s.dataset.step)]))""")
    assert shown_steps == {section: [st["step"] for st in taken] for section, taken in steps.items()}
    canon_step = steps["canon"][0]
    assert (f"shed {canon_step['tokensBefore']:,} → {canon_step['tokensAfter']:,}"
            in (await page.text_content(".layer-steps[data-section='canon']") or ""))
    canon = await rows(page, "canon")
    assert {r["id"]: r["fate"] for r in canon} == {
        c["id"]: c["fate"] for c in expected["candidates"] if c["layer"] == "canon"}
    assert "dropped" in {r["fate"] for r in canon}

    blocks = await page.evaluate(
        "[...document.querySelectorAll('#prompt .prompt-block')].map((b) => [b.dataset.layer, b.dataset.role])")
    assert blocks == [["persona", "system"], ["canon", "system"], ["question", "user"]]
    assert "\n\n".join([await prompt_text(page, layer) for layer in ids]) == expected["prompt"]
    boundary = await page.evaluate(
        "document.querySelector('#prompt .boundary').previousElementSibling.dataset.layer")
    assert boundary == "canon"
    assert await prompt_text(page, "question") == question
    assert "You are a patient tutor on 灯塔." in await prompt_text(page, "persona")

    await page.click("#messages-summary")
    messages = await page.evaluate(
        "[...document.querySelectorAll('#message-list .message')]"
        ".map((m) => [m.dataset.role, m.querySelector('pre').textContent])")
    assert messages == [[m["role"], m["content"]] for m in expected["messages"]]
    assert [m[0] for m in messages] == ["system", "user"]
    assert messages[1][1] == question
    assert await page.is_visible("#message-list .message[data-role='user']")
    await page.screenshot(path=str(OUTPUT / "inspector-profile-tutor.png"), full_page=True)
    assert await error_codes(page) == []


async def test_profile_editor_lists_problems_at_their_paths(inspector: Inspector) -> None:
    """Validate lists every PROFILE_INVALID problem with its JSON pointer; clicking one selects
    that place in the JSON text (the key and its value, or the nearest parent's key when the
    pointer names something missing). Save of an invalid profile shows PROFILE_INVALID with its
    problems and saves nothing."""
    page, rpc, project = inspector.page, inspector.rpc, inspector.project_id
    await rpc.call("profile:put", {"projectId": project, "name": "tutor", "profile": TUTOR})
    await open_page(inspector)
    await choose_project(inspector)
    await open_in_editor(inspector, "tutor")
    assert await page.get_attribute("#pe-version", "data-version") == "1"
    text = await page.input_value("#pe-json")
    assert '"name": "tutor"' in text

    broken = text.replace('"ratio": 0.2', '"ratio": 2').replace('"order": 30,', '"order": "last",')
    await set_editor(page, broken)
    await page.click("#pe-validate")
    await page.wait_for_selector("#pe-problems li")
    await idle(page)
    found = {p["path"]: p["text"] for p in await problems(page)}
    assert set(found) == {"/sections/canon/budget/ratio", "/sections/question/order"}, found
    assert "less than or equal to 1" in found["/sections/canon/budget/ratio"]
    await page.click("#pe-problems li[data-path='/sections/canon/budget/ratio'] button")
    assert await editor_selection(page) == '"ratio": 2'
    assert await page.evaluate("document.activeElement.id") == "pe-json"
    await page.click("#pe-problems li[data-path='/sections/question/order'] button")
    assert await editor_selection(page) == '"order": "last"'

    # Schema-valid but unresolvable: an unknown source, a step of a part it does not have.
    unresolvable = text.replace('"source": "request.question"', '"source": "nowhere"')
    await set_editor(page, unresolvable)
    await page.click("#pe-save")
    await page.wait_for_selector("#error-list li[data-code='PROFILE_INVALID']")
    await page.wait_for_selector("#pe-problems li")
    await idle(page)
    assert "PROFILE_INVALID" in (await page.text_content("#pe-status") or "")
    found = {p["path"]: p["text"] for p in await problems(page)}
    assert "/sections/question/source" in found, found
    await page.click("#pe-problems li[data-path='/sections/question/source'] button")
    assert await editor_selection(page) == '"source": "nowhere"'
    stored = await rpc.call("profile:get", {"projectId": project, "name": "tutor"})
    assert stored["version"] == 1
    assert stored["profile"]["sections"]["question"]["source"] == "request.question"

    # A pointer to something the text lacks selects the nearest parent's key.
    await set_editor(page, text.replace('"order": 10,', ""))
    await page.click("#pe-validate")
    await page.wait_for_selector("#pe-problems li[data-path='/sections/persona/order']")
    await idle(page)
    await page.click("#pe-problems li[data-path='/sections/persona/order'] button")
    assert await editor_selection(page) == '"persona"'
    OUTPUT.mkdir(exist_ok=True)
    await page.locator("#pe-result").screenshot(path=str(OUTPUT / "inspector-profile-problems.png"))

    # And a valid one says so.
    await set_editor(page, text)
    await page.click("#pe-validate")
    await page.wait_for_selector("#pe-valid")
    assert "no document window" in (await page.text_content("#pe-valid") or "")


async def test_profile_save_conflict_shows_both_and_saves_nothing_until_reapplied(inspector: Inspector) -> None:
    """The editor saves with the version it opened; when another client saved in between, it
    shows PROFILE_CONFLICT, both versions (the lines that differ marked) and saves nothing;
    "Save mine" then saves the page's text over the newer version."""
    page, rpc, project = inspector.page, inspector.rpc, inspector.project_id
    await rpc.call("profile:put", {"projectId": project, "name": "tutor", "profile": TUTOR})
    await open_page(inspector)
    await choose_project(inspector)
    await open_in_editor(inspector, "tutor")
    text = await page.input_value("#pe-json")

    theirs = {**TUTOR, "description": "Changed by another client."}
    await rpc.call("profile:put", {"projectId": project, "name": "tutor", "profile": theirs, "version": 1})
    mine = text.replace("A tutor on the project: persona, canon and a question.", "Edited in the inspector.")
    await set_editor(page, mine)
    await page.click("#pe-save")
    await page.wait_for_selector("#pe-conflict:not([hidden])")
    await idle(page)
    assert "PROFILE_CONFLICT" in await error_codes(page)
    error = await page.text_content("#error-list li[data-code='PROFILE_CONFLICT']") or ""
    assert '"currentVersion": 2' in error
    assert "Edited in the inspector." in (await page.text_content("#pe-conflict-mine") or "")
    assert "Changed by another client." in (await page.text_content("#pe-conflict-theirs") or "")
    marked = await page.evaluate(
        "[...document.querySelectorAll('#pe-conflict-theirs mark.diffline')].map((m) => m.textContent)")
    assert marked == ['  "description": "Changed by another client.",']
    stored = await rpc.call("profile:get", {"projectId": project, "name": "tutor"})
    assert (stored["version"], stored["profile"]["description"]) == (2, "Changed by another client.")
    await page.locator("#pe-conflict").screenshot(path=str(OUTPUT / "inspector-profile-conflict.png"))

    await page.click("#pe-reapply")
    await page.wait_for_selector("#pe-version[data-version='3']")
    await idle(page)
    assert await page.is_hidden("#pe-conflict")
    stored = await rpc.call("profile:get", {"projectId": project, "name": "tutor"})
    assert (stored["version"], stored["profile"]["description"]) == (3, "Edited in the inspector.")
    assert await page.input_value("#pe-json") == mine


async def test_built_in_profile_is_read_only_and_saves_as_a_copy(inspector: Inspector) -> None:
    """A built-in opens read-only (no Save, no Delete); saving a copy under the built-in's own
    name shows PROFILE_READ_ONLY; under a new name it is created as the project's version 1,
    listed in the picker, editable, and can be deleted again."""
    page, rpc, project = inspector.page, inspector.rpc, inspector.project_id
    await open_page(inspector)
    await choose_project(inspector)
    await open_in_editor(inspector, "novel")
    assert await page.get_attribute("#pe-json", "readonly") is not None
    assert await page.is_disabled("#pe-save")
    assert await page.is_disabled("#pe-delete")
    assert "read-only" in (await page.text_content("#pe-note") or "")
    assert '"name": "novel"' in await page.input_value("#pe-json")

    await page.fill("#pe-copy-name", "novel")
    await page.click("#pe-copy")
    await page.wait_for_selector("#error-list li[data-code='PROFILE_READ_ONLY']")
    await idle(page)

    await page.fill("#pe-copy-name", "my-novel")
    await page.click("#pe-copy")
    await page.wait_for_selector("#pe-version[data-version='1']")
    await idle(page)
    stored = await rpc.call("profile:get", {"projectId": project, "name": "my-novel"})
    assert (stored["version"], stored["builtIn"], stored["profile"]["name"]) == (1, False, "my-novel")
    assert await page.get_attribute("#pe-json", "readonly") is None
    assert await page.is_enabled("#pe-save")
    assert await page.input_value("#pe-name") == "my-novel"
    assert await page.locator("#profile-id option[value='my-novel']").count() == 1

    await page.click("#pe-delete")
    assert "Really delete my-novel v1?" in (await page.text_content("#pe-delete") or "")
    await page.click("#pe-delete")
    await page.wait_for_selector("#profile-id:not(:has(option[value='my-novel']))", state="attached")
    await idle(page)
    listed = await rpc.call("profile:list", {"projectId": project})
    assert "my-novel" not in {p["name"] for p in listed["profiles"]}
    assert "Deleted my-novel" in (await page.text_content("#pe-status") or "")
    assert set(await error_codes(page)) == {"PROFILE_READ_ONLY"}


async def _http_get(port: int, path: str, host: str | None = None) -> tuple[int, dict[str, str], bytes]:
    """One plain HTTP/1.1 GET (no websocket upgrade); status, headers (lower-case names), body."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(f"GET {path} HTTP/1.1\r\nHost: {host or f'127.0.0.1:{port}'}\r\n"
                     "Accept: */*\r\n\r\n".encode())
        await writer.drain()
        raw = await asyncio.wait_for(reader.read(), 10)
    finally:
        writer.close()
    head, _, body = raw.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    return int(lines[0].split()[1]), headers, body


async def test_page_is_served_in_debug_mode_with_strict_headers(proc: ServerProcess) -> None:
    """In debug mode the page and its three assets load without a token, never cached, with
    nosniff and a CSP that only allows loopback websockets; /inspector redirects to the
    folder, unknown or escaping names are 404, and a foreign Host is 403 (DNS rebinding)."""
    port = proc.port
    status, headers, body = await _http_get(port, "/inspector")
    assert (status, headers["location"]) == (308, "/inspector/")
    for path, name, kind in [("/inspector/", "inspector.html", "text/html"),
                             ("/inspector/inspector.js", "inspector.js", "text/javascript"),
                             ("/inspector/inspector.css", "inspector.css", "text/css"),
                             ("/inspector/strata-client.js", "strata-client.js", "text/javascript")]:
        status, headers, body = await _http_get(port, path)
        assert status == 200, path
        assert headers["content-type"].startswith(kind)
        assert headers["cache-control"] == "no-store"
        assert headers["x-content-type-options"] == "nosniff"
        assert "connect-src 'self' ws://127.0.0.1:* ws://localhost:*" in headers["content-security-policy"]
        assert "script-src 'self'" in headers["content-security-policy"]
        assert int(headers["content-length"]) == len(body)
        assert body == (ROOT / "renderer-stub" / name).read_bytes()
    for path in ["/inspector/../ipc/server.py", "/inspector/%2e%2e/pyproject.toml", "/inspector/package.json",
                 "/inspector/client-test.html", "/inspector/inspector.js/", "/inspectorx"]:
        assert (await _http_get(port, path))[0] == 404, path
    assert (await _http_get(port, "/inspector/", host=f"evil.example:{port}"))[0] == 403
    assert (await _http_get(port, "/inspector/", host="127.0.0.1:1"))[0] == 403
    assert (await _http_get(port, "/inspector/?token=x"))[0] == 200


async def test_page_is_404_without_debug(tmp_path: Path) -> None:
    """Outside debug mode the server has no inspector page at all."""
    with serving(tmp_path / "data") as running:
        for path in ("/inspector", "/inspector/", "/inspector/inspector.js"):
            assert (await _http_get(running.port, path))[0] == 404, path
