"""Operations endpoints of a running `tracing-eval run`: /healthz, /readyz and Prometheus /metrics.

The worker runs for real (a subprocess started like a deployment starts it, or in process where a
test must break its store); data arrives as real OTLP requests or from a pulled file, and the
scraped text is parsed with prometheus_client's own parser. Waits are bounded liveness deadlines,
never speed checks.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families
from sqlalchemy import select
from structlog.testing import capture_logs

from tests.conftest import BACKENDS, EXAMPLES
from tests.support.fakes.openai_server import FakeOpenAIServer, Reply, ScriptedHandler
from tests.support.fakes.schema_judge import SchemaJudge
from tests.support.otlp_payloads import genai_turn_spans, trace_request
from tests.support.results import score_result
from tests.test_judge import TRANSCRIPT, answer, ask, verdict
from tests.test_sidecar import LIVENESS_DEADLINE, free_port
from tracing_eval.app import build_pipeline, build_store
from tracing_eval.config import JudgeSettings, Settings, load_settings
from tracing_eval.connectors.otlp.file_source import OtlpFileSource
from tracing_eval.delivery import Delivery, ResultDelivery
from tracing_eval.judge import JudgeClient
from tracing_eval.metrics.judged.base import JudgeError
from tracing_eval.model import Scope, Span
from tracing_eval.pipeline import TickStats
from tracing_eval.sinks import BaseSink
from tracing_eval.sources import PullSource, SourceStore
from tracing_eval.store import schema
from tracing_eval.store.base import IngestBatch, Outgoing, Readiness
from tracing_eval.store.sql import SqlStore
from tracing_eval.telemetry import Telemetry
from tracing_eval.worker import Worker

PB = {"content-type": "application/x-protobuf"}
GENAI_FILE = EXAMPLES / "otel-genai.otlp.jsonl"
GENAI_THREADS = 7  # conversations in GENAI_FILE
T0 = 1_700_000_000.0

#: Every series the issue asks for (counters by their sample name), with the labels each must carry.
SERIES = {
    "tracing_eval_spans_received_total": {"source"},
    "tracing_eval_events_received_total": {"source"},
    "tracing_eval_threads_received_total": {"source"},
    "tracing_eval_receiver_rejects_total": {"reason"},
    "tracing_eval_threads_ready": {"mode"},
    "tracing_eval_threads_evaluated_total": {"mode"},
    "tracing_eval_evaluations_total": {"metric", "status"},
    "tracing_eval_evaluation_errors_total": {"gave_up"},
    "tracing_eval_lost_leases_total": set(),
    "tracing_eval_tick_duration_seconds_count": set(),
    "tracing_eval_tick_failures_total": set(),
    "tracing_eval_last_tick_timestamp_seconds": set(),
    "tracing_eval_sink_deliveries_total": {"sink", "kind", "outcome"},
    "tracing_eval_sink_errors_total": {"sink", "kind"},
    "tracing_eval_sink_failing_seconds": {"sink"},
    "tracing_eval_outbox_backlog": {"sink"},
    "tracing_eval_outbox_oldest_age_seconds": {"sink"},
    "tracing_eval_store_up": set(),
}
#: Judge series: declared on every worker, with samples once a judge has been called.
JUDGE_FAMILIES = {
    "tracing_eval_judge_calls",
    "tracing_eval_judge_call_duration_seconds",
    "tracing_eval_judge_tokens",
    "tracing_eval_judge_cost_usd",
    "tracing_eval_judge_cache_hits",
    "tracing_eval_judge_rate_limited",
    "tracing_eval_judge_retries",
    "tracing_eval_judge_reasks",
    "tracing_eval_judge_concurrency_limit",
}


@dataclass
class Scrape:
    """One parsed `/metrics` answer."""

    families: set[str]
    samples: list[tuple[str, dict[str, str], float]]

    def names(self) -> set[str]:
        return {name for name, _, _ in self.samples}

    def labels_of(self, name: str) -> list[dict[str, str]]:
        return [labels for n, labels, _ in self.samples if n == name]

    def value(self, name: str, **labels: str) -> float:
        """The sum over the samples of `name` whose labels include `labels` (0 when none)."""
        return sum(v for n, lab, v in self.samples if n == name and labels.items() <= lab.items())


def scrape(base: str) -> Scrape:
    r = httpx.get(f"{base}/metrics")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/plain")
    families = list(text_string_to_metric_families(r.text))
    samples = [(s.name, dict(s.labels), s.value) for f in families for s in f.samples]
    return Scrape({f.name for f in families}, samples)


def wait_until(what: str, probe: Callable[[], Any]) -> Any:
    """Call `probe` until it returns something truthy; fail after the liveness deadline."""
    deadline = time.monotonic() + LIVENESS_DEADLINE
    while True:
        if result := probe():
            return result
        assert time.monotonic() < deadline, f"the worker never got there: {what}"
        time.sleep(0.2)


@contextlib.contextmanager
def sidecar(tmp_path: Path, *args: str, env: dict[str, str] | None = None) -> Iterator[str]:
    """`python -m tracing_eval run ARGS --http 127.0.0.1:PORT` on a fresh SQLite store; yields the base URL."""
    port = free_port()
    full_env = {
        **os.environ,
        "TRACING_EVAL_STORE__URL": f"sqlite+aiosqlite:///{tmp_path / 'store.db'}",
        "TRACING_EVAL_SCHEDULE__TICK_SECONDS": "0.2",
        "TRACING_EVAL_SCHEDULE__TURN_SETTLE_SECONDS": "0.3",
        "TRACING_EVAL_SCHEDULE__THREAD_IDLE_SECONDS": "1.0",
        "TRACING_EVAL_LOGGING__FORMAT": "json",
        **(env or {}),
    }
    log = (tmp_path / "sidecar.log").open("w")
    proc = subprocess.Popen(
        [sys.executable, "-m", "tracing_eval", "run", *args, "--http", f"127.0.0.1:{port}"],
        env=full_env,
        cwd=tmp_path,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    base = f"http://127.0.0.1:{port}"

    def up() -> bool:
        assert proc.poll() is None, f"the sidecar exited:\n{(tmp_path / 'sidecar.log').read_text()}"
        try:
            return httpx.get(f"{base}/healthz").status_code == 200
        except httpx.HTTPError:
            return False

    try:
        wait_until("/healthz answers", up)
        yield base
    finally:
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=LIVENESS_DEADLINE)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        log.close()


def conversation_spans() -> list[Any]:
    """Two conversations: one whose second answer re-asks for the order number (routed to review),
    one with a failing tool call."""
    first = genai_turn_spans("ops-1", "Where is order A48213?", "Your order A48213 ships tomorrow.")
    history = [
        {"role": "user", "parts": [{"type": "text", "content": "Where is order A48213?"}]},
        {"role": "assistant", "parts": [{"type": "text", "content": "Your order A48213 ships tomorrow."}]},
    ]
    second = genai_turn_spans(
        "ops-1", "And when will it arrive?", "Could you please provide your order number?", history=history
    )
    tool = genai_turn_spans("ops-2", "Cancel order B1", "Sorry, something went wrong.", tool_error="no such order")
    return [first, second, tool]


def send(base: str, batches: list[Any]) -> int:
    for spans in batches:
        r = httpx.post(f"{base}/v1/traces", content=trace_request(spans).SerializeToString(), headers=PB)
        assert r.status_code == 200, r.text
    return sum(len(spans) for spans in batches)


def closed_port_webhook() -> dict[str, str]:
    """Env that sends review items to a webhook on a port nobody listens on."""
    return {"TRACING_EVAL_SINKS__WEBHOOK__URLS": json.dumps([f"http://127.0.0.1:{free_port()}/hook"])}


# -- the whole picture over real OTLP ----------------------------------------------------------------


def test_metrics_expose_every_series_while_the_receiver_feeds_evaluations(tmp_path: Path) -> None:
    started = time.time()
    with sidecar(tmp_path, "--source", "otlp-http", "--sink", "webhook", env=closed_port_webhook()) as base:
        sent = send(base, conversation_spans())
        bad = httpx.post(f"{base}/v1/traces", content=b"\x0a\xff\xff", headers=PB)
        assert bad.status_code == 400

        def evaluated() -> Scrape | None:
            m = scrape(base)
            done = m.value("tracing_eval_threads_evaluated_total", mode="thread") >= 2
            failing = m.value("tracing_eval_sink_errors_total", sink="webhook") >= 1
            return m if done and failing else None

        m = wait_until("both threads evaluated and the webhook tried", evaluated)
        ready = httpx.get(f"{base}/readyz")
        health = httpx.get(f"{base}/healthz")

    # every series is there, with its labels
    for name, labels in SERIES.items():
        assert name in m.names(), f"{name} missing from /metrics"
        assert all(set(lab) == labels for lab in m.labels_of(name)), (name, m.labels_of(name))
    assert JUDGE_FAMILIES <= m.families  # declared even with the judge tier off
    assert all(f.startswith("tracing_eval_") for f in m.families)

    # ingest: every span sent was counted, the malformed request is the one reject
    assert m.value("tracing_eval_spans_received_total", source="otlp-http") == sent
    assert m.value("tracing_eval_threads_received_total", source="otlp-http") >= 2
    assert m.value("tracing_eval_events_received_total") == 0
    assert m.value("tracing_eval_receiver_rejects_total", reason="bad_payload") == 1
    assert m.value("tracing_eval_receiver_rejects_total") == 1  # other reasons present at 0
    assert {lab["reason"] for lab in m.labels_of("tracing_eval_receiver_rejects_total")} >= {
        "too_large",
        "unauthorized",
    }

    # evaluation: both threads, per turn and whole; the deterministic metrics by name and status
    assert m.value("tracing_eval_threads_evaluated_total", mode="thread") == 2
    assert m.value("tracing_eval_threads_evaluated_total", mode="turns") >= 1
    assert m.value("tracing_eval_evaluations_total", metric="response_hygiene", status="ok") >= 3  # one per turn
    assert m.value("tracing_eval_evaluations_total", metric="reask", status="ok") >= 1
    assert m.value("tracing_eval_evaluations_total", metric="tool_errors") >= 1
    assert m.value("tracing_eval_evaluation_errors_total") == 0
    assert m.value("tracing_eval_lost_leases_total") == 0
    assert m.value("tracing_eval_threads_ready") == 0  # nothing left to claim
    assert m.value("tracing_eval_tick_duration_seconds_count") >= 2
    assert m.value("tracing_eval_tick_failures_total") == 0
    assert started <= m.value("tracing_eval_last_tick_timestamp_seconds") <= time.time()

    # the webhook is down: errors counted, the review items wait in the outbox
    assert m.value("tracing_eval_sink_errors_total", sink="webhook", kind="review") >= 1
    assert m.value("tracing_eval_sink_deliveries_total", sink="webhook", outcome="retried") >= 1
    assert m.value("tracing_eval_sink_deliveries_total", outcome="delivered") == 0
    assert m.value("tracing_eval_outbox_backlog", sink="webhook") >= 1
    assert m.value("tracing_eval_outbox_oldest_age_seconds", sink="webhook") > 0
    assert m.value("tracing_eval_sink_failing_seconds", sink="webhook") > 0
    assert m.value("tracing_eval_store_up") == 1
    assert m.value("tracing_eval_judge_calls_total") == 0  # no judge configured

    # the webhook has not failed for 300 s yet: ready; liveness is plain
    assert ready.status_code == 200, ready.text
    body = ready.json()
    assert body["ready"] is True and body["failed"] == []
    assert set(body["checks"]) == {"store", "scheduler", "sinks"}
    assert health.status_code == 200 and health.text == "ok"


def test_readyz_is_503_once_a_sink_fails_past_the_threshold(tmp_path: Path) -> None:
    env = {**closed_port_webhook(), "TRACING_EVAL_HTTP__SINK_FAILURE_THRESHOLD_SECONDS": "0.5"}
    with sidecar(tmp_path, "--source", "otlp-http", "--sink", "webhook", env=env) as base:
        assert httpx.get(f"{base}/readyz").status_code == 200  # nothing delivered yet, nothing failing
        send(base, conversation_spans()[:2])

        def not_ready() -> httpx.Response | None:
            r = httpx.get(f"{base}/readyz")
            return r if r.status_code == 503 else None

        r = wait_until("/readyz reports the failing webhook", not_ready)
        assert httpx.get(f"{base}/healthz").status_code == 200  # alive all the same
    body = r.json()
    assert body["ready"] is False and body["failed"] == ["sinks"]
    sinks = body["checks"]["sinks"]
    assert sinks["ok"] is False and "webhook" in sinks["detail"] and sinks["failing_seconds"]["webhook"] > 0.5
    assert body["checks"]["store"]["ok"] and body["checks"]["scheduler"]["ok"]


def test_run_serves_operations_endpoints_without_the_receiver(tmp_path: Path) -> None:
    """`run` with only pulled sources (here a file; Langfuse alike) still serves /healthz, /readyz and /metrics."""
    with sidecar(tmp_path, "--source", f"otlp-file:{GENAI_FILE}") as base:
        m = wait_until(
            "the file's threads evaluated",
            lambda: (
                (s := scrape(base)).value("tracing_eval_threads_evaluated_total", mode="thread") >= GENAI_THREADS and s
            ),
        )
        assert httpx.get(f"{base}/readyz").status_code == 200
        assert httpx.post(f"{base}/v1/traces", content=b"", headers=PB).status_code == 404  # no receiver
    source = f"otlp-file:{GENAI_FILE}"
    assert m.value("tracing_eval_spans_received_total", source=source) > 0
    assert m.value("tracing_eval_threads_received_total", source=source) >= GENAI_THREADS
    assert m.value("tracing_eval_spans_received_total", source="otlp-http") == 0
    assert m.value("tracing_eval_source_errors_total") == 0


# -- the judge tier ----------------------------------------------------------------------------------


def test_judge_calls_tokens_and_cost_match_what_the_endpoint_served(tmp_path: Path) -> None:
    with FakeOpenAIServer(SchemaJudge(broken=frozenset({"conversational_flow"})), prefix_cache=True) as llm:
        env = {
            "OPENAI_BASE_URL": llm.base_url,
            "OPENAI_API_KEY": "sk-test-not-a-key",
            "TRACING_EVAL_JUDGE__MODEL": "judge-test",
            "TRACING_EVAL_JUDGE__MAX_RETRIES": "0",
            "TRACING_EVAL_JUDGE__INPUT_PRICE_PER_MTOK": "2.0",
            "TRACING_EVAL_JUDGE__CACHED_INPUT_PRICE_PER_MTOK": "1.0",
            "TRACING_EVAL_JUDGE__OUTPUT_PRICE_PER_MTOK": "8.0",
        }
        with sidecar(tmp_path, "--source", f"otlp-file:{GENAI_FILE}", env=env) as base:

            def settled() -> Scrape | None:
                m = scrape(base)
                done = m.value("tracing_eval_threads_evaluated_total", mode="thread") >= GENAI_THREADS
                return m if done and m.value("tracing_eval_threads_ready") == 0 else None

            m = wait_until("every thread judged", settled)
            served, tokens = llm.requests, llm.token_totals()

    calls = m.value("tracing_eval_judge_calls_total")
    assert calls == len(served) > 0  # every HTTP attempt, nothing else
    assert m.value("tracing_eval_judge_calls_total", outcome="ok") == calls
    assert m.value("tracing_eval_judge_calls_total", metric="task_success", outcome="ok") >= GENAI_THREADS
    assert m.value("tracing_eval_judge_call_duration_seconds_count") == calls
    assert m.value("tracing_eval_judge_call_duration_seconds_sum") > 0

    input_tokens = m.value("tracing_eval_judge_tokens_total", type="input")
    output_tokens = m.value("tracing_eval_judge_tokens_total", type="output")
    cached = m.value("tracing_eval_judge_tokens_total", type="cached_input")
    assert (input_tokens, output_tokens, cached) == (
        tokens["prompt_tokens"],
        tokens["completion_tokens"],
        tokens["cached_tokens"],
    )
    assert cached > 0  # the shared transcript prefix was cached
    cost = ((input_tokens - cached) * 2.0 + cached * 1.0 + output_tokens * 8.0) / 1e6
    assert m.value("tracing_eval_judge_cost_usd_total") == pytest.approx(cost)

    # the broken metric: a corrective re-ask per thread (of the batched thread-metrics call), then an error result
    assert m.value("tracing_eval_judge_reasks_total", metric="thread_metrics") >= GENAI_THREADS
    assert m.value("tracing_eval_evaluations_total", metric="conversational_flow", status="error") >= GENAI_THREADS
    assert m.value("tracing_eval_evaluations_total", metric="task_success", status="ok") >= GENAI_THREADS
    assert m.value("tracing_eval_judge_rate_limited_total") == 0 and m.value("tracing_eval_judge_retries_total") == 0
    assert m.value("tracing_eval_judge_concurrency_limit") == 8  # judge.max_concurrency, never halved


# -- the store goes away (in process: the test breaks the store under a running worker) --------------


def worker_settings(store: Path, port: int | None = None) -> Settings:
    """Settings of a worker on a SQLite file, ticking every 0.2 s, its HTTP server on a free port."""
    return load_settings(
        None,
        store={"url": f"sqlite+aiosqlite:///{store}"},
        schedule={"tick_seconds": 0.2},
        http={"address": f"127.0.0.1:{port or free_port()}"},
    )


async def test_readyz_is_503_and_metrics_still_answer_when_the_store_is_gone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    folder = tmp_path / "db"
    folder.mkdir()
    port = free_port()
    settings = worker_settings(folder / "store.db", port)
    store = build_store(settings)
    await store.open()
    telemetry = Telemetry()
    pipeline = build_pipeline(settings, store, [], ["local"], complete=False, telemetry=telemetry)
    worker = Worker(settings, pipeline)
    assert worker.telemetry is telemetry
    running = asyncio.create_task(worker.run())
    base = f"http://127.0.0.1:{port}"
    try:
        async with httpx.AsyncClient(base_url=base) as http:
            deadline = time.monotonic() + LIVENESS_DEADLINE
            while True:
                with contextlib.suppress(httpx.HTTPError):
                    if (await http.get("/readyz")).status_code == 200:
                        break
                assert time.monotonic() < deadline and not running.done(), "the worker never became ready"
                await asyncio.sleep(0.1)

            shutil.rmtree(folder)  # the database and its folder are gone; so are the pooled connections
            await store.engine.dispose()
            r = await http.get("/readyz")
            metrics = await http.get("/metrics")
    finally:
        worker.stop()
        with contextlib.suppress(Exception):  # the final delivery cannot reach the store either
            await asyncio.wait_for(running, LIVENESS_DEADLINE)
        await pipeline.close()
        await store.close()
    assert r.status_code == 503
    body = r.json()
    assert body["ready"] is False and "store" in body["failed"]
    assert body["checks"]["store"]["ok"] is False and "did not answer" in body["checks"]["store"]["detail"]
    assert metrics.status_code == 200
    families = {f.name: f for f in text_string_to_metric_families(metrics.text)}
    assert [s.value for s in families["tracing_eval_store_up"].samples] == [0]


async def test_deliveries_go_out_while_a_tick_is_stuck_in_evaluation(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The worker delivers on a schedule of its own: a slow evaluation does not hold up the outbox."""
    monkeypatch.chdir(tmp_path)
    settings = worker_settings(tmp_path / "store.db")
    store = build_store(settings)
    await store.open()
    await store.ingest(IngestBatch(spans=[Span(trace_id="a" * 32, span_id="b" * 16, name="chat", start_ns=1)]), 0.0)
    [claim] = await store.claim("earlier", 1e9, Readiness(0, 0), 10, 30)
    rows = [
        Outgoing(f"r{i}", f"trace:{i}", score_result("m", 1.0, threshold=0.5, scope=Scope.THREAD)) for i in range(3)
    ]
    await store.record(claim, rows, None, ["hook"], 1e9)

    received: list[str] = []

    class Hook(BaseSink):
        name = "hook"

        async def deliver(self, delivery: Delivery) -> None:
            assert isinstance(delivery, ResultDelivery)
            received.append(delivery.result_id)

    pipeline = build_pipeline(settings, store, [], ["local"], complete=False)
    pipeline.sinks = [Hook()]
    stuck, release = asyncio.Event(), asyncio.Event()

    async def slow_tick(**_: Any) -> TickStats:
        stuck.set()
        await release.wait()
        return TickStats()

    monkeypatch.setattr(pipeline, "tick", slow_tick)
    worker = Worker(settings, pipeline)
    running = asyncio.create_task(worker.run())
    try:
        await asyncio.wait_for(stuck.wait(), LIVENESS_DEADLINE)
        deadline = time.monotonic() + LIVENESS_DEADLINE
        while len(received) < 3:
            assert time.monotonic() < deadline and not running.done(), "nothing delivered while the tick was stuck"
            await asyncio.sleep(0.05)
        assert not release.is_set() and sorted(received) == ["r0", "r1", "r2"]
    finally:
        release.set()
        worker.stop()
        await asyncio.wait_for(running, LIVENESS_DEADLINE)
        await pipeline.close()
        await store.close()


async def test_a_worker_run_closes_every_source_once_even_when_a_sink_fails_to_close(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The worker stops the sources and gives back its leases; whoever opened the pipeline closes
    sources and sinks once, and one part that fails to close does not leave the others open."""
    monkeypatch.chdir(tmp_path)
    settings = worker_settings(tmp_path / "store.db")
    store = build_store(settings)
    await store.open()
    events: list[str] = []

    class Counted(PullSource):
        name = "counted"

        async def pull(self, store: SourceStore, now: float) -> int:
            events.append("pull")
            return 0

        async def stop(self, drain_seconds: float) -> None:
            events.append("stop")

        async def aclose(self) -> None:
            events.append("close")

    class Stuck(BaseSink):
        name = "stuck"

        async def aclose(self) -> None:
            raise OSError("connection reset while closing")

    pipeline = build_pipeline(settings, store, [], ["local"], complete=False)
    pipeline.sources, pipeline.sinks = [Counted()], [Stuck()]
    worker = Worker(settings, pipeline)
    running = asyncio.create_task(worker.run())
    try:
        deadline = time.monotonic() + LIVENESS_DEADLINE
        while "pull" not in events:
            assert time.monotonic() < deadline and not running.done(), "the source was never pulled"
            await asyncio.sleep(0.05)
    finally:
        worker.stop()
        await asyncio.wait_for(running, LIVENESS_DEADLINE)
    assert "stop" in events and "close" not in events
    with capture_logs() as logged:
        await pipeline.close()
    await store.close()
    assert events.count("close") == 1
    assert [(e["event"], e["part"]) for e in logged if e["log_level"] == "warning"] == [("closing failed", "Stuck")]


# -- the parts on their own ----------------------------------------------------------------------------


async def test_the_judge_reports_every_attempt_by_outcome_with_retries_and_429s() -> None:
    second = "[turn 1]\nuser: Cancel it.\nassistant: Done."
    handler = ScriptedHandler(
        {
            TRANSCRIPT: [Reply.rate_limited(0.01), Reply.failure(500, "boom"), answer("yes")],
            second: [Reply.failure(400, "bad request")],
        }
    )
    telemetry = Telemetry()
    with FakeOpenAIServer(handler, prefix_cache=True) as server:
        settings = JudgeSettings(
            model="judge-test", base_url=server.base_url, api_key="test", cache=False, input_price_per_mtok=1.0
        )
        async with JudgeClient(settings, retry_base_seconds=0.01, retry_cap_seconds=0.05, observer=telemetry) as judge:
            value, usage = await judge.ask(ask("politeness"), verdict)
            with pytest.raises(JudgeError):
                await judge.ask(ask("politeness", transcript=second), verdict)

    def sample(name: str, **labels: str) -> float | None:
        return telemetry.registry.get_sample_value(name, labels)

    assert value == "yes"
    calls = "tracing_eval_judge_calls_total"
    assert sample(calls, metric="politeness", outcome="rate_limited") == 1
    assert sample(calls, metric="politeness", outcome="server_error") == 1
    assert sample(calls, metric="politeness", outcome="ok") == 1
    assert sample(calls, metric="politeness", outcome="client_error") == 1  # not retried
    assert sample("tracing_eval_judge_call_duration_seconds_count") == 4 == len(server.requests)
    assert sample("tracing_eval_judge_rate_limited_total", metric="politeness") == 1
    assert sample("tracing_eval_judge_retries_total", metric="politeness") == 2
    assert sample("tracing_eval_judge_tokens_total", metric="politeness", type="input") == usage.input_tokens > 0
    assert sample("tracing_eval_judge_tokens_total", metric="politeness", type="output") == usage.output_tokens > 0
    assert sample("tracing_eval_judge_cost_usd_total", metric="politeness") == pytest.approx(usage.cost_usd)


def test_a_sinks_run_of_failures_ends_with_a_success_and_ignores_refused_payloads() -> None:
    t = Telemetry()
    t.delivery("webhook", "review", "failed", 100.0, refused=True)  # the sink answered: not down
    assert t.failing_sinks(1000.0, 0) == {}
    t.delivery("webhook", "review", "retried", 100.0)
    t.delivery("webhook", "review", "retried", 200.0)
    assert t.failing_sinks(400.0, 250) == {"webhook": 300.0}  # since the first failure of the run
    assert t.failing_sinks(400.0, 350) == {}
    t.delivery("webhook", "review", "delivered", 500.0)
    assert t.failing_sinks(10_000.0, 0) == {}
    assert t.registry.get_sample_value("tracing_eval_sink_errors_total", {"sink": "webhook", "kind": "review"}) == 3
    delivered = {"sink": "webhook", "kind": "review", "outcome": "delivered"}
    assert t.registry.get_sample_value("tracing_eval_sink_deliveries_total", delivered) == 1


@pytest.mark.parametrize("batch", [True, False])
async def test_every_evaluation_and_delivered_row_is_counted_once(
    settings: Settings, store: SqlStore, batch: bool
) -> None:
    """Counted by series, not one by one: the counters still add up to every result and every row
    each sink took, per metric and status and per kind (results and review items)."""
    got: list[Delivery] = []

    class Hook(BaseSink):
        name = "hook"

        async def deliver(self, delivery: Delivery) -> None:
            got.append(delivery)

    hook = Hook()
    hook.batch = batch
    telemetry = Telemetry()
    pipeline = build_pipeline(settings, store, [], ["local"], complete=False, telemetry=telemetry)
    pipeline.sources = [OtlpFileSource(EXAMPLES / "otel-genai.otlp.jsonl", complete=True)]
    pipeline.sinks = [hook]
    stats = await pipeline.tick(settle_all=True)
    async with store.engine.connect() as conn:
        stored = (await conn.execute(select(schema.results.c.data))).scalars().all()
    sample = telemetry.registry.get_sample_value
    by_series = Counter((r["metric"], r["status"]) for r in map(json.loads, stored))
    assert len(by_series) > 5 and max(by_series.values()) > 1
    for (metric, status), n in by_series.items():
        assert sample("tracing_eval_evaluations_total", {"metric": metric, "status": status}) == n
    kinds = Counter(d.kind for d in got)
    assert kinds["result"] == len(stored) and kinds["review"] == stats.routed_to_review > 0
    assert stats.delivery.delivered == len(got)
    for kind, n in kinds.items():
        assert sample("tracing_eval_sink_deliveries_total", {"sink": "hook", "kind": kind, "outcome": "delivered"}) == n


def test_workers_in_one_process_keep_their_own_registries() -> None:
    a, b = Telemetry(), Telemetry()
    a.received("otlp-http", 3, 0, 1)
    assert a.registry.get_sample_value("tracing_eval_spans_received_total", {"source": "otlp-http"}) == 3
    assert b.registry.get_sample_value("tracing_eval_spans_received_total", {"source": "otlp-http"}) is None
    assert b"tracing_eval_spans_received_total" in a.exposition()


@pytest.mark.parametrize("backend", BACKENDS, indirect=True)
async def test_store_answers_the_operations_queries(store: SqlStore) -> None:
    await store.ping()
    await OtlpFileSource(GENAI_FILE, complete=True).pull(store, T0)
    windows = Readiness(turn_settle=5.0, thread_idle=100.0)
    assert await store.threads_ready(T0 + 1, windows) == {"thread": 0, "turns": 0}  # nothing settled yet
    assert await store.threads_ready(T0 + 10, windows) == {"thread": 0, "turns": GENAI_THREADS}
    assert await store.threads_ready(T0 + 200, windows) == {"thread": GENAI_THREADS, "turns": 0}
    claims = await store.claim("me", T0 + 200, windows, 2, 60.0)
    assert await store.threads_ready(T0 + 200, windows) == {"thread": GENAI_THREADS - len(claims), "turns": 0}

    row = {
        "kind": "result",
        "digest": "-",
        "payload": b"{}",
        "next_attempt_at": 0.0,
        "delivered_at": None,
        "failed": False,
    }
    async with store.engine.begin() as conn:
        await conn.execute(
            schema.outbox.insert(),
            [
                {**row, "sink": "otlp", "ref": "a", "created_at": T0},
                {**row, "sink": "otlp", "ref": "b", "created_at": T0 + 30},
                {**row, "sink": "otlp", "ref": "c", "created_at": T0 - 99, "delivered_at": T0},  # delivered
                {**row, "sink": "webhook", "ref": "d", "created_at": T0 - 99, "failed": True},  # parked
                {**row, "sink": "webhook", "ref": "e", "created_at": T0 + 50},
            ],
        )
    assert await store.outbox_stats(T0 + 60) == {"otlp": (2, 60.0), "webhook": (1, 10.0)}
