"""The drain's shortcuts write and read exactly what the general paths do: the outbox payload built
from serialised parts, the anchors shared by a thread's results, JSON histories read back without
parsing their messages, and flattened histories regrouped from the nodes they were read from."""

from __future__ import annotations

import json
from collections import defaultdict
from typing import Any

import orjson
import pydantic_core
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.support.results import score_result
from tests.test_history import keys, values
from tests.test_turn_tail import _example_traces, _workload_traces
from tracing_eval import conventions
from tracing_eval.assemble import thread_from_traces, trace_part
from tracing_eval.conventions.messages import role_of, roles_of
from tracing_eval.conventions.values import indexed, stored_items
from tracing_eval.delivery import Anchor, Anchors, anchor, result_payload
from tracing_eval.model import MetricResult, Scope, Span
from tracing_eval.store import history
from tracing_eval.store.base import Outgoing
from tracing_eval.store.history import Chains, Histories, Nodes, read_span, span_record

ANCHORS = [
    Anchor(),
    Anchor(trace_id="a" * 32, span_id="b" * 16, response_id="chatcmpl-1", start_ns=1_700_000_000_123_456_789),
    Anchor(trace_id="t", conversation_id='conv "quoted" \\ é 漢字 \x01\n', environment="prod-eu_1"),
    Anchor(start_ns=2**62, environment="ünïcode/slash", span_id="0" * 16),
]
RESULTS = [
    score_result("task_completion", 0.8125, threshold=0.5, reason="done \u2028 ok", evidence={"n": [1, 2.5, None]}),
    score_result("friction", 0.1, threshold=None, scope=Scope.TURN, turn_index=3, label="high", evidence={"é": "x"}),
    MetricResult(metric="m", scope=Scope.TURN, turn_index=0, status="error", error="boom", duration_ms=12.75),
]
KEYS = ["otlp:conv-1", "otlp:trace:abc", "langfuse:sess with space"]


@pytest.mark.parametrize("where", ANCHORS)
@pytest.mark.parametrize("key", KEYS)
def test_result_payload_is_the_delivery_payload_byte_for_byte(where: Anchor, key: str) -> None:
    for i, result in enumerate(RESULTS):
        o = Outgoing(f"id-{i}", "thread" if i == 0 else f"trace:{i}", result, where)
        data = pydantic_core.to_json(result)
        expected = o.delivery(key, 7).payload(data)
        got = result_payload(o.id, key, 7, o.target, pydantic_core.to_json(where), data)
        assert got == expected


def _span(trace: str, span: str, start: int, attrs: dict[str, object]) -> Span:
    return Span(trace_id=trace, span_id=span, name="chat", start_ns=start, end_ns=start + 5, attributes=attrs)


def test_anchors_are_those_anchor_builds_for_every_turn() -> None:
    traces = [
        [
            _span(
                f"t{n}",
                f"s{n}",
                1000 * (3 - n),  # started in reverse order: the earliest trace is the last one
                {
                    "gen_ai.operation.name": "chat",
                    "gen_ai.conversation.id": "c",
                    "langfuse.environment": f"env{n}",
                    "gen_ai.input.messages": f'[{{"role":"user","parts":[{{"type":"text","content":"q{n}"}}]}}]',
                    "gen_ai.output.messages": f'[{{"role":"assistant","parts":[{{"type":"text","content":"a{n}"}}]}}]',
                },
            )
        ]
        for n in range(3)
    ]
    parts = [trace_part(spans) for spans in traces]
    thread = thread_from_traces("otlp:c", traces)
    assert len(thread.turns) == 3
    anchors = Anchors(thread, parts)
    for index in (None, 0, 1, 2, 7):
        assert anchors.of(index) == anchor(thread, index, parts)
        assert anchors.of(index) is anchors.of(index)  # built once


def _stored_and_read_back(traces: list[list[Span]]) -> list[list[Span]]:
    """Every trace's spans through the store's split and read back, traces of one conversation
    sharing their thread's nodes and chains as the store shares them."""
    chains, nodes_of = Chains(), defaultdict(dict)
    records = []
    for spans in traces:
        key = next(filter(None, map(conventions.thread_id, spans)), spans[0].trace_id)
        records.append([(key, span_record(s, nodes_of[key], chains, key)) for s in spans])
    histories = {key: Histories(nodes) for key, nodes in nodes_of.items()}  # one per thread, as a load reads them
    return [[read_span(data, histories[key]) for key, data in trace] for trace in records]


def _json_text(value: object) -> bool:
    return isinstance(value, str) and value.lstrip()[:1] in ("[", "{")


@pytest.mark.parametrize("source", ["examples", "workload"])
def test_spans_read_back_give_the_same_groups_json_and_turns(source: str) -> None:
    traces = {"examples": _example_traces, "workload": _workload_traces}[source]()
    back = _stored_and_read_back(traces)
    grouped = decoded = 0
    for spans, read in zip(traces, back, strict=True):
        for s, r in zip(spans, read, strict=True):
            for prefix in (
                "llm.input_messages.",
                "llm.output_messages.",
                "gen_ai.prompt.",
                "gen_ai.completion.",
                "llm.",
            ):
                assert indexed(r.attributes, prefix) == indexed(dict(r.attributes), prefix)
                grouped += prefix in getattr(r.attributes, "groups", {})
            for key, value in s.attributes.items():
                if _json_text(value):  # inline as it came, or compact JSON of the same value (a history)
                    assert r.attributes[key] in (value, orjson.dumps(orjson.loads(value)).decode())
                items = stored_items(r.attributes, key)
                if items is not None:  # decoded already: what decoding the text gives
                    assert items == orjson.loads(r.attributes[key])
                    decoded += 1
    assert grouped > 0
    assert decoded > 0 or source == "examples"
    assert [trace_part(r).model_dump() for r in back] == [trace_part(s).model_dump() for s in traces]


def test_decoded_items_are_used_only_while_the_key_holds_their_text() -> None:
    [[span]] = _stored_and_read_back(
        [[_span("t", "s", 1, {"gen_ai.input.messages": json.dumps([{"role": "user", "content": "x" * 80}] * 2)})]]
    )
    attrs = span.attributes
    assert stored_items(attrs, "gen_ai.input.messages") == [{"role": "user", "content": "x" * 80}] * 2
    attrs["gen_ai.input.messages"] = '[{"role":"user","content":"changed"}]'
    assert stored_items(attrs, "gen_ai.input.messages") is None
    assert [m.content for m in conventions.turn_inputs(span)] == ["changed"]
    assert stored_items({"gen_ai.input.messages": "[]"}, "gen_ai.input.messages") is None


def test_a_prefix_inside_a_flattened_history_is_looked_for_in_it() -> None:
    attrs: dict[str, Any] = {"llm.model_name": "m", "llm.output_messages.0.message.role": "assistant"}
    for i in range(12):
        attrs[f"llm.input_messages.{i}.message.role"] = "user"
        attrs[f"llm.input_messages.{i}.message.content"] = f"message number {i} " * 4
    [[span]] = _stored_and_read_back([[_span("t", "s", 1, attrs)]])
    assert "llm.input_messages." in span.attributes.groups  # type: ignore[attr-defined]
    for prefix in ("llm.input_messages.1", "llm.output_messages.", "llm.input_messages.", "llm.model"):
        assert indexed(span.attributes, prefix) == indexed(dict(span.attributes), prefix)
    assert [g["message.content"] for g in indexed(span.attributes, "llm.input_messages.1")] == [
        attrs["llm.input_messages.10.message.content"],
        attrs["llm.input_messages.11.message.content"],
    ]


@given(
    st.lists(
        st.one_of(
            st.sampled_from(["user", "AI", " Model ", "developer", "tool", "x"]),
            st.none(),
            st.integers(),
            st.lists(st.text(max_size=2), max_size=2),
        )
    )
)
def test_roles_of_is_role_of_of_each_value(raw: list[Any]) -> None:
    for default in (None, "assistant"):
        assert roles_of(raw, default) == [role_of(value, default) for value in raw]


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(keys, values | values.map(lambda v: json.dumps(v)), max_size=8))
def test_json_histories_read_back_as_their_compact_json(attrs: dict[str, Any]) -> None:
    nodes: Nodes = {}
    read = read_span(span_record(_span("t", "s", 1, attrs), nodes, Chains(), "otlp:c"), Histories(nodes))
    for key, value in attrs.items():
        if _json_text(value):
            try:
                expected = orjson.dumps(orjson.loads(value)).decode()
            except orjson.JSONDecodeError:
                expected = value
            assert read.attributes[key] in (expected, value)
    for prefix in ("llm.input_messages.", "gen_ai.prompt."):
        assert indexed(read.attributes, prefix) == indexed(dict(read.attributes), prefix)


def _request(n: int, *, tags: int = 0, spacing: tuple[str, str] = (", ", ": ")) -> str:
    messages = [{"role": "user" if i % 2 == 0 else "assistant", "content": f"message {i} of a chat"} for i in range(n)]
    if tags:  # a list inside the last message
        messages[-1] = {**messages[-1], "tags": [{"t": j} for j in range(tags)]}
    return json.dumps({"model": "m", "messages": messages, "temperature": 0.2}, separators=spacing)


@pytest.mark.parametrize(
    "texts",
    [
        [_request(n) for n in range(1, 7)],  # a conversation that grows
        [
            _request(1, tags=1),
            _request(1, tags=2),
            _request(1, tags=3),
            _request(2),
        ],  # a list in the last message grows
        [_request(1), _request(2), _request(3, spacing=(",", ":")), _request(4), _request(4)],  # respaced, resent
        [_request(3), _request(2), _request(3), _request(5)],  # shrinks, then grows again
    ],
)
def test_a_request_object_that_grows_stores_what_a_fresh_split_stores(texts: list[str]) -> None:
    chains, nodes = Chains(), {}
    for i, text in enumerate(texts):
        span = _span(f"{i + 1:032x}", "c" * 16, i, {"input.value": text})
        fresh: Nodes = {}
        assert span_record(span, nodes, chains, "otlp:c") == span_record(span, fresh, Chains(), "otlp:c")
        read = read_span(span_record(span, {}, Chains(), "otlp:c"), Histories({**nodes, **fresh}))
        assert orjson.loads(read.attributes["input.value"]) == json.loads(text)


def test_a_growing_request_object_is_parsed_only_where_it_grew(monkeypatch: pytest.MonkeyPatch) -> None:
    chains, nodes = Chains(), {}
    parsed: list[int] = []
    loads = orjson.loads
    monkeypatch.setattr(history.orjson, "loads", lambda text: parsed.append(len(text)) or loads(text))
    texts = [_request(n) for n in range(1, 8)]
    for i, text in enumerate(texts):
        span_record(_span(f"{i + 1:032x}", "c" * 16, i, {"input.value": text}), nodes, chains, "otlp:c")
    # the first two whole (the second shows where `messages` closes), then only what was appended
    assert parsed[0] == len(texts[0]) and len(texts[1]) in parsed
    assert all(size < len(texts[1]) for size in parsed[parsed.index(len(texts[1])) + 2 :])
