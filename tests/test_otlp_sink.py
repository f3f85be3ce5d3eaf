"""The OTLP sink over loopback: real protobuf types out, checked against the SDK's own encoding."""

from __future__ import annotations

import gc
import gzip
import threading
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import orjson
import pytest
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest, ExportLogsServiceResponse
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.sdk.trace import TracerProvider
from sqlalchemy import func, select, update
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from tests.conftest import EXAMPLES
from tests.support.fakes.loopback import LoopbackServer
from tests.support.results import not_applicable, score_result
from tracing_eval.config import ConfigError, Settings
from tracing_eval.connectors.otlp.file_source import OtlpFileSource
from tracing_eval.connectors.otlp.sink import OtlpEvaluationSink, OtlpExportError, resolve_endpoint
from tracing_eval.connectors.otlp.sink_settings import OtlpSinkSettings
from tracing_eval.delivery import Anchor, ResultDelivery
from tracing_eval.metrics.catalogue import build_metrics
from tracing_eval.model import MetricResult, Scope, Status
from tracing_eval.pipeline import Pipeline
from tracing_eval.sinks import deliver_outbox
from tracing_eval.store import schema
from tracing_eval.store.base import Outgoing, ReviewRequest
from tracing_eval.store.sql import SqlStore

TRACE = "a5dfbdd021205be9837df8ee3732451d"
SPAN = "3af07ba70b3e9ed6"
LAST_TRACE = "0123456789abcdef0123456789abcdef"
LAST_SPAN = "fedcba9876543210"


@dataclass
class Event:
    """One received log record, decoded."""

    event_name: str
    trace_id: str
    span_id: str
    attributes: dict[str, Any]
    resource: dict[str, Any]
    time_unix_nano: int


@dataclass
class Collector:
    """A `/v1/logs` endpoint that answers the scripted statuses first, then 200."""

    statuses: list[int] = field(default_factory=list)
    events: list[Event] = field(default_factory=list)
    headers: list[dict[str, str]] = field(default_factory=list)
    attempts: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    async def logs(self, request: Request) -> Response:
        body = await request.body()
        with self.lock:
            self.attempts += 1
            status = self.statuses.pop(0) if self.statuses else 200
            self.headers.append(dict(request.headers))
        if status != 200:
            return Response(status_code=status)
        req = ExportLogsServiceRequest()
        req.ParseFromString(gzip.decompress(body) if request.headers.get("content-encoding") == "gzip" else body)
        with self.lock:
            self.events += decode(req)
        return Response(ExportLogsServiceResponse().SerializeToString(), media_type="application/x-protobuf")


def value(v: AnyValue) -> Any:
    kind = v.WhichOneof("value")
    if kind == "array_value":
        return [value(x) for x in v.array_value.values]
    if kind == "kvlist_value":
        return kv(v.kvlist_value.values)
    return getattr(v, kind) if kind else None


def kv(items: Any) -> dict[str, Any]:
    return {item.key: value(item.value) for item in items if isinstance(item, KeyValue)}


def decode(req: ExportLogsServiceRequest) -> list[Event]:
    return [
        Event(
            rec.event_name,
            rec.trace_id.hex(),
            rec.span_id.hex(),
            kv(rec.attributes),
            kv(rl.resource.attributes),
            rec.time_unix_nano,
        )
        for rl in req.resource_logs
        for sl in rl.scope_logs
        for rec in sl.log_records
    ]


@pytest.fixture
def collector() -> Iterator[tuple[Collector, str]]:
    c = Collector()
    with LoopbackServer(Starlette(routes=[Route("/v1/logs", c.logs, methods=["POST"])])) as server:
        yield c, server.url


@pytest.fixture
def no_otel_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in (
        "OTEL_EXPORTER_OTLP_ENDPOINT",
        "OTEL_EXPORTER_OTLP_LOGS_ENDPOINT",
        "OTEL_EXPORTER_OTLP_HEADERS",
        "OTEL_EXPORTER_OTLP_LOGS_HEADERS",
        "OTEL_SDK_DISABLED",
    ):
        monkeypatch.delenv(name, raising=False)


def payload(result: MetricResult, *, target: str, anchor: dict[str, Any], version: int = 3) -> ResultDelivery:
    """A result delivery as the store builds it from what the pipeline recorded."""
    return Outgoing(f"id-{result.metric}-{target}", target, result, Anchor(**anchor)).delivery("otlp:conv-7", version)


REVIEW_ITEM = ReviewRequest([]).delivery(1, "otlp:k", 1)


TURN_ANCHOR = {"trace_id": TRACE, "span_id": SPAN, "response_id": "chatcmpl-1", "start_ns": 1, "conversation_id": "c7"}
THREAD_ANCHOR = {
    "trace_id": LAST_TRACE,
    "span_id": LAST_SPAN,
    "response_id": None,
    "start_ns": 1,
    "conversation_id": "c7",
}


#: The export timeout of the sinks under test: a liveness bound, never a speed check (an export to the
#: loopback collector takes milliseconds, but seconds on a busy machine). The failures these tests
#: script are statuses the exporter does not retry itself (500, 400), so they come back at once.
EXPORT_TIMEOUT = 30.0


def sink_for(url: str, **kw: Any) -> OtlpEvaluationSink:
    return OtlpEvaluationSink(OtlpSinkSettings(endpoint=url, **{"timeout_seconds": EXPORT_TIMEOUT, **kw}))


async def test_turn_result_is_an_event_parented_to_the_turn_root_span(
    collector: tuple[Collector, str], no_otel_env: None
) -> None:
    c, url = collector
    sink = sink_for(url, service_name="evals-prod")
    r = score_result(
        "response_hygiene",
        0.5,
        threshold=0.7,
        scope=Scope.TURN,
        turn_index=1,
        label="truncated",
        reason="cut off",
        version="2",
    )
    await sink.deliver(payload(r, target=f"trace:{TRACE}", anchor=TURN_ANCHOR))
    await sink.aclose()

    [ev] = c.events
    assert ev.event_name == "gen_ai.evaluation.result"
    assert (ev.trace_id, ev.span_id) == (TRACE, SPAN)
    assert ev.resource["service.name"] == "evals-prod"
    assert ev.time_unix_nano > 0
    assert ev.attributes == {
        "gen_ai.evaluation.name": "response_hygiene",
        "gen_ai.evaluation.score.value": 0.5,
        "gen_ai.evaluation.score.label": "truncated",
        "gen_ai.evaluation.explanation": "cut off",
        "gen_ai.response.id": "chatcmpl-1",
        "tracing_eval.result.id": f"id-response_hygiene-trace:{TRACE}",
        "tracing_eval.thread.key": "otlp:conv-7",
        "tracing_eval.thread.version": 3,
        "tracing_eval.target": f"trace:{TRACE}",
        "tracing_eval.scope": "turn",
        "tracing_eval.turn.index": 1,
        "tracing_eval.metric.version": "2",
        "tracing_eval.status": "ok",
        "tracing_eval.passed": False,
        "tracing_eval.threshold": 0.7,
    }
    assert c.headers[0]["content-type"] == "application/x-protobuf"


async def test_thread_result_goes_to_last_turn_root_with_conversation_id(
    collector: tuple[Collector, str], no_otel_env: None
) -> None:
    c, url = collector
    sink = sink_for(url)
    r = score_result("task_success", 0.9, threshold=0.7)
    r.judge_model = "gpt-4o-mini"
    await sink.deliver(payload(r, target="thread", anchor=THREAD_ANCHOR))
    await sink.aclose()

    [ev] = c.events
    assert (ev.trace_id, ev.span_id) == (LAST_TRACE, LAST_SPAN)
    assert ev.attributes["gen_ai.conversation.id"] == "c7"
    assert ev.attributes["gen_ai.evaluation.score.label"] == "pass"  # no metric label: the verdict
    assert ev.attributes["tracing_eval.scope"] == "thread"
    assert ev.attributes["tracing_eval.judge.model"] == "gpt-4o-mini"
    assert "gen_ai.response.id" not in ev.attributes and "tracing_eval.turn.index" not in ev.attributes


async def test_errors_and_not_applicable_carry_no_score(collector: tuple[Collector, str], no_otel_env: None) -> None:
    c, url = collector
    sink = sink_for(url)
    failed = MetricResult(
        metric="failure_rate", scope=Scope.THREAD, status=Status.ERROR, error="MalformedAnswer: label 'meh'"
    )
    weird = MetricResult(metric="completeness", scope=Scope.THREAD, status=Status.ERROR, error="no answer at all")
    na = not_applicable("tool_errors", "no tool calls")
    for r in (failed, weird, na):
        await sink.deliver(payload(r, target="thread", anchor=THREAD_ANCHOR))
    await sink.aclose()

    by_name = {e.attributes["gen_ai.evaluation.name"]: e.attributes for e in c.events}
    assert by_name["failure_rate"]["error.type"] == "MalformedAnswer"
    assert by_name["failure_rate"]["gen_ai.evaluation.explanation"] == "MalformedAnswer: label 'meh'"
    assert by_name["completeness"]["error.type"] == "_OTHER"
    assert by_name["tool_errors"]["gen_ai.evaluation.score.label"] == "not_applicable"
    assert by_name["tool_errors"]["tracing_eval.status"] == "not_applicable"
    for attrs in by_name.values():
        assert "gen_ai.evaluation.score.value" not in attrs and "tracing_eval.passed" not in attrs
    assert "gen_ai.evaluation.score.label" not in by_name["failure_rate"]


async def test_review_payloads_are_ignored_and_unknown_ids_are_not_parented(
    collector: tuple[Collector, str], no_otel_env: None
) -> None:
    c, url = collector
    sink = sink_for(url)
    await sink.deliver(REVIEW_ITEM)
    assert c.attempts == 0
    anchor = {"trace_id": "langfuse-trace-7", "span_id": None, "response_id": "resp-9", "conversation_id": None}
    tracer = TracerProvider().get_tracer("app")
    with tracer.start_as_current_span("unrelated work"):  # must not become the event's parent
        await sink.deliver(payload(score_result("repetition", 1.0, threshold=0.7), target="thread", anchor=anchor))
    await sink.aclose()
    [ev] = c.events
    assert (ev.trace_id, ev.span_id) == ("", "")
    assert ev.attributes["gen_ai.response.id"] == "resp-9"


async def test_failing_endpoint_raises_so_the_outbox_retries(
    collector: tuple[Collector, str], no_otel_env: None
) -> None:
    c, url = collector
    c.statuses = [500, 400]
    sink = sink_for(url, headers={"Authorization": "Bearer s3cret"})
    p = payload(score_result("repetition", 1.0, threshold=0.7), target="thread", anchor=THREAD_ANCHOR)
    with pytest.raises(OtlpExportError):
        await sink.deliver(p)
    with pytest.raises(OtlpExportError):
        await sink.deliver(p)
    assert c.events == []
    await sink.deliver(p)
    await sink.aclose()
    assert len(c.events) == 1
    assert c.headers[-1]["authorization"] == "Bearer s3cret"


async def test_unreachable_endpoint_raises(no_otel_env: None) -> None:
    # discard port: nothing listens. The exporter retries a refused connection with backoff until its
    # timeout, so a short one (the outcome is a failure however busy the machine is)
    sink = sink_for("http://127.0.0.1:9/v1/logs", timeout_seconds=0.5)
    with pytest.raises(OtlpExportError):
        await sink.deliver(payload(score_result("x", 1.0, threshold=None), target="thread", anchor={}))
    await sink.aclose()


def test_endpoint_resolution(no_otel_env: None, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ConfigError, match="OTEL_EXPORTER_OTLP_ENDPOINT"):
        OtlpEvaluationSink(OtlpSinkSettings())
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4318/")
    assert OtlpEvaluationSink(OtlpSinkSettings()).endpoint == "http://collector:4318/v1/logs"
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_LOGS_ENDPOINT", "http://logs:4318/custom/logs")
    assert OtlpEvaluationSink(OtlpSinkSettings()).endpoint == "http://logs:4318/custom/logs"
    assert OtlpEvaluationSink(OtlpSinkSettings(endpoint="http://cfg:4318")).endpoint == "http://cfg:4318/v1/logs"
    assert resolve_endpoint("https://otel.example/otlp/v1/logs", {}) == "https://otel.example/otlp/v1/logs"


def test_sdk_disabled_is_a_configuration_error(no_otel_env: None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_SDK_DISABLED", "true")
    with pytest.raises(ConfigError, match="OTEL_SDK_DISABLED"):
        sink_for("http://127.0.0.1:4318/v1/logs")


async def test_example_run_reaches_the_endpoint_once_per_result_correctly_parented(
    collector: tuple[Collector, str], no_otel_env: None, settings: Settings, store: SqlStore
) -> None:
    """The examples through the real pipeline: every recorded result arrives once, on its turn's root span."""
    c, url = collector
    c.statuses = [500]  # the first export fails and is retried by the outbox
    sink = sink_for(url)
    source = OtlpFileSource(EXAMPLES / "otel-genai.otlp.jsonl", complete=True)
    pipeline = Pipeline(store, settings, build_metrics(settings), "test", sources=[source], sinks=[sink])
    await pipeline.tick(settle_all=True)
    pending = await store.outbox_backlog()  # the first batch failed and waits for its backoff; the rest
    assert pending == len(await store.results()) > 100  # wait for the next round (no more batches after a failure)
    stats = await deliver_outbox(store, [sink], now=10**10, max_attempts=5)
    assert (stats.delivered, await store.outbox_backlog()) == (pending, 0)
    await sink.aclose()

    roots = await _turn_roots(store)
    stored = await store.results()
    assert {s.result.turn_index is None for s in stored} == {True, False}  # thread and turn results
    assert len(roots) == 7 and len(stored) > 50
    events = defaultdict(list)
    for ev in c.events:
        events[ev.attributes["tracing_eval.result.id"]].append(ev)
    assert {k: len(v) for k, v in events.items()} == {s.id: 1 for s in stored}
    for s in stored:
        [ev] = events[s.id]
        turns = roots[s.thread_key]
        expected = turns[-1] if s.result.turn_index is None else turns[s.result.turn_index]
        assert (ev.trace_id, ev.span_id) == expected
        assert ev.attributes["gen_ai.evaluation.name"] == s.result.metric
        if s.result.turn_index is None:
            assert ev.attributes["gen_ai.conversation.id"] == s.thread_key.removeprefix("otlp:")


async def _turn_roots(store: SqlStore) -> dict[str, list[tuple[str, str]]]:
    """Thread key -> (trace id, root span id) of each turn, in turn order."""
    out = {}
    for key in await store.thread_keys():
        traces = await store.load_traces(key)
        roots = [next(s for s in spans if s.parent_id is None) for spans in traces]
        out[key] = [(s.trace_id, s.span_id) for s in sorted(roots, key=lambda s: s.start_ns)]
    return out


async def test_a_bad_row_is_parked_alone_and_the_rest_of_its_batch_delivered(
    collector: tuple[Collector, str], no_otel_env: None, settings: Settings, store: SqlStore
) -> None:
    """A payload that is not a result delivery is parked alone, with an error naming its row and the
    field; the rest of its batch is delivered."""
    c, url = collector
    sink = sink_for(url)
    source = OtlpFileSource(EXAMPLES / "otel-genai.otlp.jsonl", complete=True)
    pipeline = Pipeline(store, settings, build_metrics(settings), "test", sources=[source], sinks=[sink])
    await pipeline.tick(settle_all=True, deliver=False)
    rows = await store.outbox_backlog()
    async with store.engine.begin() as conn:
        first = (await conn.execute(select(func.min(schema.outbox.c.id)))).scalar_one()
        bad = orjson.dumps({"thread_key": "otlp:x", "result": "not a result"})
        await conn.execute(update(schema.outbox).where(schema.outbox.c.id == first).values(payload=bad))
    stats = await deliver_outbox(store, [sink], now=10**10, max_attempts=5)
    await sink.aclose()
    assert (stats.delivered, stats.failed, stats.retried) == (rows - 1, 1, 0)
    assert len(c.events) == rows - 1 and await store.outbox_backlog() == 0
    async with store.engine.connect() as conn:
        [(failed_id, error)] = (
            await conn.execute(select(schema.outbox.c.id, schema.outbox.c.last_error).where(schema.outbox.c.failed))
        ).all()
    assert failed_id == first and f"outbox row {first} (result): " in error and "result: Input should be" in error


def _sdk_request(items: list[ResultDelivery], service_name: str) -> ExportLogsServiceRequest:
    """What the SDK's Logs API and `encode_logs` make of these payloads: the reference encoding."""
    from opentelemetry import trace
    from opentelemetry.exporter.otlp.proto.common._log_encoder import encode_logs
    from opentelemetry.sdk._logs import LoggerProvider
    from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter, SimpleLogRecordProcessor
    from opentelemetry.sdk.resources import SERVICE_NAME, Resource
    from opentelemetry.trace import INVALID_SPAN, NonRecordingSpan, SpanContext, TraceFlags

    from tracing_eval.connectors.otlp.sink import EVENT_NAME, SCOPE, event_attributes

    exporter = InMemoryLogRecordExporter()
    provider = LoggerProvider(resource=Resource.create({SERVICE_NAME: service_name}), shutdown_on_exit=False)
    provider.add_log_record_processor(SimpleLogRecordProcessor(exporter))
    logger = provider.get_logger(SCOPE)
    for p in items:
        anchor = p.anchor
        try:
            ids = int(anchor.trace_id or "", 16), int(anchor.span_id or "", 16)
        except ValueError:
            ids = (0, 0)
        valid = len(anchor.trace_id or "") == 32 and len(anchor.span_id or "") == 16 and all(ids)
        span = (
            NonRecordingSpan(SpanContext(*ids, is_remote=True, trace_flags=TraceFlags(TraceFlags.SAMPLED)))
            if valid
            else INVALID_SPAN
        )
        logger.emit(
            timestamp=7, context=trace.set_span_in_context(span), event_name=EVENT_NAME, attributes=event_attributes(p)
        )
    return encode_logs(exporter.get_finished_logs())


def _comparable(req: ExportLogsServiceRequest) -> ExportLogsServiceRequest:
    """Times and the random `service.instance.id` cleared: what must match between two encodings."""
    for rl in req.resource_logs:
        kept = [kv for kv in rl.resource.attributes if kv.key != "service.instance.id"]
        del rl.resource.attributes[:]
        rl.resource.attributes.extend(sorted(kept, key=lambda kv: kv.key))
        for sl in rl.scope_logs:
            for rec in sl.log_records:
                rec.time_unix_nano = rec.observed_time_unix_nano = 0
    return req


def test_events_are_encoded_as_the_sdk_would_encode_them(no_otel_env: None) -> None:
    """The sink builds OTLP itself for speed; the bytes it sends must say what the SDK would send."""
    results = [
        (score_result("repetition", 0.25, threshold=0.7), "thread", THREAD_ANCHOR),
        (score_result("tone", 1.0, threshold=None, reason="fine"), "turn:3", TURN_ANCHOR),
        (
            MetricResult(metric="judge_x", scope=Scope.THREAD, status=Status.ERROR, error="TimeoutError: slow"),
            "thread",
            {},
        ),
        (not_applicable("tool_errors", "no tool calls"), "thread", {"trace_id": "zz", "span_id": SPAN}),
        (score_result("x", 1, threshold=0.5), "turn:0", {"trace_id": "0" * 32, "span_id": SPAN}),
    ]
    items = [payload(r, target=target, anchor=anchor) for r, target, anchor in results]
    sink = sink_for("http://127.0.0.1:9/v1/logs", service_name="evals")
    ours = ExportLogsServiceRequest.FromString(sink.encode([*items, REVIEW_ITEM], 5))
    assert _comparable(ours) == _comparable(_sdk_request(items, "evals"))
    assert len(ours.resource_logs[0].scope_logs[0].log_records) == 5
    assert sink.encode([REVIEW_ITEM], 5) == b""


async def test_otel_headers_and_gzip_from_the_environment(
    collector: tuple[Collector, str], no_otel_env: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    c, url = collector
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_HEADERS", "x-team=evals,authorization=from-env")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_LOGS_COMPRESSION", "gzip")
    sink = sink_for(url, headers={"Authorization": "Bearer cfg"})
    await sink.deliver(payload(score_result("x", 1.0, threshold=None), target="thread", anchor=THREAD_ANCHOR))
    await sink.aclose()
    assert c.headers[-1]["x-team"] == "evals"
    assert c.headers[-1]["authorization"] == "Bearer cfg"  # the configured header wins
    assert c.headers[-1]["content-encoding"] == "gzip"
    assert [e.attributes["gen_ai.evaluation.name"] for e in c.events] == ["x"]


async def test_results_go_out_batch_size_per_request(
    collector: tuple[Collector, str], no_otel_env: None, settings: Settings, store: SqlStore
) -> None:
    c, url = collector
    settings.sinks.batch_size = 7
    sink = sink_for(url)
    source = OtlpFileSource(EXAMPLES / "otel-genai.otlp.jsonl", complete=True)
    pipeline = Pipeline(store, settings, build_metrics(settings), "test", sources=[source], sinks=[sink])
    await pipeline.tick(settle_all=True)
    await sink.aclose()
    results = len(await store.results())
    assert results > 14 and await store.outbox_backlog() == 0
    assert len(c.events) == results
    assert c.attempts == -(-results // 7)  # full requests of 7, the last one shorter


def test_a_ca_file_from_the_environment_verifies_the_endpoint(no_otel_env: None) -> None:
    import ssl

    import certifi

    from tracing_eval.connectors.otlp.sink import tls_verify

    assert tls_verify({}) is True
    ctx = tls_verify({"OTEL_EXPORTER_OTLP_CERTIFICATE": certifi.where()})
    assert isinstance(ctx, ssl.SSLContext) and ctx.cert_store_stats()["x509_ca"] > 0
    with pytest.raises(ConfigError, match="OTEL_EXPORTER_OTLP_LOGS_CERTIFICATE"):
        tls_verify(
            {"OTEL_EXPORTER_OTLP_LOGS_CERTIFICATE": "/nonexistent/ca.pem", "OTEL_EXPORTER_OTLP_CERTIFICATE": "x"}
        )


async def test_a_sent_body_is_freed_at_once_not_at_the_next_garbage_collection(
    collector: tuple[Collector, str], no_otel_env: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """httpx keeps each request in a reference cycle: a body it holds lives until the collector runs,
    which the sidecar makes rare (`worker.tune_gc`). The sink's bodies go as soon as they are sent,
    with their length (not chunked)."""
    c, url = collector
    freed: list[int] = []

    class Body(bytes):
        def __del__(self) -> None:
            freed.append(len(self))

    sink = sink_for(url)
    encode = sink.encode
    monkeypatch.setattr(sink, "encode", lambda deliveries, now_ns: Body(encode(deliveries, now_ns)))
    batch = [
        payload(score_result(f"m{i}", 1.0, threshold=0.5), target="thread", anchor=THREAD_ANCHOR) for i in range(50)
    ]
    gc.disable()
    try:
        for _ in range(3):
            await sink.deliver_batch(batch)
        assert len(freed) == 3 and min(freed) > 5_000
    finally:
        gc.enable()
        await sink.aclose()
    assert len(c.events) == 150
    assert all(h["content-length"] == str(freed[0]) and "transfer-encoding" not in h for h in c.headers)
