"""Driving the reading roll-up through the summarizer seam (``reading:summaries:run``, seed 000).

A run summarises a project's book from the paragraphs up to a level (``chapter`` by default), one
level after the other, so each level's prompts hold the summaries just made below it. For every unit
of a level without a current summary whose parts are all summarised (:func:`units.backlog`), the
:class:`~services.summaries.seam.Completer` is asked with the seed's exact prompt for that step; the
answer is read as JSON (a Markdown fence around it is tolerated) and stored through
:meth:`ReadingService.put`, with the same checks as ``reading:summaries:put``. An answer refused
(not JSON, not the schema, over the level's limit, citing a page outside its unit) is asked again
once, the refusal appended as a follow-up user message; refused again, the unit counts as
``refused`` and the run goes on. A completion that does not come (an error, a timeout, no text)
counts as ``failed``; a few in a row, or the completing client leaving, stop the run with a warning.

Progress goes to a sink as ``$/progress`` params (token ``reading/<projectId>``): ``begin``,
``report`` (at most five a second, and at each new level) and ``end``, which is sent however the run
ends. One run per project at a time: a second is refused with :class:`RunBusy`.

Logs carry the project id, levels, unit names, counts and reasons; never a prompt or an answer.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final, Literal

import structlog

from services.reading import units
from services.reading.service import ReadingService, UnitNotFound
from services.reading.summary import LIMITS, Level, SummaryProblem
from services.summaries.seam import (
    Completer,
    CompletionMessage,
    CompletionRequest,
    CompletionUnavailable,
)

_log = structlog.get_logger("reading")

LEVELS: Final[tuple[Level, ...]] = ("paragraph", "page", "chapter")
MAX_ANSWER_CHARS: Final = 32_768  # far above any summary within its limit; a longer answer is refused
MAX_FAILURES_IN_A_ROW: Final = 3  # completions that did not come, one after another, stop a run
REPORT_EVERY: Final = 0.2  # seconds between progress reports within a level

ProgressSink = Callable[[dict[str, Any]], None]
Outcome = Literal["done", "refused", "failed", "changed"]

# Reasons a completion did not come that mean no client can complete any more.
_GONE: Final = frozenset({"no_client", "closed"})
_FENCE = re.compile(r"\A```[A-Za-z0-9_-]*[ \t]*\n?(.*?)\n?[ \t]*```\Z", re.DOTALL)


class NoCompleter(Exception):
    """No connected client can run completions."""


class RunBusy(Exception):
    """A roll-up of this project is already running."""


def max_tokens(level: Level) -> int:
    """What a completion may spend for a summary of ``level``: a little above the level's limit."""
    limit = LIMITS[level]
    return limit + max(64, limit // 2)


def purpose(level: Level) -> str:
    return f"reading.summary.{level}"


def read_answer(text: str) -> dict[str, Any]:
    """The JSON object in a completion's text: the whole text, or inside a Markdown code fence, or
    from its first ``{`` to its last ``}``; else ``READING_SUMMARY_INVALID``."""
    body = text.strip()
    if len(body) > MAX_ANSWER_CHARS:
        raise SummaryProblem("READING_SUMMARY_INVALID", "",
                             f"the answer is longer than {MAX_ANSWER_CHARS} characters", reason="too_long")
    fenced = _FENCE.match(body)
    if fenced:
        body = fenced.group(1).strip()
    candidates = [body]
    first, last = body.find("{"), body.rfind("}")
    if 0 <= first < last and (first, last) != (0, len(body) - 1):
        candidates.append(body[first:last + 1])
    for candidate in candidates:
        try:
            value = json.loads(candidate)
        except ValueError:
            continue
        if isinstance(value, dict):
            return value
    raise SummaryProblem("READING_SUMMARY_INVALID", "", "the answer is not one JSON object",
                         reason="json_invalid")


def follow_up(problem: SummaryProblem, pages: tuple[int, int]) -> str:
    """The user message asking again after ``problem`` (which names rules and pages, never text)."""
    where = f" at {problem.path}" if problem.path else ""
    span = f"page {pages[0]}" if pages[0] == pages[1] else f"pages {pages[0]}–{pages[1]}"
    return (f"That answer was refused ({problem.code}{where}): {problem.message}. "
            f"Return the corrected STRICT JSON only, following the schema, citing only {span}. "
            "No markdown.")


@dataclass(slots=True)
class Tally:
    """One level's outcome: summaries stored, refused after the retry, completions that did not come,
    and the units still without a current summary when the run ended."""

    done: int = 0
    refused: int = 0
    failed: int = 0
    remaining: int = 0


@dataclass(frozen=True, slots=True)
class RunReport:
    project_id: str
    level: Level
    levels: Mapping[Level, Tally]
    warnings: tuple[str, ...]


@dataclass(slots=True)
class _Progress:
    """The ``$/progress`` reports of one run."""

    sink: ProgressSink | None
    project_id: str
    total: int
    done: int = 0
    level: Level = "paragraph"
    began: bool = False
    last: float = 0.0

    def send(self, kind: Literal["begin", "report", "end"], force: bool = False) -> None:
        if self.sink is None:
            return
        now = time.monotonic()
        if kind == "report" and not force and now - self.last < REPORT_EVERY:
            return
        self.last = now
        self.began = self.began or kind == "begin"
        percentage = round(100 * self.done / self.total) if self.total else 100
        self.sink({"token": f"reading/{self.project_id}", "value": {
            "kind": kind, "title": "Summarizing", "projectId": self.project_id, "level": self.level,
            "done": self.done, "total": self.total, "percentage": percentage}})


class RollUp:
    """Runs the roll-up of a project's summaries through ``completer``.

    ``available`` tells whether a client that runs completions is connected now; ``progress``
    (settable later, as the transport is made after the services) receives ``$/progress`` params.
    """

    def __init__(self, reading: ReadingService, completer: Completer, *,
                 available: Callable[[], bool] = lambda: True, progress: ProgressSink | None = None,
                 max_failures: int = MAX_FAILURES_IN_A_ROW) -> None:
        self._reading = reading
        self._completer = completer
        self._available = available
        self.progress = progress
        self._max_failures = max_failures
        self._running: set[str] = set()

    def running(self, project_id: str) -> bool:
        return project_id in self._running

    async def run(self, project_id: str, level: Level = "chapter", prefer: str | None = None) -> RunReport:
        """Summarise every unit from the paragraphs up to ``level`` that lacks a current summary.

        Raises ``ProjectNotFound`` for an unknown project, :class:`NoCompleter` when no client runs
        completions, :class:`RunBusy` while another run of the project is under way. ``prefer``
        (a connection id) is the client asked first when it runs completions.
        """
        if project_id in self._running:
            raise RunBusy(project_id)
        self._running.add(project_id)  # before any await: a second call sees it at once
        try:
            return await self._run(project_id, LEVELS[:LEVELS.index(level) + 1], prefer)
        finally:
            self._running.discard(project_id)

    async def _lacking(self, project_id: str, levels: tuple[Level, ...]) -> dict[Level, int]:
        found: dict[Level, int] = {}
        for lvl in levels:
            backlog = await self._reading.pending(project_id, lvl)
            found[lvl] = len(backlog.ready) + backlog.waiting
        return found

    async def _run(self, project_id: str, levels: tuple[Level, ...], prefer: str | None) -> RunReport:
        lacking = await self._lacking(project_id, levels)  # ProjectNotFound first
        if not self._available():
            raise NoCompleter()
        tallies = {lvl: Tally() for lvl in levels}
        warnings: list[str] = []
        changed = 0
        progress = _Progress(self.progress, project_id, total=sum(lacking.values()), level=levels[0])
        _log.info("reading.run_begin", project_id=project_id, level=levels[-1], lacking=dict(lacking))
        try:
            progress.send("begin")
            stop: str | None = None
            for lvl in levels:
                backlog = await self._reading.pending(project_id, lvl)
                # Units that wait for a part refused or failed below are not tried in this run.
                progress.total += len(backlog.ready) - lacking[lvl]
                progress.level = lvl
                if backlog.ready:
                    progress.send("report", force=True)
                failures = 0
                for pending in backlog.ready:
                    outcome, reason = await self._one(project_id, pending, prefer)
                    progress.done += 1
                    if outcome == "changed":
                        changed += 1
                    else:
                        tally = tallies[lvl]
                        tally.done += outcome == "done"
                        tally.refused += outcome == "refused"
                        tally.failed += outcome == "failed"
                    failures = failures + 1 if outcome == "failed" else 0
                    if reason in _GONE:
                        stop = "READING_COMPLETER_GONE: no client runs completions any more; the run stopped"
                    elif failures >= self._max_failures:
                        stop = (f"READING_COMPLETIONS_FAILING: {failures} completions in a row did not "
                                "come; the run stopped")
                    if stop is not None:
                        break
                    progress.send("report", force=progress.done == progress.total)
                if stop is not None:
                    warnings.append(stop)
                    break
        finally:
            if progress.began:
                progress.send("end")
        remaining = await self._lacking(project_id, levels)
        for lvl in levels:
            tallies[lvl].remaining = remaining[lvl]
        refused = sum(t.refused for t in tallies.values())
        if refused:
            warnings.append(f"READING_SUMMARIES_REFUSED: {refused} answers were refused twice; their units "
                            "(and those that roll them up) remain")
        if changed:
            warnings.append(f"READING_TEXT_CHANGED: {changed} units changed while they were summarised; "
                            "run again to summarise them")
        _log.info("reading.run_end", project_id=project_id, level=levels[-1], changed=changed,
                  tallies={lvl: [t.done, t.refused, t.failed, t.remaining] for lvl, t in tallies.items()},
                  warnings=[w.split(":", 1)[0] for w in warnings])
        return RunReport(project_id, levels[-1], tallies, tuple(warnings))

    async def _one(self, project_id: str, pending: units.Pending,
                   prefer: str | None) -> tuple[Outcome, str | None]:
        """Ask for ``pending``'s summary (and once more if it is refused) and store it; the outcome and,
        for ``failed``, why the completion did not come."""
        unit = pending.unit
        messages = [CompletionMessage("system", pending.system), CompletionMessage("user", pending.user)]
        for attempt in (1, 2):
            request = CompletionRequest(purpose(unit.level), tuple(messages), max_tokens(unit.level), prefer)
            try:
                text = await self._completer.complete(request)
            except CompletionUnavailable as exc:
                _log.info("reading.run_unit", project_id=project_id, level=unit.level, unit=unit.name,
                          outcome="failed", attempt=attempt, reason=exc.reason)
                return "failed", exc.reason
            try:
                summary = read_answer(text)
                if not await self._still(project_id, unit):
                    _log.info("reading.run_unit", project_id=project_id, level=unit.level, unit=unit.name,
                              outcome="changed", attempt=attempt)
                    return "changed", None
                accepted = await self._reading.put(project_id, unit.level, unit.name, summary,
                                                   source="client")
            except UnitNotFound:
                return "changed", None
            except SummaryProblem as problem:
                _log.info("reading.run_unit", project_id=project_id, level=unit.level, unit=unit.name,
                          outcome="refused", attempt=attempt, code=problem.code, path=problem.path)
                messages += [CompletionMessage("assistant", text[:MAX_ANSWER_CHARS]),
                             CompletionMessage("user", follow_up(problem, unit.pages))]
                continue
            _log.debug("reading.run_unit", project_id=project_id, level=unit.level, unit=unit.name,
                       outcome="done", attempt=attempt, tokens=accepted.tokens)
            return "done", None
        return "refused", None

    async def _still(self, project_id: str, unit: units.Unit) -> bool:
        """Whether ``unit`` is still in the book with the text it was summarised from."""
        now = units.find(await self._reading.book(project_id), unit.level, unit.name)
        return now is not None and now.hash == unit.hash
