"""Property-based fuzzing (hypothesis) of the OTLP decoders, the convention extractors and turn assembly.

Deterministic and bounded: `derandomize=True`, no example database, a fixed number of examples per
property (EXAMPLES), so a run costs a few seconds and fails the same way every time. `bench/bad_input.py`
runs the same properties with many more examples (`FUZZ_EXAMPLES`).

- The decoders (`decompress`, `decode_traces`, `decode_logs`, `decode_json_line`) raise nothing but
  `OtlpDecodeError`, on arbitrary bytes and on structured mutations of SDK-encoded payloads (byte
  flips, truncation, insertion, deletion, duplication, splices; JSON trees with nodes replaced by
  arbitrary JSON, ids replaced by arbitrary text; under gzip and deflate). Whatever they accept has
  well-formed ids, and flows through ingest and assembly without an error.
- Every extractor of `tracing_eval.conventions` (each convention module's own functions too, not only
  the guarded precedence layer) and the message/value helpers never raise on spans whose attributes,
  events and resource hold arbitrary values: strings, numbers, booleans, nulls, nested lists and maps,
  and JSON text of message-like shapes.
- `assemble.thread_from_traces` never raises; its turns are indexed 0..k-1 in start order, its message
  positions run 0..n-1 across the thread, and every turn validates and hashes.
"""

from __future__ import annotations

import gzip
import json
import os
import zlib
from collections.abc import Callable
from typing import Any

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from tests.support.otlp_payloads import details_log_request, genai_turn_spans, to_otlp_json, trace_request
from tracing_eval import conventions
from tracing_eval.assemble import thread_from_traces, turn_from_trace
from tracing_eval.connectors.otlp.decode import (
    JSON,
    PROTOBUF,
    Decoded,
    OtlpDecodeError,
    decode_json_line,
    decode_logs,
    decode_traces,
    decompress,
)
from tracing_eval.conventions import genai, langfuse, messages, openinference, traceloop, values, vercel
from tracing_eval.ingest import make_batch
from tracing_eval.model import Message, Span, SpanEvent, Thread, Turn

EXAMPLES = int(os.environ.get("FUZZ_EXAMPLES", "150"))
FUZZ = settings(
    max_examples=EXAMPLES,
    derandomize=True,
    database=None,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much],
)
MORE = settings(FUZZ, max_examples=4 * EXAMPLES)  # for the cheap decoder properties
LIMIT = 1 << 20
HEX = set("0123456789abcdef")

# -- SDK-encoded bases -----------------------------------------------------------------------------

_SPANS = genai_turn_spans("fuzz", "Where is my order?", "It ships tomorrow.", tool_error="timeout")
_TRACES = trace_request(_SPANS)
_CHAT = next(s for s in _SPANS if s.name.startswith("chat"))
_LOGS = details_log_request(_CHAT.context.trace_id, _CHAT.context.span_id, "Where is my order?", "Tomorrow.")
TRACES_PB = _TRACES.SerializeToString()
LOGS_PB = _LOGS.SerializeToString()
TRACES_JSON = json.dumps(to_otlp_json(_TRACES)).encode()
LOGS_JSON = json.dumps(to_otlp_json(_LOGS)).encode()
BASES = [
    (TRACES_PB, PROTOBUF, "traces"),
    (LOGS_PB, PROTOBUF, "logs"),
    (TRACES_JSON, JSON, "traces"),
    (LOGS_JSON, JSON, "logs"),
]
DEEP_JSON = b'{"resourceSpans":' + b"[" * 1000 + b"]" * 1000 + b"}"


def only_decode_errors(fn: Callable[..., Any], *args: Any) -> Any:
    """Call a decoder: its result, or None when it raised OtlpDecodeError (anything else fails the test)."""
    try:
        return fn(*args)
    except OtlpDecodeError as exc:
        assert str(exc), "a decode error says what is wrong"
        return None


def check_accepted(decoded: Decoded | None) -> None:
    """What a decoder accepts has well-formed ids and goes through ingest and assembly."""
    if decoded is None:
        return
    for s in decoded.spans:
        assert len(s.trace_id) == 32 and set(s.trace_id) <= HEX and s.trace_id != "0" * 32
        assert len(s.span_id) == 16 and set(s.span_id) <= HEX and s.span_id != "0" * 16
        assert s.parent_id is None or (len(s.parent_id) == 16 and set(s.parent_id) <= HEX)
    for e in decoded.logs:
        assert len(e.trace_id) == 32 and len(e.span_id) == 16
    assert decoded.rejected == len(decoded.errors)
    make_batch(decoded.spans, [(e.trace_id, e.span_id, e.event) for e in decoded.logs])
    by_trace: dict[str, list[Span]] = {}
    for s in decoded.spans:
        by_trace.setdefault(s.trace_id, []).append(s)
    check_thread(thread_from_traces("fuzz", list(by_trace.values())))


def check_thread(thread: Thread) -> None:
    assert [t.index for t in thread.turns] == list(range(len(thread.turns)))
    assert [t.started_ns for t in thread.turns] == sorted(t.started_ns for t in thread.turns)
    assert [m.position for m in thread.messages] == list(range(len(thread.messages)))
    for turn in thread.turns:
        Turn.model_validate(turn.model_dump())
        assert len(turn.content_hash) == 32


# -- decoders on arbitrary bytes -------------------------------------------------------------------

ENCODINGS = st.one_of(
    st.sampled_from([None, "", "identity", "gzip", "deflate", "GZIP", "br", "gzip, deflate"]), st.text(max_size=12)
)


@MORE
@given(st.binary(max_size=600), st.sampled_from([PROTOBUF, JSON]))
def test_decoders_raise_only_decode_errors_on_arbitrary_bytes(data: bytes, mt: str) -> None:
    check_accepted(only_decode_errors(decode_traces, data, mt))
    check_accepted(only_decode_errors(decode_logs, data, mt))
    check_accepted(only_decode_errors(decode_json_line, data))


def test_json_nested_deeper_than_the_stack_is_a_decode_error() -> None:
    """Not under hypothesis, which raises the recursion limit while a test runs: at the normal limit,
    1000 nested arrays (the JSON parser allows 1024) must be refused, not exhaust the stack."""
    for data in (
        DEEP_JSON,
        b'{"resourceLogs":' + b"[" * 1000 + b"]" * 1000 + b"}",
        b'{"x":' * 1000 + b"1" + b"}" * 1000,
    ):
        for decode in (decode_traces, decode_logs):
            assert only_decode_errors(decode, data, JSON) is None
        only_decode_errors(decode_json_line, data)


@MORE
@given(st.binary(max_size=600), ENCODINGS, st.integers(1, 4096))
def test_decompress_raises_only_decode_errors_and_keeps_to_the_limit(
    data: bytes, encoding: str | None, limit: int
) -> None:
    out = only_decode_errors(decompress, data, encoding, limit)
    assert out is None or len(out) <= limit


@MORE
@given(st.binary(max_size=300), st.sampled_from(["gzip", "deflate", "raw"]), st.integers(0, 64))
def test_compressed_garbage_and_truncated_streams_raise_only_decode_errors(data: bytes, kind: str, cut: int) -> None:
    if kind == "gzip":
        packed, encoding = gzip.compress(data, mtime=0), "gzip"
    elif kind == "deflate":
        packed, encoding = zlib.compress(data), "deflate"
    else:
        c = zlib.compressobj(6, zlib.DEFLATED, -zlib.MAX_WBITS)
        packed, encoding = c.compress(data) + c.flush(), "deflate"
    assert decompress(packed, encoding, LIMIT) == data
    if cut and cut < len(packed):  # a truncated stream is refused, never read as a shorter body
        assert only_decode_errors(decompress, packed[:-cut], encoding, LIMIT) is None
    out = only_decode_errors(decompress, packed, encoding, max(len(data) - 1, 1))
    assert out is None or len(out) <= max(len(data) - 1, 1)


# -- decoders on structured mutations of real payloads ---------------------------------------------


@st.composite
def byte_mutations(draw: st.DrawFn) -> tuple[bytes, str, str]:
    base, mt, signal = draw(st.sampled_from(BASES))
    data = bytearray(base)
    for _ in range(draw(st.integers(1, 4))):
        op = draw(st.sampled_from(["flip", "set", "insert", "delete", "truncate", "duplicate", "splice"]))
        at = draw(st.integers(0, max(len(data) - 1, 0)))
        if op == "flip" and data:
            data[at] ^= 1 << draw(st.integers(0, 7))
        elif op == "set" and data:
            data[at] = draw(st.integers(0, 255))
        elif op == "insert":
            data[at:at] = draw(st.binary(min_size=1, max_size=8))
        elif op == "delete":
            del data[at : at + draw(st.integers(1, 16))]
        elif op == "truncate":
            del data[at:]
        elif op == "duplicate":
            data[at:at] = data[at : at + draw(st.integers(1, 32))]
        elif op == "splice":
            other = draw(st.sampled_from(BASES))[0]
            start = draw(st.integers(0, len(other) - 1))
            data[at:] = other[start:]
    return bytes(data), mt, signal


@MORE
@given(byte_mutations(), st.sampled_from([None, "gzip", "deflate"]))
def test_decoders_raise_only_decode_errors_on_mutated_payloads(
    case: tuple[bytes, str, str], encoding: str | None
) -> None:
    data, mt, signal = case
    if encoding == "gzip":
        data = gzip.compress(data, mtime=0)
    elif encoding == "deflate":
        data = zlib.compress(data)
    body = only_decode_errors(decompress, data, encoding, LIMIT)
    if body is None:
        return
    decode = decode_traces if signal == "traces" else decode_logs
    check_accepted(only_decode_errors(decode, body, mt))
    if mt == JSON:
        check_accepted(only_decode_errors(decode_json_line, body))


JSON_SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=40),
    st.sampled_from(["", "0" * 32, "0" * 16, "ABCDEF0123456789" * 2, "zz", "0x01", "-1", "1e9", "SPAN_KIND_SERVER"]),
)
JSON_VALUES = st.recursive(
    JSON_SCALARS,
    lambda children: st.one_of(
        st.lists(children, max_size=4),
        st.dictionaries(
            st.one_of(
                st.text(max_size=12),
                st.sampled_from(
                    [
                        "traceId",
                        "spanId",
                        "parentSpanId",
                        "stringValue",
                        "intValue",
                        "arrayValue",
                        "kvlistValue",
                        "values",
                        "key",
                        "value",
                        "attributes",
                        "spans",
                    ]
                ),
            ),
            children,
            max_size=4,
        ),
    ),
    max_leaves=12,
)


def _positions(node: Any) -> list[tuple[Any, Any]]:
    """Every (container, key or index) in a JSON tree, iteratively."""
    out: list[tuple[Any, Any]] = []
    stack = [node]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            for key, value in item.items():
                out.append((item, key))
                stack.append(value)
        elif isinstance(item, list):
            for i, value in enumerate(item):
                out.append((item, i))
                stack.append(value)
    return out


@st.composite
def json_mutations(draw: st.DrawFn) -> tuple[bytes, str]:
    base, _, signal = draw(st.sampled_from([b for b in BASES if b[1] == JSON]))
    tree = json.loads(base)
    for _ in range(draw(st.integers(1, 4))):
        positions = _positions(tree)
        if not positions:
            break
        container, key = draw(st.sampled_from(positions))
        op = draw(st.sampled_from(["replace", "delete", "id", "wrap", "duplicate"]))
        if op == "replace":
            container[key] = draw(JSON_VALUES)
        elif op == "delete":
            del container[key]
        elif op == "id":
            ids = [(c, k) for c, k in positions if k in ("traceId", "spanId", "parentSpanId")]
            c, k = draw(st.sampled_from(ids)) if ids else (container, key)
            c[k] = draw(st.one_of(st.text(max_size=40), st.sampled_from(["", "0" * 32, "ab", "AB" * 8, "g" * 16])))
        elif op == "wrap":
            container[key] = [container[key]] if draw(st.booleans()) else {"value": container[key]}
        elif op == "duplicate" and isinstance(container, list):
            container.insert(key, container[key])
    return json.dumps(tree).encode(), signal


@MORE
@given(json_mutations())
def test_decoders_raise_only_decode_errors_on_mutated_json_trees(case: tuple[bytes, str]) -> None:
    data, signal = case
    decode = decode_traces if signal == "traces" else decode_logs
    check_accepted(only_decode_errors(decode, data, JSON))
    check_accepted(only_decode_errors(decode_json_line, data))


# -- conventions and assembly on arbitrary attribute values ----------------------------------------

KEYS = [
    "gen_ai.input.messages", "gen_ai.output.messages", "gen_ai.system_instructions", "gen_ai.operation.name",
    "gen_ai.conversation.id", "session.id", "langfuse.session.id", "traceloop.association.properties.session_id",
    "gen_ai.tool.name", "gen_ai.tool.call.id", "gen_ai.tool.call.arguments", "gen_ai.tool.call.result",
    "gen_ai.response.finish_reasons", "gen_ai.usage.input_tokens", "gen_ai.usage.output_tokens",
    "gen_ai.usage.prompt_tokens", "gen_ai.response.model", "gen_ai.request.model", "gen_ai.response.id",
    "error.type", "openinference.span.kind", "input.value", "output.value", "llm.model_name",
    "llm.input_messages.0.message.role", "llm.input_messages.0.message.content",
    "llm.input_messages.1.message.contents.0.message_content.text", "llm.output_messages.0.message.role",
    "llm.output_messages.0.message.content", "llm.output_messages.0.message.tool_calls.0.tool_call.function.name",
    "llm.output_messages.0.message.tool_calls.0.tool_call.function.arguments", "llm.finish_reason",
    "llm.token_count.prompt", "llm.token_count.completion", "tool.name", "tool.id", "traceloop.span.kind",
    "traceloop.entity.input", "traceloop.entity.output", "traceloop.entity.name", "llm.request.type",
    "gen_ai.prompt.0.role", "gen_ai.prompt.0.content", "gen_ai.prompt.1.role", "gen_ai.prompt.1.content",
    "gen_ai.completion.0.role", "gen_ai.completion.0.content", "gen_ai.completion.0.tool_calls.0.name",
    "gen_ai.completion.0.tool_calls.0.arguments", "gen_ai.completion.0.function_call.name",
    "gen_ai.completion.0.finish_reason", "langfuse.observation.type", "langfuse.observation.input",
    "langfuse.observation.output", "langfuse.observation.level", "langfuse.observation.status_message",
    "langfuse.observation.usage_details", "langfuse.observation.model.name", "langfuse.trace.input",
    "langfuse.trace.output", "gen_ai.prompt", "gen_ai.completion",
    "llm.input_messages.x.message.role", "llm.output_messages.-1.message.content", "gen_ai.prompt.\u0663.role",
    "gen_ai.completion.00.content", "llm.input_messages." + "9" * 5000 + ".message.role",  # int() limit: 4300 digits
    "ai.operationId", "ai.prompt", "ai.prompt.messages", "ai.response.text", "ai.response.toolCalls",
    "ai.response.finishReason", "ai.toolCall.name", "ai.toolCall.id", "ai.toolCall.args", "ai.toolCall.result",
    "ai.telemetry.metadata.sessionId",
]  # fmt: skip
WORDS = [
    "user", "assistant", "tool", "system", "developer", "human", "ai", "model", "function", "chat", "invoke_agent",
    "execute_tool", "embeddings", "LLM", "TOOL", "AGENT", "CHAIN", "generation", "agent", "ERROR", "text",
    "tool_call", "tool_call_response", "function_call", "function_call_output", "stop", "length", "Error: boom",
    "ai.generateText", "ai.generateText.doGenerate", "ai.toolCall", "tool-call", "tool-result",
    "execute_event_loop_cycle",
]  # fmt: skip
SHAPE_KEYS = [
    "role", "parts", "content", "type", "text", "id", "name", "arguments", "response", "result", "tool_calls",
    "function", "choices", "message", "messages", "output", "input", "finish_reason", "index", "lc", "kwargs",
    "args", "tool_call_id", "call_id", "instructions", "query", "answer", "x", "data", "toolUse", "toolResult",
    "toolUseId", "toolCallId", "toolName", "value", "system", "prompt", "response_metadata",
]  # fmt: skip
INT64 = st.integers(min_value=-(2**63), max_value=2**63 - 1)  # what an OTLP intValue can hold
SCALARS = st.one_of(st.none(), st.booleans(), INT64, st.floats(), st.text(max_size=12), st.sampled_from(WORDS))
SHAPES = st.recursive(
    SCALARS,
    lambda children: st.one_of(
        st.lists(children, max_size=4), st.dictionaries(st.sampled_from(SHAPE_KEYS), children, max_size=5)
    ),
    max_leaves=8,
)
ATTRIBUTE_VALUES = st.one_of(SHAPES, SHAPES.map(lambda v: json.dumps(v, default=str)))
ATTRIBUTES = st.dictionaries(st.sampled_from(KEYS), ATTRIBUTE_VALUES, max_size=6)
EVENT_NAMES = [
    genai.DETAILS_EVENT, *sorted(genai.LEGACY_EVENTS), "exception", "gen_ai.client.operation.exception",
    "gen_ai.content.prompt", "gen_ai.content.completion", "other",
]  # fmt: skip
EVENTS = st.lists(
    st.builds(
        lambda name, attrs, body, at: SpanEvent.model_construct(name=name, time_ns=at, attributes=attrs, body=body),
        st.sampled_from(EVENT_NAMES),
        st.dictionaries(st.sampled_from(KEYS), ATTRIBUTE_VALUES, max_size=3),
        st.one_of(st.none(), ATTRIBUTE_VALUES),
        st.integers(0, 10),
    ),
    max_size=2,
)


@st.composite
def traces_of_spans(draw: st.DrawFn) -> list[list[Span]]:
    """Traces of spans built the way the decoder builds them (`model_construct`, values unchecked),
    with arbitrary parent links (cycles and dangling parents included) and clashing start times."""
    out = []
    for t in range(draw(st.integers(0, 3))):
        n = draw(st.integers(1, 3))
        ids = [f"{t:08x}{i:08x}" for i in range(n)]
        out.append(
            [
                Span.model_construct(
                    trace_id=f"{draw(st.integers(0, 3)):032x}",
                    span_id=span_id,
                    parent_id=draw(st.sampled_from([None, *ids, "f" * 16])),
                    name=draw(st.sampled_from(["chat gpt-4o", "execute_tool lookup", "invoke_agent a", ""])),
                    kind=0,
                    start_ns=draw(st.integers(0, 5)),
                    end_ns=draw(st.integers(0, 5)),
                    status=draw(st.sampled_from(["unset", "ok", "error"])),
                    status_message=draw(st.sampled_from(["", "boom"])),
                    attributes=draw(ATTRIBUTES),
                    events=draw(EVENTS),
                    resource=draw(st.dictionaries(st.sampled_from(KEYS[:8]), ATTRIBUTE_VALUES, max_size=2)),
                    scope="",
                )
                for span_id in ids
            ]
        )
    return out


def _module_extractors() -> list[Callable[[Span], Any]]:
    """Every public `(span) -> ...` function of the convention modules."""
    found = []
    for module in (genai, openinference, traceloop, langfuse, vercel):
        for name in sorted(vars(module)):
            fn = getattr(module, name)
            code = getattr(fn, "__code__", None)
            if name.startswith("_") or getattr(fn, "__module__", None) != module.__name__ or code is None:
                continue
            if code.co_argcount == 1 and code.co_varnames[0] == "span":
                found.append(fn)
    return found


MODULE_EXTRACTORS = _module_extractors()
PUBLIC_EXTRACTORS = [getattr(conventions, n) for n in conventions.__all__ if n not in ("SpanKind", "SpanReading")]


def test_the_fuzzed_extractors_are_all_there() -> None:
    names = {f"{f.__module__.rsplit('.', 1)[1]}.{f.__name__}" for f in MODULE_EXTRACTORS}
    assert {"genai.input_messages", "openinference.value_output", "traceloop.tool_call", "langfuse.usage"} <= names
    assert {"vercel.input_messages", "vercel.output_messages", "vercel.tool_call", "vercel.kind"} <= names
    assert {"genai.input_tail", "openinference.input_tail"} <= names
    assert len(MODULE_EXTRACTORS) >= 30 and len(PUBLIC_EXTRACTORS) == 13


@FUZZ
@given(traces_of_spans())
def test_convention_extractors_never_raise_on_arbitrary_attribute_values(traces: list[list[Span]]) -> None:
    for span in (s for trace in traces for s in trace):
        for fn in MODULE_EXTRACTORS:
            fn(span)
        for fn in (conventions.input_messages, conventions.output_messages, conventions.turn_inputs):
            assert all(isinstance(m, Message) for m in fn(span))
        assert bool(conventions.turn_inputs(span)) == bool(conventions.input_messages(span))
        assert conventions.span_kind(span) in ("llm", "tool", "agent", "other")
        for fn in (conventions.thread_id, conventions.system_instructions, conventions.model, conventions.span_error):
            assert fn(span) is None or isinstance(fn(span), str)
        tokens = conventions.usage(span)
        assert all(x is None or isinstance(x, int) for x in tokens)
        conventions.tool_call(span)
        conventions.response_id(span)
        conventions.read_span(span)


@FUZZ
@given(ATTRIBUTE_VALUES, st.booleans())
@example({"args": [1], "kwargs": [1]}, True)  # found by this test: a decorated call with list kwargs
@example('{"kwargs": {}, "args": 5}', False)
@example({"kwargs": {}, "args": {"0": "x"}}, False)
def test_message_and_value_helpers_never_raise(value: Any, output: bool) -> None:
    for m in (
        messages.payload_messages(value, output=output)
        + messages.message_list(value, output=output)
        + messages.parts_messages(value, output=output)
        + (messages.converse_messages("assistant" if output else "user", value) or [])
    ):
        Message.model_validate(m.model_dump())
    messages.openai_tool_calls(value)
    for fn in (values.text, values.content_text, values.result_text, values.dumps):
        assert isinstance(fn(value), str)
    assert values.as_int(value) is None or isinstance(values.as_int(value), int)
    assert values.as_str(value) is None or isinstance(values.as_str(value), str)
    values.maybe_json(value)
    values.loads(value)


@FUZZ
@given(traces_of_spans())
def test_assembled_threads_are_consistent(traces: list[list[Span]]) -> None:
    thread = thread_from_traces("fuzz", traces)
    check_thread(thread)
    assert len(thread.turns) <= len(traces)
    for trace in traces:
        turn_from_trace(trace)
    make_batch([s for trace in traces for s in trace], [])
