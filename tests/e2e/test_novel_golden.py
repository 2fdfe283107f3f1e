"""Golden regression test of the `novel` assembly: the default four-layer prompt stays byte-identical.

One real ``python -m main serve --debug`` child serves the module. The frozen
corpus of tests/support/golden_corpus.py (Chinese and English projects:
constraints, knowledge graph, memories, settings, budget profiles, chapters
indexed for retrieval) is seeded into it once over JSON-RPC; then every case
is sent as ``context:assemble`` (client token) and ``context:inspect``
(inspector token) and compared, field by field, with its golden file in
tests/golden/novel/ (captured by scripts/capture_golden.py).

Compared: prompt, tokenCount, stablePrefixHash, prefixHashes, layers,
warnings, budget, systemPrompt, tokenizer, and for inspect also candidates,
layerTexts and arithmetic. Every golden field must be present and equal; fields
a result gains later are ignored (tests/support/golden_diff.py). Not compared:
timingsMs (wall-clock) and stablePrefixUnchanged / prefixDivergence, which
depend on which assemblies the server ran before, not on the request.

A failure names the case and the first differing field with a readable diff.
Never "fix" a failure by re-capturing unless the change to `novel` output is
intended (see scripts/capture_golden.py).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from tests.support.client import RpcClient
from tests.support.golden_corpus import (
    ASSEMBLE_FIELDS,
    CASES,
    INSPECT_FIELDS,
    SERVER_ARGS,
    Case,
    corpus_fingerprint,
    golden_request,
    run_case,
    seed_corpus,
    unmet_expectations,
)
from tests.support.golden_diff import KEY_TOLERANCE, align_ties, first_difference
from tests.support.process import ServerProcess, start_server

GOLDEN_DIR = Path(__file__).resolve().parents[1] / "golden" / "novel"


def load_golden(case: Case) -> dict[str, Any]:
    golden: dict[str, Any] = json.loads((GOLDEN_DIR / f"{case.name}.json").read_text(encoding="utf-8"))
    return golden


@pytest.fixture(scope="module")
def proc(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    running = start_server(tmp_path_factory.mktemp("novel-golden") / "data", *SERVER_ARGS)
    try:
        yield running
    finally:
        running.terminate()
        running.kill()


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def clients(proc: ServerProcess) -> AsyncIterator[tuple[RpcClient, RpcClient]]:
    """A renderer's connection and the inspector's, shared by the module."""
    rpc = await RpcClient.open(proc.url, proc.token)
    inspector = await RpcClient.open(proc.url, str(proc.ready["inspectorToken"]))
    try:
        yield rpc, inspector
    finally:
        await inspector.close()
        await rpc.close()


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def project_ids(clients: tuple[RpcClient, RpcClient], tmp_path_factory: pytest.TempPathFactory
                      ) -> dict[str, str]:
    """The corpus, seeded once for the module, with every retrieval index settled."""
    return await seed_corpus(clients[0], tmp_path_factory.mktemp("novel-golden-projects"))


def test_golden_files_are_those_of_this_corpus() -> None:
    """tests/golden/novel holds exactly one file per case; each was captured from this very corpus
    (same fingerprint, same request) and still shows every engine path its case claims, so a
    passing comparison below really covers those paths."""
    assert sorted(p.stem for p in GOLDEN_DIR.glob("*.json")) == sorted(c.name for c in CASES)
    fingerprint = corpus_fingerprint()
    for case in CASES:
        golden = load_golden(case)
        assert golden["corpusFingerprint"] == fingerprint, (
            f"{case.name}: tests/support/golden_corpus.py (or a text helper it uses) changed since the "
            "capture; the corpus is frozen")
        assert golden["request"] == golden_request(case), case.name
        assert sorted(golden["assemble"]) == sorted(ASSEMBLE_FIELDS), case.name
        assert sorted(golden["inspect"]) == sorted(INSPECT_FIELDS), case.name
        assert unmet_expectations(case, golden["inspect"]) == [], case.name


@pytest.mark.asyncio(loop_scope="module")
@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
async def test_novel_assembly_is_unchanged(case: Case, clients: tuple[RpcClient, RpcClient],
                                           project_ids: dict[str, str]) -> None:
    """context:assemble and context:inspect of this case give, field for field, what the golden file
    holds: the same prompt bytes, token count, stable-prefix and per-layer hashes, layer table,
    warnings, budget, system prompt and tokenizer, and for inspect the same candidates (id, layer,
    section, source, tokens, key, keyName, fate, keptTokens, reason, in order), layer texts and
    budget arithmetic."""
    golden = load_golden(case)
    rpc, inspector = clients
    assembled, inspected = await run_case(rpc, inspector, case, project_ids[case.project])

    differences = []
    for kind, fields, actual in (("assemble", ASSEMBLE_FIELDS, assembled),
                                 ("inspect", INSPECT_FIELDS, inspected)):
        for name in fields:
            if name not in golden[kind]:
                continue
            if name not in actual:
                differences.append(f"{kind}.{name}: missing from the result")
                continue
            got = align_ties(golden[kind][name], actual[name]) if name == "candidates" else actual[name]
            found = first_difference(golden[kind][name], got, f"{kind}.{name}")
            if found is not None:
                differences.append(found)
    if differences:
        where = ", ".join(d.split(":", 1)[0].split("[", 1)[0] for d in differences)
        pytest.fail(f"case {case.name} ({case.summary}) differs from tests/golden/novel/{case.name}.json "
                    f"in {len(differences)} field(s): {where}\nfirst difference:\n{differences[0]}",
                    pytrace=False)


def test_a_candidate_key_may_move_in_its_last_decimal_and_nothing_else_may() -> None:
    """first_difference lets a candidate's float ``key`` differ by up to KEY_TOLERANCE (float32
    scores round differently on CPUs with other vector instructions), but not by more, not an
    integer key, and no other float field at all."""
    golden = {"candidates": [{"id": "a", "key": 0.641792, "tokens": 3, "ratio": 0.5}]}

    def now(**changed: Any) -> dict[str, Any]:
        return {"candidates": [{**golden["candidates"][0], **changed}]}

    assert first_difference(golden, now(key=0.641791)) is None
    assert first_difference(golden, now(key=0.641792 + KEY_TOLERANCE / 2)) is None
    assert first_difference(golden, now(key=0.64178)) is not None
    assert first_difference(golden, now(key=1)) is not None
    assert first_difference(golden, now(ratio=0.500001)) is not None
    assert first_difference({"key": 0.5}, {"key": 0.500001}, "") is not None  # not a candidate's key


def test_candidates_tied_within_the_tolerance_may_come_in_either_order_but_nothing_else_moves() -> None:
    """align_ties puts candidates whose keys equal the golden one's within KEY_TOLERANCE in the
    golden order; a candidate with a different key, or a different fate, still makes a difference."""
    golden = [{"id": "a", "key": 0.9, "fate": "included"},
              {"id": "copy", "key": 0.661007, "fate": "dropped"},
              {"id": "original", "key": 0.661007, "fate": "dropped"},
              {"id": "z", "key": 0.5, "fate": "dropped"}]
    swapped = [golden[0], {**golden[2], "key": 0.661008}, golden[1], golden[3]]
    assert first_difference(golden, align_ties(golden, swapped)) is None
    apart = [golden[0], {**golden[2], "key": 0.7}, golden[1], golden[3]]
    assert first_difference(golden, align_ties(golden, apart)) is not None
    other_fate = [golden[0], {**golden[2], "fate": "included"}, golden[1], golden[3]]
    assert first_difference(golden, align_ties(golden, other_fate)) is not None
    out_of_run = [golden[0], golden[1], golden[3], golden[2]]
    assert first_difference(golden, align_ties(golden, out_of_run)) is not None
