"""Langfuse observations -> canonical spans -> turns, without a server (reference/langfuse.md §3-§4)."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from tracing_eval.assemble import thread_from_traces
from tracing_eval.connectors.langfuse.mapping import (
    ReadFilter,
    fingerprint,
    from_ns,
    group_by_trace,
    iso,
    parse_time,
    to_ns,
    trace_info_v3,
    trace_info_v4,
    trace_root,
    v3_trace_spans,
    v4_trace_spans,
)
from tracing_eval.identity import is_sampled
from tracing_eval.model import Span

SYSTEM = {"role": "system", "content": "You are a support agent."}


def row(obs_id: str, trace: str, kind: str, start: str, *, parent: str | None = None, **fields) -> dict:
    """A `GET /v2/observations` row with the groups core, basic, io, metadata, model, usage, trace_context."""
    base = {
        "id": obs_id,
        "traceId": trace,
        "startTime": f"2026-11-30T10:00:{start}Z",
        "endTime": f"2026-11-30T10:00:{start}Z",
        "projectId": "p1",
        "parentObservationId": parent,
        "type": kind,
        "isRootObservation": parent is None,
        "name": obs_id,
        "level": "DEFAULT",
        "statusMessage": None,
        "environment": "production",
        "sessionId": "sess-1",
        "userId": "u1",
        "input": None,
        "output": None,
        "metadata": {},
        "providedModelName": None,
        "usageDetails": {},
        "traceName": "chat-turn",
        "tags": ["support"],
        "release": None,
        "modelId": None,
        "inputPrice": None,
        "outputPrice": None,
        "totalPrice": None,
    }
    return {**base, **fields}


def turn_rows(trace: str, second: int, user: str, answer: str, history: list[dict]) -> list[dict]:
    prompt = [SYSTEM, *history, {"role": "user", "content": user}]
    root = f"{trace}-root"
    return [
        row(root, trace, "AGENT", f"{second:02d}.000", input=json.dumps([{"role": "user", "content": user}]),
            output=json.dumps([{"role": "assistant", "content": answer}])),
        row(f"{trace}-gen", trace, "GENERATION", f"{second:02d}.100", parent=root, input=json.dumps(prompt),
            output=json.dumps({"role": "assistant", "content": answer}), providedModelName="gpt-4o-mini",
            usageDetails={"input": 30, "output": 5, "total": 35}),
    ]  # fmt: skip


def tool_turn_rows(trace: str, *, tool_level: str = "DEFAULT", status: str | None = None) -> list[dict]:
    root = f"{trace}-root"
    call = {"id": "call_1", "type": "function", "function": {"name": "lookup_order", "arguments": '{"id": 7}'}}
    asked = {"role": "assistant", "content": None, "tool_calls": [call]}
    user = {"role": "user", "content": "where is order 7?"}
    tool_msg = {"role": "tool", "tool_call_id": "call_1", "content": '{"status": "packed"}'}
    return [
        row(root, trace, "SPAN", "20.000", input=json.dumps([user]),
            output=json.dumps([{"role": "assistant", "content": "It is packed."}])),
        row(f"{trace}-g1", trace, "GENERATION", "20.100", parent=root, input=json.dumps([SYSTEM, user]),
            output=json.dumps(asked), providedModelName="gpt-4o-mini", usageDetails={"input": 20, "output": 8}),
        row(f"{trace}-tool", trace, "TOOL", "20.300", parent=root, name="lookup_order", input='{"id": 7}',
            output='{"status": "packed"}', level=tool_level, statusMessage=status,
            metadata={"tool_call_id": "call_1"}),
        row(f"{trace}-g2", trace, "GENERATION", "20.500", parent=root, input=json.dumps([SYSTEM, user, asked, tool_msg]),
            output=json.dumps({"role": "assistant", "content": "It is packed."}), providedModelName="gpt-4o-mini",
            usageDetails={"input": 40, "output": 6}),
    ]  # fmt: skip


def spans_of(rows: list[dict]) -> list[list[Span]]:
    return [v4_trace_spans(rs, trace_info_v4(rs)) for rs in group_by_trace(rows).values()]


def test_v4_rows_become_one_turn_per_trace_and_one_thread_per_session():
    first = turn_rows("t1", 0, "Hi, I need help", "Sure, what is up?", [])
    second = turn_rows(
        "t2",
        30,
        "My parcel is late",
        "Let me check.",
        [{"role": "user", "content": "Hi, I need help"}, {"role": "assistant", "content": "Sure, what is up?"}],
    )
    traces = spans_of(list(reversed(first + second)))  # the API returns newest first
    thread = thread_from_traces(trace_info_v4(first).thread_key, traces, source="langfuse")

    assert thread.key == "langfuse:sess-1" and thread.conversation_id == "sess-1"
    assert thread.system_prompt == "You are a support agent."
    assert [(t.trace_id, t.user_text, t.assistant_text) for t in thread.turns] == [
        ("t1", "Hi, I need help", "Sure, what is up?"),
        ("t2", "My parcel is late", "Let me check."),
    ]
    turn = thread.turns[0]
    assert turn.root_span_id == "t1-root"  # the root observation: what turn scores attach to
    assert turn.model == "gpt-4o-mini" and (turn.input_tokens, turn.output_tokens) == (30, 5)
    assert turn.started_ns == to_ns("2026-11-30T10:00:00.000Z")


def test_tool_observations_become_tool_calls_with_results():
    [spans] = spans_of(tool_turn_rows("t3"))
    thread = thread_from_traces("langfuse:sess-1", [spans], source="langfuse")
    [call] = thread.turns[0].tool_calls
    assert (call.name, call.arguments, call.error, call.span_id) == ("lookup_order", {"id": 7}, None, "t3-tool")
    assert "packed" in str(call.result)
    tool = next(s for s in spans if s.span_id == "t3-tool")
    assert tool.attributes["gen_ai.tool.call.id"] == "call_1"  # from the observation metadata


def test_level_error_marks_the_tool_call_and_the_turn():
    [spans] = spans_of(tool_turn_rows("t4", tool_level="ERROR", status="order service down"))
    tool = next(s for s in spans if s.span_id == "t4-tool")
    assert (tool.status, tool.status_message) == ("error", "order service down")
    thread = thread_from_traces("langfuse:sess-1", [spans], source="langfuse")
    assert thread.turns[0].tool_calls[0].error == "order service down"

    rows = turn_rows("t5", 40, "hi", "hello", [])
    rows[0] |= {"level": "ERROR", "statusMessage": "handler crashed"}
    turn = thread_from_traces("langfuse:sess-1", spans_of(rows), source="langfuse").turns[0]
    assert turn.error == "handler crashed"
    rows[0] |= {"level": "WARNING"}
    assert thread_from_traces("k", spans_of(rows)).turns[0].error is None


def test_rows_without_session_are_a_thread_of_their_own():
    rows = [r | {"sessionId": None} for r in turn_rows("t6", 0, "hi", "hello", [])]
    info = trace_info_v4(rows)
    assert info.session_id is None and info.thread_key == "langfuse:trace:t6"
    assert all("langfuse.session.id" not in s.attributes for s in v4_trace_spans(rows, info))


def test_span_attributes_carry_what_the_langfuse_convention_reads():
    rows = turn_rows("t7", 0, "hi", "hello", [])
    span = v4_trace_spans(rows, trace_info_v4(rows))[1]
    attrs = span.attributes
    assert attrs["langfuse.observation.type"] == "generation"
    assert json.loads(attrs["langfuse.observation.input"])[0] == SYSTEM  # raw v4 string kept
    assert attrs["langfuse.observation.model.name"] == "gpt-4o-mini"
    assert attrs["langfuse.observation.usage_details"] == {"input": 30, "output": 5, "total": 35}
    assert attrs["langfuse.session.id"] == "sess-1" and attrs["langfuse.environment"] == "production"
    assert attrs["langfuse.trace.tags"] == ["support"] and attrs["langfuse.trace.name"] == "chat-turn"
    assert span.parent_id == "t7-root" and span.scope == "langfuse"


def v3_trace(trace_id: str, *, trace_input, trace_output, observations: list[dict]) -> dict:
    return {
        "id": trace_id,
        "timestamp": "2026-11-30T09:59:59.500Z",
        "name": "chat",
        "input": trace_input,
        "output": trace_output,
        "sessionId": "sess-3",
        "release": None,
        "version": None,
        "userId": None,
        "metadata": {},
        "tags": [],
        "public": False,
        "environment": "default",
        "htmlPath": "/x",
        "observations": observations,
        "scores": [],
    }


def v3_observation(obs_id: str, kind: str, *, parent: str | None = None, **fields) -> dict:
    base = {"id": obs_id, "traceId": "v3t", "type": kind, "name": obs_id, "startTime": "2026-11-30T10:00:00.000Z",
            "endTime": "2026-11-30T10:00:01.000Z", "parentObservationId": parent, "level": "DEFAULT",
            "statusMessage": None, "model": None, "input": None, "output": None, "metadata": {}, "usageDetails": {}}  # fmt: skip
    return {**base, **fields}


def test_v3_trace_with_its_own_io_gets_a_virtual_root():
    gen = v3_observation(
        "g1",
        "GENERATION",
        input=[SYSTEM, {"role": "user", "content": "what is 2+2?"}],
        output={"role": "assistant", "content": "4"},
        model="gpt-4o",
    )
    trace = v3_trace("v3t", trace_input={"question": "what is 2+2?"}, trace_output="4", observations=[gen])
    spans = v3_trace_spans(trace, trace_info_v3(trace))
    root = trace_root(spans)
    assert root is not None and root.span_id == "t-v3t"
    assert root.start_ns == to_ns("2026-11-30T09:59:59.500Z")
    assert next(s for s in spans if s.span_id == "g1").parent_id == "t-v3t"
    turn = thread_from_traces("langfuse:sess-3", [spans], source="langfuse").turns[0]
    assert (turn.user_text, turn.assistant_text, turn.model) == ("what is 2+2?", "4", "gpt-4o")


def test_v3_trace_mirroring_its_root_observation_needs_no_virtual_root():
    io_in, io_out = [{"role": "user", "content": "hi"}], [{"role": "assistant", "content": "hello"}]
    root = v3_observation("r1", "SPAN", input=io_in, output=io_out)
    trace = v3_trace("v3t", trace_input=io_in, trace_output=io_out, observations=[root])
    spans = v3_trace_spans(trace, trace_info_v3(trace))
    assert [s.span_id for s in spans] == ["r1"]
    assert spans[0].attributes["langfuse.session.id"] == "sess-3"


@pytest.mark.parametrize(
    ("change", "kept"),
    [
        ({}, True),
        ({"environment": "staging"}, False),
        ({"tags": ["support", "vip"]}, True),
        ({"tags": ["vip"]}, False),
        ({"traceName": "batch-job"}, False),
        ({"tags": ["support", "tracing-eval"]}, False),  # our own judge traffic
        ({"traceName": "tracing-eval judge"}, False),
        ({"metadata": {"tracing_eval": "true"}}, False),
        ({"metadata": {"tracing_eval": "false"}}, True),
    ],
)
def test_read_filter(change: dict, kept: bool):
    rows = [r | change for r in turn_rows("t8", 0, "hi", "hello", [])]
    rule = ReadFilter(frozenset({"production"}), frozenset({"support"}), frozenset({"chat-turn"}))
    assert rule.keep(trace_info_v4(rows)) is kept


def test_sampling_is_by_session_and_matches_the_store():
    rule = ReadFilter(sample_rate=0.5)
    sessions = [f"s{i}" for i in range(200)]
    kept = {
        s for s in sessions if rule.keep(trace_info_v4([r | {"sessionId": s} for r in turn_rows("t", 0, "a", "b", [])]))
    }
    assert 60 < len(kept) < 140
    assert kept == {s for s in sessions if is_sampled(f"langfuse:{s}", 0.5)}  # every trace of a session agrees


def test_times_parse_and_render_like_langfuse():
    assert to_ns("2026-11-30T10:00:00.123456789Z") == to_ns("2026-11-30T10:00:00.123456Z")
    assert parse_time("2026-11-30T11:00:00+01:00") == datetime(2026, 11, 30, 10, tzinfo=UTC)
    assert iso(to_ns("2026-11-30T10:00:00.5Z")) == "2026-11-30T10:00:00.500Z"
    assert from_ns(to_ns("2026-11-30T10:00:00.250Z")) == datetime(2026, 11, 30, 10, 0, 0, 250000, tzinfo=UTC)
    assert to_ns(None) == 0 and to_ns("not a time") == 0


def test_fingerprint_changes_only_with_content():
    rows = turn_rows("t9", 0, "hi", "hello", [])
    a = v4_trace_spans(rows, trace_info_v4(rows))
    b = v4_trace_spans(rows, trace_info_v4(rows))
    assert [fingerprint(s) for s in a] == [fingerprint(s) for s in b]
    rows[1] |= {"output": json.dumps({"role": "assistant", "content": "hello!"})}
    c = v4_trace_spans(rows, trace_info_v4(rows))
    assert fingerprint(a[0]) == fingerprint(c[0]) and fingerprint(a[1]) != fingerprint(c[1])
