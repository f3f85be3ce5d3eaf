"""The committed example payloads decode, hold the scripted conversations, and regenerate to the same shape."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tracing_eval.connectors.otlp.decode import LogEvent, decode_json_line
from tracing_eval.model import Span
from tracing_eval.transcripts import thread_from_json_line

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
GENAI, OPENINFERENCE, TRANSCRIPTS = "otel-genai.otlp.jsonl", "openinference.otlp.jsonl", "transcripts.jsonl"

#: conversation id -> (user turns, tool executions in order); the failed one is cancel_order in cancel-failed.
EXPECTED: dict[str, tuple[int, tuple[str, ...]]] = {
    "support-order-status": (3, ("lookup_order", "track_shipment")),
    "support-shipment-tracking": (3, ("track_shipment",)),
    "support-cancel-ok": (3, ("lookup_order", "cancel_order")),
    "support-repetition-loop": (4, ("lookup_order",)),
    "support-reask-order": (4, ("lookup_order", "track_shipment")),
    "support-cancel-failed": (3, ("cancel_order",)),
    "support-refusal-loop": (3, ()),
}
REFUND_LINE = "Your refund has been initiated and will appear on your statement within 5-7 business days."
REASK = "Could you please provide your order number?"
FALSE_SUCCESS = "I've successfully cancelled your order."


@dataclass
class Conversation:
    """One conversation as seen in an OTLP file: per-turn root spans, LLM and tool spans, log events."""

    roots: list[Span] = field(default_factory=list)
    llm: list[Span] = field(default_factory=list)
    tools: list[Span] = field(default_factory=list)
    events: list[LogEvent] = field(default_factory=list)

    def shape(self) -> tuple[Any, ...]:
        failed = tuple(t.name for t in self.tools if t.status == "error")
        return len(self.roots), len(self.llm), tuple(t.name for t in self.tools), failed, len(self.events)


def decode_file(path: Path) -> tuple[list[Span], list[LogEvent]]:
    spans, logs = [], []
    for n, line in enumerate(path.read_bytes().splitlines(), 1):
        decoded = decode_json_line(line)
        assert decoded.rejected == 0 and not decoded.errors, f"{path.name}:{n}: {decoded.errors}"
        assert decoded.spans or decoded.logs, f"{path.name}:{n} holds neither spans nor logs"
        spans += decoded.spans
        logs += decoded.logs
    return spans, logs


def _role(span: Span, genai: bool) -> str:
    if genai:
        return {"invoke_agent": "root", "chat": "llm", "execute_tool": "tool"}[span.attributes["gen_ai.operation.name"]]
    return {"AGENT": "root", "LLM": "llm", "TOOL": "tool"}[span.attributes["openinference.span.kind"]]


def conversations(path: Path) -> dict[str, Conversation]:
    """Group a file's spans by conversation: one trace per turn, the root span names the conversation."""
    genai = path.name.startswith("otel-genai")
    spans, logs = decode_file(path)
    by_trace: dict[str, list[Span]] = defaultdict(list)
    for s in sorted(spans, key=lambda s: s.start_ns):
        by_trace[s.trace_id].append(s)
    out: dict[str, Conversation] = defaultdict(Conversation)
    conv_of_trace = {}
    for trace_id, trace in by_trace.items():
        [root] = [s for s in trace if s.parent_id is None]
        assert _role(root, genai) == "root", root.name
        prefix, _, conv_id = root.attributes["gen_ai.conversation.id" if genai else "session.id"].partition("/")
        assert prefix == ("genai" if genai else "oi")
        conv_of_trace[trace_id] = conv_id
        conv = out[conv_id]
        for s in trace:
            getattr(conv, {"root": "roots", "llm": "llm", "tool": "tools"}[_role(s, genai)]).append(s)
    for log in logs:
        out[conv_of_trace[log.trace_id]].events.append(log)
    for conv in out.values():
        conv.roots.sort(key=lambda s: s.start_ns)
    return dict(out)


def transcripts(path: Path) -> dict[str, list[dict[str, Any]]]:
    lines = path.read_text(encoding="utf-8").splitlines()
    return {json.loads(line)["thread_id"]: json.loads(line)["turns"] for line in lines}


def tool_call_ids(messages: list[dict[str, Any]]) -> list[str]:
    return [tc["id"] for m in messages for tc in m.get("tool_calls") or []]


def turn_answers_genai(conv: Conversation) -> list[str]:
    return [json.loads(r.attributes["gen_ai.output.messages"])[0]["parts"][0]["content"] for r in conv.roots]


def turn_answers_openinference(conv: Conversation) -> list[str]:
    return [r.attributes["output.value"] for r in conv.roots]


def assert_scripted_shape(convs: dict[str, Conversation]) -> None:
    assert set(convs) == set(EXPECTED)
    for conv_id, (turns, tools) in EXPECTED.items():
        conv = convs[conv_id]
        assert len(conv.roots) == turns, conv_id
        assert len(conv.llm) == turns + len(tools), conv_id  # a tool turn takes two model calls
        assert tuple(t.name.removeprefix("execute_tool ") for t in conv.tools) == tools, conv_id
        failed = [t for t in conv.tools if t.status == "error"]
        assert len(failed) == (conv_id == "support-cancel-failed"), conv_id


def test_genai_example_spans_and_details_events() -> None:
    convs = conversations(EXAMPLES / GENAI)
    assert_scripted_shape(convs)
    expected_ids = transcripts(EXAMPLES / TRANSCRIPTS)
    for conv_id, conv in convs.items():
        for root in conv.roots:
            assert root.name == "invoke_agent support-bot" and root.attributes["gen_ai.agent.name"] == "support-bot"
        for llm in conv.llm:
            assert llm.name == "chat gpt-4o-mini" and llm.scope == "opentelemetry.instrumentation.genai.openai"
            assert llm.attributes["gen_ai.conversation.id"] == f"genai/{conv_id}"
            history = json.loads(llm.attributes["gen_ai.input.messages"])
            assert history[0]["role"] == "system" and history[1]["role"] == "user"
            assert json.loads(llm.attributes["gen_ai.output.messages"])[0]["role"] == "assistant"
            assert llm.attributes["gen_ai.usage.input_tokens"] > 0
        for tool in conv.tools:
            assert tool.attributes["gen_ai.tool.name"] == tool.name.removeprefix("execute_tool ")
            assert json.loads(tool.attributes["gen_ai.tool.call.arguments"])
        assert [t.attributes["gen_ai.tool.call.id"] for t in conv.tools] == tool_call_ids(expected_ids[conv_id])
        # one details event per chat span, joined by trace and span id, with structured messages
        assert sorted((e.trace_id, e.span_id) for e in conv.events) == sorted((s.trace_id, s.span_id) for s in conv.llm)
        for e in conv.events:
            assert e.event.name == "gen_ai.client.inference.operation.details"
            assert e.event.attributes["gen_ai.conversation.id"] == f"genai/{conv_id}"
            assert isinstance(e.event.attributes["gen_ai.input.messages"], list)
            assert isinstance(e.event.attributes["gen_ai.output.messages"][0]["parts"], list)
    [failed] = convs["support-cancel-failed"].tools
    assert failed.attributes["error.type"].endswith("ToolError") and "already shipped" in failed.status_message
    assert "gen_ai.tool.call.result" not in failed.attributes
    assert any(s.attributes.get("gen_ai.request.stream") for s in convs["support-shipment-tracking"].llm)
    assert_bad_conversations(convs, turn_answers_genai)


def test_openinference_example_spans() -> None:
    convs = conversations(EXAMPLES / OPENINFERENCE)
    assert_scripted_shape(convs)
    expected_ids = transcripts(EXAMPLES / TRANSCRIPTS)
    for conv_id, conv in convs.items():
        assert not conv.events
        for span in conv.roots + conv.llm + conv.tools:
            assert span.attributes["session.id"] == f"oi/{conv_id}"
        for root in conv.roots:
            assert root.name == "support-bot" and root.attributes["input.value"]
        for llm in conv.llm:
            assert llm.name == "ChatCompletion" and llm.attributes["llm.input_messages.0.message.role"] == "system"
            assert llm.attributes["llm.output_messages.0.message.role"] == "assistant"
        for tool in conv.tools:
            assert tool.attributes["tool.name"] == tool.name and json.loads(tool.attributes["input.value"])
        assert [t.attributes["tool.id"] for t in conv.tools] == tool_call_ids(expected_ids[conv_id])
    [failed] = convs["support-cancel-failed"].tools
    [exc] = [e for e in failed.events if e.name == "exception"]
    assert "already shipped" in exc.attributes["exception.message"] and "output.value" not in failed.attributes
    assert_bad_conversations(convs, turn_answers_openinference)


def assert_bad_conversations(convs: dict[str, Conversation], answers: Any) -> None:
    assert answers(convs["support-repetition-loop"]).count(REFUND_LINE) >= 3
    reask = answers(convs["support-reask-order"])
    assert REASK in reask[2] and not any(REASK in a for a in reask[:2])
    assert FALSE_SUCCESS in answers(convs["support-cancel-failed"])[0]
    refusals = answers(convs["support-refusal-loop"])
    assert len(set(refusals)) == 1 and "can't help" in refusals[0]


def test_transcripts_follow_the_eval_schema() -> None:
    lines = (EXAMPLES / TRANSCRIPTS).read_bytes().splitlines()
    threads = {t.key: t for t in (thread_from_json_line(line, n) for n, line in enumerate(lines, 1))}
    assert set(threads) == set(EXPECTED)
    for conv_id, (turns, tools) in EXPECTED.items():
        thread = threads[conv_id]
        assert len(thread.turns) == turns and thread.system_prompt
        calls = [tc for turn in thread.turns for m in turn.messages for tc in m.tool_calls]
        assert tuple(tc.name for tc in calls) == tools
        assert [tc.name for tc in calls if tc.failed] == (
            ["cancel_order"] if conv_id == "support-cancel-failed" else []
        )
    first_user = threads["support-reask-order"].turns[0].messages[0]
    assert first_user.role == "user" and "A48213" in first_user.content


def test_example_files_stay_small() -> None:
    assert sum((EXAMPLES / name).stat().st_size for name in (GENAI, OPENINFERENCE, TRANSCRIPTS)) < 900_000


@pytest.fixture(scope="module")
def regenerated(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("examples")
    subprocess.run(
        [sys.executable, str(EXAMPLES / "generate.py"), "--out", str(out)], check=True, timeout=300, capture_output=True
    )
    return out


@pytest.mark.parametrize("name", [GENAI, OPENINFERENCE])
def test_regenerated_payloads_have_the_committed_shape(regenerated: Path, name: str) -> None:
    fresh, committed = conversations(regenerated / name), conversations(EXAMPLES / name)
    assert {k: v.shape() for k, v in fresh.items()} == {k: v.shape() for k, v in committed.items()}


def test_regenerated_transcripts_are_identical(regenerated: Path) -> None:
    assert (regenerated / TRANSCRIPTS).read_text() == (EXAMPLES / TRANSCRIPTS).read_text()
