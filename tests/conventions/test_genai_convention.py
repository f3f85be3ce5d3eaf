"""OTel GenAI shapes as real instrumentations emit them (reference/otel.md §3.4-3.6, §8.1-8.2)."""

from __future__ import annotations

import orjson

from tracing_eval import conventions
from tracing_eval.conventions import genai
from tracing_eval.model import Span, SpanEvent

TRACE = "0af7651916cd43dd8448eb211c80319c"

# genai-openai 1.3b0 with SPAN_ONLY: JSON-string attributes, `response` key, normalized finish_reason.
SYSTEM_MSG = {"role": "system", "parts": [{"content": "You are terse.", "type": "text"}], "name": None}
USER_MSG = {"role": "user", "parts": [{"content": "Weather in Paris?", "type": "text"}], "name": None}
CALL_MSG = {
    "role": "assistant",
    "parts": [{"arguments": {"location": "Paris"}, "name": "get_weather", "id": "call_1", "type": "tool_call"}],
    "name": None,
}
TOOL_MSG = {
    "role": "tool",
    "parts": [{"response": "rainy, 57F", "id": "call_1", "type": "tool_call_response"}],
    "name": None,
}


def chat_span(input_messages, output_messages, *, finish_reasons=("stop",), span_id="b7ad6b7169203331") -> Span:
    return Span(
        trace_id=TRACE,
        span_id=span_id,
        name="chat gpt-4o-mini",
        kind=3,
        attributes={
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": "openai",
            "gen_ai.request.model": "gpt-4o-mini",
            "gen_ai.response.model": "gpt-4o-mini-2024-07-18",
            "gen_ai.response.id": "chatcmpl-1",
            "gen_ai.response.finish_reasons": list(finish_reasons),
            "gen_ai.usage.input_tokens": 52,
            "gen_ai.usage.output_tokens": 7,
            "gen_ai.input.messages": input_messages,
            "gen_ai.output.messages": output_messages,
        },
    )


def test_span_only_json_strings_first_call():
    out = [{**CALL_MSG, "finish_reason": "tool_call"}]
    s = chat_span(
        orjson.dumps([SYSTEM_MSG, USER_MSG]).decode(), orjson.dumps(out).decode(), finish_reasons=["tool_calls"]
    )

    inputs = conventions.input_messages(s)
    assert [(m.role, m.content) for m in inputs] == [("system", "You are terse."), ("user", "Weather in Paris?")]
    (answer,) = conventions.output_messages(s)
    assert answer.role == "assistant"
    assert answer.finish_reason == "tool_call"  # the message's own value wins over the span list
    assert [(tc.id, tc.name, tc.arguments) for tc in answer.tool_calls] == [
        ("call_1", "get_weather", {"location": "Paris"})
    ]
    assert conventions.span_kind(s) == "llm"
    assert conventions.system_instructions(s) == "You are terse."
    assert conventions.usage(s) == (52, 7)
    assert conventions.model(s) == "gpt-4o-mini-2024-07-18"
    assert conventions.response_id(s) == "chatcmpl-1"


def test_second_call_history_holds_tool_call_and_response():
    history = orjson.dumps([SYSTEM_MSG, USER_MSG, CALL_MSG, TOOL_MSG]).decode()
    s = chat_span(
        history, '[{"role":"assistant","parts":[{"content":"Rainy, 57F.","type":"text"}],"finish_reason":"stop"}]'
    )

    inputs = conventions.input_messages(s)
    assert [m.role for m in inputs] == ["system", "user", "assistant", "tool"]
    assert inputs[3].content == "rainy, 57F"
    assert inputs[3].tool_call_id == "call_1"
    assert conventions.output_messages(s)[0].content == "Rainy, 57F."


def test_tool_result_under_result_key_like_registry_example():
    part = {"type": "tool_call_response", "id": "call_9", "result": "rainy, 57°F"}
    s = chat_span([{"role": "tool", "parts": [part]}], [])
    (tool,) = conventions.input_messages(s)
    assert (tool.role, tool.content, tool.tool_call_id) == ("tool", "rainy, 57°F", "call_9")


def test_structured_tool_response_is_serialised_as_json_text():
    part = {"type": "tool_call_response", "id": "c", "response": {"temp_f": 57, "sky": "rain"}}
    (tool,) = genai.input_messages(chat_span([{"role": "tool", "parts": [part]}], []))
    assert orjson.loads(tool.content) == {"temp_f": 57, "sky": "rain"}


def test_structured_and_json_string_attributes_give_the_same_messages():
    structured = chat_span([SYSTEM_MSG, USER_MSG, CALL_MSG, TOOL_MSG], [{**CALL_MSG, "finish_reason": "tool_call"}])
    as_json = chat_span(
        orjson.dumps([SYSTEM_MSG, USER_MSG, CALL_MSG, TOOL_MSG]).decode(),
        orjson.dumps([{**CALL_MSG, "finish_reason": "tool_call"}]).decode(),
    )
    assert conventions.input_messages(structured) == conventions.input_messages(as_json)
    assert conventions.output_messages(structured) == conventions.output_messages(as_json)
    assert len(conventions.input_messages(structured)) == 4


def test_array_of_json_strings_is_accepted():
    """Older SDKs only allowed primitive arrays, so each message may be its own JSON string."""
    s = chat_span([orjson.dumps(USER_MSG).decode()], [])
    assert [m.content for m in conventions.input_messages(s)] == ["Weather in Paris?"]


def test_finish_reason_falls_back_to_span_attribute():
    s = chat_span(
        [USER_MSG], '[{"role":"assistant","parts":[{"type":"text","content":"hi"}]}]', finish_reasons=["length"]
    )
    assert conventions.output_messages(s)[0].finish_reason == "length"


def test_system_instructions_attribute():
    s = chat_span([USER_MSG], [])
    s.attributes["gen_ai.system_instructions"] = '[{"type":"text","content":"Be kind."}]'
    assert conventions.system_instructions(s) == "Be kind."


def test_details_event_with_structured_values():
    """SPAN_AND_EVENT: a log record parented to the chat span, structured (kvlist/array) messages."""
    event = SpanEvent(
        name="gen_ai.client.inference.operation.details",
        attributes={
            "gen_ai.operation.name": "chat",
            "gen_ai.input.messages": [SYSTEM_MSG, USER_MSG],
            "gen_ai.output.messages": [{**CALL_MSG, "finish_reason": "tool_call"}],
            "gen_ai.system_instructions": [{"type": "text", "content": "You are terse."}],
        },
    )
    s = Span(
        trace_id=TRACE,
        span_id="b7ad6b7169203331",
        name="chat gpt-4o-mini",
        attributes={"gen_ai.operation.name": "chat"},
        events=[event],
    )

    assert [m.role for m in conventions.input_messages(s)] == ["system", "user"]
    assert conventions.output_messages(s)[0].tool_calls[0].name == "get_weather"
    assert conventions.system_instructions(s) == "You are terse."


def test_span_attributes_win_over_details_event():
    event = SpanEvent(
        name="gen_ai.client.inference.operation.details",
        attributes={"gen_ai.input.messages": [{"role": "user", "parts": [{"type": "text", "content": "from event"}]}]},
    )
    s = chat_span([{"role": "user", "parts": [{"type": "text", "content": "from span"}]}], [])
    s.events.append(event)
    assert [m.content for m in conventions.input_messages(s)] == ["from span"]


def legacy_span() -> Span:
    """openai-v2 2.4b0 default: per-message log events with content in the body."""
    events = [
        SpanEvent(
            name="gen_ai.system.message",
            time_ns=1,
            attributes={"gen_ai.system": "openai"},
            body={"content": "You are terse."},
        ),
        SpanEvent(
            name="gen_ai.user.message",
            time_ns=1,
            attributes={"gen_ai.system": "openai"},
            body={"content": "Weather in Paris?"},
        ),
        SpanEvent(
            name="gen_ai.assistant.message",
            time_ns=1,
            attributes={"gen_ai.system": "openai"},
            body={
                "tool_calls": [
                    {
                        "id": "call_1",
                        "type": "function",
                        "function": {"name": "get_weather", "arguments": '{"location": "Paris"}'},
                    }
                ]
            },
        ),
        SpanEvent(
            name="gen_ai.tool.message",
            time_ns=1,
            attributes={"gen_ai.system": "openai"},
            body={"content": "rainy, 57F", "id": "call_1"},
        ),
        SpanEvent(
            name="gen_ai.choice",
            time_ns=2,
            attributes={"gen_ai.system": "openai"},
            body={"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "Rainy, 57F."}},
        ),
    ]
    return Span(
        trace_id=TRACE,
        span_id="00f067aa0ba902b7",
        name="chat gpt-4o-mini",
        attributes={
            "gen_ai.system": "openai",
            "gen_ai.operation.name": "chat",
            "gen_ai.usage.prompt_tokens": 60,
            "gen_ai.usage.completion_tokens": 5,
        },
        events=events,
    )


def test_legacy_events_with_bodies():
    s = legacy_span()
    inputs = conventions.input_messages(s)
    assert [m.role for m in inputs] == ["system", "user", "assistant", "tool"]
    assert inputs[2].tool_calls[0].arguments == {"location": "Paris"}
    assert (inputs[3].content, inputs[3].tool_call_id) == ("rainy, 57F", "call_1")
    (choice,) = conventions.output_messages(s)
    assert (choice.content, choice.finish_reason) == ("Rainy, 57F.", "stop")
    assert conventions.usage(s) == (60, 5)  # legacy usage names
    assert conventions.system_instructions(s) == "You are terse."


def test_legacy_choices_in_index_order_and_tool_call_choice():
    events = [
        SpanEvent(name="gen_ai.choice", body={"index": 1, "finish_reason": "stop", "message": {"content": "second"}}),
        SpanEvent(
            name="gen_ai.choice",
            body={
                "index": 0,
                "finish_reason": "tool_calls",
                "message": {
                    "role": "assistant",
                    "tool_calls": [{"id": "c", "type": "function", "function": {"name": "f", "arguments": "{}"}}],
                },
            },
        ),
    ]
    out = genai.legacy_output(Span(trace_id=TRACE, span_id="a", events=events))
    assert [m.finish_reason for m in out] == ["tool_calls", "stop"]
    assert out[0].tool_calls[0].name == "f" and out[1].content == "second"


def test_execute_tool_span():
    s = Span(
        trace_id=TRACE,
        span_id="1111111111111111",
        name="execute_tool get_weather",
        kind=1,
        attributes={
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": "get_weather",
            "gen_ai.tool.call.id": "call_1",
            "gen_ai.tool.type": "function",
            "gen_ai.tool.call.arguments": '{"location": "Paris"}',
            "gen_ai.tool.call.result": "rainy, 57F",
        },
    )
    assert conventions.span_kind(s) == "tool"
    call = conventions.tool_call(s)
    assert call is not None
    assert (call.id, call.name, call.arguments, call.result, call.error, call.span_id) == (
        "call_1",
        "get_weather",
        {"location": "Paris"},
        "rainy, 57F",
        None,
        "1111111111111111",
    )


def test_execute_tool_span_error():
    s = Span(
        trace_id=TRACE,
        span_id="2222222222222222",
        name="execute_tool get_weather",
        status="error",
        status_message="ConnectionError: upstream down",
        attributes={"gen_ai.operation.name": "execute_tool", "error.type": "ConnectionError"},
    )
    call = conventions.tool_call(s)
    assert call is not None and call.name == "get_weather"  # name from the span name
    assert call.error == "ConnectionError: upstream down"


def test_agent_and_other_operations():
    agent = Span(trace_id=TRACE, span_id="a", attributes={"gen_ai.operation.name": "invoke_agent"})
    emb = Span(
        trace_id=TRACE, span_id="b", attributes={"gen_ai.operation.name": "embeddings", "gen_ai.request.model": "e"}
    )
    assert conventions.span_kind(agent) == "agent"
    assert conventions.span_kind(emb) == "other"
