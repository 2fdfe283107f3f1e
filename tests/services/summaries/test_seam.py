"""The summarizer seam: a client's completion when there is one, the caller's fallback otherwise."""

from __future__ import annotations

import pytest

from services.summaries.seam import (
    FALLBACK_WARNING,
    CompletionRequest,
    CompletionUnavailable,
    NoCompleter,
    Summarizer,
    messages,
)

REQUEST = CompletionRequest("chat.summary", messages((("system", "sum up"), ("user", "open chapter 5"))), 100)


class Answering:
    def __init__(self, answer: str) -> None:
        self.answer = answer
        self.seen: list[CompletionRequest] = []

    async def complete(self, request: CompletionRequest) -> str:
        self.seen.append(request)
        return self.answer


class Failing:
    def __init__(self, reason: str) -> None:
        self.reason = reason

    async def complete(self, request: CompletionRequest) -> str:
        raise CompletionUnavailable(self.reason)


async def test_a_clients_answer_is_the_summary() -> None:
    """A completer's text (trimmed) is used as is, from the client, with no warning."""
    completer = Answering("  User asked for chapter 5.  ")
    summary = await Summarizer(completer).summarize(REQUEST, lambda: "fallback")
    assert (summary.text, summary.source, summary.warning) == ("User asked for chapter 5.", "client", None)
    assert completer.seen == [REQUEST]


@pytest.mark.parametrize("reason", ["no_client", "error", "timeout", "invalid", "closed", "busy"])
async def test_no_completion_falls_back_with_the_warning(reason: str) -> None:
    """Whatever kept the completion away, the fallback's text comes back with SUMMARY_FALLBACK."""
    summary = await Summarizer(Failing(reason)).summarize(REQUEST, lambda: "User asked for chapter 5.")
    assert (summary.text, summary.source, summary.warning, summary.reason) == (
        "User asked for chapter 5.", "extractive", FALLBACK_WARNING, reason)


async def test_an_empty_answer_falls_back() -> None:
    """A blank completion is no summary: the fallback is used."""
    summary = await Summarizer(Answering("   ")).summarize(REQUEST, lambda: "fb")
    assert (summary.text, summary.reason) == ("fb", "invalid")


async def test_no_completer_always_falls_back() -> None:
    """With no client behind it the seam is the fallback."""
    summary = await Summarizer(NoCompleter()).summarize(REQUEST, lambda: "fb")
    assert (summary.source, summary.reason) == ("extractive", "no_client")


async def test_summaries_are_capped_at_a_boundary() -> None:
    """A summary over max_chars is cut, at a sentence end when one is near."""
    text = "User asked for chapter 5. " * 30
    summary = await Summarizer(Answering(text)).summarize(REQUEST, lambda: "", max_chars=100)
    assert len(summary.text) <= 100
    assert summary.text.endswith(".")
    long_zh = "用户要打开第五章。" * 30
    capped = await Summarizer(Answering(long_zh)).summarize(REQUEST, lambda: "", max_chars=50)
    assert len(capped.text) <= 50
    assert capped.text.endswith("。")
