"""`tracing-eval inspect`: what was read from a stored trace or thread, and clear errors otherwise."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

from click.testing import CliRunner

from tests.test_unknown_answers import UNREADABLE, answer, turn_spans
from tracing_eval.cli import main
from tracing_eval.config import Settings, load_settings
from tracing_eval.ingest import make_batch
from tracing_eval.model import Span
from tracing_eval.store.sql import SqlStore


def invoke(*args: str) -> Any:
    return CliRunner(env={"COLUMNS": "200"}).invoke(main, list(args), catch_exceptions=False)


def stored(spans: list[Span]) -> None:
    """Spans ingested into the store the CLI opens (its default, in the test's directory)."""

    async def go() -> None:
        store = SqlStore(load_settings(None).store.url)
        await store.open()
        try:
            await store.ingest(make_batch(spans, []), time.time())
        finally:
            await store.close()

    asyncio.run(go())


def test_inspect_a_thread_shows_roles_sources_and_the_unknown_answer(settings: Settings) -> None:
    good = turn_spans("a" * 32, 100, "Where is A1?", answer("It shipped."))
    unknown = turn_spans("b" * 32, 200, "And my refund?", UNREADABLE)
    lost = Span(trace_id="c" * 32, span_id="c" * 16, name="acme.run", start_ns=300, attributes={"session.id": "conv-u"})
    stored([*good, *unknown, lost])

    res = invoke("inspect", "--thread", "otlp:conv-u")
    assert res.exit_code == 0, res.output
    text = res.stdout
    assert text.count("\ntrace ") == 3
    assert "chat my-model  llm (genai.kind)" in text and "agent turn  other (nothing matched)" in text
    assert "out (genai.output_messages)" in text and 'assistant: "It shipped."' in text
    assert "answer unknown: looked for on 'chat my-model', which had acme.llm.completion" in text
    assert "→ no turn: no user message or answer was read from 1 span(s)" in text

    report = json.loads(invoke("inspect", "b" * 32, "--format", "json").stdout)
    [trace] = report["traces"]
    assert report["thread_key"] == "otlp:conv-u" and report["conversation_id"] == "conv-u"
    assert [(s["name"], s["role"], s["inputs_from"], s["outputs_from"]) for s in trace["spans"]] == [
        ("agent turn", "other", None, None),
        ("chat my-model", "llm", "genai.input_messages", None),
    ]
    assert trace["turn"]["user"] == "And my refund?" and trace["turn"]["answer"] is None
    assert "acme.llm.completion" in trace["turn"]["answer_unknown"]["attributes"]


def test_inspect_says_clearly_what_is_missing(settings: Settings) -> None:
    for args, message in [
        ((), "give a TRACE_ID or --thread KEY (one of them)"),
        (("a" * 32, "--thread", "otlp:x"), "give a TRACE_ID or --thread KEY (one of them)"),
        (("d" * 32,), f"no stored spans for trace {'d' * 32}"),
        (("--thread", "otlp:nope"), "no stored spans for thread 'otlp:nope'"),
    ]:
        res = invoke("inspect", *args)
        assert res.exit_code == 2 and message in res.stderr, (args, res.stderr)
