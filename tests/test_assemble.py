"""Spans -> turns -> threads, with hand-built spans in the shapes of reference/otel.md §8 and
with spans produced and encoded by the real OpenTelemetry SDK."""

from __future__ import annotations

import orjson
import pytest

from tracing_eval.assemble import system_prompt, thread_from_traces, turn_from_trace
from tracing_eval.connectors.otlp.decode import decode_logs, decode_traces
from tracing_eval.model import Span, SpanEvent

SYSTEM = {"role": "system", "parts": [{"type": "text", "content": "You are terse."}], "name": None}


def user(text: str) -> dict:
    return {"role": "user", "parts": [{"type": "text", "content": text}], "name": None}


def calls(*pairs: tuple[str | None, str, dict]) -> dict:
    parts = [{"type": "tool_call", "id": cid, "name": name, "arguments": args} for cid, name, args in pairs]
    return {"role": "assistant", "parts": parts, "name": None}


def result(call_id: str, response: str, key: str = "response") -> dict:
    return {"role": "tool", "parts": [{"type": "tool_call_response", "id": call_id, key: response}], "name": None}


def answer(text: str) -> dict:
    return {"role": "assistant", "parts": [{"type": "text", "content": text}], "name": None}


def js(value) -> str:
    return orjson.dumps(value).decode()


class TraceBuilder:
    """Spans of one trace with increasing start times; ids are readable but hex-shaped."""

    def __init__(self, trace_id: str, t0: int) -> None:
        self.trace_id, self.t, self.spans = trace_id, t0, []

    def add(self, span_id: str, parent: str | None, name: str, attrs: dict, **kw) -> Span:
        self.t += 1_000_000
        s = Span(
            trace_id=self.trace_id,
            span_id=span_id,
            parent_id=parent,
            name=name,
            start_ns=self.t,
            end_ns=self.t + 500_000,
            attributes=attrs,
            **kw,
        )
        self.spans.append(s)
        return s

    def chat(self, span_id: str, parent: str | None, inputs: list, outputs: list, *, tokens=(10, 2), resp="r") -> Span:
        return self.add(
            span_id,
            parent,
            "chat gpt-4o-mini",
            {
                "gen_ai.operation.name": "chat",
                "gen_ai.provider.name": "openai",
                "gen_ai.request.model": "gpt-4o-mini",
                "gen_ai.response.model": "gpt-4o-mini-2024-07-18",
                "gen_ai.response.id": resp,
                "gen_ai.usage.input_tokens": tokens[0],
                "gen_ai.usage.output_tokens": tokens[1],
                "gen_ai.input.messages": js(inputs),
                "gen_ai.output.messages": js(outputs),
            },
        )

    def tool(self, span_id: str, parent: str, name: str, call_id: str | None, **kw) -> Span:
        attrs = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": name}
        if call_id:
            attrs["gen_ai.tool.call.id"] = call_id
        attrs.update(kw.pop("attrs", {}))
        return self.add(span_id, parent, f"execute_tool {name}", attrs, **kw)


def genai_conversation() -> tuple[list[Span], list[Span]]:
    """Two turns of one conversation, one trace each: invoke_agent root, chat, execute_tool, chat."""
    t1 = TraceBuilder("a" * 32, 1_000_000_000)
    t1.add(
        "a000000000000001",
        None,
        "invoke_agent support",
        {
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.agent.name": "support",
            "gen_ai.conversation.id": "conv-1",
            "gen_ai.output.messages": js([{**answer("Rainy, 57F."), "finish_reason": "stop"}]),
        },
    )
    t1.chat(
        "a000000000000002",
        "a000000000000001",
        [SYSTEM, user("Weather in Paris?")],
        [{**calls(("call_1", "get_weather", {"location": "Paris"})), "finish_reason": "tool_call"}],
        tokens=(50, 9),
        resp="resp-1a",
    )
    t1.tool(
        "a000000000000003", "a000000000000001", "get_weather", "call_1", attrs={"gen_ai.tool.call.result": "rainy, 57F"}
    )
    history1 = [
        SYSTEM,
        user("Weather in Paris?"),
        calls(("call_1", "get_weather", {"location": "Paris"})),
        result("call_1", "rainy, 57F"),
    ]
    t1.chat(
        "a000000000000004",
        "a000000000000001",
        history1,
        [{**answer("Rainy, 57F."), "finish_reason": "stop"}],
        tokens=(70, 5),
        resp="resp-1b",
    )

    t2 = TraceBuilder("b" * 32, 5_000_000_000)
    t2.add(
        "b000000000000001",
        None,
        "invoke_agent support",
        {"gen_ai.operation.name": "invoke_agent", "gen_ai.conversation.id": "conv-1"},
    )
    history2 = [*history1, answer("Rainy, 57F."), user("And in Rome?")]
    t2.chat(
        "b000000000000002",
        "b000000000000001",
        history2,
        [{**calls(("call_2", "get_weather", {"location": "Rome"})), "finish_reason": "tool_call"}],
        resp="resp-2a",
    )
    t2.tool(
        "b000000000000003",
        "b000000000000001",
        "get_weather",
        "call_2",
        status="error",
        status_message="TimeoutError: weather API timed out",
        attrs={"error.type": "TimeoutError"},
    )
    t2.chat(
        "b000000000000004",
        "b000000000000001",
        [
            *history2,
            calls(("call_2", "get_weather", {"location": "Rome"})),
            result("call_2", "Error: timed out", key="result"),
        ],
        [{**answer("Sorry, the weather service is down."), "finish_reason": "stop"}],
        resp="resp-2b",
    )
    return t1.spans, t2.spans


def test_turn_messages_user_tail_tool_calls_and_final_answer():
    spans, _ = genai_conversation()
    turn = turn_from_trace(spans, index=3)
    assert turn is not None
    assert [(m.role, m.content) for m in turn.messages] == [
        ("user", "Weather in Paris?"),
        ("assistant", ""),
        ("tool", "rainy, 57F"),
        ("assistant", "Rainy, 57F."),
    ]
    (call,) = turn.tool_calls
    assert (call.id, call.name, call.arguments, call.result) == (
        "call_1",
        "get_weather",
        {"location": "Paris"},
        "rainy, 57F",
    )
    assert call.error is None
    assert call.span_id == "a000000000000003"
    assert turn.index == 3
    assert (turn.trace_id, turn.root_span_id) == ("a" * 32, "a000000000000001")
    assert turn.response_id == "resp-1b"
    assert turn.model == "gpt-4o-mini-2024-07-18"
    assert (turn.input_tokens, turn.output_tokens) == (120, 14)
    assert turn.started_ns == spans[0].start_ns and turn.ended_ns == spans[0].end_ns
    assert turn.finish_reason == "stop"
    assert turn.error is None
    assert all(m.role != "system" for m in turn.messages)


def test_second_turn_does_not_repeat_the_first_and_links_failed_tool():
    _, spans = genai_conversation()
    turn = turn_from_trace(spans)
    assert turn is not None
    assert turn.user_text == "And in Rome?"
    assert [m.role for m in turn.messages] == ["user", "assistant", "tool", "assistant"]
    assert "Paris" not in " ".join(m.content for m in turn.messages)
    (call,) = turn.tool_calls
    assert call.id == "call_2" and call.span_id == "b000000000000003"
    assert call.error == "TimeoutError: weather API timed out"  # the span's error wins over the result text
    assert call.result == "Error: timed out"  # read from the `result` key
    assert turn.assistant_text == "Sorry, the weather service is down."


def test_thread_orders_turns_and_sets_positions():
    first, second = genai_conversation()
    thread = thread_from_traces("otlp:conv-1", [second, first], version=4)
    assert [t.trace_id for t in thread.turns] == ["a" * 32, "b" * 32]
    assert [t.index for t in thread.turns] == [0, 1]
    assert [m.position for m in thread.messages] == list(range(8))
    assert [t.user_text for t in thread.turns] == ["Weather in Paris?", "And in Rome?"]
    assert thread.conversation_id == "conv-1"
    assert thread.system_prompt == "You are terse."
    assert (thread.key, thread.source, thread.version) == ("otlp:conv-1", "otlp", 4)


def test_thread_skips_traces_without_llm_content():
    first, second = genai_conversation()
    http = [
        Span(
            trace_id="c" * 32,
            span_id="c000000000000001",
            name="GET /healthz",
            start_ns=3_000_000_000,
            attributes={"http.request.method": "GET", "http.route": "/healthz"},
        )
    ]
    thread = thread_from_traces("k", [http, second, first])
    assert len(thread.turns) == 2 and [t.index for t in thread.turns] == [0, 1]


def test_root_output_is_the_final_answer():
    t = TraceBuilder("d" * 32, 0)
    t.add(
        "d000000000000001",
        None,
        "invoke_agent a",
        {"gen_ai.operation.name": "invoke_agent", "gen_ai.output.messages": js([answer("Final from agent.")])},
    )
    t.chat("d000000000000002", "d000000000000001", [user("Q?")], [answer("Draft from model.")])
    turn = turn_from_trace(t.spans)
    assert turn is not None
    assert [(m.role, m.content) for m in turn.messages] == [("user", "Q?"), ("assistant", "Final from agent.")]


def test_root_answer_takes_the_finish_reason_of_the_last_model_call():
    trace = "8" * 32
    root = Span(
        trace_id=trace,
        span_id="8000000000000001",
        name="Agent",
        start_ns=1,
        attributes={
            "openinference.span.kind": "AGENT",
            "input.value": "Write a long poem",
            "output.value": "Roses are red, violets",
        },
    )
    llm = Span(
        trace_id=trace,
        span_id="8000000000000002",
        parent_id=root.span_id,
        start_ns=2,
        attributes={
            "openinference.span.kind": "LLM",
            "llm.input_messages.0.message.role": "user",
            "llm.input_messages.0.message.content": "Write a long poem",
            "llm.output_messages.0.message.role": "assistant",
            "llm.output_messages.0.message.content": "Roses are red, violets",
            "llm.finish_reason": "length",
        },
    )
    turn = turn_from_trace([root, llm])
    assert turn is not None
    assert [m.role for m in turn.messages] == ["user", "assistant"]
    assert turn.finish_reason == "length"


def test_tool_span_without_tool_call_part_becomes_a_call_before_the_answer():
    t = TraceBuilder("e" * 32, 0)
    t.add("e000000000000001", None, "workflow", {})
    t.tool(
        "e000000000000002",
        "e000000000000001",
        "lookup_order",
        None,
        attrs={"gen_ai.tool.call.arguments": '{"order": 7}', "gen_ai.tool.call.result": '{"error": "no such order"}'},
    )
    t.chat("e000000000000003", "e000000000000001", [user("Where is order 7?")], [answer("I could not find it.")])
    turn = turn_from_trace(t.spans)
    assert turn is not None
    assert [m.role for m in turn.messages] == ["user", "assistant", "assistant"]
    (call,) = turn.messages[1].tool_calls
    assert (call.name, call.arguments, call.span_id) == ("lookup_order", {"order": 7}, "e000000000000002")
    assert call.error is not None and "no such order" in call.error  # looks_like_tool_error on the result
    assert turn.assistant_text == "I could not find it."


def test_tool_spans_matched_by_name_and_order_when_ids_are_missing():
    t = TraceBuilder("f" * 32, 0)
    t.add("f000000000000001", None, "root", {})
    t.chat(
        "f000000000000002",
        "f000000000000001",
        [user("Compare Paris and Rome")],
        [calls((None, "get_weather", {"location": "Paris"}), (None, "get_weather", {"location": "Rome"}))],
    )
    t.tool("f000000000000003", "f000000000000001", "get_weather", None, attrs={"gen_ai.tool.call.result": "rainy"})
    t.tool("f000000000000004", "f000000000000001", "get_weather", None, status="error", status_message="boom")
    t.chat("f000000000000005", "f000000000000001", [user("Compare Paris and Rome")], [answer("Paris is rainy.")])
    turn = turn_from_trace(t.spans)
    assert turn is not None
    paris, rome = turn.tool_calls
    assert (paris.arguments, paris.span_id, paris.result, paris.error) == (
        {"location": "Paris"},
        "f000000000000003",
        "rainy",
        None,
    )
    assert (rome.arguments, rome.span_id, rome.error) == ({"location": "Rome"}, "f000000000000004", "boom")
    assert len(turn.assistant_messages) == 2  # no synthetic message: both spans matched


def test_root_error_and_unanswered_turn():
    t = TraceBuilder("0" * 31 + "1", 0)
    t.add(
        "0000000000000011",
        None,
        "chat gpt-4o-mini",
        {
            "gen_ai.operation.name": "chat",
            "gen_ai.input.messages": js([user("hi")]),
            "error.type": "openai.RateLimitError",
        },
        status="error",
        status_message="Error code: 429 - Rate limit",
    )
    turn = turn_from_trace(t.spans)
    assert turn is not None
    assert turn.user_text == "hi" and turn.assistant_text == ""
    assert turn.error == "Error code: 429 - Rate limit"


def test_traces_without_llm_content_return_none():
    assert turn_from_trace([]) is None
    http = Span(trace_id="1" * 32, span_id="1" * 16, name="POST /checkout", attributes={"http.request.method": "POST"})
    child = Span(
        trace_id="1" * 32, span_id="2" * 16, parent_id="1" * 16, name="SELECT", attributes={"db.system": "postgresql"}
    )
    assert turn_from_trace([http, child]) is None
    no_content = Span(
        trace_id="1" * 32,
        span_id="3" * 16,
        name="chat gpt-4o-mini",
        attributes={"gen_ai.operation.name": "chat", "gen_ai.usage.input_tokens": 5},
    )
    assert turn_from_trace([no_content]) is None


def test_nested_llm_spans_and_duplicate_delivery_count_once():
    t = TraceBuilder("2" * 32, 0)
    outer = t.chat("2000000000000001", None, [user("Q?")], [answer("A.")], tokens=(10, 1))
    t.chat("2000000000000002", "2000000000000001", [user("Q?")], [answer("A.")], tokens=(10, 1))
    turn = turn_from_trace([*t.spans, outer])
    assert turn is not None
    assert [(m.role, m.content) for m in turn.messages] == [("user", "Q?"), ("assistant", "A.")]
    assert (turn.input_tokens, turn.output_tokens) == (10, 1)


def test_legacy_events_single_chat_span():
    """openai-v2 2.4b0 default: the chat span is the root, content in log events merged onto it."""

    def ev(name, body, t):
        return SpanEvent(name=name, time_ns=t, attributes={"gen_ai.system": "openai"}, body=body)

    span = Span(
        trace_id="3" * 32,
        span_id="3" * 16,
        name="chat gpt-4o-mini",
        start_ns=1,
        end_ns=9,
        attributes={
            "gen_ai.system": "openai",
            "gen_ai.operation.name": "chat",
            "gen_ai.request.model": "gpt-4o-mini",
            "gen_ai.usage.input_tokens": 20,
            "gen_ai.usage.output_tokens": 4,
        },
        events=[
            ev(
                "gen_ai.choice",
                {"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "57F."}},
                3,
            ),
            ev("gen_ai.system.message", {"content": "You are terse."}, 2),
            ev("gen_ai.user.message", {"content": "Weather?"}, 2),
        ],
    )
    turn = turn_from_trace([span])
    assert turn is not None
    assert [(m.role, m.content) for m in turn.messages] == [("user", "Weather?"), ("assistant", "57F.")]
    assert turn.finish_reason == "stop" and turn.model == "gpt-4o-mini"
    assert system_prompt([span]) == "You are terse."


def test_openinference_agent_root_llm_and_failed_tool():
    trace = "4" * 32
    root = Span(
        trace_id=trace,
        span_id="4000000000000001",
        name="Agent",
        start_ns=1,
        end_ns=100,
        attributes={
            "openinference.span.kind": "AGENT",
            "input.value": "Cancel order 7",
            "output.value": "Sorry, I could not cancel it.",
            "session.id": "sess-9",
        },
    )
    llm = Span(
        trace_id=trace,
        span_id="4000000000000002",
        parent_id=root.span_id,
        name="ChatCompletion",
        start_ns=2,
        attributes={
            "openinference.span.kind": "LLM",
            "llm.input_messages.0.message.role": "system",
            "llm.input_messages.0.message.content": "You help with orders.",
            "llm.input_messages.1.message.role": "user",
            "llm.input_messages.1.message.content": "Cancel order 7",
            "llm.output_messages.0.message.role": "assistant",
            "llm.output_messages.0.message.tool_calls.0.tool_call.id": "call_x",
            "llm.output_messages.0.message.tool_calls.0.tool_call.function.name": "cancel_order",
            "llm.output_messages.0.message.tool_calls.0.tool_call.function.arguments": '{"order_id": 7}',
            "llm.model_name": "gpt-4o",
            "llm.token_count.prompt": 30,
            "llm.token_count.completion": 8,
        },
    )
    tool = Span(
        trace_id=trace,
        span_id="4000000000000003",
        parent_id=root.span_id,
        name="cancel_order",
        start_ns=3,
        status="error",
        attributes={
            "openinference.span.kind": "TOOL",
            "tool.name": "cancel_order",
            "tool.id": "call_x",
            "input.value": '{"order_id": 7}',
        },
        events=[
            SpanEvent(
                name="exception",
                attributes={"exception.type": "PermissionError", "exception.message": "order already shipped"},
            )
        ],
    )
    thread = thread_from_traces("oi", [[tool, llm, root]])
    (turn,) = thread.turns
    assert thread.conversation_id == "sess-9"
    assert thread.system_prompt == "You help with orders."
    assert [(m.role, m.content) for m in turn.messages] == [
        ("user", "Cancel order 7"),
        ("assistant", ""),
        ("assistant", "Sorry, I could not cancel it."),
    ]
    (call,) = turn.tool_calls
    assert (call.id, call.span_id, call.error) == ("call_x", tool.span_id, "PermissionError: order already shipped")
    assert (turn.model, turn.input_tokens, turn.output_tokens) == ("gpt-4o", 30, 8)


def test_traceloop_workflow_with_flattened_llm_and_tool():
    trace = "5" * 32
    wf = Span(
        trace_id=trace,
        span_id="5000000000000001",
        name="support.workflow",
        start_ns=1,
        attributes={
            "traceloop.span.kind": "workflow",
            "traceloop.entity.input": '{"args": ["Where is my parcel?"], "kwargs": {}}',
            "traceloop.entity.output": '"It arrives tomorrow."',
            "traceloop.association.properties.session_id": "tl-1",
        },
    )
    llm = Span(
        trace_id=trace,
        span_id="5000000000000002",
        parent_id=wf.span_id,
        name="openai.chat",
        start_ns=2,
        attributes={
            "llm.request.type": "chat",
            "gen_ai.prompt.0.role": "user",
            "gen_ai.prompt.0.content": "Where is my parcel?",
            "gen_ai.completion.0.role": "assistant",
            "gen_ai.completion.0.finish_reason": "tool_calls",
            "gen_ai.completion.0.tool_calls.0.id": "c1",
            "gen_ai.completion.0.tool_calls.0.name": "track",
            "gen_ai.completion.0.tool_calls.0.arguments": '{"id": "P1"}',
            "gen_ai.usage.prompt_tokens": 12,
            "gen_ai.usage.completion_tokens": 4,
        },
    )
    tool = Span(
        trace_id=trace,
        span_id="5000000000000003",
        parent_id=wf.span_id,
        name="track.tool",
        start_ns=3,
        attributes={
            "traceloop.span.kind": "tool",
            "traceloop.entity.name": "track",
            "traceloop.entity.input": '{"args": [], "kwargs": {"id": "P1"}}',
            "traceloop.entity.output": '"in transit"',
        },
    )
    turn = turn_from_trace([wf, llm, tool])
    assert turn is not None
    assert turn.user_text == "Where is my parcel?" and turn.assistant_text == "It arrives tomorrow."
    (call,) = turn.tool_calls
    assert (call.id, call.result, call.span_id, call.error) == ("c1", "in transit", tool.span_id, None)
    assert (turn.input_tokens, turn.output_tokens) == (12, 4)


def test_langfuse_generation_and_tool_observations():
    trace = "6" * 32
    root = Span(
        trace_id=trace,
        span_id="6000000000000001",
        name="chat-turn",
        start_ns=1,
        attributes={
            "langfuse.session.id": "lf-7",
            "session.id": "ignored",
            "langfuse.observation.type": "span",
            "langfuse.trace.input": '"Book a table for 2"',
            "langfuse.trace.output": '"Booked for 19:00."',
        },
    )
    gen = Span(
        trace_id=trace,
        span_id="6000000000000002",
        parent_id=root.span_id,
        name="generation",
        start_ns=2,
        attributes={
            "langfuse.observation.type": "generation",
            "langfuse.observation.input": '[{"role": "user", "content": "Book a table for 2"}]',
            "langfuse.observation.output": '{"role": "assistant", "content": "", "tool_calls": [{"id": "t1", "type": "function", '
            '"function": {"name": "book", "arguments": "{\\"people\\": 2}"}}]}',
            "langfuse.observation.usage_details": {"input": 9, "output": 6},
        },
    )
    tool = Span(
        trace_id=trace,
        span_id="6000000000000003",
        parent_id=root.span_id,
        name="book",
        start_ns=3,
        attributes={
            "langfuse.observation.type": "tool",
            "langfuse.observation.level": "ERROR",
            "langfuse.observation.status_message": "restaurant API 503",
        },
    )
    thread = thread_from_traces("lf", [[root, gen, tool]], source="langfuse")
    (turn,) = thread.turns
    assert thread.conversation_id == "lf-7"
    assert turn.user_text == "Book a table for 2" and turn.assistant_text == "Booked for 19:00."
    (call,) = turn.tool_calls
    assert (call.name, call.arguments, call.error, call.span_id) == (
        "book",
        {"people": 2},
        "restaurant API 503",
        tool.span_id,
    )
    assert (turn.input_tokens, turn.output_tokens) == (9, 6)


# --- the real OpenTelemetry SDK and OTLP encoder -------------------------------------------------


def _sdk_spans(build) -> list[Span]:
    """Run `build(provider)` under a real TracerProvider; encode with the OTLP exporter's encoder and decode."""
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": "support-bot"}))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    build(provider)
    provider.shutdown()
    req = encode_spans(exporter.get_finished_spans())
    decoded = decode_traces(req.SerializeToString(), "application/x-protobuf")
    assert decoded.rejected == 0
    return decoded.spans


def test_real_sdk_spans_roundtrip_through_otlp_protobuf():
    from opentelemetry.trace import SpanKind, Status, StatusCode

    def turn(tracer, conv: str, question: str, history: list, city: str, fail: bool) -> None:
        with tracer.start_as_current_span(
            "invoke_agent support",
            kind=SpanKind.INTERNAL,
            attributes={"gen_ai.operation.name": "invoke_agent", "gen_ai.conversation.id": conv},
        ):
            inputs = [SYSTEM, *history, user(question)]
            call = calls((f"call_{city}", "get_weather", {"location": city}))
            with tracer.start_as_current_span("chat gpt-4o-mini", kind=SpanKind.CLIENT) as chat:
                chat.set_attribute("gen_ai.operation.name", "chat")
                chat.set_attribute("gen_ai.request.model", "gpt-4o-mini")
                chat.set_attribute("gen_ai.usage.input_tokens", 40)
                chat.set_attribute("gen_ai.usage.output_tokens", 8)
                chat.set_attribute("gen_ai.response.finish_reasons", ["tool_calls"])
                chat.set_attribute("gen_ai.input.messages", inputs)  # structured (array of kvlists)
                chat.set_attribute(
                    "gen_ai.output.messages", js([{**call, "finish_reason": "tool_call"}])
                )  # JSON string
            with tracer.start_as_current_span("execute_tool get_weather") as tool:
                tool.set_attribute("gen_ai.operation.name", "execute_tool")
                tool.set_attribute("gen_ai.tool.name", "get_weather")
                tool.set_attribute("gen_ai.tool.call.id", f"call_{city}")
                if fail:
                    tool.record_exception(ConnectionError("weather API unreachable"))
                    tool.set_status(Status(StatusCode.ERROR, "weather API unreachable"))
                else:
                    tool.set_attribute("gen_ai.tool.call.result", "sunny")
            with tracer.start_as_current_span("chat gpt-4o-mini", kind=SpanKind.CLIENT) as chat:
                chat.set_attribute("gen_ai.operation.name", "chat")
                chat.set_attribute("gen_ai.response.id", f"resp-{city}")
                chat.set_attribute("gen_ai.input.messages", js([*inputs, call, result(f"call_{city}", "sunny")]))
                chat.set_attribute(
                    "gen_ai.output.messages", [{**answer(f"{city}: see above."), "finish_reason": "stop"}]
                )

    def build(provider) -> None:
        tracer = provider.get_tracer("test.genai")
        turn(tracer, "conv-sdk", "Weather in Oslo?", [], "Oslo", fail=False)
        turn(
            tracer,
            "conv-sdk",
            "And Bergen?",
            [user("Weather in Oslo?"), answer("Oslo: see above.")],
            "Bergen",
            fail=True,
        )

    spans = _sdk_spans(build)
    assert isinstance(
        next(s for s in spans if s.name.startswith("chat")).attributes.get("gen_ai.output.messages"), (str, list)
    )
    traces: dict[str, list[Span]] = {}
    for s in spans:
        traces.setdefault(s.trace_id, []).append(s)
    assert len(traces) == 2
    thread = thread_from_traces("otlp:conv-sdk", list(traces.values()))

    assert thread.conversation_id == "conv-sdk"
    assert thread.system_prompt == "You are terse."
    assert [t.user_text for t in thread.turns] == ["Weather in Oslo?", "And Bergen?"]
    assert [t.assistant_text for t in thread.turns] == ["Oslo: see above.", "Bergen: see above."]
    assert [m.position for m in thread.messages] == list(range(len(thread.messages)))
    ok_call, failed_call = (t.tool_calls[0] for t in thread.turns)
    assert ok_call.error is None and ok_call.result == "sunny" and ok_call.span_id is not None
    assert failed_call.error == "weather API unreachable"
    assert failed_call.span_id == next(
        s.span_id for s in traces[thread.turns[1].trace_id] if s.name.startswith("execute_tool")
    )
    assert thread.turns[0].input_tokens == 40 and thread.turns[0].response_id == "resp-Oslo"
    assert thread.turns[0].messages[1].finish_reason == "tool_call"


def test_real_sdk_legacy_log_events_joined_to_the_span():
    """openai-v2 style: content in log records with event_name, parented to the chat span."""
    from opentelemetry import trace
    from opentelemetry.exporter.otlp.proto.common._log_encoder import encode_logs
    from opentelemetry.sdk._logs import LoggerProvider
    from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter, SimpleLogRecordProcessor

    log_exporter = InMemoryLogRecordExporter()
    logger_provider = LoggerProvider()
    logger_provider.add_log_record_processor(SimpleLogRecordProcessor(log_exporter))
    logger = logger_provider.get_logger("opentelemetry.instrumentation.openai_v2")

    def build(provider) -> None:
        tracer = provider.get_tracer("test.openai_v2")
        with tracer.start_as_current_span(
            "chat gpt-4o-mini", attributes={"gen_ai.system": "openai", "gen_ai.operation.name": "chat"}
        ) as span:
            ctx = trace.set_span_in_context(span)
            for name, body in [
                ("gen_ai.system.message", {"content": "You are terse."}),
                ("gen_ai.user.message", {"content": "Weather in Paris?"}),
                (
                    "gen_ai.choice",
                    {
                        "index": 0,
                        "finish_reason": "tool_calls",
                        "message": {
                            "role": "assistant",
                            "tool_calls": [
                                {
                                    "id": "call_1",
                                    "type": "function",
                                    "function": {"name": "get_weather", "arguments": '{"location": "Paris"}'},
                                }
                            ],
                        },
                    },
                ),
            ]:
                logger.emit(context=ctx, event_name=name, body=body, attributes={"gen_ai.system": "openai"})

    spans = _sdk_spans(build)
    logger_provider.shutdown()
    logs = decode_logs(encode_logs(log_exporter.get_finished_logs()).SerializeToString(), "application/x-protobuf").logs
    assert {log.event.name for log in logs} == {"gen_ai.system.message", "gen_ai.user.message", "gen_ai.choice"}
    (span,) = spans
    span.events.extend(log.event for log in logs if (log.trace_id, log.span_id) == (span.trace_id, span.span_id))

    turn = turn_from_trace(spans)
    assert turn is not None
    assert turn.user_text == "Weather in Paris?"
    (call,) = turn.tool_calls
    assert (call.id, call.name, call.arguments) == ("call_1", "get_weather", {"location": "Paris"})
    assert turn.finish_reason == "tool_calls"
    assert system_prompt(spans) == "You are terse."


@pytest.mark.parametrize("reverse", [False, True])
def test_root_is_the_earliest_parentless_span(reverse):
    t = TraceBuilder("7" * 32, 0)
    t.add(
        "7000000000000001", "ffffffffffffffff", "remote-parented handler", {"gen_ai.conversation.id": "c"}
    )  # parent elsewhere
    t.chat("7000000000000002", "7000000000000001", [user("x")], [answer("y")])
    spans = list(reversed(t.spans)) if reverse else t.spans
    turn = turn_from_trace(spans)
    assert turn is not None and turn.root_span_id == "7000000000000001"


# --- real instrumentations (OpenAI client over a mock transport) -------------------------------


def _openai_agent_loop(tracer, client, city: str, tool_span) -> None:
    """The canonical tool loop: ask, run the requested tool, ask again with the result."""
    tools = [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}]
    messages = [{"role": "system", "content": "You are terse."}, {"role": "user", "content": f"Weather in {city}?"}]
    first = client.chat.completions.create(model="gpt-4o-mini", messages=messages, tools=tools)
    call = first.choices[0].message.tool_calls[0]
    with tracer.start_as_current_span(f"tool {call.function.name}") as span:
        tool_span(span, call.id, call.function.name)
    messages += [
        first.choices[0].message.model_dump(exclude_none=True),
        {"role": "tool", "tool_call_id": call.id, "content": "rainy, 57F"},
    ]
    client.chat.completions.create(model="gpt-4o-mini", messages=messages, tools=tools)


def _fake_openai():
    import httpx2
    import openai

    calls_seen = []

    def handler(request):
        calls_seen.append(request)
        if len(calls_seen) % 2:
            message = {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": f"call_{len(calls_seen)}",
                        "type": "function",
                        "function": {"name": "get_weather", "arguments": '{"location": "Paris"}'},
                    }
                ],
            }
            finish = "tool_calls"
        else:
            message, finish = {"role": "assistant", "content": "Rainy, 57F."}, "stop"
        return httpx2.Response(
            200,
            json={
                "id": f"chatcmpl-{len(calls_seen)}",
                "object": "chat.completion",
                "created": 1,
                "model": "gpt-4o-mini-2024-07-18",
                "choices": [{"index": 0, "message": message, "finish_reason": finish}],
                "usage": {"prompt_tokens": 50, "completion_tokens": 7, "total_tokens": 57},
            },
        )

    return openai.OpenAI(
        api_key="sk-test",
        base_url="http://fake.invalid/v1",
        http_client=httpx2.Client(transport=httpx2.MockTransport(handler)),
    )


@pytest.mark.parametrize("flavour", ["genai-openai", "openinference"])
def test_real_instrumentation_output_assembles(flavour, monkeypatch):
    from opentelemetry.trace import Status, StatusCode

    monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "SPAN_ONLY")
    if flavour == "genai-openai":
        from opentelemetry.instrumentation.genai.openai import OpenAIInstrumentor

        root_attrs = {"gen_ai.operation.name": "invoke_agent", "gen_ai.conversation.id": "conv-real"}

        def tool_span(span, call_id, name):
            span.set_attributes(
                {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": name, "gen_ai.tool.call.id": call_id}
            )
            span.set_status(Status(StatusCode.ERROR, "upstream 503"))
    else:
        from openinference.instrumentation.openai import OpenAIInstrumentor

        root_attrs = {"openinference.span.kind": "CHAIN", "session.id": "conv-real"}

        def tool_span(span, call_id, name):
            span.set_attributes(
                {
                    "openinference.span.kind": "TOOL",
                    "tool.name": name,
                    "tool.id": call_id,
                    "input.value": '{"location": "Paris"}',
                    "output.value": "Error: upstream 503",
                }
            )

    instrumentor = OpenAIInstrumentor()
    client = _fake_openai()

    def build(provider) -> None:
        tracer = provider.get_tracer("test.app")
        instrumentor.instrument(tracer_provider=provider)
        try:
            with tracer.start_as_current_span("turn", attributes=root_attrs):
                _openai_agent_loop(tracer, client, "Paris", tool_span)
        finally:
            instrumentor.uninstrument()

    spans = _sdk_spans(build)
    turn = turn_from_trace(spans)
    assert turn is not None
    assert [m.role for m in turn.messages] == ["user", "assistant", "tool", "assistant"]
    assert turn.user_text == "Weather in Paris?"
    assert turn.assistant_text == "Rainy, 57F."
    (call,) = turn.tool_calls
    assert (call.id, call.name, call.arguments) == ("call_1", "get_weather", {"location": "Paris"})
    assert call.span_id == next(s.span_id for s in spans if s.name == "tool get_weather")
    assert call.error is not None and "upstream 503" in call.error
    assert (turn.input_tokens, turn.output_tokens) == (100, 14)
    assert turn.model == "gpt-4o-mini-2024-07-18"
    assert turn.finish_reason == "stop"
    assert system_prompt(spans) == "You are terse."
    assert thread_from_traces("k", [spans]).conversation_id == "conv-real"
