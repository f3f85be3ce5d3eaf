"""OpenLLMetry / Traceloop <= 0.55 flattened attributes (reference/otel.md §3.6, §5.2)."""

from __future__ import annotations

from tracing_eval import conventions
from tracing_eval.model import Span

TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"


def openai_chat_span() -> Span:
    return Span(
        trace_id=TRACE,
        span_id="1000000000000001",
        name="openai.chat",
        kind=3,
        attributes={
            "llm.request.type": "chat",
            "gen_ai.system": "openai",
            "gen_ai.request.model": "gpt-4o-mini",
            "gen_ai.response.model": "gpt-4o-mini-2024-07-18",
            "gen_ai.prompt.0.role": "system",
            "gen_ai.prompt.0.content": "You are terse.",
            "gen_ai.prompt.1.role": "user",
            "gen_ai.prompt.1.content": "Weather in Paris?",
            "gen_ai.prompt.2.role": "assistant",
            "gen_ai.prompt.2.tool_calls.0.id": "call_0",
            "gen_ai.prompt.2.tool_calls.0.name": "get_time",
            "gen_ai.prompt.2.tool_calls.0.arguments": "{}",
            "gen_ai.prompt.3.role": "tool",
            "gen_ai.prompt.3.content": "12:00",
            "gen_ai.prompt.3.tool_call_id": "call_0",
            "gen_ai.completion.0.role": "assistant",
            "gen_ai.completion.0.finish_reason": "tool_calls",
            "gen_ai.completion.0.tool_calls.0.id": "call_1",
            "gen_ai.completion.0.tool_calls.0.name": "get_weather",
            "gen_ai.completion.0.tool_calls.0.arguments": '{"location": "Paris"}',
            "gen_ai.usage.prompt_tokens": 40,
            "gen_ai.usage.completion_tokens": 9,
            "llm.usage.total_tokens": 49,
            "traceloop.association.properties.session_id": "conv-9",
        },
    )


def test_flattened_prompt_and_completion():
    s = openai_chat_span()
    assert conventions.span_kind(s) == "llm"
    msgs = conventions.input_messages(s)
    assert [m.role for m in msgs] == ["system", "user", "assistant", "tool"]
    assert msgs[2].tool_calls[0].name == "get_time"
    assert (msgs[3].content, msgs[3].tool_call_id) == ("12:00", "call_0")
    (out,) = conventions.output_messages(s)
    assert out.finish_reason == "tool_calls"
    assert [(tc.id, tc.name, tc.arguments) for tc in out.tool_calls] == [
        ("call_1", "get_weather", {"location": "Paris"})
    ]
    assert conventions.usage(s) == (40, 9)
    assert conventions.thread_id(s) == "conv-9"


def test_list_content_serialised_as_json_string():
    s = Span(
        trace_id=TRACE,
        span_id="2",
        attributes={
            "llm.request.type": "chat",
            "gen_ai.prompt.0.role": "user",
            "gen_ai.prompt.0.content": '[{"type": "text", "text": "Describe"}, {"type": "image_url", "image_url": {"url": "x"}}]',
            "gen_ai.completion.0.content": "A cat.",
        },
    )
    assert conventions.input_messages(s)[0].content == "Describe"
    out = conventions.output_messages(s)
    assert (out[0].role, out[0].content) == ("assistant", "A cat.")  # role defaults to assistant on outputs


def test_json_looking_user_text_is_kept_verbatim():
    s = Span(
        trace_id=TRACE, span_id="3", attributes={"gen_ai.prompt.0.role": "user", "gen_ai.prompt.0.content": "[1, 2, 3]"}
    )
    assert conventions.input_messages(s)[0].content == "[1, 2, 3]"


def test_workflow_root_entity_io_and_tool_span():
    workflow = Span(
        trace_id=TRACE,
        span_id="4",
        name="support.workflow",
        attributes={
            "traceloop.span.kind": "workflow",
            "traceloop.entity.name": "support",
            "traceloop.entity.input": '{"args": ["Weather in Paris?"], "kwargs": {}}',
            "traceloop.entity.output": '"Rainy, 57F."',
        },
    )
    tool = Span(
        trace_id=TRACE,
        span_id="5",
        name="get_weather.tool",
        attributes={
            "traceloop.span.kind": "tool",
            "traceloop.entity.name": "get_weather",
            "traceloop.entity.input": '{"args": [], "kwargs": {"location": "Paris"}}',
            "traceloop.entity.output": '"rainy, 57F"',
        },
    )
    assert conventions.span_kind(workflow) == "other"
    assert [(m.role, m.content) for m in conventions.input_messages(workflow)] == [("user", "Weather in Paris?")]
    assert [(m.role, m.content) for m in conventions.output_messages(workflow)] == [("assistant", "Rainy, 57F.")]
    assert conventions.span_kind(tool) == "tool"
    call = conventions.tool_call(tool)
    assert call is not None and (call.name, call.arguments, call.result) == (
        "get_weather",
        {"location": "Paris"},
        "rainy, 57F",
    )


def test_genai_attributes_win_over_flattened():
    """>= 0.56 emits `gen_ai.input.messages`; if both are present the newer form wins."""
    s = openai_chat_span()
    s.attributes["gen_ai.input.messages"] = '[{"role":"user","parts":[{"type":"text","content":"new format"}]}]'
    assert [m.content for m in conventions.input_messages(s)] == ["new format"]
