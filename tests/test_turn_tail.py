"""A turn is assembled from the tail of each chat span's history (`conventions.turn_inputs`): the
system messages and everything from the last assistant message on. Assembling from the tail must give
exactly what assembling from the whole history gives."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import orjson
import pytest

from tests.conftest import EXAMPLES
from tracing_eval import conventions
from tracing_eval.assemble import trace_part
from tracing_eval.connectors.otlp.decode import JSON, decode_traces
from tracing_eval.model import Span


def _traces(spans: list[Span]) -> list[list[Span]]:
    by_trace: dict[str, list[Span]] = defaultdict(list)
    for s in spans:
        by_trace[s.trace_id].append(s)
    return list(by_trace.values())


def _example_traces() -> list[list[Span]]:
    spans: list[Span] = []
    for name in ("otel-genai.otlp.jsonl", "openinference.otlp.jsonl"):
        for line in (EXAMPLES / name).read_text().splitlines():
            if line.strip():
                spans += decode_traces(line.encode(), JSON).spans
    return _traces(spans)


def _span(attrs: dict[str, Any], *, span_id: str = "b" * 16, parent: str | None = None) -> Span:
    return Span(trace_id="a" * 32, span_id=span_id, parent_id=parent, name="chat", attributes=attrs)


def _genai(history: list[dict[str, Any]], answer: str = "ok") -> list[Span]:
    out = [{"role": "assistant", "parts": [{"type": "text", "content": answer}]}]
    attrs = {
        "gen_ai.operation.name": "chat",
        "gen_ai.input.messages": orjson.dumps(history).decode(),
        "gen_ai.output.messages": orjson.dumps(out).decode(),
    }
    return [_span(attrs)]


def _openinference(history: list[tuple[str, str]]) -> list[Span]:
    attrs: dict[str, Any] = {"openinference.span.kind": "LLM", "llm.output_messages.0.message.role": "assistant"}
    attrs["llm.output_messages.0.message.content"] = "fine"
    for i, (role, content) in enumerate(history):
        attrs[f"llm.input_messages.{i}.message.role"] = role
        attrs[f"llm.input_messages.{i}.message.content"] = content
    return [_span(attrs)]


def _text(role: str, content: str) -> dict[str, Any]:
    return {"role": role, "parts": [{"type": "text", "content": content}]}


EDGE_CASES = [
    _genai([_text("system", "be brief"), _text("user", "hi")]),  # no assistant yet: all of it
    _genai(
        [_text("system", "a"), _text("user", "q1"), _text("assistant", "a1"), _text("system", "b"), _text("user", "q2")]
    ),
    _genai(
        [
            _text("user", "weather?"),
            {"role": "assistant", "parts": [{"type": "tool_call", "id": "c1", "name": "weather", "arguments": {}}]},
            {"role": "user", "parts": [{"type": "tool_call_response", "id": "c1", "response": "sunny"}]},
        ]
    ),  # tool results in a user message (Anthropic style) after the last assistant
    _genai([_text("user", "q1"), _text("assistant", "a1"), {"role": "tool", "parts": ["r"]}, _text("user", "q2")]),
    _genai([_text("user", "q1"), {"role": "ai", "parts": ["a1"]}, _text("developer", "rules"), _text("human", "q2")]),
    _genai([_text("user", "q1"), _text("assistant", "a1"), {"role": None}, "junk", _text("user", "q2")]),  # type: ignore[list-item]
    _openinference([("system", "s"), ("user", "q1"), ("assistant", "a1"), ("tool", "r"), ("user", "q2")]),
    _openinference([("user", "q1"), ("assistant", "a1"), ("assistant", "a2"), ("user", "q2")]),
    _openinference([("system", "s"), ("user", "only")]),
]


def _workload_traces() -> list[list[Span]]:
    """The benchmark's conversations: both conventions, growing histories, tool calls."""
    from bench import workload
    from tracing_eval.connectors.otlp.decode import PROTOBUF, decompress

    wl = workload.build(6, 10)
    spans = [s for body in wl.bodies for s in decode_traces(decompress(body, "gzip", 1 << 30), PROTOBUF).spans]
    return _traces(spans)


@pytest.mark.parametrize("source", ["examples", "edge cases", "workload"])
def test_a_turn_from_the_history_tail_is_the_turn_from_the_whole_history(
    source: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    traces = {"examples": _example_traces, "edge cases": lambda: EDGE_CASES, "workload": _workload_traces}[source]()
    assert traces
    tails = [trace_part(spans) for spans in traces]
    monkeypatch.setattr(conventions, "turn_inputs", conventions.input_messages)
    wholes = [trace_part(spans) for spans in traces]
    assert [t.model_dump() for t in tails] == [w.model_dump() for w in wholes]
    assert any(t.turn is not None and len(t.turn.messages) > 1 for t in tails)


def test_the_tail_is_shorter_than_the_history_once_there_is_an_answer() -> None:
    [span] = EDGE_CASES[1]
    assert [m.role for m in conventions.input_messages(span)] == ["system", "user", "assistant", "system", "user"]
    assert [m.content for m in conventions.turn_inputs(span)] == ["a", "a1", "b", "q2"]
    [span] = EDGE_CASES[0]
    assert conventions.turn_inputs(span) == conventions.input_messages(span)
