"""OpenInference shapes (openinference-instrumentation-openai 0.1.66; reference/otel.md §5.1, §8.3)."""

from __future__ import annotations

import orjson

from tracing_eval import conventions
from tracing_eval.conventions import openinference
from tracing_eval.model import Span, SpanEvent

TRACE = "5b8efff798038103d269b633813fc60c"

REQUEST = {
    "messages": [
        {"role": "system", "content": "You are terse."},
        {"role": "user", "content": "Weather in Paris?"},
    ],
    "model": "gpt-4o-mini",
    "tools": [{"type": "function", "function": {"name": "get_weather"}}],
}
RESPONSE = {
    "id": "chatcmpl-AB1",
    "object": "chat.completion",
    "model": "gpt-4o-mini-2024-07-18",
    "choices": [
        {
            "index": 0,
            "finish_reason": "tool_calls",
            "message": {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "call_1",
                        "type": "function",
                        "function": {"name": "get_weather", "arguments": '{"location":"Paris"}'},
                    }
                ],
            },
        }
    ],
}


def llm_span(**extra) -> Span:
    attrs = {
        "openinference.span.kind": "LLM",
        "llm.system": "openai",
        "input.value": orjson.dumps(REQUEST).decode(),
        "input.mime_type": "application/json",
        "output.value": orjson.dumps(RESPONSE).decode(),
        "output.mime_type": "application/json",
        "llm.invocation_parameters": '{"model": "gpt-4o-mini"}',
        "llm.tools.0.tool.json_schema": '{"type": "function"}',
        "llm.input_messages.0.message.role": "system",
        "llm.input_messages.0.message.content": "You are terse.",
        "llm.input_messages.1.message.role": "user",
        "llm.input_messages.1.message.content": "Weather in Paris?",
        "llm.output_messages.0.message.role": "assistant",
        "llm.output_messages.0.message.tool_calls.0.tool_call.id": "call_1",
        "llm.output_messages.0.message.tool_calls.0.tool_call.function.name": "get_weather",
        "llm.output_messages.0.message.tool_calls.0.tool_call.function.arguments": '{"location":"Paris"}',
        "llm.model_name": "gpt-4o-mini-2024-07-18",
        "llm.token_count.prompt": 52,
        "llm.token_count.completion": 17,
        "llm.token_count.total": 69,
        "session.id": "sess-42",
        "user.id": "user-7",
    }
    attrs.update(extra)
    return Span(
        trace_id=TRACE, span_id="aaaaaaaaaaaaaaa1", name="ChatCompletion", kind=1, status="ok", attributes=attrs
    )


def test_flattened_llm_messages():
    s = llm_span()
    assert conventions.span_kind(s) == "llm"
    assert [(m.role, m.content) for m in conventions.input_messages(s)] == [
        ("system", "You are terse."),
        ("user", "Weather in Paris?"),
    ]
    (out,) = conventions.output_messages(s)
    assert [(tc.id, tc.name, tc.arguments) for tc in out.tool_calls] == [
        ("call_1", "get_weather", {"location": "Paris"})
    ]
    assert conventions.thread_id(s) == "sess-42"
    assert conventions.usage(s) == (52, 17)
    assert conventions.model(s) == "gpt-4o-mini-2024-07-18"
    assert conventions.response_id(s) == "chatcmpl-AB1"


def test_message_contents_and_tool_call_id_in_history():
    s = llm_span(
        **{
            "llm.input_messages.1.message.content": None,
            "llm.input_messages.1.message.contents.0.message_content.type": "text",
            "llm.input_messages.1.message.contents.0.message_content.text": "Weather in",
            "llm.input_messages.1.message.contents.1.message_content.type": "image",
            "llm.input_messages.1.message.contents.1.message_content.image.image.url": "https://x/y.png",
            "llm.input_messages.1.message.contents.2.message_content.type": "text",
            "llm.input_messages.1.message.contents.2.message_content.text": "Paris?",
            "llm.input_messages.2.message.role": "tool",
            "llm.input_messages.2.message.content": "rainy, 57F",
            "llm.input_messages.2.message.tool_call_id": "call_1",
        }
    )
    del s.attributes["llm.input_messages.1.message.content"]
    msgs = conventions.input_messages(s)
    assert msgs[1].content == "Weather in\nParis?"
    assert (msgs[2].role, msgs[2].content, msgs[2].tool_call_id) == ("tool", "rainy, 57F", "call_1")


def test_indices_are_numeric_not_lexicographic():
    attrs = {f"llm.input_messages.{i}.message.role": "user" for i in range(12)}
    attrs.update({f"llm.input_messages.{i}.message.content": f"m{i}" for i in range(12)})
    s = Span(trace_id=TRACE, span_id="b", attributes={"openinference.span.kind": "LLM", **attrs})
    assert [m.content for m in conventions.input_messages(s)] == [f"m{i}" for i in range(12)]


def test_request_and_response_json_when_messages_are_hidden():
    """With OPENINFERENCE_HIDE_INPUT_MESSAGES the flattened messages are absent; input/output.value remain."""
    s = llm_span()
    for key in [k for k in s.attributes if k.startswith(("llm.input_messages.", "llm.output_messages."))]:
        del s.attributes[key]
    assert [m.role for m in conventions.input_messages(s)] == ["system", "user"]
    (out,) = conventions.output_messages(s)
    assert out.finish_reason == "tool_calls"
    assert out.tool_calls[0].arguments == {"location": "Paris"}


def test_agent_root_plain_text_value():
    s = Span(
        trace_id=TRACE,
        span_id="c",
        name="agent",
        attributes={
            "openinference.span.kind": "AGENT",
            "input.value": "Weather in Paris?",
            "input.mime_type": "text/plain",
            "output.value": "Rainy, 57F.",
            "session.id": "sess-42",
        },
    )
    assert conventions.span_kind(s) == "agent"
    assert [(m.role, m.content) for m in conventions.input_messages(s)] == [("user", "Weather in Paris?")]
    assert [(m.role, m.content) for m in conventions.output_messages(s)] == [("assistant", "Rainy, 57F.")]


def test_chain_is_other():
    s = Span(trace_id=TRACE, span_id="d", attributes={"openinference.span.kind": "CHAIN", "llm.model_name": "x"})
    assert conventions.span_kind(s) == "other"


def test_tool_span_with_exception_event():
    s = Span(
        trace_id=TRACE,
        span_id="eeeeeeeeeeeeeee1",
        name="get_weather",
        status="error",
        attributes={
            "openinference.span.kind": "TOOL",
            "tool.name": "get_weather",
            "tool.id": "call_1",
            "tool.parameters": '{"type": "object"}',
            "input.value": '{"location": "Paris"}',
        },
        events=[
            SpanEvent(
                name="exception",
                attributes={
                    "exception.type": "TimeoutError",
                    "exception.message": "weather API timed out",
                    "exception.escaped": "False",
                },
            )
        ],
    )
    assert conventions.span_kind(s) == "tool"
    assert conventions.span_error(s) == "TimeoutError: weather API timed out"
    call = conventions.tool_call(s)
    assert call is not None
    assert (call.id, call.name, call.arguments, call.error) == (
        "call_1",
        "get_weather",
        {"location": "Paris"},
        "TimeoutError: weather API timed out",
    )


def test_tool_span_success():
    s = Span(
        trace_id=TRACE,
        span_id="f",
        name="get_weather",
        status="ok",
        attributes={
            "openinference.span.kind": "TOOL",
            "tool.name": "get_weather",
            "tool.id": "call_1",
            "input.value": '{"location": "Paris"}',
            "output.value": "rainy, 57F",
        },
    )
    call = openinference.tool_call(s)
    assert call is not None and call.result == "rainy, 57F" and call.error is None
    assert conventions.tool_call(s).error is None  # type: ignore[union-attr]


def test_chain_root_with_serialised_langchain_state():
    """LangGraph under OpenInference: CHAIN root whose output.value is the graph state with LangChain messages."""

    def lc(cls: str, **kwargs):
        return {"lc": 1, "type": "constructor", "id": ["langchain", "schema", "messages", cls], "kwargs": kwargs}

    state = {
        "messages": [
            lc("HumanMessage", content="Weather in Paris?"),
            lc(
                "AIMessage",
                content="",
                tool_calls=[{"name": "get_weather", "args": {"location": "Paris"}, "id": "call_1"}],
            ),
            lc("ToolMessage", content="rainy, 57F", tool_call_id="call_1"),
            lc("AIMessage", content="Rainy, 57F."),
        ]
    }
    s = Span(
        trace_id=TRACE,
        span_id="g",
        name="LangGraph",
        attributes={
            "openinference.span.kind": "CHAIN",
            "input.value": orjson.dumps({"messages": [{"role": "user", "content": "Weather in Paris?"}]}).decode(),
            "output.value": orjson.dumps(state).decode(),
        },
    )
    assert [(m.role, m.content) for m in conventions.input_messages(s)] == [("user", "Weather in Paris?")]
    out = conventions.output_messages(s)
    assert [m.role for m in out] == ["user", "assistant", "tool", "assistant"]
    assert out[1].tool_calls[0].arguments == {"location": "Paris"} and out[2].tool_call_id == "call_1"
    assert out[-1].content == "Rainy, 57F."
