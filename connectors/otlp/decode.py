"""OTLP wire formats (protobuf and JSON with hex ids) to canonical spans and log events.

Pure functions over bytes: no I/O. Errors are `OtlpDecodeError` with a message that says
what is wrong, so the receiver can answer 400 with it.
"""

from __future__ import annotations

import base64
import sys
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Literal

import orjson
from google.protobuf import json_format
from google.protobuf.message import DecodeError
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue

from tracing_eval.model import Span, SpanEvent

PROTOBUF = "application/x-protobuf"
JSON = "application/json"
_STATUS: dict[int, Literal["unset", "ok", "error"]] = {0: "unset", 1: "ok", 2: "error"}
_ID_KEYS = ("traceId", "spanId", "parentSpanId")


class OtlpDecodeError(ValueError):
    """The payload is not valid OTLP; the message says what is wrong."""


class PayloadTooLarge(OtlpDecodeError):
    """The body exceeds the size limit once decompressed."""


@dataclass
class LogEvent:
    """An OTLP log record that belongs to a span (joined by trace and span id)."""

    trace_id: str
    span_id: str
    event: SpanEvent


@dataclass
class Decoded:
    spans: list[Span] = field(default_factory=list)
    logs: list[LogEvent] = field(default_factory=list)
    rejected: int = 0
    errors: list[str] = field(default_factory=list)


#: First input fed to zlib per member; doubled up to `_MAX_FEED` while the member lasts. Feeding a
#: member about its own size keeps multi-member gzip linear: zlib copies whatever follows a member's
#: end (`unused_data`), so feeding the whole body would copy the rest of it once per member.
_FIRST_FEED, _MAX_FEED = 64, 1 << 20


def decompress(body: bytes, encoding: str | None, limit: int, reserve: Callable[[int], None] | None = None) -> bytes:
    """Undo `Content-Encoding` (gzip, deflate or none), refusing more than `limit` bytes. Linear in the
    body's size, whatever its members look like. `reserve(n)` is called for every n bytes inflated
    (it may raise to stop); a body without encoding is returned as it is."""
    encoding = (encoding or "identity").strip().lower()
    if encoding in ("", "identity"):
        if len(body) > limit:
            raise PayloadTooLarge(f"body is {len(body)} bytes; the limit is {limit}")
        return body
    if encoding not in ("gzip", "deflate"):
        raise OtlpDecodeError(f"unsupported Content-Encoding {encoding!r}; use gzip, deflate or none")
    try:  # a gzip body may hold several members (RFC 1952); each one is part of the body
        return _inflate(body, 16 + zlib.MAX_WBITS if encoding == "gzip" else zlib.MAX_WBITS, limit, encoding, reserve)
    except zlib.error as exc:
        if encoding == "deflate":  # some clients send raw deflate without the zlib header
            try:
                return decompress_raw_deflate(body, limit, reserve)
            except zlib.error:
                pass
        raise OtlpDecodeError(f"body is not valid {encoding}: {exc}") from None


def decompress_raw_deflate(body: bytes, limit: int, reserve: Callable[[int], None] | None = None) -> bytes:
    return _inflate(body, -zlib.MAX_WBITS, limit, "deflate", reserve)


def _inflate(body: bytes, wbits: int, limit: int, encoding: str, reserve: Callable[[int], None] | None) -> bytes:
    """Inflate every member of `body` (gzip) or the one stream (zlib, raw deflate; trailing bytes ignored)."""
    view, out, pos, reserved = memoryview(body), bytearray(), 0, 0
    data: bytes | memoryview
    while True:
        d, feed, data = zlib.decompressobj(wbits), _FIRST_FEED, b""
        while not d.eof:
            if not data:
                if pos >= len(view):
                    raise OtlpDecodeError(f"{encoding} stream is truncated")
                data = view[pos : pos + feed]
                pos, feed = pos + len(data), min(2 * feed, _MAX_FEED)
            out += d.decompress(data, limit + 1 - len(out))
            if len(out) > limit:
                raise PayloadTooLarge(f"body decompresses to more than the limit of {limit} bytes")
            if reserve is not None and len(out) > reserved:
                reserve(len(out) - reserved)
                reserved = len(out)
            data = d.unconsumed_tail
        pos -= len(d.unused_data)  # back to the first byte after this member
        if encoding != "gzip" or pos >= len(view):
            return bytes(out)


def media_type(content_type: str | None) -> str:
    """`application/json; charset=utf-8` -> `application/json`; unknown types raise."""
    mt = (content_type or "").split(";")[0].strip().lower()
    if mt in (PROTOBUF, "application/protobuf"):
        return PROTOBUF
    if mt == JSON:
        return JSON
    raise OtlpDecodeError(f"unsupported Content-Type {content_type!r}; use {PROTOBUF} or {JSON}")


def any_value(v: AnyValue) -> Any:
    kind = v.WhichOneof("value")
    if kind == "string_value":
        return v.string_value
    if kind == "int_value":
        return v.int_value
    if kind == "double_value":
        return v.double_value
    if kind == "bool_value":
        return v.bool_value
    if kind == "array_value":
        return [any_value(x) for x in v.array_value.values]
    if kind == "kvlist_value":
        return {kv.key: any_value(kv.value) for kv in v.kvlist_value.values}
    if kind == "bytes_value":
        return base64.b64encode(v.bytes_value).decode()
    return None


def attributes(kvs: Any) -> dict[str, Any]:
    return {kv.key: any_value(kv.value) for kv in kvs}


def _hex_id(raw: bytes, size: int, what: str) -> str:
    if len(raw) != size:
        raise OtlpDecodeError(f"{what} must be {size} bytes, got {len(raw)}")
    if raw == b"\0" * size:
        raise OtlpDecodeError(f"{what} is all zeros")
    return raw.hex()


def _parent_id(raw: bytes) -> str | None:
    """The parent span id: empty (or all zeros) for a root, else 8 bytes like any span id."""
    if not raw or raw == b"\0" * len(raw):
        return None
    if len(raw) != 8:
        raise OtlpDecodeError(f"parentSpanId must be 8 bytes or empty, got {len(raw)}")
    return raw.hex()


#: Times are nanoseconds since 1970 in a fixed64; the store keeps signed 64-bit integers (to 2262-04-11).
MAX_TIME_NS = 2**63 - 1


def _time(ns: int, what: str) -> int:
    if ns > MAX_TIME_NS:
        raise OtlpDecodeError(f"{what} {ns} is out of range (the largest time stored is {MAX_TIME_NS}, in 2262)")
    return ns


_MAX_JSON_DEPTH = 512  # far deeper than any real request (AnyValue nesting stops at 100 levels anyway)
#: Where OTLP/JSON has ids: spans (and their links) and log records, under either spelling of each key.
_PATHS = (
    (("resourceSpans", "resource_spans"), ("scopeSpans", "scope_spans"), ("spans",)),
    (("resourceLogs", "resource_logs"), ("scopeLogs", "scope_logs"), ("logRecords", "log_records")),
)


def _too_deep(node: Any, limit: int = _MAX_JSON_DEPTH) -> bool:
    """True when JSON `node` nests more than `limit` levels (iterative: no recursion on hostile input)."""
    stack = [(node, 1)]
    while stack:
        item, depth = stack.pop()
        if depth > limit:
            return True
        if isinstance(item, dict):
            stack.extend((v, depth + 1) for v in item.values())
        elif isinstance(item, list):
            stack.extend((v, depth + 1) for v in item)
    return False


def _hex_ids_to_base64(node: Any) -> None:
    if not isinstance(node, dict):
        return
    for key in _ID_KEYS:
        val = node.get(key)
        if isinstance(val, str):
            try:
                node[key] = base64.b64encode(bytes.fromhex(val)).decode() if val else ""
            except ValueError:
                raise OtlpDecodeError(f"{key} {val[:40]!r} is not a hex string") from None


def _json_ids_to_base64(obj: Any) -> None:
    """OTLP/JSON carries ids as hex; protobuf's JSON mapping wants base64. Rewrite them in place where
    OTLP has them (spans, their links, log records); unknown fields are left alone."""
    if _too_deep(obj):
        raise OtlpDecodeError(f"OTLP/JSON body is nested too deeply (more than {_MAX_JSON_DEPTH} levels)")
    for path in _PATHS:
        nodes = [obj]
        for keys in path:
            found = (next((n[k] for k in keys if k in n), None) for n in nodes if isinstance(n, dict))
            nodes = [x for items in found if isinstance(items, list) for x in items]
        for node in nodes:
            _hex_ids_to_base64(node)
            links = node.get("links") if isinstance(node, dict) else None
            for link in links if isinstance(links, list) else []:
                _hex_ids_to_base64(link)


def parse(body: bytes, mt: str, message: Any) -> Any:
    """Parse an OTLP request body (protobuf, or OTLP/JSON with hex ids) into `message`."""
    if mt == PROTOBUF:
        try:
            message.ParseFromString(body)
        except (DecodeError, RuntimeError, ValueError) as exc:
            raise OtlpDecodeError(f"body is not a valid {type(message).__name__} protobuf: {exc}") from None
        return message
    try:
        obj = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise OtlpDecodeError(f"body is not valid JSON: {exc}") from None
    if not isinstance(obj, dict):
        raise OtlpDecodeError("OTLP/JSON body must be a JSON object")
    _json_ids_to_base64(obj)
    try:
        json_format.ParseDict(obj, message, ignore_unknown_fields=True)
    except json_format.ParseError as exc:
        raise OtlpDecodeError(f"body does not match {type(message).__name__}: {exc}") from None
    return message


def span_chunks(req: ExportTraceServiceRequest, size: int) -> Iterator[Decoded]:
    """Canonical spans of a trace export, `size` at a time (rejected ones count towards `size`);
    spans with bad ids or times are counted as rejected, with the reason. At least one chunk."""
    out, sent = Decoded(), False
    for rs in req.resource_spans:
        resource = attributes(rs.resource.attributes)
        for ss in rs.scope_spans:
            scope = ss.scope.name
            for s in ss.spans:
                if len(out.spans) + out.rejected >= size:
                    yield out
                    out, sent = Decoded(), True
                try:
                    trace_id = _hex_id(s.trace_id, 16, "traceId")
                    span_id = _hex_id(s.span_id, 8, "spanId")
                    parent = _parent_id(s.parent_span_id)
                    start = _time(s.start_time_unix_nano, "startTimeUnixNano")
                    end = _time(s.end_time_unix_nano, "endTimeUnixNano")
                    events = [
                        SpanEvent.model_construct(
                            name=e.name,
                            time_ns=_time(e.time_unix_nano, f"event {e.name[:40]!r} timeUnixNano"),
                            attributes=attributes(e.attributes),
                            body=None,
                        )
                        for e in s.events
                    ]
                except OtlpDecodeError as exc:
                    out.rejected += 1
                    out.errors.append(f"span {s.name[:80]!r}: {exc}")
                    continue
                out.spans.append(
                    Span.model_construct(
                        trace_id=trace_id,
                        span_id=span_id,
                        parent_id=parent,
                        name=s.name,
                        kind=s.kind,
                        start_ns=start,
                        end_ns=end,
                        status=_STATUS.get(s.status.code, "unset"),
                        status_message=s.status.message,
                        attributes=attributes(s.attributes),
                        events=events,
                        resource=resource,
                        scope=scope,
                    )
                )
    if out.spans or out.rejected or not sent:
        yield out


def spans_from_request(req: ExportTraceServiceRequest) -> Decoded:
    """Canonical spans from a trace export, all at once."""
    return next(span_chunks(req, sys.maxsize))


def log_chunks(req: ExportLogsServiceRequest, size: int) -> Iterator[Decoded]:
    """Log records that carry an event name and belong to a span, `size` at a time; others are ignored."""
    out, sent = Decoded(), False
    for rl in req.resource_logs:
        for sl in rl.scope_logs:
            for r in sl.log_records:
                if len(out.logs) + out.rejected >= size:
                    yield out
                    out, sent = Decoded(), True
                attrs = attributes(r.attributes)
                name = r.event_name or attrs.get("event.name")
                if not name or not r.trace_id or not r.span_id:
                    continue  # plain logs and unparented events carry nothing to join
                try:
                    trace_id = _hex_id(r.trace_id, 16, "traceId")
                    span_id = _hex_id(r.span_id, 8, "spanId")
                    when = _time(r.time_unix_nano or r.observed_time_unix_nano, "timeUnixNano")
                except OtlpDecodeError as exc:
                    out.rejected += 1
                    out.errors.append(f"log record {str(name)[:80]!r}: {exc}")
                    continue
                body = any_value(r.body) if r.HasField("body") else None
                out.logs.append(
                    LogEvent(
                        trace_id,
                        span_id,
                        SpanEvent.model_construct(name=str(name), time_ns=when, attributes=attrs, body=body),
                    )
                )
    if out.logs or out.rejected or not sent:
        yield out


def logs_from_request(req: ExportLogsServiceRequest) -> Decoded:
    """Log records that carry an event name and belong to a span, all at once."""
    return next(log_chunks(req, sys.maxsize))


def parse_traces(body: bytes, mt: str) -> ExportTraceServiceRequest:
    return parse(body, mt, ExportTraceServiceRequest())


def parse_logs(body: bytes, mt: str) -> ExportLogsServiceRequest:
    return parse(body, mt, ExportLogsServiceRequest())


def decode_traces(body: bytes, mt: str) -> Decoded:
    return spans_from_request(parse_traces(body, mt))


def decode_logs(body: bytes, mt: str) -> Decoded:
    return logs_from_request(parse_logs(body, mt))


def decode_json_line(line: bytes) -> Decoded:
    """One line of the Collector file exporter: a trace or a logs export request in OTLP/JSON."""
    try:
        obj = orjson.loads(line)
    except orjson.JSONDecodeError as exc:
        raise OtlpDecodeError(f"not valid JSON: {exc}") from None
    if not isinstance(obj, dict):
        raise OtlpDecodeError("expected a JSON object with resourceSpans or resourceLogs")
    _json_ids_to_base64(obj)
    if "resourceSpans" in obj or "resource_spans" in obj:
        msg: Any = ExportTraceServiceRequest()
        convert: Callable[[Any], Decoded] = spans_from_request
    elif "resourceLogs" in obj or "resource_logs" in obj:
        msg = ExportLogsServiceRequest()
        convert = logs_from_request
    else:
        return Decoded()
    try:
        json_format.ParseDict(obj, msg, ignore_unknown_fields=True)
    except json_format.ParseError as exc:
        raise OtlpDecodeError(f"does not match the OTLP schema: {exc}") from None
    return convert(msg)
