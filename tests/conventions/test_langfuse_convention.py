"""Langfuse OTel attributes (reference/langfuse.md §8.2)."""

from __future__ import annotations

from tracing_eval import conventions
from tracing_eval.model import Span

TRACE = "c0ffee00c0ffee00c0ffee00c0ffee00"


def test_generation_observation_io_and_usage():
    s = Span(
        trace_id=TRACE,
        span_id="1",
        name="llm-call",
        attributes={
            "langfuse.observation.type": "generation",
            "langfuse.observation.input": '[{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}]',
            "langfuse.observation.output": '{"role": "assistant", "content": "Hello!"}',
            "langfuse.observation.model.name": "gpt-4o",
            "langfuse.observation.usage_details": '{"input": 11, "output": 3, "total": 14}',
            "langfuse.session.id": "lf-session",
        },
    )
    assert conventions.span_kind(s) == "llm"
    assert [(m.role, m.content) for m in conventions.input_messages(s)] == [("system", "Be brief."), ("user", "Hi")]
    assert [(m.role, m.content) for m in conventions.output_messages(s)] == [("assistant", "Hello!")]
    assert conventions.system_instructions(s) == "Be brief."
    assert conventions.model(s) == "gpt-4o"
    assert conventions.usage(s) == (11, 3)
    assert conventions.thread_id(s) == "lf-session"


def test_level_error_with_status_message():
    s = Span(
        trace_id=TRACE,
        span_id="2",
        attributes={
            "langfuse.observation.type": "tool",
            "langfuse.observation.level": "ERROR",
            "langfuse.observation.status_message": "quota exceeded",
            "langfuse.observation.input": '{"q": "x"}',
            "langfuse.observation.output": "null",
        },
    )
    assert conventions.span_kind(s) == "tool"
    assert conventions.span_error(s) == "quota exceeded"
    call = conventions.tool_call(s)
    assert call is not None and call.error == "quota exceeded" and call.arguments == {"q": "x"}


def test_level_warning_is_not_an_error():
    s = Span(trace_id=TRACE, span_id="3", attributes={"langfuse.observation.level": "WARNING"})
    assert conventions.span_error(s) is None


def test_trace_input_output_on_root():
    s = Span(
        trace_id=TRACE,
        span_id="4",
        name="handle",
        attributes={
            "langfuse.observation.type": "span",
            "langfuse.trace.input": '{"question": "What is 2+2?"}',
            "langfuse.trace.output": '{"answer": "4"}',
        },
    )
    assert conventions.span_kind(s) == "other"  # `span` is the SDK default and decides nothing
    assert [(m.role, m.content) for m in conventions.input_messages(s)] == [("user", "What is 2+2?")]
    assert [(m.role, m.content) for m in conventions.output_messages(s)] == [("assistant", "4")]


def test_agent_type():
    s = Span(
        trace_id=TRACE, span_id="5", attributes={"langfuse.observation.type": "agent", "gen_ai.operation.name": "chat"}
    )
    assert conventions.span_kind(s) == "agent"  # the Langfuse type wins over the operation name
