"""Histories stored once per thread (`store/history.py`): spans read back as they came, histories that
extend each other share their nodes, and the process-local memories stay within their bounds."""

from __future__ import annotations

import json
from typing import Any

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st

from tracing_eval.model import Span, SpanEvent
from tracing_eval.store import history
from tracing_eval.store.history import Chains, Histories, KnownNodes, Nodes, read_event, read_span, span_record


def round_trip(span: Span, chains: Chains | None = None, nodes: Nodes | None = None) -> tuple[Span, bytes, Nodes]:
    nodes = {} if nodes is None else nodes
    data = span_record(span, nodes, chains or Chains(), "otlp:c")
    return read_span(data, Histories(nodes)), data, nodes


def same(a: Any, b: Any) -> bool:
    """Equal, counting a JSON string and the value it holds as equal (spacing is not kept)."""
    if isinstance(a, str) and isinstance(b, str) and a != b:
        try:
            return json.loads(a) == json.loads(b)
        except ValueError:
            return False
    return a == b


def messages(n: int, start: int = 0) -> list[dict[str, Any]]:
    roles = ("user", "assistant")
    return [{"role": roles[i % 2], "content": f"message number {i} with some words in it"} for i in range(start, n)]


def flat(prefix: str, msgs: list[dict[str, Any]]) -> dict[str, Any]:
    return {f"{prefix}{i}.message.{k}": v for i, m in enumerate(msgs) for k, v in m.items()}


def test_every_history_form_reads_back_and_the_stored_span_does_not_hold_it() -> None:
    history_json = json.dumps([{"role": "system", "content": "Be brief and polite, always."}, *messages(6)])
    request = json.dumps({"model": "gpt-4o", "messages": messages(5), "temperature": 0.2})
    attrs = {
        "gen_ai.input.messages": history_json,
        "input.value": request,
        "ai.prompt.messages": messages(4),  # structured, not a string
        "langfuse.observation.input": {"messages": messages(3), "tools": ["lookup"]},
        **flat("llm.input_messages.", messages(7)),
        "gen_ai.prompt.0.role": "user",
        "gen_ai.prompt.0.content": "a traceloop prompt long enough to count",
        "gen_ai.prompt.1.role": "assistant",
        "gen_ai.prompt.1.content": "and its answer, also long enough",
        "other": "kept as it is",
    }
    event = SpanEvent(
        name="gen_ai.client.inference.operation.details", attributes={"gen_ai.input.messages": messages(4)}
    )
    span = Span(trace_id="a" * 32, span_id="b" * 16, name="chat", attributes=attrs, events=[event])
    back, data, nodes = round_trip(span)
    assert set(back.attributes) == set(attrs)
    assert all(same(back.attributes[k], v) for k, v in attrs.items())
    assert isinstance(back.attributes["gen_ai.input.messages"], str)  # a string stays a string
    assert json.loads(back.attributes["input.value"]) == json.loads(request)  # keys in their order too
    assert list(json.loads(back.attributes["input.value"])) == ["model", "messages", "temperature"]
    assert back.events[0].attributes == event.attributes
    assert b"message number 1 " not in data  # every history went to the nodes
    assert len(nodes) > 0


def test_histories_that_extend_each_other_share_their_nodes() -> None:
    chains, nodes = Chains(), {}
    sizes = []
    for turn in range(1, 11):
        span = Span(
            trace_id=f"{turn:032x}", span_id="c" * 16, attributes=flat("llm.input_messages.", messages(2 * turn))
        )
        back, data, _ = round_trip(span, chains, nodes)
        assert back.attributes == span.attributes
        sizes.append(len(nodes))
    assert sizes == [2 * t for t in range(1, 11)]  # each message once, however many spans repeat it
    # without the memory of the last chain the ids are the same (it only spares hashing)
    again: Nodes = {}
    for turn in range(1, 11):
        span = Span(
            trace_id=f"{turn:032x}", span_id="c" * 16, attributes=flat("llm.input_messages.", messages(2 * turn))
        )
        round_trip(span, Chains(), again)
    assert again == nodes


def test_a_history_that_diverges_gets_nodes_of_its_own() -> None:
    chains, nodes = Chains(), {}
    first = Span(trace_id="1" * 32, span_id="1" * 16, attributes={"gen_ai.input.messages": messages(6)})
    edited = messages(6)
    edited[2]["content"] = "an edited message in the middle"
    second = Span(trace_id="2" * 32, span_id="2" * 16, attributes={"gen_ai.input.messages": edited})
    a, _, _ = round_trip(first, chains, nodes)
    b, _, _ = round_trip(second, chains, nodes)
    assert a.attributes == first.attributes and b.attributes == second.attributes
    assert len(nodes) == 6 + 4  # the shared first two, then two chains apart


def test_only_the_nodes_a_thread_lacks_are_added() -> None:
    """An ingest adds the nodes after the last one its thread has: in this ingest's nodes or stored
    (committed) before. Without what was stored, the whole chain goes again, under the same ids."""
    chains = Chains()

    def chat(n: int) -> Span:
        return Span(trace_id=f"{n:032x}", span_id="c" * 16, attributes={"gen_ai.input.messages": messages(n)})

    first: Nodes = {}
    span_record(chat(4), first, chains, "otlp:c")
    assert len(first) == 4
    second: Nodes = {}
    data = span_record(chat(6), second, chains, "otlp:c", stored=set(first))
    assert len(second) == 2
    (oldest,) = [parent for parent, _ in second.values() if parent not in second]
    assert oldest in first  # the new tail hangs on the stored chain
    assert read_span(data, Histories(first | second)).attributes == chat(6).attributes
    span_record(chat(8), second, chains, "otlp:c", stored=set(first))  # the same ingest, a later turn
    assert len(second) == 4
    again: Nodes = {}
    span_record(chat(8), again, chains, "otlp:c")  # nothing stored known: the whole chain
    assert again == first | second


def test_forms_it_cannot_rebuild_exactly_stay_inline() -> None:
    odd = {
        "llm.input_messages.1.message.role": "user",  # no index 0
        "llm.input_messages.1.message.content": "x" * 100,
        "gen_ai.input.messages": "[not json" + "x" * 100,
        "input.value": json.dumps({"args": [1, 2, 3], "kwargs": {"k": "v" * 100}}),  # no messages
        "ai.prompt.messages": [1, 2, 3],  # not a list of objects
    }
    span = Span(trace_id="a" * 32, span_id="b" * 16, attributes=odd)
    back, data, nodes = round_trip(span)
    assert back.attributes == odd and nodes == {}
    assert orjson.loads(data)["attributes"] == odd


values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)
keys = st.sampled_from(
    ["gen_ai.input.messages", "input.value", "ai.prompt", "llm.input_messages.0.message.role", "other", "gen_ai.prompt"]
) | st.text(max_size=30)


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(keys, values | values.map(lambda v: json.dumps(v)), max_size=8))
def test_any_attributes_read_back_the_same(attrs: dict[str, Any]) -> None:
    span = Span(trace_id="a" * 32, span_id="b" * 16, attributes=attrs)
    back, _, _ = round_trip(span)
    assert set(back.attributes) == set(attrs)
    assert all(same(back.attributes[k], v) for k, v in attrs.items())


def test_an_event_reads_back() -> None:
    event = SpanEvent(name="e", time_ns=5, attributes={"gen_ai.input.messages": json.dumps(messages(3))}, body="b")
    nodes: Nodes = {}
    data = history.event_record(event, nodes, Chains(), "k")
    back = read_event(data, Histories(nodes))
    assert (
        back.name == "e"
        and back.body == "b"
        and same(back.attributes["gen_ai.input.messages"], event.attributes["gen_ai.input.messages"])
    )


def test_the_memories_stay_within_their_bounds() -> None:
    chains = Chains(max_bytes=50_000)
    for t in range(200):
        items = [orjson.dumps(m) for m in messages(40)] + [str(t).encode()]
        chains.add((f"thread-{t}", "slot"), items, {})
        assert chains.held <= 50_000
    known = KnownNodes(max_ids=1000)
    for t in range(100):
        known.stored(f"thread-{t}", [f"{t}-{i}" for i in range(30)], 100.0)
        assert known.held <= 1000
    assert known.known("thread-99", 100.0) and not known.known("thread-0", 100.0)
    assert not known.known("thread-99", 100.0 + history.KNOWN_SECONDS)  # trusted for a while only
    known.forget("thread-99")
    assert not known.known("thread-99", 100.0)


flat_values = st.sampled_from(["user", "assistant", "a message long enough to be kept as a node", 1, 1.0, True, ["x"]])


@st.composite
def grown_histories(draw: st.DrawFn) -> list[dict[str, Any]]:
    """Attributes of successive spans of one thread: histories that mostly grow, sometimes change
    a value (also its type only: 1, 1.0, True), a key, their spacing or their form."""
    msgs = [{"role": "user", "content": "first message of the conversation, long enough"}]
    out = []
    for _ in range(draw(st.integers(1, 6))):
        for _ in range(draw(st.integers(0, 3))):
            msgs.append({draw(st.sampled_from(["role", "content", "name"])): draw(flat_values)})
        if msgs and draw(st.booleans()):
            at = draw(st.integers(0, len(msgs) - 1))
            msgs[at] = {**msgs[at], draw(st.sampled_from(["content", "extra"])): draw(flat_values)}
        if draw(st.booleans()):  # a list inside the last message grows, not the history
            msgs[-1] = {**msgs[-1], "parts": [*msgs[-1].get("parts", []), {"t": draw(flat_values)}]}
        separators = draw(st.sampled_from([(",", ":"), (", ", ": "), (" , ", ":")]))
        text = json.dumps(msgs, separators=separators)
        if draw(st.booleans()):
            text = text + draw(st.sampled_from(["", " ", "\n"]))
        request = draw(  # a chat request: messages among other members, before or after them
            st.sampled_from(
                [
                    {"messages": msgs},
                    {"model": "m", "messages": msgs, "temperature": draw(flat_values)},
                    {"model": "m", "messages": msgs, "tools": [{"n": draw(flat_values)}]},
                ]
            )
        )
        request_text = json.dumps(request, separators=draw(st.sampled_from([(",", ":"), (", ", ": ")])))
        attrs: dict[str, Any] = {"gen_ai.input.messages": text, "input.value": request_text}
        attrs.update(flat("llm.input_messages.", msgs))
        out.append(attrs)
    return out


@settings(max_examples=300, deadline=None)
@given(grown_histories())
def test_reusing_the_last_chain_stores_what_a_fresh_split_stores(spans: list[dict[str, Any]]) -> None:
    """The items a history takes from the last one of its slot are the ones it would make itself."""
    chains, nodes = Chains(), {}
    for i, attrs in enumerate(spans):
        span = Span(trace_id=f"{i + 1:032x}", span_id="c" * 16, attributes=attrs)
        fresh: Nodes = {}
        expected = span_record(span, fresh, Chains(), "otlp:c")
        before = dict(nodes)
        assert span_record(span, nodes, chains, "otlp:c") == expected
        assert {k: v for k, v in nodes.items() if k in fresh} == fresh and set(nodes) == set(before) | set(fresh)
        back = read_span(expected, Histories(nodes))
        assert back.attributes.keys() == attrs.keys() and all(same(back.attributes[k], v) for k, v in attrs.items())


def test_a_stored_span_reads_back_as_model_construct_would_build_it() -> None:
    """`read_span` builds models without pydantic's `model_construct`; this holds it to the same
    result (values, fields set, extra and private slots), so a pydantic that keeps them elsewhere fails here."""
    event = SpanEvent(name="e", time_ns=3, attributes={"k": 1}, body={"b": [1]})
    span = Span(trace_id="a" * 32, span_id="b" * 16, name="chat", status="ok", attributes={"x": "y"}, events=[event])
    for back in (round_trip(span)[0], read_span(span_record(span, {}, Chains(), "k"), Histories({}))):
        data = orjson.loads(span_record(span, {}, Chains(), "k"))
        data["events"] = [SpanEvent.model_construct(**e) for e in data["events"]]
        expected = Span.model_construct(**data)
        for model, reference in ((back, expected), (back.events[0], expected.events[0])):
            assert model == reference and model.model_dump() == reference.model_dump()
            assert model.model_fields_set == reference.model_fields_set
            assert model.__pydantic_extra__ == reference.__pydantic_extra__
            assert model.__pydantic_private__ == reference.__pydantic_private__
            assert model.model_copy(update={"name": "z"}).name == "z"
    partial_data = {"trace_id": "a" * 32, "span_id": "b" * 16}  # not every field: pydantic fills the defaults
    assert history._construct(Span, dict(partial_data)) == Span.model_construct(**partial_data)
