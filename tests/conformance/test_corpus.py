"""The conformance corpus: what real framework libraries emitted, read back exactly.

Every recording (`recordings/*.otlp.jsonl`, made by `record.py`) holds the three scripted
conversations of `conversations.py`. Read through the sidecar itself (`run --once` into a store),
each must yield one thread per conversation with the exact user texts, tool calls (name,
arguments, result, in order), answers and conversation ids, the repeating conversation must be
flagged, and no other thread may go to review.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from click.testing import CliRunner

from tests.conformance.conversations import CONVERSATIONS, SYSTEM_PROMPT, Conversation
from tests.conformance.record import RECORDINGS_LIST, VERSIONS
from tests.conftest import REPO
from tracing_eval.assemble import thread_from_traces
from tracing_eval.cli import main
from tracing_eval.model import Thread
from tracing_eval.store.sql import SqlStore

NAMES = [r.name for r in RECORDINGS_LIST]


def invoke(env: dict[str, str], *args: str) -> Any:
    return CliRunner(env={"COLUMNS": "250", **env}).invoke(main, list(args), catch_exceptions=False)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Every recording through `run --once` into one store; its URL, the CLI's answer and the threads."""
    url = f"sqlite+aiosqlite:///{tmp_path_factory.mktemp('corpus') / 'store.db'}"
    env = {"TRACING_EVAL_STORE__URL": url}
    run = invoke(env, "run", "--once", *(f"--source=otlp-file:{r.path}" for r in RECORDINGS_LIST))
    assert run.exit_code == 0, run.output

    async def threads() -> dict[str, Thread]:
        store = SqlStore(url)
        await store.open()
        try:
            return {key: thread_from_traces(key, await store.load_traces(key)) for key in await store.thread_keys()}
        finally:
            await store.close()

    results = [json.loads(line) for line in invoke(env, "results", "--format", "jsonl").stdout.splitlines()]
    return {"env": env, "run": run, "threads": asyncio.run(threads()), "results": results}


def read_as(thread: Thread) -> list[dict[str, Any]]:
    """A thread as the corpus states it: per turn the user text, tool calls in order, the answer."""
    return [
        {
            "user": turn.user_text,
            "calls": [(c.name, c.arguments, c.result, c.error) for c in turn.tool_calls],
            "answer": turn.assistant_text,
            "answer_unknown": turn.answer_unknown,
        }
        for turn in thread.turns
    ]


def scripted(conv: Conversation) -> list[dict[str, Any]]:
    return [
        {
            "user": turn.user,
            "calls": [(c.name, c.arguments, c.result, None) for c in turn.calls],
            "answer": turn.answer,
            "answer_unknown": None,
        }
        for turn in conv.turns
    ]


@pytest.mark.parametrize("name", NAMES)
def test_every_framework_reads_back_exactly(corpus: dict[str, Any], name: str) -> None:
    threads = {k: t for k, t in corpus["threads"].items() if k.startswith(f"otlp:{name}/")}
    assert sorted(threads) == sorted(f"otlp:{name}/{c.id}" for c in CONVERSATIONS)  # one thread per conversation
    for conv in CONVERSATIONS:
        thread = threads[f"otlp:{name}/{conv.id}"]
        assert thread.conversation_id == f"{name}/{conv.id}"
        assert thread.system_prompt == SYSTEM_PROMPT
        assert read_as(thread) == scripted(conv), f"{name}/{conv.id}"
        assert thread.unreadable == []
        for turn, expected in zip(thread.turns, conv.turns, strict=True):
            # the transcript itself: the user, then per tool call the call and its result, then the answer
            roles = [m.role for m in turn.messages]
            assert roles == ["user", *(["assistant", "tool"] * len(expected.calls)), "assistant"], (name, turn.index)
            calls = [m.tool_calls[0] for m in turn.messages if m.tool_calls]
            results = [m for m in turn.messages if m.role == "tool"]
            assert [r.tool_call_id for r in results] == [c.id for c in calls] and all(c.id for c in calls)
            assert all(c.span_id for c in calls), "every call is linked to the tool span that ran it"
            assert turn.trace_id and turn.model == "gpt-4o-mini"


def test_the_repeating_conversation_is_flagged_and_nothing_else_goes_to_review(corpus: dict[str, Any]) -> None:
    by_key = {r["thread_key"]: r for r in corpus["results"]}
    assert len(by_key) == 3 * len(NAMES)
    for name in NAMES:
        repetition = by_key[f"otlp:{name}/repeat-refund"]["metrics"]["repetition"]
        assert (repetition["label"], repetition["passed"]) == ("fully", False), name
        for conv in ("tool-orders", "plain-hours"):
            metrics = by_key[f"otlp:{name}/{conv}"]["metrics"]
            assert metrics["repetition"]["label"] == "none", (name, conv)
            assert metrics["response_hygiene"]["passed"] is True, (name, conv)
    queue = invoke(corpus["env"], "review", "list", "--format", "jsonl").stdout
    routed = {json.loads(line)["thread_key"] for line in queue.splitlines()}
    assert routed == {f"otlp:{name}/repeat-refund" for name in NAMES}
    # no result anywhere says an answer was unreadable
    assert all("unknown_answer" not in m.get("evidence", {}) for r in corpus["results"] for m in r["metrics"].values())


def test_inspect_shows_how_a_recorded_trace_was_read(corpus: dict[str, Any]) -> None:
    thread = corpus["threads"]["otlp:strands-latest/tool-orders"]
    trace_id = thread.turns[2].trace_id
    report = json.loads(invoke(corpus["env"], "inspect", trace_id.upper(), "--format", "json").stdout)
    [trace] = report["traces"]
    assert report["thread_key"] == "otlp:strands-latest/tool-orders" and trace["trace_id"] == trace_id
    roles = [(s["name"], s["role"], s["role_from"]) for s in trace["spans"]]
    assert roles[0] == ("invoke_agent Strands Agents", "agent", "genai.kind")
    assert [r for r in roles if r[0] == "execute_event_loop_cycle"] == [
        ("execute_event_loop_cycle", "other", "genai.kind")
    ] * 3  # Strands' loop steps are never the model call
    chats = [s for s in trace["spans"] if s["name"] == "chat"]
    assert [s["role"] for s in chats] == ["llm"] * 3
    assert [c["name"] for s in chats for m in s["outputs"] for c in m.get("tool_calls", [])] == ["lookup_order"] * 2
    assert all(s["outputs_from"] == "genai.details_output" for s in chats)
    assert trace["turn"]["answer"] == "A1001 is still on its way, and B2002 ships tomorrow."
    assert [c["arguments"] for c in trace["turn"]["tool_calls"]] == [{"order_id": "A1001"}, {"order_id": "B2002"}]

    text = invoke(corpus["env"], "inspect", "--thread", "otlp:vercel-ai/plain-hours").stdout
    assert text.count("\ntrace ") == 3 and "ai.streamText.doStream  llm (vercel.kind)" in text
    assert 'answer: "No, the shop is closed on public holidays."' in text


def test_every_recording_has_its_library_versions_and_a_row_in_the_docs() -> None:
    versions = json.loads(VERSIONS.read_text())
    assert sorted(versions) == sorted(NAMES)
    table = (REPO / "docs" / "sources-and-sinks.md").read_text()
    for recording in RECORDINGS_LIST:
        version = versions[recording.name][recording.library]
        assert f"`{recording.name}`" in table and f"{recording.library} {version}" in table, recording.name
