"""Message forms of agent frameworks (LangChain/LangGraph, Strands, the Vercel AI SDK) and the
precedence rules that keep an outer span from hiding the model call inside it.

The recorded spans of the real libraries are checked end to end in tests/conformance; these are
the smaller forms each convention must read, including older SDK versions the corpus does not hold.
"""

from __future__ import annotations

import orjson
import pytest

from tracing_eval import conventions
from tracing_eval.assemble import turn_from_trace
from tracing_eval.conventions.messages import converse_messages, payload_messages
from tracing_eval.conventions.values import result_text
from tracing_eval.model import Span, SpanEvent

TRACE = "c" * 32


def js(value) -> str:
    return orjson.dumps(value).decode()


def span(span_id: str, parent: str | None, name: str, attrs: dict, *, events=(), start: int = 0) -> Span:
    return Span(
        trace_id=TRACE,
        span_id=span_id,
        parent_id=parent,
        name=name,
        start_ns=start or int(span_id, 16),
        end_ns=(start or int(span_id, 16)) + 10,
        attributes=attrs,
        events=[SpanEvent(name=n, attributes=a) for n, a in events],
    )


# -- LangChain / LangGraph ----------------------------------------------------------------------


def lc(kind: str, **data) -> dict:
    return {"type": kind, "data": {"type": kind, "additional_kwargs": {}, "response_metadata": {}, **data}}


def test_langchain_messages_to_dict_form_is_read_with_tool_calls_and_finish_reason():
    state = {
        "messages": [
            lc("human", content="Where is A1?"),
            lc(
                "ai", content="", tool_calls=[{"name": "lookup", "args": {"id": "A1"}, "id": "c1", "type": "tool_call"}]
            ),
            lc("tool", content="shipped", tool_call_id="c1", name="lookup"),
            lc("ai", content="It shipped.", response_metadata={"finish_reason": "stop"}),
        ]
    }
    messages = payload_messages(js(state), output=True)
    assert [(m.role, m.content) for m in messages] == [
        ("user", "Where is A1?"),
        ("assistant", ""),
        ("tool", "shipped"),
        ("assistant", "It shipped."),
    ]
    assert [(c.id, c.name, c.arguments) for c in messages[1].tool_calls] == [("c1", "lookup", {"id": "A1"})]
    assert messages[2].tool_call_id == "c1" and messages[3].finish_reason == "stop"


def oi_llm(span_id: str, parent: str, answer: str) -> Span:
    return span(
        span_id,
        parent,
        "ChatOpenAI",
        {
            "openinference.span.kind": "LLM",
            "llm.input_messages.0.message.role": "user",
            "llm.input_messages.0.message.content": "Hi?",
            "llm.output_messages.0.message.role": "assistant",
            "llm.output_messages.0.message.content": answer,
            "llm.finish_reason": "stop",
        },
    )


@pytest.mark.parametrize(
    "root_output",
    [
        js({"messages": [lc("human", content="Hi?"), {"type": "ai", "data": {"id": "x"}}]}),  # a form it cannot read
        js({"messages": [lc("human", content="Hi?"), lc("ai", content="")]}),  # empty
        None,  # missing
    ],
)
def test_an_empty_or_missing_answer_on_the_root_never_hides_the_model_calls(root_output):
    attrs = {"openinference.span.kind": "CHAIN", "input.value": js({"messages": [{"role": "user", "content": "Hi?"}]})}
    if root_output is not None:
        attrs["output.value"] = root_output
    turn = turn_from_trace([span("1", None, "LangGraph", attrs), oi_llm("2", "1", "Hello there!")])
    assert (turn.user_text, turn.assistant_text, turn.answer_unknown) == ("Hi?", "Hello there!", None)


def test_a_root_answer_that_says_something_still_wins():
    attrs = {"openinference.span.kind": "CHAIN", "output.value": "Hello (edited by the app)!"}
    turn = turn_from_trace([span("1", None, "chain", attrs), oi_llm("2", "1", "Hello there!")])
    assert turn.assistant_text == "Hello (edited by the app)!"


# -- Strands: Bedrock Converse blocks in the GenAI events ----------------------------------------------------


def test_converse_blocks_are_text_tool_uses_and_tool_results():
    use = {"toolUse": {"toolUseId": "t1", "name": "lookup", "input": {"id": "A1"}}}
    [call] = converse_messages("assistant", js([{"text": "Checking."}, use]))
    assert (call.content, [(c.id, c.name, c.arguments) for c in call.tool_calls]) == (
        "Checking.",
        [("t1", "lookup", {"id": "A1"})],
    )
    result = {"toolResult": {"toolUseId": "t1", "status": "success", "content": [{"text": "a"}, {"text": "b"}]}}
    [tool] = converse_messages("user", [result])
    assert (tool.role, tool.content, tool.tool_call_id) == ("tool", "a\nb", "t1")
    assert converse_messages("user", js([{"text": "Hi"}]))[0].content == "Hi"
    for other in ('[{"type": "text", "text": "x"}]', "plain text", "[]", js([{"role": "user"}]), None):
        assert converse_messages("user", other) is None


def strands_chat(span_id: str, parent: str, history: list[tuple[str, list]], choice: tuple[object, str]) -> Span:
    events = [(f"gen_ai.{role}.message", {"content": js(blocks)}) for role, blocks in history]
    events.append(("gen_ai.choice", {"message": js(choice[0]), "finish_reason": choice[1]}))
    return span(span_id, parent, "chat", {"gen_ai.operation.name": "chat"}, events=events)


def test_strands_default_events_read_into_one_turn_with_the_tool_call_in_order():
    use = {"toolUse": {"toolUseId": "t1", "name": "lookup", "input": {"id": "A1"}}}
    done = {"toolResult": {"toolUseId": "t1", "status": "success", "content": [{"text": "shipped"}]}}
    root = span(
        "10",
        None,
        "invoke_agent Strands Agents",
        {"gen_ai.operation.name": "invoke_agent", "session.id": "s1"},
        events=[
            ("gen_ai.user.message", {"content": js([{"text": "Where is A1?"}])}),
            ("gen_ai.choice", {"message": "It shipped.\n", "finish_reason": "end_turn"}),  # a string, not JSON
        ],
    )
    cycle = {"gen_ai.operation.name": "execute_event_loop_cycle"}
    spans = [
        root,
        span("11", "10", "execute_event_loop_cycle", cycle, events=[("gen_ai.user.message", {"content": "[]"})]),
        strands_chat("12", "11", [("user", [{"text": "Where is A1?"}])], ([use], "tool_use")),
        span(
            "13",
            "11",
            "execute_tool lookup",
            {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "lookup", "gen_ai.tool.call.id": "t1"},
            events=[
                ("gen_ai.tool.message", {"role": "tool", "content": js({"id": "A1"}), "id": "t1"}),
                ("gen_ai.choice", {"message": js([{"text": "shipped"}]), "id": "t1"}),
            ],
        ),
        span("14", "10", "execute_event_loop_cycle", cycle),
        strands_chat(
            "15",
            "14",
            [("user", [{"text": "Where is A1?"}]), ("assistant", [use]), ("tool", [done])],
            ([{"text": "It shipped."}], "end_turn"),
        ),
    ]
    turn = turn_from_trace(spans)
    assert [(m.role, m.content) for m in turn.messages] == [
        ("user", "Where is A1?"),
        ("assistant", ""),
        ("tool", "shipped"),
        ("assistant", "It shipped."),
    ]
    [call] = turn.tool_calls
    assert (call.id, call.arguments, call.result, call.span_id) == ("t1", {"id": "A1"}, "shipped", "13")
    assert conventions.span_kind(spans[1]) == "other"
    assert conventions.tool_call(spans[3]).result == "shipped"  # from the execute_tool span's events alone


def test_a_wrapper_span_with_inputs_only_never_hides_the_model_calls_inside_it():
    """An agent-loop step of a framework nobody told us about, which repeats the chat's inputs."""
    history = js([{"role": "user", "parts": [{"type": "text", "content": "Hi?"}]}])
    out = js([{"role": "assistant", "parts": [{"type": "text", "content": "Hello!"}], "finish_reason": "stop"}])
    spans = [
        span("20", None, "agent run", {"gen_ai.operation.name": "invoke_agent"}),
        span("21", "20", "loop step", {"gen_ai.operation.name": "some_loop_step", "gen_ai.input.messages": history}),
        span("22", "21", "chat", {"gen_ai.operation.name": "chat", "gen_ai.input.messages": history}),
    ]
    spans[2].attributes["gen_ai.output.messages"] = out
    assert conventions.span_kind(spans[1]) == "llm"  # by its content alone...
    turn = turn_from_trace(spans)
    assert (turn.user_text, turn.assistant_text, turn.answer_unknown) == ("Hi?", "Hello!", None)  # ...but not the call


def test_text_blocks_as_tool_results():
    assert result_text([{"text": "a"}, {"type": "text", "text": "b"}]) == "a\nb"
    assert result_text([{"text": "a", "extra": 1}]) == '[{"text":"a","extra":1}]'
    assert result_text({"ok": True}) == '{"ok":true}'


# -- Vercel AI SDK -------------------------------------------------------------------------------


def ai(span_id: str, parent: str | None, operation: str, **attrs) -> Span:
    return span(span_id, parent, operation, {"ai.operationId": operation, **attrs})


def test_vercel_generate_text_with_a_tool_step():
    prompt = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": [{"type": "text", "text": "A1?"}]},
    ]
    call = {"type": "tool-call", "toolCallId": "c1", "toolName": "lookup", "input": {"id": "A1"}}
    result = {
        "type": "tool-result",
        "toolCallId": "c1",
        "toolName": "lookup",
        "output": {"type": "text", "value": "ok"},
    }
    spans = [
        ai(
            "30",
            None,
            "ai.generateText",
            **{
                "ai.telemetry.metadata.sessionId": "conv-9",
                "ai.prompt": js({"system": "Be brief.", "messages": [{"role": "user", "content": "A1?"}]}),
                "ai.response.text": "A1 shipped.",
            },
        ),
        ai(
            "31",
            "30",
            "ai.generateText.doGenerate",
            **{
                "ai.prompt.messages": js(prompt),
                "ai.response.toolCalls": js([{"toolCallId": "c1", "toolName": "lookup", "input": '{"id": "A1"}'}]),
                "ai.response.finishReason": "tool-calls",
                "gen_ai.request.model": "gpt-4o-mini",
            },
        ),
        ai(
            "32",
            "30",
            "ai.toolCall",
            **{
                "ai.toolCall.name": "lookup",
                "ai.toolCall.id": "c1",
                "ai.toolCall.args": '{"id":"A1"}',
                "ai.toolCall.result": '"ok"',
            },
        ),
        ai(
            "33",
            "30",
            "ai.generateText.doGenerate",
            **{
                "ai.prompt.messages": js(
                    [*prompt, {"role": "assistant", "content": [call]}, {"role": "tool", "content": [result]}]
                ),
                "ai.response.text": "A1 shipped.",
                "ai.response.finishReason": "stop",
            },
        ),
    ]
    assert [conventions.span_kind(s) for s in spans] == ["agent", "llm", "tool", "llm"]
    assert conventions.thread_id(spans[0]) == "conv-9"
    turn = turn_from_trace(spans)
    assert [(m.role, m.content) for m in turn.messages] == [
        ("user", "A1?"),
        ("assistant", ""),
        ("tool", "ok"),
        ("assistant", "A1 shipped."),
    ]
    [tc] = turn.tool_calls
    assert (tc.id, tc.name, tc.arguments, tc.result, tc.span_id) == ("c1", "lookup", {"id": "A1"}, "ok", "32")
    assert turn.finish_reason == "stop"
    assert conventions.system_instructions(spans[1]) == "Be brief."


def test_vercel_older_sdk_forms_and_a_bare_prompt():
    v4 = [
        {
            "role": "assistant",
            "content": [{"type": "tool-call", "toolCallId": "c1", "toolName": "f", "args": {"x": 1}}],
        },
        {"role": "tool", "content": [{"type": "tool-result", "toolCallId": "c1", "toolName": "f", "result": {"y": 2}}]},
    ]
    read = conventions.input_messages(ai("40", None, "ai.streamText.doStream", **{"ai.prompt.messages": js(v4)}))
    assert read[0].tool_calls[0].arguments == {"x": 1}
    assert (read[1].role, read[1].content, read[1].tool_call_id) == ("tool", '{"y":2}', "c1")
    bare = ai("41", None, "ai.generateText", **{"ai.prompt": js({"prompt": "Hello?"})})
    assert [(m.role, m.content) for m in conventions.input_messages(bare)] == [("user", "Hello?")]
    assert conventions.span_kind(ai("43", None, "ai.embed")) == "other"
    assert conventions.output_messages(ai("44", None, "ai.generateText.doGenerate")) == []  # nothing recorded
    assert conventions.input_messages(span("45", None, "x", {"ai.prompt.messages": js(v4)})) == []  # not the SDK's span
