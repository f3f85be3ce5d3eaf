"""Write `tests/corpus/otlp/`: malformed (and valid-but-odd) OTLP/HTTP requests and `manifest.json`.

Every request is derived from payloads the real OTel SDK encodes (`tests/support/otlp_payloads.py`: an
`invoke_agent` turn with a failing tool span and a chat span, and a
`gen_ai.client.inference.operation.details` log event), then broken on purpose: truncated,
byte-flipped, re-typed, re-encoded, compressed wrongly, oversized. Each item says what the receiver
must answer: the status, a fragment of the error message (of `partial_success.error_message` for a
200), how many spans or log records are rejected, and how many spans and events end up stored.

The output is deterministic (ids, times and the resource are normalised; gzip has no timestamp),
so it is committed, and `tests/test_bad_input.py` checks that it matches this script:

    .venv/bin/python tests/corpus/make_otlp_corpus.py
"""

from __future__ import annotations

import gzip
import json
import sys
import zlib
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from google.protobuf import json_format  # noqa: E402
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest  # noqa: E402
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest  # noqa: E402
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue  # noqa: E402

from examples.otlp_capture import ids_to_hex  # noqa: E402
from tests.support.otlp_payloads import details_log_request, genai_turn_spans, trace_request  # noqa: E402

OUT = Path(__file__).resolve().parent / "otlp"
MANIFEST = "manifest.json"
#: The receiver's `max_body_bytes` the corpus is served with (413 above it, after decompression).
LIMIT = 16 * 1024
TRACES, LOGS = "/v1/traces", "/v1/logs"
PB, JS = "application/x-protobuf", "application/json"
SPANS = 3  # spans in the base trace request: invoke_agent root, execute_tool (failed), chat
T0 = 1_767_225_600_000_000_000  # 2026-01-01T00:00:00Z in ns

# message fragments the receiver answers with
NOT_PB_TRACES = "is not a valid ExportTraceServiceRequest protobuf"
NOT_PB_LOGS = "is not a valid ExportLogsServiceRequest protobuf"
NOT_JSON = "body is not valid JSON"
NOT_OBJECT = "OTLP/JSON body must be a JSON object"
NOT_HEX = "is not a hex string"
MISMATCH_TRACES = "body does not match ExportTraceServiceRequest"
MISMATCH_LOGS = "body does not match ExportLogsServiceRequest"
BAD_CT = "unsupported Content-Type"
BAD_CE = "unsupported Content-Encoding"
TOO_LARGE = f"body decompresses to more than the limit of {LIMIT} bytes"
TOO_DEEP = "nested too deeply"


@dataclass
class Item:
    """One request and the answer it must get."""

    file: str
    category: str
    description: str
    status: int
    message: str = ""  # a fragment of the error message ("" with a 200 and no partial_success)
    path: str = TRACES
    headers: dict[str, str] = field(default_factory=dict)
    rejected: int = 0  # partial_success.rejected_spans / rejected_log_records
    spans: int = 0  # spans stored afterwards
    events: int = 0  # log events stored afterwards
    body: bytes = field(default=b"", repr=False)


# -- the SDK-encoded base payloads, normalised per item --------------------------------------------

_SDK_TRACES = trace_request(
    genai_turn_spans("corpus", "Where is my order A48213?", "It ships tomorrow.", tool_error="order service timed out")
)
_SDK_LOGS = details_log_request(1, 1, "Where is my order A48213?", "It ships tomorrow.")
_RESOURCE = {
    "service.name": "tracing-eval-corpus",
    "telemetry.sdk.language": "python",
    "telemetry.sdk.name": "opentelemetry",
}


def _trace_id(seed: int) -> bytes:
    return bytes.fromhex(f"{seed:08x}c0ffee00c0ffee00c0ffee00")


def _span_id(seed: int, n: int) -> bytes:
    return bytes.fromhex(f"{seed:06x}5a{n:08x}")


def _resource(resource: Any) -> None:
    del resource.attributes[:]
    for key, value in _RESOURCE.items():
        resource.attributes.add(key=key, value=AnyValue(string_value=value))


def traces(seed: int) -> ExportTraceServiceRequest:
    """The SDK's trace request with ids, times, resource and conversation id fixed by `seed`."""
    req = ExportTraceServiceRequest()
    req.CopyFrom(_SDK_TRACES)
    spans = [s for rs in req.resource_spans for ss in rs.scope_spans for s in ss.spans]
    ranked = sorted(spans, key=lambda s: s.start_time_unix_nano)
    new_ids = {s.span_id: _span_id(seed, n + 1) for n, s in enumerate(ranked)}
    for n, s in enumerate(ranked):
        s.trace_id = _trace_id(seed)
        s.span_id = new_ids[s.span_id]
        if s.parent_span_id:
            s.parent_span_id = new_ids[s.parent_span_id]
        s.start_time_unix_nano = T0 + seed * 10**9 + n * 10**6
        s.end_time_unix_nano = T0 + seed * 10**9 + (10 - n) * 10**6
        for kv in s.attributes:
            if kv.key == "gen_ai.conversation.id":
                kv.value.string_value = f"corpus-{seed:03d}"
    for rs in req.resource_spans:
        _resource(rs.resource)
    return req


def chat_span(req: ExportTraceServiceRequest) -> Any:
    return next(s for rs in req.resource_spans for ss in rs.scope_spans for s in ss.spans if s.name.startswith("chat"))


def logs(seed: int) -> ExportLogsServiceRequest:
    """The SDK's details log event, parented to the chat span of `traces(seed)`."""
    req = ExportLogsServiceRequest()
    req.CopyFrom(_SDK_LOGS)
    chat = chat_span(traces(seed))
    for rl in req.resource_logs:
        _resource(rl.resource)
        for sl in rl.scope_logs:
            for r in sl.log_records:
                r.trace_id, r.span_id = chat.trace_id, chat.span_id
                r.time_unix_nano = r.observed_time_unix_nano = T0 + seed * 10**9 + 5 * 10**6
    return req


def otlp_json(message: Any) -> dict[str, Any]:
    """OTLP/JSON as the spec has it: lowerCamelCase, hex ids, integer enums, int64 as strings."""
    return ids_to_hex(json_format.MessageToDict(message, use_integers_for_enums=True))


def dumps(obj: Any) -> bytes:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode()


def json_spans(obj: dict[str, Any]) -> list[dict[str, Any]]:
    return [s for rs in obj["resourceSpans"] for ss in rs["scopeSpans"] for s in ss["spans"]]


def json_records(obj: dict[str, Any]) -> list[dict[str, Any]]:
    return [r for rl in obj["resourceLogs"] for sl in rl["scopeLogs"] for r in sl["logRecords"]]


# -- raw protobuf wire helpers ---------------------------------------------------------------------


def varint(n: int) -> bytes:
    out = bytearray()
    while True:
        b, n = n & 0x7F, n >> 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def tag(number: int, wire_type: int) -> bytes:
    return varint(number << 3 | wire_type)


def ld(number: int, payload: bytes) -> bytes:
    """A length-delimited field."""
    return tag(number, 2) + varint(len(payload)) + payload


def with_span_suffix(req: ExportTraceServiceRequest, suffix: bytes) -> bytes:
    """The request with raw bytes appended to the first span's encoding (a field added on the wire)."""
    rs = req.resource_spans[0]
    ss = rs.scope_spans[0]
    spans = [s.SerializeToString() for s in ss.spans]
    spans[0] += suffix
    scope = ld(1, ss.scope.SerializeToString()) + b"".join(ld(2, s) for s in spans)
    return ld(1, ld(1, rs.resource.SerializeToString()) + ld(2, scope))


def deep_any_value_pb(depth: int) -> bytes:
    """An AnyValue of `depth` nested array_values around a string (encoded by hand)."""
    v = ld(1, b"x")
    for _ in range(depth):
        v = ld(5, ld(1, v))  # AnyValue.array_value -> ArrayValue.values
    return v


def deep_any_value_json(depth: int, kind: str = "arrayValue") -> dict[str, Any]:
    v: dict[str, Any] = {"stringValue": "x"}
    for _ in range(depth):
        v = (
            {"arrayValue": {"values": [v]}}
            if kind == "arrayValue"
            else {"kvlistValue": {"values": [{"key": "k", "value": v}]}}
        )
    return v


def gz(data: bytes) -> bytes:
    return gzip.compress(data, mtime=0)


def raw_deflate(data: bytes) -> bytes:
    c = zlib.compressobj(9, zlib.DEFLATED, -zlib.MAX_WBITS)
    return c.compress(data) + c.flush()


def padded_pb(req: ExportTraceServiceRequest, size: int) -> bytes:
    """The request plus an unknown bytes field (number 100) so that it is exactly `size` bytes."""
    body = req.SerializeToString()
    for pad in range(size - len(body), 0, -1):  # the field's own header takes a few bytes
        out = body + ld(100, b"\0" * pad)
        if len(out) == size:
            return out
    raise ValueError(f"cannot pad to {size}")


# -- the corpus ------------------------------------------------------------------------------------


class Corpus:
    def __init__(self) -> None:
        self.items: list[Item] = []
        self.seed = 0

    def next_seed(self) -> int:
        self.seed += 1
        return self.seed

    def add(self, name: str, body: bytes, **kw: Any) -> None:
        headers = kw.pop("headers", None)
        ct = kw.pop("ct", PB)
        ce = kw.pop("ce", None)
        if headers is None:
            headers = {"content-type": ct} if ct is not None else {}
            if ce is not None:
                headers["content-encoding"] = ce
        n = len(self.items) + 1
        self.items.append(Item(file=f"{n:03d}-{name}", body=body, headers=headers, **kw))

    # each builder below takes a fresh seed, so no two items share trace or span ids

    def pb(self, mutate: Callable[[ExportTraceServiceRequest], Any] | None = None) -> ExportTraceServiceRequest:
        req = traces(self.next_seed())
        if mutate is not None:
            mutate(req)
        return req

    def js(self, mutate: Callable[[dict[str, Any]], Any] | None = None) -> dict[str, Any]:
        obj = otlp_json(traces(self.next_seed()))
        if mutate is not None:
            mutate(obj)
        return obj

    def logs_pb(self, mutate: Callable[[ExportLogsServiceRequest], Any] | None = None) -> ExportLogsServiceRequest:
        req = logs(self.next_seed())
        if mutate is not None:
            mutate(req)
        return req

    def logs_js(self, mutate: Callable[[dict[str, Any]], Any] | None = None) -> dict[str, Any]:
        obj = otlp_json(logs(self.next_seed()))
        if mutate is not None:
            mutate(obj)
        return obj


def first_span(obj: dict[str, Any]) -> dict[str, Any]:
    return json_spans(obj)[0]


def set_first(key: str, value: Any) -> Callable[[dict[str, Any]], None]:
    def mutate(obj: dict[str, Any]) -> None:
        first_span(obj)[key] = value

    return mutate


def set_first_record(key: str, value: Any) -> Callable[[dict[str, Any]], None]:
    def mutate(obj: dict[str, Any]) -> None:
        json_records(obj)[0][key] = value

    return mutate


def add_attribute(value: Any, key: str = "corpus.value") -> Callable[[dict[str, Any]], None]:
    def mutate(obj: dict[str, Any]) -> None:
        first_span(obj).setdefault("attributes", []).append({"key": key, "value": value})

    return mutate


def pb_attribute(value: AnyValue, key: str = "corpus.value") -> Callable[[ExportTraceServiceRequest], None]:
    def mutate(req: ExportTraceServiceRequest) -> None:
        req.resource_spans[0].scope_spans[0].spans[0].attributes.append(KeyValue(key=key, value=value))

    return mutate


def pb_span(field_name: str, value: Any, index: int = 0) -> Callable[[ExportTraceServiceRequest], None]:
    def mutate(req: ExportTraceServiceRequest) -> None:
        setattr(req.resource_spans[0].scope_spans[0].spans[index], field_name, value)

    return mutate


def build() -> tuple[list[Item], dict[str, Any]]:
    c = Corpus()

    # controls: the unbroken payloads, to show what a full success looks like
    c.add(
        "valid-protobuf.bin",
        c.pb().SerializeToString(),
        category="valid",
        description="SDK-encoded trace request",
        status=200,
        spans=SPANS,
    )
    c.add(
        "valid-json.json",
        dumps(c.js()),
        ct=JS,
        category="valid",
        description="the same as OTLP/JSON (hex ids, integer enums)",
        status=200,
        spans=SPANS,
    )
    c.add(
        "valid-logs-protobuf.bin",
        c.logs_pb().SerializeToString(),
        path=LOGS,
        category="valid",
        description="SDK-encoded details log event",
        status=200,
        events=1,
    )
    c.add(
        "valid-logs-json.json",
        dumps(c.logs_js()),
        path=LOGS,
        ct=JS,
        category="valid",
        description="the details log event as OTLP/JSON",
        status=200,
        events=1,
    )
    c.add(
        "valid-protobuf-gzip.bin.gz",
        gz(c.pb().SerializeToString()),
        ce="gzip",
        category="valid",
        description="gzip-compressed protobuf, as the SDK exporter sends it",
        status=200,
        spans=SPANS,
    )

    # truncated protobuf: every prefix of a length-delimited top-level field is corrupt
    body = c.pb().SerializeToString()
    n = len(body)
    for cut in sorted({1, 2, 3, 5, 10, 25, 64, 128, n // 4, n // 2, 3 * n // 4, n - 2, n - 1}):
        b = c.pb().SerializeToString()[:cut]
        c.add(
            f"truncated-protobuf-at-{cut}.bin",
            b,
            category="truncated_protobuf",
            description=f"trace request cut after {cut} of {n} bytes",
            status=400,
            message=NOT_PB_TRACES,
        )
    body = c.logs_pb().SerializeToString()
    n = len(body)
    for cut in (1, 4, n // 2, n - 1):
        b = c.logs_pb().SerializeToString()[:cut]
        c.add(
            f"truncated-logs-protobuf-at-{cut}.bin",
            b,
            path=LOGS,
            category="truncated_protobuf",
            description=f"logs request cut after {cut} of {n} bytes",
            status=400,
            message=NOT_PB_LOGS,
        )

    # truncated JSON: no proper prefix of an object is JSON
    for frac in (1, 3, 2):
        b = dumps(c.js())
        cut = 1 if frac == 1 else len(b) // frac
        c.add(
            f"truncated-json-at-{cut}.json",
            b[:cut],
            ct=JS,
            category="truncated_json",
            description=f"OTLP/JSON cut after {cut} of {len(b)} bytes",
            status=400,
            message=NOT_JSON,
        )
    b = dumps(c.js())
    c.add(
        "truncated-json-last-brace.json",
        b[:-1],
        ct=JS,
        category="truncated_json",
        description="OTLP/JSON without its closing brace",
        status=400,
        message=NOT_JSON,
    )
    b = dumps(c.logs_js())
    c.add(
        "truncated-logs-json.json",
        b[: len(b) // 2],
        path=LOGS,
        ct=JS,
        category="truncated_json",
        description="logs OTLP/JSON cut in half",
        status=400,
        message=NOT_JSON,
    )

    # flipped bytes and broken wire format
    def flip(b: bytes, at: int, value: int) -> bytes:
        return b[:at] + bytes([value]) + b[at + 1 :]

    b = c.pb().SerializeToString()
    c.add(
        "flipped-top-tag-wire-type-6.bin",
        flip(b, 0, 0x0E),
        category="corrupt_protobuf",
        description="first tag byte gets wire type 6 (does not exist)",
        status=400,
        message=NOT_PB_TRACES,
    )
    b = c.pb().SerializeToString()
    c.add(
        "flipped-top-tag-wire-type-7.bin",
        flip(b, 0, 0x0F),
        category="corrupt_protobuf",
        description="first tag byte gets wire type 7 (does not exist)",
        status=400,
        message=NOT_PB_TRACES,
    )
    b = c.pb().SerializeToString()
    c.add(
        "flipped-top-tag-field-0.bin",
        flip(b, 0, 0x02),
        category="corrupt_protobuf",
        description="first tag names field number 0",
        status=400,
        message=NOT_PB_TRACES,
    )
    b = c.pb().SerializeToString()
    c.add(
        "flipped-top-tag-end-group.bin",
        flip(b, 0, 0x0C),
        category="corrupt_protobuf",
        description="first tag is an END_GROUP with no group open",
        status=400,
        message=NOT_PB_TRACES,
    )
    inner = c.pb().resource_spans[0].SerializeToString()
    c.add(
        "flipped-outer-length-too-long.bin",
        tag(1, 2) + varint(2 * len(inner)) + inner,
        category="corrupt_protobuf",
        description="the top-level length says twice the body",
        status=400,
        message=NOT_PB_TRACES,
    )
    inner = c.pb().resource_spans[0].SerializeToString()
    c.add(
        "flipped-outer-length-too-short.bin",
        tag(1, 2) + varint(len(inner) // 2) + inner,
        category="corrupt_protobuf",
        description="the top-level length says half the body",
        status=400,
        message=NOT_PB_TRACES,
    )
    req = c.pb()
    b = req.SerializeToString()
    name = chat_span(req).name.encode()
    at = b.index(name)
    c.add(
        "flipped-span-name-invalid-utf8.bin",
        flip(b, at, 0xFF),
        category="corrupt_protobuf",
        description="a byte of a span name set to 0xFF (strings must be UTF-8)",
        status=400,
        message="bad UTF-8",
    )
    req = c.pb()
    b = req.SerializeToString()
    at = b.index(b"order service timed out")
    c.add(
        "flipped-status-message-invalid-utf8.bin",
        b[:at] + b"\xc3\x28" + b[at + 2 :],
        category="corrupt_protobuf",
        description="an invalid two-byte UTF-8 sequence in a status message",
        status=400,
        message="bad UTF-8",
    )
    b = c.pb().SerializeToString()
    c.add(
        "appended-varint-overflow.bin",
        b + tag(2, 0) + b"\xff" * 10 + b"\x01",
        category="corrupt_protobuf",
        description="a varint of 11 bytes appended",
        status=400,
        message=NOT_PB_TRACES,
    )
    b = c.pb().SerializeToString()
    c.add(
        "appended-length-past-end.bin",
        b + ld(1, b"")[:1] + b"\x7f\x00",
        category="corrupt_protobuf",
        description="a field whose length runs past the end",
        status=400,
        message=NOT_PB_TRACES,
    )
    b = c.pb().SerializeToString()
    c.add(
        "appended-unterminated-group.bin",
        b + tag(7, 3),
        category="corrupt_protobuf",
        description="a START_GROUP that never ends",
        status=400,
        message=NOT_PB_TRACES,
    )
    b = c.pb().SerializeToString()
    c.add(
        "appended-huge-length.bin",
        b + tag(1, 2) + varint(2**32),
        category="corrupt_protobuf",
        description="a length of 4 GiB",
        status=400,
        message=NOT_PB_TRACES,
    )
    c.add(
        "gzip-body-without-content-encoding.bin.gz",
        gz(c.pb().SerializeToString()),
        category="corrupt_protobuf",
        description="gzip bytes sent as plain protobuf (no Content-Encoding)",
        status=400,
        message=NOT_PB_TRACES,
    )
    c.add(
        "json-body-as-protobuf.json",
        dumps(c.js()),
        category="corrupt_protobuf",
        description="an OTLP/JSON body labelled application/x-protobuf",
        status=400,
        message=NOT_PB_TRACES,
    )
    c.add(
        "protobuf-body-as-json.bin",
        c.pb().SerializeToString(),
        ct=JS,
        category="corrupt_protobuf",
        description="a protobuf body labelled application/json",
        status=400,
        message=NOT_JSON,
    )
    c.add(
        "nested-span-deep-any-value-protobuf.bin",
        with_span_suffix(c.pb(), ld(9, ld(1, b"deep") + ld(2, deep_any_value_pb(120)))),
        category="deep_nesting",
        description="an attribute with 120 nested array values (protobuf decoder depth limit)",
        status=400,
        message=NOT_PB_TRACES,
    )
    c.add(
        "nested-span-any-value-protobuf-40.bin",
        with_span_suffix(c.pb(), ld(9, ld(1, b"deep") + ld(2, deep_any_value_pb(40)))),
        category="deep_nesting",
        description="an attribute with 40 nested array values (within the limit)",
        status=200,
        spans=SPANS,
    )

    # wrong wire types that protobuf reads as unknown fields: accepted, the field is ignored
    c.add(
        "wire-type-varint-for-resource-spans.bin",
        tag(1, 0) + b"\x01" + c.pb().SerializeToString(),
        category="wrong_wire_type",
        description="resource_spans also sent as a varint: skipped as an unknown field, the rest is stored",
        status=200,
        spans=SPANS,
    )
    c.add(
        "wire-type-len-for-span-kind.bin",
        with_span_suffix(c.pb(), ld(6, b"xx")),
        category="wrong_wire_type",
        description="span kind sent length-delimited: skipped, the span is stored",
        status=200,
        spans=SPANS,
    )
    c.add(
        "wire-type-varint-for-span-name.bin",
        with_span_suffix(c.pb(), tag(5, 0) + b"\x05"),
        category="wrong_wire_type",
        description="span name sent as a varint: skipped, the span is stored",
        status=200,
        spans=SPANS,
    )
    c.add(
        "wire-type-fixed64-only.bin",
        tag(1, 1) + b"\0" * 8,
        category="wrong_wire_type",
        description="only a fixed64 where resource_spans belongs: an empty request",
        status=200,
    )
    c.add(
        "trace-request-to-logs-path.bin",
        c.pb().SerializeToString(),
        path=LOGS,
        category="wrong_wire_type",
        description="a trace request posted to /v1/logs",
        status=400,
        message=NOT_PB_LOGS,
    )
    c.add(
        "logs-request-to-traces-path.bin",
        c.logs_pb().SerializeToString(),
        category="wrong_wire_type",
        description="a logs request posted to /v1/traces",
        status=400,
        message=NOT_PB_TRACES,
    )

    # bad ids in protobuf: the span (or log record) is rejected, the rest is stored (partial_success)
    for label, fld, value, message in (
        ("span-id-2-bytes", "span_id", b"\x01\x02", "spanId must be 8 bytes, got 2"),
        ("span-id-9-bytes", "span_id", b"\x01" * 9, "spanId must be 8 bytes, got 9"),
        ("span-id-all-zero", "span_id", b"\0" * 8, "spanId is all zeros"),
        ("trace-id-15-bytes", "trace_id", b"\x07" * 15, "traceId must be 16 bytes, got 15"),
        ("trace-id-17-bytes", "trace_id", b"\x07" * 17, "traceId must be 16 bytes, got 17"),
        ("trace-id-all-zero", "trace_id", b"\0" * 16, "traceId is all zeros"),
        ("trace-id-missing", "trace_id", b"", "traceId must be 16 bytes, got 0"),
    ):
        c.add(
            f"bad-id-protobuf-{label}.bin",
            c.pb(pb_span(fld, value)).SerializeToString(),
            category="bad_ids",
            description=f"one span's {fld} is bad: that span is rejected",
            status=200,
            message=message,
            rejected=1,
            spans=SPANS - 1,
        )

    def all_spans_bad(req: ExportTraceServiceRequest) -> None:
        for s in req.resource_spans[0].scope_spans[0].spans:
            s.span_id = b"\0" * 8

    c.add(
        "bad-id-protobuf-every-span.bin",
        c.pb(all_spans_bad).SerializeToString(),
        category="bad_ids",
        description="every span has an all-zero span id: 200 with all rejected, nothing stored",
        status=200,
        message="spanId is all zeros",
        rejected=SPANS,
    )
    c.add(
        "odd-id-protobuf-parent-3-bytes.bin",
        c.pb(pb_span("parent_span_id", b"\x01\x02\x03", 1)).SerializeToString(),
        category="bad_ids",
        description="a parent span id of 3 bytes: that span is rejected (it is not made a root)",
        status=200,
        message="parentSpanId must be 8 bytes or empty, got 3",
        rejected=1,
        spans=SPANS - 1,
    )

    def log_id(fld: str, value: bytes) -> Callable[[ExportLogsServiceRequest], None]:
        def mutate(req: ExportLogsServiceRequest) -> None:
            setattr(req.resource_logs[0].scope_logs[0].log_records[0], fld, value)

        return mutate

    c.add(
        "bad-id-logs-trace-id-3-bytes.bin",
        c.logs_pb(log_id("trace_id", b"\x01\x02\x03")).SerializeToString(),
        path=LOGS,
        category="bad_ids",
        description="a log event with a 3-byte trace id is rejected",
        status=200,
        message="traceId must be 16 bytes, got 3",
        rejected=1,
    )
    c.add(
        "bad-id-logs-span-id-all-zero.bin",
        c.logs_pb(log_id("span_id", b"\0" * 8)).SerializeToString(),
        path=LOGS,
        category="bad_ids",
        description="a log event with an all-zero span id is rejected",
        status=200,
        message="spanId is all zeros",
        rejected=1,
    )

    # bad ids in OTLP/JSON: hex that does not parse refuses the request; hex of the wrong size rejects the span
    for label, key, value in (
        ("trace-id-odd-length", "traceId", "0102030405060708090a0b0c0d0e0f1"),
        ("trace-id-non-hex", "traceId", "zz02030405060708090a0b0c0d0e0f10"),
        ("trace-id-base64", "traceId", "AQIDBAUGBwgJCgsMDQ4PEA=="),
        ("span-id-uuid-dashes", "spanId", "0102-0304-0506-0708"),
        ("span-id-0x-prefix", "spanId", "0x0102030405060708"),
        ("parent-span-id-odd-length", "parentSpanId", "abc"),
    ):
        c.add(
            f"bad-id-json-{label}.json",
            dumps(c.js(set_first(key, value))),
            ct=JS,
            category="bad_ids",
            description=f"{key} {value!r} is not hex",
            status=400,
            message=NOT_HEX,
        )

    def link_bad(obj: dict[str, Any]) -> None:
        first_span(obj)["links"] = [{"traceId": "not-hex", "spanId": "0102030405060708"}]

    c.add(
        "bad-id-json-link-trace-id.json",
        dumps(c.js(link_bad)),
        ct=JS,
        category="bad_ids",
        description="a link whose traceId is not hex",
        status=400,
        message=NOT_HEX,
    )
    c.add(
        "bad-id-json-logs-span-id.json",
        dumps(c.logs_js(set_first_record("spanId", "span-1"))),
        path=LOGS,
        ct=JS,
        category="bad_ids",
        description="a log record whose spanId is not hex",
        status=400,
        message=NOT_HEX,
    )
    c.add(
        "bad-id-json-trace-id-number.json",
        dumps(c.js(set_first("traceId", 12345))),
        ct=JS,
        category="bad_ids",
        description="traceId is a number, not a string",
        status=400,
        message=MISMATCH_TRACES,
    )
    for label, key, value, message in (
        ("trace-id-4-bytes", "traceId", "01020304", "traceId must be 16 bytes, got 4"),
        ("trace-id-all-zero", "traceId", "0" * 32, "traceId is all zeros"),
        ("trace-id-null", "traceId", None, "traceId must be 16 bytes, got 0"),
        ("span-id-9-bytes", "spanId", "010203040506070809", "spanId must be 8 bytes, got 9"),
        ("span-id-empty", "spanId", "", "spanId must be 8 bytes, got 0"),
        ("span-id-all-zero", "spanId", "0" * 16, "spanId is all zeros"),
    ):
        c.add(
            f"bad-id-json-{label}.json",
            dumps(c.js(set_first(key, value))),
            ct=JS,
            category="bad_ids",
            description=f"one span's {key} is {value!r}: that span is rejected",
            status=200,
            message=message,
            rejected=1,
            spans=SPANS - 1,
        )

    def upper_ids(obj: dict[str, Any]) -> None:
        for s in json_spans(obj):
            for key in ("traceId", "spanId", "parentSpanId"):
                if s.get(key):
                    s[key] = s[key].upper()

    c.add(
        "odd-id-json-uppercase-hex.json",
        dumps(c.js(upper_ids)),
        ct=JS,
        category="bad_ids",
        description="uppercase hex ids (OTLP/JSON ids are case-insensitive)",
        status=200,
        spans=SPANS,
    )
    c.add(
        "odd-id-json-logs-uppercase-hex.json",
        dumps(c.logs_js(lambda o: json_records(o)[0].update(traceId=json_records(o)[0]["traceId"].upper()))),
        path=LOGS,
        ct=JS,
        category="bad_ids",
        description="a log record with an uppercase hex trace id",
        status=200,
        events=1,
    )

    # wrong JSON types: the request does not match the schema
    def wrong(obj: dict[str, Any], where: str, value: Any) -> dict[str, Any]:
        if where == "resourceSpans":
            obj["resourceSpans"] = value
        elif where == "scopeSpans":
            obj["resourceSpans"][0]["scopeSpans"] = value
        elif where == "spans":
            obj["resourceSpans"][0]["scopeSpans"][0]["spans"] = value
        else:
            first_span(obj)[where] = value
        return obj

    for label, where, value in (
        ("resource-spans-string", "resourceSpans", "spans"),
        ("resource-spans-object", "resourceSpans", {"scopeSpans": []}),
        ("scope-spans-number", "scopeSpans", 7),
        ("span-name-number", "name", 42),
        ("span-name-object", "name", {"text": "chat"}),
        ("attributes-object", "attributes", {"gen_ai.operation.name": "chat"}),
        ("events-object", "events", {"name": "x"}),
        ("event-name-number", "events", [{"name": 5}]),
        ("start-time-float", "startTimeUnixNano", 1.5),
        ("start-time-negative", "startTimeUnixNano", "-1"),
        ("start-time-word", "startTimeUnixNano", "yesterday"),
        ("kind-list", "kind", [1]),
    ):
        c.add(
            f"wrong-type-json-{label}.json",
            dumps(wrong(c.js(), where, value)),
            ct=JS,
            category="wrong_types",
            description=f"{where} is {json.dumps(value)}",
            status=400,
            message=MISMATCH_TRACES,
        )
    for label, value in (
        ("two-values", {"stringValue": "a", "intValue": "1"}),
        ("int-not-a-number", {"intValue": "forty-two"}),
        ("bool-string", {"boolValue": "yes"}),
        ("array-not-a-list", {"arrayValue": {"values": {"stringValue": "a"}}}),
    ):
        c.add(
            f"wrong-type-json-any-value-{label}.json",
            dumps(c.js(add_attribute(value))),
            ct=JS,
            category="wrong_types",
            description=f"an attribute value {json.dumps(value)}",
            status=400,
            message=MISMATCH_TRACES,
        )
    c.add(
        "wrong-type-json-logs-records-string.json",
        dumps(c.logs_js(lambda o: o["resourceLogs"][0]["scopeLogs"][0].update(logRecords="none"))),
        path=LOGS,
        ct=JS,
        category="wrong_types",
        description="logRecords is a string",
        status=400,
        message=MISMATCH_LOGS,
    )
    c.add(
        "wrong-type-json-logs-body-number-map.json",
        dumps(c.logs_js(set_first_record("body", {"kvlistValue": {"values": [{"key": 1}]}}))),
        path=LOGS,
        ct=JS,
        category="wrong_types",
        description="a log body map whose key is a number",
        status=400,
        message=MISMATCH_LOGS,
    )
    c.add(
        "lenient-json-span-as-string.json",
        dumps(wrong(c.js(), "spans", ["a span"])),
        ct=JS,
        category="wrong_types",
        description="a span given as a string reads as an empty span (protobuf's JSON parser skips its characters as unknown fields): rejected for its missing ids",
        status=200,
        message="traceId must be 16 bytes, got 0",
        rejected=1,
    )
    c.add(
        "lenient-json-status-as-string.json",
        dumps(wrong(c.js(), "status", "ERROR")),
        ct=JS,
        category="wrong_types",
        description="a status given as a string reads as an unset status: the spans are stored",
        status=200,
        spans=SPANS,
    )
    c.add(
        "lenient-json-any-value-bare-string.json",
        dumps(c.js(add_attribute("plain string"))),
        ct=JS,
        category="wrong_types",
        description="an attribute value given as a bare string: protobuf's JSON parser reads it as an empty AnyValue, so the attribute is kept with no value",
        status=200,
        spans=SPANS,
    )

    # enums: integers per the spec; names (and unknown names, ignored) are accepted too
    for label, mutate in (
        ("span-kind-name", set_first("kind", "SPAN_KIND_CLIENT")),
        ("span-kind-unknown-name", set_first("kind", "SPAN_KIND_TELEPATHY")),
        ("span-kind-out-of-range", set_first("kind", 99)),
        ("status-code-name", set_first("status", {"code": "STATUS_CODE_ERROR", "message": "failed"})),
        ("status-code-out-of-range", set_first("status", {"code": 7})),
    ):
        c.add(
            f"enum-json-{label}.json",
            dumps(c.js(mutate)),
            ct=JS,
            category="enums",
            description=f"{label.replace('-', ' ')}: accepted",
            status=200,
            spans=SPANS,
        )
    c.add(
        "enum-json-logs-severity-name.json",
        dumps(c.logs_js(set_first_record("severityNumber", "SEVERITY_NUMBER_WARN"))),
        path=LOGS,
        ct=JS,
        category="enums",
        description="severityNumber as its name: accepted",
        status=200,
        events=1,
    )

    # int64 / uint64 overflow
    for label, mutate, status, message in (
        ("int-value-2-63", add_attribute({"intValue": "9223372036854775808"}), 400, MISMATCH_TRACES),
        ("int-value-minus-2-63-minus-1", add_attribute({"intValue": "-9223372036854775809"}), 400, MISMATCH_TRACES),
        ("int-value-1e30-number", add_attribute({"intValue": 1e30}), 400, MISMATCH_TRACES),
        ("start-time-2-64", set_first("startTimeUnixNano", "18446744073709551616"), 400, MISMATCH_TRACES),
        ("int-value-max", add_attribute({"intValue": "9223372036854775807"}), 200, ""),
    ):
        spans = SPANS if status == 200 else 0
        c.add(
            f"int64-json-{label}.json",
            dumps(c.js(mutate)),
            ct=JS,
            category="int64_overflow",
            description=label.replace("-", " "),
            status=status,
            message=message,
            spans=spans,
        )
    # times past the store's signed 64-bit range: that span (or log record) is rejected, the rest stored
    c.add(
        "int64-json-start-time-max.json",
        dumps(c.js(set_first("startTimeUnixNano", "18446744073709551615"))),
        ct=JS,
        category="int64_overflow",
        description="a start time of 2**64-1 (legal uint64, past 2262): that span is rejected",
        status=200,
        message="startTimeUnixNano 18446744073709551615 is out of range",
        rejected=1,
        spans=SPANS - 1,
    )
    c.add(
        "int64-json-logs-time-2-64.json",
        dumps(c.logs_js(set_first_record("timeUnixNano", "18446744073709551616"))),
        path=LOGS,
        ct=JS,
        category="int64_overflow",
        description="a log record time of 2**64",
        status=400,
        message=MISMATCH_LOGS,
    )
    c.add(
        "int64-protobuf-int-value-min.bin",
        c.pb(pb_attribute(AnyValue(int_value=-(2**63)))).SerializeToString(),
        category="int64_overflow",
        description="the smallest int64 attribute (protobuf)",
        status=200,
        spans=SPANS,
    )

    # deep nesting
    c.add(
        "deep-json-any-value-array-120.json",
        dumps(c.js(add_attribute(deep_any_value_json(120)))),
        ct=JS,
        category="deep_nesting",
        description="an attribute with 120 nested array values (JSON parser depth limit 100)",
        status=400,
        message=MISMATCH_TRACES,
    )
    c.add(
        "deep-json-any-value-kvlist-120.json",
        dumps(c.js(add_attribute(deep_any_value_json(120, "kvlistValue")))),
        ct=JS,
        category="deep_nesting",
        description="an attribute with 120 nested maps",
        status=400,
        message=MISMATCH_TRACES,
    )
    c.add(
        "deep-json-any-value-array-40.json",
        dumps(c.js(add_attribute(deep_any_value_json(40)))),
        ct=JS,
        category="deep_nesting",
        description="an attribute with 40 nested array values (within the limit)",
        status=200,
        spans=SPANS,
    )
    c.add(
        "deep-json-arrays-1000.json",
        b'{"resourceSpans":' + b"[" * 1000 + b"]" * 1000 + b"}",
        ct=JS,
        category="deep_nesting",
        description="1000 nested arrays (below the JSON parser's own limit of 1024)",
        status=400,
        message=TOO_DEEP,
    )
    c.add(
        "deep-json-unknown-objects-1000.json",
        b'{"resourceSpans":[],"x":' + b'{"a":' * 1000 + b"1" + b"}" * 1000 + b"}",
        ct=JS,
        category="deep_nesting",
        description="an unknown field holding 1000 nested objects",
        status=400,
        message=TOO_DEEP,
    )
    c.add(
        "deep-json-logs-arrays-1000.json",
        b'{"resourceLogs":' + b"[" * 1000 + b"]" * 1000 + b"}",
        path=LOGS,
        ct=JS,
        category="deep_nesting",
        description="1000 nested arrays in a logs request",
        status=400,
        message=TOO_DEEP,
    )
    c.add(
        "deep-json-arrays-2000.json",
        b'{"resourceSpans":' + b"[" * 2000 + b"]" * 2000 + b"}",
        ct=JS,
        category="deep_nesting",
        description="2000 nested arrays (past the JSON parser's limit)",
        status=400,
        message=NOT_JSON,
    )

    # huge attribute strings, the size limit exactly, and over it
    big = "x" * (LIMIT - 6000)
    c.add(
        "huge-attribute-json-under-limit.json",
        dumps(c.js(add_attribute({"stringValue": big}))),
        ct=JS,
        category="huge",
        description=f"a {len(big)}-character attribute, under the {LIMIT}-byte limit",
        status=200,
        spans=SPANS,
    )
    c.add(
        "huge-attribute-protobuf-under-limit.bin",
        c.pb(pb_attribute(AnyValue(string_value=big))).SerializeToString(),
        category="huge",
        description=f"a {len(big)}-character attribute in protobuf",
        status=200,
        spans=SPANS,
    )
    c.add(
        "huge-body-exactly-limit.bin.gz",
        gz(padded_pb(c.pb(), LIMIT)),
        ce="gzip",
        category="huge",
        description=f"a body of exactly {LIMIT} bytes once decompressed (padded with an unknown field)",
        status=200,
        spans=SPANS,
    )
    c.add(
        "huge-body-limit-plus-one.bin.gz",
        gz(padded_pb(c.pb(), LIMIT + 1)),
        ce="gzip",
        category="huge",
        description=f"a body of {LIMIT + 1} bytes once decompressed",
        status=413,
        message=TOO_LARGE,
    )
    c.add(
        "huge-attribute-protobuf-over-limit.bin",
        c.pb(pb_attribute(AnyValue(string_value="y" * (LIMIT + 10)))).SerializeToString(),
        category="huge",
        description="an uncompressed body over the limit (refused on Content-Length)",
        status=413,
        message=f"the limit is {LIMIT}",
    )
    c.add(
        "huge-attribute-json-1mib-gzip.json.gz",
        gz(dumps(c.js(add_attribute({"stringValue": "z" * 2**20})))),
        ct=JS,
        ce="gzip",
        category="huge",
        description="a 1 MiB attribute, gzip-compressed to a small body",
        status=413,
        message=TOO_LARGE,
    )

    # decompression bombs
    zeros = b"\0" * (4 * 2**20)
    c.add(
        "bomb-gzip-4mib.gz",
        gz(zeros),
        ce="gzip",
        category="bombs",
        description="4 MiB of zeros in a small gzip body",
        status=413,
        message=TOO_LARGE,
    )
    c.add(
        "bomb-deflate-4mib.zz",
        zlib.compress(zeros, 9),
        ce="deflate",
        category="bombs",
        description="4 MiB of zeros, zlib deflate",
        status=413,
        message=TOO_LARGE,
    )
    c.add(
        "bomb-raw-deflate-4mib.deflate",
        raw_deflate(zeros),
        ce="deflate",
        category="bombs",
        description="4 MiB of zeros, raw deflate (no zlib header)",
        status=413,
        message=TOO_LARGE,
    )
    c.add(
        "bomb-gzip-json-whitespace.json.gz",
        gz(b'{"resourceSpans":[' + b" " * (4 * 2**20) + b"]}"),
        ct=JS,
        ce="gzip",
        category="bombs",
        description="4 MiB of JSON whitespace",
        status=413,
        message=TOO_LARGE,
    )
    c.add(
        "bomb-gzip-logs.gz",
        gz(zeros),
        path=LOGS,
        ce="gzip",
        category="bombs",
        description="a gzip bomb posted to /v1/logs",
        status=413,
        message=TOO_LARGE,
    )
    c.add(
        "bomb-double-gzip.gz.gz",
        gz(gz(zeros)),
        ce="gzip",
        category="bombs",
        description="gzip inside gzip: one layer is undone, the inner gzip is not protobuf",
        status=400,
        message=NOT_PB_TRACES,
    )

    # compression errors and odd encodings
    body = c.pb().SerializeToString()
    c.add(
        "gzip-declared-plain-body.bin",
        body,
        ce="gzip",
        category="compression",
        description="Content-Encoding gzip on an uncompressed body",
        status=400,
        message="body is not valid gzip",
    )
    c.add(
        "deflate-declared-plain-body.bin",
        c.pb().SerializeToString(),
        ce="deflate",
        category="compression",
        description="Content-Encoding deflate on an uncompressed body",
        status=400,
        message="body is not valid deflate",
    )
    g = gz(c.pb().SerializeToString())
    c.add(
        "gzip-truncated-trailer.bin.gz",
        g[:-8],
        ce="gzip",
        category="compression",
        description="gzip without its CRC and size trailer",
        status=400,
        message="gzip stream is truncated",
    )
    g = gz(c.pb().SerializeToString())
    c.add(
        "gzip-truncated-half.bin.gz",
        g[: len(g) // 2],
        ce="gzip",
        category="compression",
        description="gzip cut in half",
        status=400,
        message="gzip stream is truncated",
    )
    g = gz(c.pb().SerializeToString())
    c.add(
        "gzip-bad-crc.bin.gz",
        g[:-8] + bytes([g[-8] ^ 0xFF]) + g[-7:],
        ce="gzip",
        category="compression",
        description="gzip with a wrong CRC-32",
        status=400,
        message="body is not valid gzip",
    )
    g = gz(c.pb().SerializeToString())
    c.add(
        "gzip-bad-magic.bin.gz",
        b"\x1f\x8c" + g[2:],
        ce="gzip",
        category="compression",
        description="gzip with a wrong magic number",
        status=400,
        message="body is not valid gzip",
    )
    z = zlib.compress(c.pb().SerializeToString())
    c.add(
        "deflate-truncated.zz",
        z[: len(z) // 2],
        ce="deflate",
        category="compression",
        description="zlib deflate cut in half",
        status=400,
        message="deflate stream is truncated",
    )
    z = zlib.compress(c.pb().SerializeToString())
    c.add(
        "deflate-bad-adler.zz",
        z[:-1] + bytes([z[-1] ^ 0xFF]),
        ce="deflate",
        category="compression",
        description="zlib deflate with a wrong Adler-32",
        status=400,
        message="body is not valid deflate",
    )
    r = raw_deflate(c.pb().SerializeToString())
    c.add(
        "raw-deflate-truncated.deflate",
        r[: len(r) // 2],
        ce="deflate",
        category="compression",
        description="raw deflate cut in half",
        status=400,
        message="deflate stream is truncated",
    )
    c.add(
        "gzip-empty-body.bin",
        b"",
        ce="gzip",
        category="compression",
        description="Content-Encoding gzip on an empty body",
        status=400,
        message="gzip stream is truncated",
    )
    c.add(
        "deflate-empty-body.bin",
        b"",
        ce="deflate",
        category="compression",
        description="Content-Encoding deflate on an empty body",
        status=400,
        message="deflate stream is truncated",
    )
    for label, enc in (
        ("br", "br"),
        ("zstd", "zstd"),
        ("compress", "compress"),
        ("x-gzip", "x-gzip"),
        ("stacked", "gzip, gzip"),
    ):
        c.add(
            f"encoding-{label}.bin.gz",
            gz(c.pb().SerializeToString()),
            ce=enc,
            category="compression",
            description=f"Content-Encoding {enc!r} is not supported",
            status=400,
            message=BAD_CE,
        )
    c.add(
        "encoding-uppercase-gzip.bin.gz",
        gz(c.pb().SerializeToString()),
        ce="GZIP",
        category="compression",
        description="Content-Encoding GZIP (case-insensitive): accepted",
        status=200,
        spans=SPANS,
    )
    c.add(
        "encoding-identity.bin",
        c.pb().SerializeToString(),
        ce="identity",
        category="compression",
        description="Content-Encoding identity: accepted",
        status=200,
        spans=SPANS,
    )
    c.add(
        "encoding-deflate-zlib.zz",
        zlib.compress(c.pb().SerializeToString()),
        ce="deflate",
        category="compression",
        description="zlib deflate: accepted",
        status=200,
        spans=SPANS,
    )
    c.add(
        "encoding-raw-deflate.deflate",
        raw_deflate(c.pb().SerializeToString()),
        ce="deflate",
        category="compression",
        description="raw deflate without the zlib header: accepted",
        status=200,
        spans=SPANS,
    )
    c.add(
        "encoding-gzip-json-logs.json.gz",
        gz(dumps(c.logs_js())),
        path=LOGS,
        ct=JS,
        ce="gzip",
        category="compression",
        description="gzip OTLP/JSON logs: accepted",
        status=200,
        events=1,
    )

    # content types
    for label, ct in (
        ("text-plain", "text/plain"),
        ("octet-stream", "application/octet-stream"),
        ("grpc", "application/grpc"),
        ("form", "application/x-www-form-urlencoded"),
        ("multipart", "multipart/form-data; boundary=x"),
        ("ndjson", "application/x-ndjson"),
        ("json-typo", "application/jsn"),
        ("empty", ""),
    ):
        c.add(
            f"content-type-{label}.bin",
            c.pb().SerializeToString(),
            ct=ct,
            category="content_type",
            description=f"Content-Type {ct!r}",
            status=415,
            message=BAD_CT,
        )
    c.add(
        "content-type-missing.bin",
        c.pb().SerializeToString(),
        ct=None,
        category="content_type",
        description="no Content-Type header",
        status=415,
        message=BAD_CT,
    )
    c.add(
        "content-type-logs-text-plain.json",
        dumps(c.logs_js()),
        path=LOGS,
        ct="text/plain",
        category="content_type",
        description="logs with Content-Type text/plain",
        status=415,
        message=BAD_CT,
    )
    for label, ct, body_is_json in (
        ("json-charset", "application/json; charset=utf-8", True),
        ("json-uppercase", "APPLICATION/JSON", True),
        ("protobuf-alias", "application/protobuf", False),
        ("protobuf-with-parameter", "application/x-protobuf; proto=opentelemetry.proto.collector.trace.v1", False),
    ):
        b = dumps(c.js()) if body_is_json else c.pb().SerializeToString()
        c.add(
            f"content-type-{label}.{'json' if body_is_json else 'bin'}",
            b,
            ct=ct,
            category="content_type",
            description=f"Content-Type {ct!r}: accepted",
            status=200,
            spans=SPANS,
        )

    # empty bodies and empty requests (an empty request is a success)
    c.add(
        "empty-protobuf.bin",
        b"",
        category="empty",
        description="an empty protobuf body is an empty request",
        status=200,
    )
    c.add(
        "empty-logs-protobuf.bin",
        b"",
        path=LOGS,
        category="empty",
        description="an empty protobuf logs request",
        status=200,
    )
    c.add("empty-json-object.json", b"{}", ct=JS, category="empty", description="{} is an empty request", status=200)
    c.add(
        "empty-logs-json-object.json",
        b"{}",
        path=LOGS,
        ct=JS,
        category="empty",
        description="{} as a logs request",
        status=200,
    )
    c.add(
        "empty-json-resource-spans.json",
        b'{"resourceSpans":[{"scopeSpans":[{"spans":[]}]}]}',
        ct=JS,
        category="empty",
        description="resource and scope with no spans",
        status=200,
    )
    c.add(
        "empty-gzip-of-nothing.bin.gz",
        gz(b""),
        ce="gzip",
        category="empty",
        description="gzip of an empty body",
        status=200,
    )
    c.add(
        "empty-json-zero-bytes.json",
        b"",
        ct=JS,
        category="empty",
        description="a zero-length JSON body is not JSON",
        status=400,
        message=NOT_JSON,
    )
    c.add(
        "empty-json-whitespace.json",
        b"  \n",
        ct=JS,
        category="empty",
        description="only whitespace",
        status=400,
        message=NOT_JSON,
    )

    # JSON that is not an object
    for label, b in (
        ("array", b"[]"),
        ("null", b"null"),
        ("string", b'"resourceSpans"'),
        ("number", b"42"),
        ("boolean", b"true"),
        ("array-of-requests", b"[" + dumps(otlp_json(traces(c.next_seed()))) + b"]"),
    ):
        c.add(
            f"json-not-object-{label}.json",
            b,
            ct=JS,
            category="json_not_object",
            description=f"a JSON {label.replace('-', ' ')}",
            status=400,
            message=NOT_OBJECT,
        )
    c.add(
        "json-not-object-logs-array.json",
        b"[]",
        path=LOGS,
        ct=JS,
        category="json_not_object",
        description="a JSON array posted to /v1/logs",
        status=400,
        message=NOT_OBJECT,
    )

    # invalid JSON text
    b = dumps(c.js())
    c.add(
        "invalid-json-bom.json",
        b"\xef\xbb\xbf" + b,
        ct=JS,
        category="invalid_json",
        description="a UTF-8 byte order mark before the object",
        status=400,
        message=NOT_JSON,
    )
    c.add(
        "invalid-json-utf8.json",
        dumps(c.js(set_first("name", "chat"))).replace(b'"chat"', b'"ch\xffat"'),
        ct=JS,
        category="invalid_json",
        description="invalid UTF-8 in a string",
        status=400,
        message=NOT_JSON,
    )
    c.add(
        "invalid-json-lone-surrogate.json",
        dumps(c.js(set_first("name", "chat"))).replace(b'"chat"', b'"\\ud800"'),
        ct=JS,
        category="invalid_json",
        description="a lone UTF-16 surrogate escape",
        status=400,
        message=NOT_JSON,
    )
    c.add(
        "invalid-json-nan.json",
        b'{"resourceSpans":[],"x":NaN}',
        ct=JS,
        category="invalid_json",
        description="a NaN literal",
        status=400,
        message=NOT_JSON,
    )
    c.add(
        "invalid-json-trailing-comma.json",
        b'{"resourceSpans":[],}',
        ct=JS,
        category="invalid_json",
        description="a trailing comma",
        status=400,
        message=NOT_JSON,
    )
    c.add(
        "invalid-json-single-quotes.json",
        b"{'resourceSpans':[]}",
        ct=JS,
        category="invalid_json",
        description="single-quoted keys",
        status=400,
        message=NOT_JSON,
    )
    c.add(
        "invalid-json-comment.json",
        b'{"resourceSpans":[] /* none */}',
        ct=JS,
        category="invalid_json",
        description="a comment",
        status=400,
        message=NOT_JSON,
    )
    c.add(
        "invalid-json-lines.json",
        dumps(c.js()) + b"\n" + dumps(c.js()),
        ct=JS,
        category="invalid_json",
        description="two requests as JSON lines in one body",
        status=400,
        message=NOT_JSON,
    )

    # unknown fields: receivers MUST ignore them
    c.add(
        "unknown-field-json-top-level.json",
        dumps({**c.js(), "futureField": {"a": [1, 2, 3]}}),
        ct=JS,
        category="unknown_fields",
        description="an unknown top-level field",
        status=200,
        spans=SPANS,
    )
    c.add(
        "unknown-field-json-in-span.json",
        dumps(c.js(set_first("newSpanField", "v"))),
        ct=JS,
        category="unknown_fields",
        description="an unknown field in a span",
        status=200,
        spans=SPANS,
    )
    c.add(
        "unknown-field-json-in-resource.json",
        dumps(c.js(lambda o: o["resourceSpans"][0]["resource"].update(entityRefs=[{"type": "service"}]))),
        ct=JS,
        category="unknown_fields",
        description="an unknown field in the resource",
        status=200,
        spans=SPANS,
    )
    c.add(
        "unknown-field-json-holding-trace-id.json",
        dumps({**c.js(), "debug": {"traceId": "not hex at all"}}),
        ct=JS,
        category="unknown_fields",
        description="an unknown field whose value has a traceId key that is not hex: still unknown, still ignored",
        status=200,
        spans=SPANS,
    )
    c.add(
        "unknown-field-json-logs.json",
        dumps(c.logs_js(set_first_record("newRecordField", 1))),
        path=LOGS,
        ct=JS,
        category="unknown_fields",
        description="an unknown field in a log record",
        status=200,
        events=1,
    )
    c.add(
        "unknown-field-json-snake-case-keys.json",
        dumps({"resource_spans": c.js()["resourceSpans"]}),
        ct=JS,
        category="unknown_fields",
        description="proto field names (resource_spans) instead of lowerCamelCase: accepted",
        status=200,
        spans=SPANS,
    )
    c.add(
        "unknown-field-protobuf-top-level.bin",
        c.pb().SerializeToString() + ld(1000, b"future"),
        category="unknown_fields",
        description="an unknown field number 1000 at the top level",
        status=200,
        spans=SPANS,
    )
    c.add(
        "unknown-field-protobuf-in-span.bin",
        with_span_suffix(c.pb(), tag(99, 0) + b"\x05"),
        category="unknown_fields",
        description="an unknown field number 99 in a span",
        status=200,
        spans=SPANS,
    )
    c.add(
        "unknown-field-json-resource-spans-to-logs.json",
        dumps(c.js()),
        path=LOGS,
        ct=JS,
        category="unknown_fields",
        description="a trace request posted to /v1/logs as JSON: resourceSpans is unknown there, nothing to store",
        status=200,
    )

    # valid-but-odd requests that must be accepted
    def duplicate_spans(req: ExportTraceServiceRequest) -> None:
        ss = req.resource_spans[0].scope_spans[0]
        ss.spans.extend(list(ss.spans))

    c.add(
        "odd-duplicate-spans.bin",
        c.pb(duplicate_spans).SerializeToString(),
        category="odd_but_valid",
        description="every span twice in one request: stored once",
        status=200,
        spans=SPANS,
    )
    c.add(
        "odd-two-requests-concatenated.bin",
        c.pb().SerializeToString() + c.pb().SerializeToString(),
        category="odd_but_valid",
        description="two protobuf requests back to back merge into one (protobuf semantics)",
        status=200,
        spans=2 * SPANS,
    )

    def no_event_name(req: ExportLogsServiceRequest) -> None:
        req.resource_logs[0].scope_logs[0].log_records[0].event_name = ""

    def no_ids(req: ExportLogsServiceRequest) -> None:
        r = req.resource_logs[0].scope_logs[0].log_records[0]
        r.trace_id, r.span_id = b"", b""

    def event_name_attribute(req: ExportLogsServiceRequest) -> None:
        r = req.resource_logs[0].scope_logs[0].log_records[0]
        r.event_name = ""
        r.attributes.append(
            KeyValue(key="event.name", value=AnyValue(string_value="gen_ai.client.inference.operation.details"))
        )

    c.add(
        "odd-log-without-event-name.bin",
        c.logs_pb(no_event_name).SerializeToString(),
        path=LOGS,
        category="odd_but_valid",
        description="a plain log record (no event name) is ignored",
        status=200,
    )
    c.add(
        "odd-log-without-ids.bin",
        c.logs_pb(no_ids).SerializeToString(),
        path=LOGS,
        category="odd_but_valid",
        description="an event that belongs to no span is ignored",
        status=200,
    )
    c.add(
        "odd-log-event-name-attribute.bin",
        c.logs_pb(event_name_attribute).SerializeToString(),
        path=LOGS,
        category="odd_but_valid",
        description="the event name in the event.name attribute",
        status=200,
        events=1,
    )
    c.add(
        "odd-string-int64-as-number.json",
        dumps(c.js(set_first("startTimeUnixNano", T0))),
        ct=JS,
        category="odd_but_valid",
        description="an int64 as a JSON number instead of a string",
        status=200,
        spans=SPANS,
    )
    c.add(
        "odd-attribute-without-value.json",
        dumps(c.js(add_attribute(None, key="corpus.empty"))),
        ct=JS,
        category="odd_but_valid",
        description="an attribute with a null value",
        status=200,
        spans=SPANS,
    )

    # values the store once could not write, so the whole request got 503 for ever (issue 14): each is
    # now rejected on its own (times past 2262), or stored (a span sent twice with different content,
    # NUL in a conversation id, dropped), and the rest of the request is stored
    def event_at(ns: int) -> Callable[[ExportTraceServiceRequest], None]:
        def mutate(req: ExportTraceServiceRequest) -> None:
            req.resource_spans[0].scope_spans[0].spans[0].events.add(name="late", time_unix_nano=ns)

        return mutate

    for label, mutate, message in (
        ("start-time-2-63", pb_span("start_time_unix_nano", 2**63), "startTimeUnixNano 9223372036854775808"),
        ("end-time-2-64-minus-1", pb_span("end_time_unix_nano", 2**64 - 1), "endTimeUnixNano 18446744073709551615"),
        ("event-time-2-63", event_at(2**63), "event 'late' timeUnixNano 9223372036854775808"),
    ):
        c.add(
            f"store-limit-protobuf-{label}.bin",
            c.pb(mutate).SerializeToString(),
            category="store_limits",
            description=f"{label.replace('-', ' ')}: past the largest time stored, that span is rejected",
            status=200,
            message=message + " is out of range",
            rejected=1,
            spans=SPANS - 1,
        )

    def log_at(req: ExportLogsServiceRequest) -> None:
        req.resource_logs[0].scope_logs[0].log_records[0].time_unix_nano = 2**63

    c.add(
        "store-limit-logs-time-2-63.bin",
        c.logs_pb(log_at).SerializeToString(),
        path=LOGS,
        category="store_limits",
        description="a log record at 2**63 ns: rejected",
        status=200,
        message="timeUnixNano 9223372036854775808 is out of range",
        rejected=1,
    )

    def same_span_changed(req: ExportTraceServiceRequest) -> None:
        ss = req.resource_spans[0].scope_spans[0]
        again = type(ss.spans[0])()
        again.CopyFrom(ss.spans[0])
        again.name = "renamed on the second copy"
        ss.spans.append(again)

    c.add(
        "store-limit-same-span-twice-changed.bin",
        c.pb(same_span_changed).SerializeToString(),
        category="store_limits",
        description="one span twice in a request with different content: stored once",
        status=200,
        spans=SPANS,
    )

    def conversation(value: str) -> Callable[[ExportTraceServiceRequest], None]:
        def mutate(req: ExportTraceServiceRequest) -> None:
            for s in req.resource_spans[0].scope_spans[0].spans:
                for kv in s.attributes:
                    if kv.key == "gen_ai.conversation.id":
                        kv.value.string_value = value

        return mutate

    c.add(
        "store-limit-nul-in-conversation-id.bin",
        c.pb(conversation("corpus\0nul")).SerializeToString(),
        category="store_limits",
        description="NUL in gen_ai.conversation.id: dropped from the id, everything stored",
        status=200,
        spans=SPANS,
    )
    c.add(
        "store-limit-conversation-id-only-nul.json",
        dumps(otlp_json(c.pb(conversation("\0\0")))),
        ct=JS,
        category="store_limits",
        description="a conversation id of NUL only: no conversation id, everything stored",
        status=200,
        spans=SPANS,
    )
    whole = c.pb().SerializeToString()
    c.add(
        "gzip-many-members.bin.gz",
        b"".join(gzip.compress(whole[i : i + 7], mtime=0) for i in range(0, len(whole), 7)),
        ce="gzip",
        category="compression",
        description="gzip of one member per 7 bytes of the body (RFC 1952 allows any number): all read",
        status=200,
        spans=SPANS,
    )

    items = c.items
    names = [i.file for i in items]
    assert len(set(names)) == len(names), "duplicate file names"
    manifest = {
        "about": "Malformed and odd OTLP/HTTP requests with the answer each must get. "
        "Written by tests/corpus/make_otlp_corpus.py; checked by tests/test_bad_input.py.",
        "max_body_bytes": LIMIT,
        "counts": {
            "items": len(items),
            "by_status": {str(k): v for k, v in sorted(Counter(i.status for i in items).items())},
            "by_category": dict(sorted(Counter(i.category for i in items).items())),
        },
        "items": [{k: v for k, v in asdict(i).items() if k != "body"} for i in items],
    }
    return items, manifest


def render() -> dict[str, bytes]:
    """Every file of the corpus, manifest included, by name."""
    items, manifest = build()
    files = {i.file: i.body for i in items}
    files[MANIFEST] = (json.dumps(manifest, indent=1, ensure_ascii=False) + "\n").encode()
    return files


def main() -> None:
    files = render()
    OUT.mkdir(parents=True, exist_ok=True)
    for stale in OUT.iterdir():
        if stale.name not in files:
            stale.unlink()
    for name, data in files.items():
        (OUT / name).write_bytes(data)
    counts = json.loads(files[MANIFEST])["counts"]
    print(f"wrote {counts['items']} requests to {OUT.relative_to(REPO)}: {counts['by_status']}")


if __name__ == "__main__":
    main()
