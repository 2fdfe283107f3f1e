"""Tests of scripts/demo.py: the novel demo (a four-chapter sample indexed before one assembly, an
earlier passage found by meaning alone, quiet logs) and --profile game-master (three prompts with their
meta), in each language."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from scripts import demo
from scripts.sample_data import NOVEL, NOVEL_CURSOR, NOVEL_INSTRUCTION, NOVEL_RECALL, ZH_CHAPTERS
from services.retrieval.chunking import chunk_text
from services.retrieval.lexical import Terms
from services.retrieval.search import Hit
from services.tokenizer import resolve_tokenizer

ROOT = Path(__file__).resolve().parents[2]


def turns(output: str) -> dict[str, tuple[str, dict[str, Any]]]:
    """The demo's output as {title: (prompt, meta)}, each ``meta`` line read back as JSON."""
    found: dict[str, tuple[str, dict[str, Any]]] = {}
    for block in output.split("\n##### ")[1:]:
        heading, rest = block.split("\n", 1)
        prompt, meta_lines = rest.strip("\n").split("\n\nmeta:\n")
        meta = {}
        for line in meta_lines.strip("\n").splitlines():
            key, value = line.strip().split(": ", 1)
            meta[key] = json.loads(value)
        found[heading.split(": segments:assemble")[0]] = (prompt, meta)
    return found


def test_game_master_demo_in_english() -> None:
    """The first turn has the welcome and tier-0 NPCs, the later turn the innkeeper's secrets and no
    welcome, the small budget the NPC block dropped after its tiers and the input trimmed; only
    English segments are used."""
    done = subprocess.run([sys.executable, str(ROOT / "scripts" / "demo.py"), "--profile", "game-master",
                           "--language", "en"], capture_output=True, text=True, timeout=90, cwd=ROOT,
                          check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.startswith("imported 22 segments (11 per language); assembling with locale en\n")
    found = turns(done.stdout)
    assert list(found) == ["first turn", "later turn", "later turn, small budget"]

    prompt, meta = found["first turn"]
    assert prompt.startswith("=== CORE_BEGIN ===\nYou are the game master of a text adventure.")
    assert ("=== NPC_BEGIN ===\nNPC: npc.innkeeper\nMarta, the innkeeper: broad, cheerful, quick to laugh.\n"
            "NPC: npc.bard\nFen, a travelling bard: thin, polite, always tuning a lute.\n"
            "=== NPC_END ===") in prompt
    assert meta["order"] == ["core", "ruleset", "world", "entry", "entry_start", "npc", "game_state",
                             "player", "input"]
    assert (meta["tokenizer"], meta["exact"], meta["emptyScopes"]) == ("cl100k_base", True, ["rng"])
    assert "truncated" not in meta

    prompt, meta = found["later turn"]
    assert "ENTRY_START" not in prompt
    assert "Under the bar she hides a smuggler's map of the old river tunnels.\nNPC: npc.bard" in prompt
    assert len(meta["segmentIdsByScope"]["npc"]) == 5
    assert "truncated" not in meta

    prompt, meta = found["later turn, small budget"]
    assert meta["tokensEstimated"] <= demo.SMALL_BUDGETS["en"]
    assert "NPC_BEGIN" not in prompt
    assert meta["truncated"]["droppedScopes"] == ["npc"]
    assert meta["truncated"]["npcDroppedTiers"] == [{"npcId": "npc.innkeeper", "fromTier": 2, "toTier": 0},
                                                    {"npcId": "npc.bard", "fromTier": 1, "toTier": 0}]
    assert meta["truncated"]["inputTrimmed"]["fromChars"] == 212
    assert 0 < meta["truncated"]["inputTrimmed"]["toChars"] < 212
    assert "玛尔塔" not in done.stdout


async def test_game_master_demo_in_chinese(capsys: pytest.CaptureFixture[str]) -> None:
    """The Chinese segments (locale zh-CN) come through exactly; the NPC cap drops the bard."""
    await demo.game_master("zh", None)
    output = capsys.readouterr().out
    found = turns(output)
    prompt, meta = found["first turn"]
    assert "=== CORE_BEGIN ===\n你是一场文字冒险的游戏主持人。" in prompt
    assert "NPC: npc.innkeeper\n玛尔塔，旅店老板娘：身材宽大，性格开朗，爱笑。\n" in prompt
    assert "Marta" not in output
    prompt, meta = found["later turn, small budget"]
    assert meta["tokensEstimated"] <= demo.SMALL_BUDGETS["zh"]
    assert meta["truncated"]["droppedNpcs"] == ["npc.bard"]
    assert "NPC: npc.bard" not in prompt


def test_novel_stays_the_default() -> None:
    """Without flags the demo runs the novel profile, quietly; --budget and --verbose are read."""
    assert demo.parse_args([]).profile == "novel"
    assert demo.parse_args([]).verbose is False
    assert demo.parse_args(["--verbose"]).verbose is True
    assert demo.parse_args(["--profile", "game-master", "--budget", "400"]).budget == 400


# --------------------------------------------------------------------------- the novel demo


def candidate_rows(output: str) -> dict[str, list[str]]:
    """The candidate table as {id: [layer, id, tokens, key, dense, bm25, found by?, fate...]}."""
    block = output.split("=== candidates ===")[1].split("\n\n")[0]
    return {cells[1]: cells for cells in (line.split() for line in block.splitlines()[2:])}


def recall_chunk(language: str) -> str:
    """The candidate id of the chunk that holds the passage the demo must bring back by meaning."""
    document, phrase = NOVEL_RECALL[language]
    text = NOVEL[language][document]
    at = text.index(phrase)
    [chunk] = [c for c in chunk_text(text, resolve_tokenizer().count) if c.start <= at < c.end]
    return f"chunk:{document}#{chunk.ordinal}"


def check_novel_output(output: str, language: str) -> None:
    """What a newcomer must see: the sample indexed (chunks > 0), the chapter-2 passage retrieved by
    meaning (a dense rank, no BM25 rank) and included in the prompt, other passages found by words too."""
    first = output.splitlines()[0]
    assert first.startswith(f"sample novel: {len(NOVEL[language])} chapters")
    chunks = int(first.split("indexed into ")[1].split()[0])
    assert chunks >= 2 * len(NOVEL[language])
    rows = candidate_rows(output)
    wanted = recall_chunk(language)
    layer, _, _, _, dense, bm25, found, fate = rows[wanted][:8]
    assert (layer, bm25, found, fate) == ("retrieved", "-", "meaning", "included")
    if "encoder: multilingual-e5-small" in first:
        # e5 ranks it above every passage of the other chapters (only the chapter being written may be
        # nearer); the fallback encoder finds it too, lower.
        others = [int(cells[4]) for id_, cells in rows.items()
                  if id_.startswith("chunk:") and not id_.startswith(f"chunk:{NOVEL_CURSOR[language]}#")]
        assert int(dense) == min(others)
    assert any(cells[6] == "both" for id_, cells in rows.items() if id_.startswith("chunk:"))
    prompt = output.split("=== prompt ===")[1].split("=== layers ===")[0]
    assert NOVEL_RECALL[language][1] in prompt
    meaning = output.split("=== retrieved by meaning ===")[1].split("\n\nwarnings:")[0]
    assert meaning.splitlines()[1].startswith(f"{wanted}  dense rank {dense}, no BM25 match, included")


@pytest.mark.parametrize("language", ["zh", "en"])
def test_recalled_passage_shares_no_search_term_with_the_query(language: str) -> None:
    """The sample is written so that BM25 cannot find the chapter-2 passage: its chunk shares no search
    term (Strata's own: jieba words, stemmed English) with what the Retrieved layer searches for, the
    last 800 characters before the cursor and the instruction; it sits in an earlier chapter."""
    terms = Terms()
    cursor_text = NOVEL[language][NOVEL_CURSOR[language]]
    query = set(terms(cursor_text[-800:] + "\n" + NOVEL_INSTRUCTION[language]))
    document, phrase = NOVEL_RECALL[language]
    text = NOVEL[language][document]
    at = text.index(phrase)
    [chunk] = [c for c in chunk_text(text, resolve_tokenizer().count) if c.start <= at < c.end]
    assert query.isdisjoint(terms(text[chunk.start:chunk.end]))
    assert list(NOVEL[language]).index(document) < list(NOVEL[language]).index(NOVEL_CURSOR[language])
    assert len(NOVEL[language]) >= 4


def test_novel_demo_in_english_indexes_and_finds_a_passage_by_meaning() -> None:
    """The default profile, run as a newcomer would: exit 0, the chapter-2 passage found by meaning and
    in the prompt, nothing on stderr (the logs are quiet without --verbose)."""
    done = subprocess.run([sys.executable, str(ROOT / "scripts" / "demo.py"), "--language", "en"],
                          capture_output=True, text=True, timeout=300, cwd=ROOT, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    check_novel_output(done.stdout, "en")
    assert done.stderr == ""
    assert "retrieval." not in done.stdout  # no log line over the output


async def test_novel_demo_in_chinese_with_verbose_logs_on_stderr(capsys: pytest.CaptureFixture[str]) -> None:
    """In Chinese the same holds for 第二章; --verbose sends the services' log lines to stderr, never
    to stdout."""
    await demo.main("zh", None, verbose=True)
    captured = capsys.readouterr()
    check_novel_output(captured.out, "zh")
    assert "retrieval." in captured.err
    assert "retrieval." not in captured.out


def test_found_by_reads_the_ranks_of_a_hit() -> None:
    """meaning: a dense rank and no BM25 rank; words: BM25 only; both: both; nothing for other layers."""
    def hit(dense: int | None, lexical: int | None) -> Hit:
        return Hit("p", "d.md", 0, 0, 1, "", 1, 0.5, dense, lexical)

    assert demo.found_by(hit(0, None)) == "meaning"
    assert demo.found_by(hit(None, 3)) == "words"
    assert demo.found_by(hit(2, 0)) == "both"
    assert demo.found_by(None) == ""


def test_the_inspector_fixture_is_unchanged() -> None:
    """The browser tests of the inspector seed the small fixture (scripts/sample_data.seed by default),
    whose chapter 5 they click in: the demo's novel is separate."""
    assert "苏晴敲着门" in ZH_CHAPTERS["第五章.md"]
    assert set(NOVEL["zh"]).isdisjoint({"第五章.md"})
