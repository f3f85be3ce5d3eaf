"""`run --once --sink otlp --sink webhook` over the examples: events and review items, each once."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
from click.testing import CliRunner
from starlette.applications import Starlette
from starlette.routing import Route

from tests.conftest import EXAMPLES
from tests.support.fakes.loopback import LoopbackServer
from tests.test_otlp_sink import Collector
from tests.test_webhook_sink import SECRET, Receiver
from tracing_eval.cli import main


def invoke(*args: str) -> Any:
    return CliRunner(env={"COLUMNS": "250"}).invoke(main, list(args), catch_exceptions=False)


def test_run_once_sends_events_and_review_items_through_the_configured_sinks(
    settings: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    collector, receiver = Collector(statuses=[503]), Receiver(statuses={"a": [500]})
    logs = LoopbackServer(Starlette(routes=[Route("/v1/logs", collector.logs, methods=["POST"])]))
    hooks = LoopbackServer(Starlette(routes=[Route("/hook/{name}", receiver.hook, methods=["POST"])]))
    with logs, hooks:
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", logs.url)
        monkeypatch.setenv("TRACING_EVAL_SINKS__WEBHOOK__URLS", json.dumps([f"{hooks.url}/hook/a"]))
        monkeypatch.setenv("TRACING_EVAL_SINKS__WEBHOOK__SECRET", SECRET)
        source = f"--source=otlp-file:{EXAMPLES / 'otel-genai.otlp.jsonl'}"
        first = invoke("run", "--once", source, "--sink", "otlp", "--sink", "webhook")
        assert first.exit_code == 0, first.output
        assert "retrying" in first.stderr  # the 503 and the 500 were retried later, not lost
        stored = [json.loads(x) for x in invoke("results", "--format", "jsonl").stdout.splitlines()]
        expected = sum(len(r["metrics"]) + sum(len(t["metrics"]) for t in r["turns"]) for r in stored)
        queue_size = invoke("review", "list").stdout.count("otlp:genai/")
        time.sleep(1.2)  # the first retry is due one second later (outbox backoff)
        again = invoke("run", "--once", source, "--sink", "otlp", "--sink", "webhook")
        assert "pulled 0 spans, evaluated 0 threads" in again.stderr and "retrying 0" in again.stderr
    ids = [e.attributes["tracing_eval.result.id"] for e in collector.events]
    assert len(ids) == expected and len(set(ids)) == expected
    assert all(e.event_name == "gen_ai.evaluation.result" for e in collector.events)
    assert len(receiver.processed_ids("a")) == queue_size == 4
    assert sorted(receiver.posts.values()) == [1, 1, 1, 2]  # one 500, then once each
    assert receiver.bad_signatures == 0
