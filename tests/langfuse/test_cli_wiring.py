"""The sidecar's own commands against the fake Langfuse: `run --once --source langfuse`, `backfill`, `doctor`."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from click.testing import CliRunner

from tests.support.fakes.langfuse_server import FakeLangfuseServer
from tests.support.langfuse_harness import FAILING_TURNS, OK_TURNS, QUEUE
from tracing_eval.cli import main


@pytest.fixture(params=["v4", "v3"])
def langfuse(
    request: pytest.FixtureRequest, settings: Any, monkeypatch: pytest.MonkeyPatch
) -> Iterator[FakeLangfuseServer]:
    with FakeLangfuseServer(request.param) as server:
        monkeypatch.setenv("LANGFUSE_BASE_URL", server.base_url)
        monkeypatch.setenv("LANGFUSE_PUBLIC_KEY", server.public_key)
        monkeypatch.setenv("LANGFUSE_SECRET_KEY", server.secret_key)
        monkeypatch.delenv("LANGFUSE_HOST", raising=False)
        yield server
        server.assert_no_violations()


def invoke(*args: str) -> Any:
    return CliRunner(env={"COLUMNS": "250"}).invoke(main, list(args), catch_exceptions=False)


def test_run_once_with_the_langfuse_source_writes_scores_and_queue_items_back(langfuse: FakeLangfuseServer) -> None:
    start = datetime.now(UTC) - timedelta(hours=2)
    langfuse.seed_session("sess-ok", OK_TURNS, start=start)
    langfuse.seed_session("sess-bad", FAILING_TURNS, start=start + timedelta(minutes=5))
    res = invoke("run", "--once", "--source", "langfuse")
    assert res.exit_code == 0, res.output
    stored = {r["thread_key"]: r for r in map(json.loads, invoke("results", "--format", "jsonl").stdout.splitlines())}
    assert set(stored) == {"langfuse:sess-ok", "langfuse:sess-bad"}
    assert stored["langfuse:sess-bad"]["metrics"]["reask"]["passed"] is False
    session_scores = [s for s in langfuse.scores if s.session_id == "sess-bad"]
    assert {"reask", "user_friction", "refusal_loop"} <= {s.name for s in session_scores}
    assert all(s.trace_id is None for s in session_scores)
    assert any(s.trace_id for s in langfuse.scores)  # per-turn scores sit on traces
    ids = [s.id for s in langfuse.scores]
    assert len(ids) == len(set(ids))
    [queue] = [q for q in langfuse.queues if q.name == QUEUE]
    items = [i for i in langfuse.queue_items if i.queue_id == queue.id]
    assert [(i.object_id, i.object_type) for i in items] == [("sess-bad", "SESSION")]

    rows = len(langfuse.scores)
    again = invoke("run", "--once", "--source", "langfuse")
    assert again.exit_code == 0 and len(langfuse.scores) == rows  # nothing new, nothing duplicated
    assert len([i for i in langfuse.queue_items if i.queue_id == queue.id]) == 1


def test_backfill_reads_history_and_doctor_checks_the_connection(langfuse: FakeLangfuseServer) -> None:
    langfuse.seed_session("old", FAILING_TURNS, start=datetime.now(UTC) - timedelta(days=3))
    assert invoke("run", "--once", "--source", "langfuse").stdout.count("old") == 0  # default window: 24h
    res = invoke("backfill", "--since", "4d")
    assert res.exit_code == 0, res.output
    assert "read 0 spans" not in res.stderr and "spans from langfuse since" in res.stderr
    assert any(s.session_id == "old" for s in langfuse.scores)
    doctor = invoke("doctor", "--source", "langfuse")
    assert doctor.exit_code == 0, doctor.output
    assert f"read API {langfuse.mode}" in doctor.stdout
    bad = invoke("backfill", "--since", "yesterday-ish")
    assert bad.exit_code == 2 and "--since" in bad.stderr
