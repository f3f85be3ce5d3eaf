"""End to end: the real OTel SDK exporters send to a running `tracing-eval run`, which scores idle threads."""

from __future__ import annotations

import gzip
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from opentelemetry.exporter.otlp.proto.http import Compression
from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import BatchLogRecordProcessor
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

from tests.support.otlp_payloads import genai_turn_spans, to_otlp_json, trace_request

LIVENESS_DEADLINE = 90.0  # how long to wait for the worker before calling it hung (not a speed check)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def cli(*args: str, env: dict[str, str], cwd: Path, check: bool = True) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(
        [sys.executable, "-m", "tracing_eval", *args], env=env, cwd=cwd, capture_output=True, text=True
    )
    if check and proc.returncode != 0:
        raise AssertionError(f"tracing-eval {' '.join(args)} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    return proc


@pytest.fixture
def sidecar(tmp_path: Path) -> Iterator[dict[str, Any]]:
    port = free_port()
    env = {
        **os.environ,
        "TRACING_EVAL_STORE__URL": f"sqlite+aiosqlite:///{tmp_path / 'store.db'}",
        "TRACING_EVAL_SCHEDULE__TICK_SECONDS": "0.3",
        "TRACING_EVAL_SCHEDULE__TURN_SETTLE_SECONDS": "0.5",
        "TRACING_EVAL_SCHEDULE__THREAD_IDLE_SECONDS": "1.5",
        "TRACING_EVAL_LOGGING__FORMAT": "json",
    }
    log_path = tmp_path / "sidecar.log"
    log = log_path.open("w")  # a file, not a pipe nobody reads: a full pipe would block the sidecar's logging
    proc = subprocess.Popen(
        [sys.executable, "-m", "tracing_eval", "run", "--source", "otlp-http", "--http", f"127.0.0.1:{port}"],
        env=env,
        cwd=tmp_path,
        stdout=log,
        stderr=subprocess.STDOUT,
        text=True,
    )
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + LIVENESS_DEADLINE
    while True:
        try:
            if httpx.get(f"{base}/healthz").status_code == 200:
                break
        except httpx.HTTPError:
            pass
        if proc.poll() is not None or time.monotonic() > deadline:
            raise AssertionError(f"sidecar did not start:\n{log_path.read_text()}")
        time.sleep(0.1)
    yield {"base": base, "env": env, "cwd": tmp_path, "proc": proc}
    if proc.poll() is None:
        proc.kill()
        proc.wait()
    log.close()


def ticks(base: str) -> float:
    """How many ticks the sidecar has finished (its Prometheus tick histogram's count)."""
    text = httpx.get(f"{base}/metrics").text
    [line] = [x for x in text.splitlines() if x.startswith("tracing_eval_tick_duration_seconds_count")]
    return float(line.split()[-1])


def stored(sidecar: dict[str, Any]) -> list[dict[str, Any]]:
    out = cli("results", "--format", "jsonl", env=sidecar["env"], cwd=sidecar["cwd"]).stdout
    return [json.loads(line) for line in out.splitlines() if line.strip()]


def wait_for(sidecar: dict[str, Any], predicate: Any) -> list[dict[str, Any]]:
    deadline = time.monotonic() + LIVENESS_DEADLINE
    while True:
        records = stored(sidecar)
        if predicate(records):
            return records
        assert time.monotonic() < deadline, f"sidecar never produced the expected results; last: {records}"
        time.sleep(0.5)


def test_real_exporters_to_running_sidecar_get_threads_scored(sidecar: dict[str, Any]) -> None:
    base = sidecar["base"]
    provider = TracerProvider()
    provider.add_span_processor(
        BatchSpanProcessor(OTLPSpanExporter(endpoint=f"{base}/v1/traces", compression=Compression.Gzip))
    )
    logs = LoggerProvider()
    logs.add_log_record_processor(BatchLogRecordProcessor(OTLPLogExporter(endpoint=f"{base}/v1/logs")))
    tracer = provider.get_tracer("app")
    history: list[dict[str, Any]] = []
    answers = ["Your order A48213 ships tomorrow.", "Could you please provide your order number?"]
    for user, answer in zip(["Where is order A48213?", "And when will it arrive?"], answers, strict=True):
        with tracer.start_as_current_span(
            "invoke_agent support",
            attributes={"gen_ai.operation.name": "invoke_agent", "gen_ai.conversation.id": "e2e-1"},
        ):
            msgs = history + [{"role": "user", "parts": [{"type": "text", "content": user}]}]
            with tracer.start_as_current_span(
                "chat gpt-4o-mini",
                attributes={
                    "gen_ai.operation.name": "chat",
                    "gen_ai.provider.name": "openai",
                    "gen_ai.input.messages": json.dumps(msgs),
                    "gen_ai.output.messages": json.dumps(
                        [{"role": "assistant", "parts": [{"type": "text", "content": answer}], "finish_reason": "stop"}]
                    ),
                },
            ):
                pass
        history = msgs + [{"role": "assistant", "parts": [{"type": "text", "content": answer}]}]
    assert provider.force_flush() and logs.force_flush()
    provider.shutdown()
    logs.shutdown()

    # the same conversation shape over OTLP/JSON (hex ids), as the JSON exporter sends it
    body = gzip.compress(json.dumps(to_otlp_json(trace_request(genai_turn_spans("e2e-json", "hi", "hello")))).encode())
    r = httpx.post(
        f"{base}/v1/traces", content=body, headers={"content-type": "application/json", "content-encoding": "gzip"}
    )
    assert r.status_code == 200 and r.json() == {}

    records = wait_for(
        sidecar, lambda recs: {"otlp:e2e-1", "otlp:e2e-json"} <= {x["thread_key"] for x in recs if x["metrics"]}
    )
    e2e = next(x for x in records if x["thread_key"] == "otlp:e2e-1")
    assert len(e2e["turns"]) == 2
    assert e2e["metrics"]["reask"]["passed"] is False
    assert e2e["metrics"]["reask"]["evidence"]["reasked_messages"] == [3]
    assert all("response_hygiene" in t["metrics"] for t in e2e["turns"])
    review = cli("review", "list", env=sidecar["env"], cwd=sidecar["cwd"]).stdout
    assert "otlp:e2e-1" in review

    # malformed input: the right 4xx, and nothing changes
    before = stored(sidecar)
    bad = [
        httpx.post(f"{base}/v1/traces", content=b"\x0a\xff\xff", headers={"content-type": "application/x-protobuf"}),
        httpx.post(f"{base}/v1/traces", content=b"{", headers={"content-type": "application/json"}),
        httpx.post(f"{base}/v1/traces", content=b"x", headers={"content-type": "text/xml"}),
    ]
    assert [b.status_code for b in bad] == [400, 400, 415]
    seen = ticks(base)  # two whole ticks later (the first may have begun before the requests) ...
    deadline = time.monotonic() + LIVENESS_DEADLINE
    while ticks(base) < seen + 2:
        assert time.monotonic() < deadline, "the sidecar stopped ticking"
        time.sleep(0.1)
    assert stored(sidecar) == before  # ... nothing changed

    proc = sidecar["proc"]
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=LIVENESS_DEADLINE) == 0
