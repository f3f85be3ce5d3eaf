"""OTLP wire formats (protobuf and JSON with hex ids) to canonical spans and log events.

Pure functions over bytes: no I/O. Errors are `OtlpDecodeError` with a message that says
what is wrong, so the receiver can answer 400 with it.
"""

from __future__ import annotations

import base64
import zlib
from dataclasses import dataclass, field
from typing import Any

import orjson
from google.protobuf import json_format
from google.protobuf.message import DecodeError
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue

from tracing_eval.model import Span, SpanEvent

PROTOBUF = "application/x-protobuf"
JSON = "application/json"
_STATUS = {0: "unset", 1: "ok", 2: "error"}
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


def decompress(body: bytes, encoding: str | None, limit: int) -> bytes:
    """Undo `Content-Encoding` (gzip, deflate or none), refusing more than `limit` bytes."""
    encoding = (encoding or "identity").strip().lower()
    if encoding in ("", "identity"):
        if len(body) > limit:
            raise PayloadTooLarge(f"body is {len(body)} bytes; the limit is {limit}")
        return body
    if encoding not in ("gzip", "deflate"):
        raise OtlpDecodeError(f"unsupported Content-Encoding {encoding!r}; use gzip, deflate or none")
    wbits = 16 + zlib.MAX_WBITS if encoding == "gzip" else zlib.MAX_WBITS
    out, rest = b"", body
    try:
        while True:  # a gzip body may hold several members (RFC 1952); each one is part of the body
            d = zlib.decompressobj(wbits)
            out += d.decompress(rest, limit + 1 - len(out))
            if len(out) > limit or d.unconsumed_tail:
                raise PayloadTooLarge(f"body decompresses to more than the limit of {limit} bytes")
            if not d.eof:
                raise OtlpDecodeError(f"{encoding} stream is truncated")
            rest = d.unused_data
            if not rest or encoding != "gzip":
                break
    except zlib.error as exc:
        if encoding == "deflate":  # some clients send raw deflate without the zlib header
            try:
                return decompress_raw_deflate(body, limit)
            except zlib.error:
                pass
        raise OtlpDecodeError(f"body is not valid {encoding}: {exc}") from None
    return out


def decompress_raw_deflate(body: bytes, limit: int) -> bytes:
    d = zlib.decompressobj(-zlib.MAX_WBITS)
    out = d.decompress(body, limit + 1)
    if len(out) > limit or d.unconsumed_tail:
        raise PayloadTooLarge(f"body decompresses to more than the limit of {limit} bytes")
    if not d.eof:
        raise OtlpDecodeError("deflate stream is truncated")
    return out


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


def spans_from_request(req: ExportTraceServiceRequest) -> Decoded:
    """Canonical spans from a trace export; spans with bad ids are counted as rejected."""
    out = Decoded()
    for rs in req.resource_spans:
        resource = attributes(rs.resource.attributes)
        for ss in rs.scope_spans:
            scope = ss.scope.name
            for s in ss.spans:
                try:
                    trace_id = _hex_id(s.trace_id, 16, "traceId")
                    span_id = _hex_id(s.span_id, 8, "spanId")
                    parent = s.parent_span_id.hex() if len(s.parent_span_id) == 8 else None
                except OtlpDecodeError as exc:
                    out.rejected += 1
                    out.errors.append(f"span {s.name!r}: {exc}")
                    continue
                out.spans.append(
                    Span.model_construct(
                        trace_id=trace_id,
                        span_id=span_id,
                        parent_id=parent if parent and parent != "0" * 16 else None,
                        name=s.name,
                        kind=s.kind,
                        start_ns=s.start_time_unix_nano,
                        end_ns=s.end_time_unix_nano,
                        status=_STATUS.get(s.status.code, "unset"),
                        status_message=s.status.message,
                        attributes=attributes(s.attributes),
                        events=[
                            SpanEvent.model_construct(
                                name=e.name, time_ns=e.time_unix_nano, attributes=attributes(e.attributes), body=None
                            )
                            for e in s.events
                        ],
                        resource=resource,
                        scope=scope,
                    )
                )
    return out


def logs_from_request(req: ExportLogsServiceRequest) -> Decoded:
    """Log records that carry an event name and belong to a span; others are ignored."""
    out = Decoded()
    for rl in req.resource_logs:
        for sl in rl.scope_logs:
            for r in sl.log_records:
                attrs = attributes(r.attributes)
                name = r.event_name or attrs.get("event.name")
                if not name or not r.trace_id or not r.span_id:
                    continue  # plain logs and unparented events carry nothing to join
                try:
                    trace_id = _hex_id(r.trace_id, 16, "traceId")
                    span_id = _hex_id(r.span_id, 8, "spanId")
                except OtlpDecodeError as exc:
                    out.rejected += 1
                    out.errors.append(f"log record {name!r}: {exc}")
                    continue
                body = any_value(r.body) if r.HasField("body") else None
                out.logs.append(
                    LogEvent(
                        trace_id,
                        span_id,
                        SpanEvent.model_construct(
                            name=str(name),
                            time_ns=r.time_unix_nano or r.observed_time_unix_nano,
                            attributes=attrs,
                            body=body,
                        ),
                    )
                )
    return out


def decode_traces(body: bytes, mt: str) -> Decoded:
    return spans_from_request(parse(body, mt, ExportTraceServiceRequest()))


def decode_logs(body: bytes, mt: str) -> Decoded:
    return logs_from_request(parse(body, mt, ExportLogsServiceRequest()))


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
        convert = spans_from_request
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
