"""Precedence across conventions (DESIGN §5) and robustness against bad attribute content."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tracing_eval import conventions
from tracing_eval.assemble import system_prompt, turn_from_trace
from tracing_eval.model import Span, SpanEvent

TRACE = "11111111111111111111111111111111"
ALL_IDS = {
    "langfuse.session.id": "lf",
    "session.id": "oi",
    "gen_ai.conversation.id": "genai",
    "traceloop.association.properties.session_id": "tl",
}


def span(attrs=None, *, resource=None, events=(), status="unset", status_message="") -> Span:
    return Span(
        trace_id=TRACE,
        span_id="2222222222222222",
        attributes=attrs or {},
        resource=resource or {},
        events=list(events),
        status=status,
        status_message=status_message,
    )


@pytest.mark.parametrize(
    "dropped, expected",
    [
        ([], "lf"),
        (["langfuse.session.id"], "oi"),
        (["langfuse.session.id", "session.id"], "genai"),
        (["langfuse.session.id", "session.id", "gen_ai.conversation.id"], "tl"),
        (list(ALL_IDS), None),
    ],
)
def test_thread_id_precedence(dropped, expected):
    attrs = {k: v for k, v in ALL_IDS.items() if k not in dropped}
    assert conventions.thread_id(span(attrs)) == expected


def test_thread_id_resource_is_a_fallback_only():
    assert conventions.thread_id(span(resource={"session.id": "from-resource"})) == "from-resource"
    both = span({"gen_ai.conversation.id": "from-span"}, resource={"langfuse.session.id": "from-resource"})
    assert conventions.thread_id(both) == "from-span"


def test_thread_id_skips_empty_and_non_string_values():
    assert (
        conventions.thread_id(span({"langfuse.session.id": "  ", "session.id": ["x"], "gen_ai.conversation.id": 42}))
        == "42"
    )
    assert conventions.thread_id(span({"session.id": True})) is None


def test_span_error_sources():
    assert conventions.span_error(span()) is None
    assert conventions.span_error(span(status="ok")) is None
    assert (
        conventions.span_error(
            span(
                status="error",
                status_message="Error code: 429 - Rate limit",
                attrs={"error.type": "openai.RateLimitError"},
            )
        )
        == "Error code: 429 - Rate limit"
    )
    assert (
        conventions.span_error(span(status="error", attrs={"error.type": "openai.RateLimitError"}))
        == "openai.RateLimitError"
    )
    assert conventions.span_error(span(status="error")) == "error"
    exc = SpanEvent(name="exception", attributes={"exception.type": "ValueError", "exception.message": "bad city"})
    assert conventions.span_error(span(events=[exc])) == "ValueError: bad city"
    assert conventions.span_error(span({"error.type": "timeout"})) == "timeout"
    assert conventions.span_error(span({"langfuse.observation.level": "ERROR"})) == "ERROR"


def test_message_precedence_order():
    """genai attrs > details event > OpenInference > flattened > legacy events > input.value."""
    layers = [
        ("gen_ai.input.messages", '[{"role":"user","parts":[{"type":"text","content":"genai"}]}]'),
        (
            "details",
            SpanEvent(
                name="gen_ai.client.inference.operation.details",
                attributes={
                    "gen_ai.input.messages": [{"role": "user", "parts": [{"type": "text", "content": "details"}]}]
                },
            ),
        ),
        ("llm.input_messages.0.message.role", "user"),
        ("gen_ai.prompt.0.role", "user"),
        ("legacy", SpanEvent(name="gen_ai.user.message", body={"content": "legacy"})),
        ("input.value", "value"),
    ]
    attrs = {"llm.input_messages.0.message.content": "openinference", "gen_ai.prompt.0.content": "flattened"}
    events = []
    for key, value in layers:
        if isinstance(value, SpanEvent):
            events.append(value)
        else:
            attrs[key] = value
    expected = ["genai", "details", "openinference", "flattened", "legacy", "value"]
    for n, want in enumerate(expected):
        removed = {k for k, v in layers[:n] if not isinstance(v, SpanEvent)}
        removed_events = {v.name for k, v in layers[:n] if isinstance(v, SpanEvent)}
        s = span(
            {k: v for k, v in attrs.items() if k not in removed},
            events=[e for e in events if e.name not in removed_events],
        )
        assert [m.content for m in conventions.input_messages(s)] == [want]


@pytest.mark.parametrize(
    "value",
    [
        "not json",
        "[{",
        "{}",
        "[]",
        "null",
        "42",
        '"just a string"',
        42,
        3.5,
        True,
        None,
        ["a", 1, None],
        [{"role": 7, "parts": "nope"}],
        [{"role": "user", "parts": [None, 5, {"type": "tool_call"}]}],
        [{"role": "assistant", "parts": [{"type": "tool_call", "name": {"x": 1}, "arguments": "{broken"}]}],
        {"role": "user", "parts": [{"type": "text", "content": {"nested": True}}]},
        [{"role": "tool", "parts": [{"type": "tool_call_response", "id": ["x"], "response": {"a": float("nan")}}]}],
        '{"input": ' * 900 + '"deep"' + "}" * 900,
    ],
)
def test_malformed_message_attributes_do_not_raise(value):
    attrs = {
        key: value
        for key in (
            "gen_ai.input.messages",
            "gen_ai.output.messages",
            "gen_ai.system_instructions",
            "input.value",
            "output.value",
            "gen_ai.response.finish_reasons",
            "gen_ai.usage.input_tokens",
            "llm.token_count.prompt",
            "session.id",
            "langfuse.observation.usage_details",
            "langfuse.observation.level",
            "traceloop.entity.input",
            "gen_ai.tool.call.arguments",
            "gen_ai.tool.name",
            "llm.input_messages.0.message.tool_calls.0.tool_call.id",
            "gen_ai.prompt.0.tool_calls.x.name",
            "gen_ai.completion.0.content",
            "error.type",
        )
    }
    events = [
        SpanEvent(name="gen_ai.choice", body=value),
        SpanEvent(name="gen_ai.user.message", body=value),
        SpanEvent(name="gen_ai.client.inference.operation.details", attributes={"gen_ai.input.messages": value}),
        SpanEvent(name="exception", attributes={"exception.type": value}),
    ]
    s = span(attrs, events=events)
    conventions.input_messages(s)
    conventions.output_messages(s)
    conventions.span_kind(s)
    conventions.span_error(s)
    conventions.thread_id(s)
    conventions.usage(s)
    conventions.tool_call(s)
    conventions.system_instructions(s)
    turn_from_trace([s])
    system_prompt([s])


def test_malformed_json_string_falls_through_to_next_convention():
    s = span(
        {
            "gen_ai.input.messages": '[{"role": "user", "parts": [',
            "llm.input_messages.0.message.role": "user",
            "llm.input_messages.0.message.content": "fallback",
        }
    )
    assert [m.content for m in conventions.input_messages(s)] == ["fallback"]


_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(
            st.sampled_from(
                [
                    "role",
                    "parts",
                    "type",
                    "content",
                    "id",
                    "name",
                    "arguments",
                    "response",
                    "result",
                    "tool_calls",
                    "function",
                    "message",
                    "finish_reason",
                    "index",
                    "choices",
                    "messages",
                ]
            ),
            inner,
            max_size=5,
        )
    ),
    max_leaves=20,
)
_keys = st.sampled_from(
    [
        "gen_ai.input.messages",
        "gen_ai.output.messages",
        "gen_ai.system_instructions",
        "gen_ai.operation.name",
        "openinference.span.kind",
        "input.value",
        "output.value",
        "llm.input_messages.0.message.role",
        "llm.output_messages.0.message.tool_calls.0.tool_call.function.arguments",
        "gen_ai.prompt.0.role",
        "gen_ai.completion.1.tool_calls.0.arguments",
        "traceloop.span.kind",
        "traceloop.entity.output",
        "langfuse.observation.type",
        "langfuse.observation.output",
        "gen_ai.tool.call.id",
        "gen_ai.tool.name",
        "gen_ai.usage.output_tokens",
        "gen_ai.response.id",
    ]
)


@settings(max_examples=200, deadline=None)
@given(
    st.dictionaries(_keys, _values, max_size=8),
    st.lists(
        st.tuples(
            st.sampled_from(["gen_ai.choice", "gen_ai.assistant.message", "gen_ai.tool.message", "exception"]), _values
        ),
        max_size=3,
    ),
)
def test_arbitrary_attribute_content_never_raises(attrs, events):
    s = span(attrs, events=[SpanEvent(name=n, body=b, attributes={"exception.message": b}) for n, b in events])
    tool = Span(trace_id=TRACE, span_id="3333333333333333", parent_id=s.span_id, attributes=attrs)
    turn = turn_from_trace([s, tool])
    if turn is not None:
        assert turn.trace_id == TRACE
    system_prompt([s, tool])
