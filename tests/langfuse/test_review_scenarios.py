"""`scenarios export --from langfuse`: sessions in the review annotation queue become scenarios.

The queue is filled the production way (`run --once --source langfuse` scores the sessions and routes
the failing one), then read back through the real client against the spec-checked fake, v4 and v3.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
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


def lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]


def test_sessions_in_the_review_queue_become_scenarios_once(langfuse: FakeLangfuseServer, tmp_path: Path) -> None:
    start = datetime.now(UTC) - timedelta(hours=2)
    langfuse.seed_session("sess-ok", OK_TURNS, start=start)
    langfuse.seed_session("sess-bad", FAILING_TURNS, start=start + timedelta(minutes=5))
    assert invoke("run", "--once", "--source", "langfuse").exit_code == 0
    [queue] = [q for q in langfuse.queues if q.name == QUEUE]
    assert [i.object_id for i in langfuse.queue_items if i.queue_id == queue.id] == ["sess-bad"]

    out = tmp_path / "scenarios.jsonl"
    res = invoke("scenarios", "export", "--from", "langfuse", "--out", str(out))
    assert res.exit_code == 0, res.output
    assert "1 new scenario(s) written" in res.stderr
    [scenario] = lines(out)
    assert scenario["source"]["thread_key"] == "langfuse:sess-bad" and scenario["source"]["origin"] == "langfuse"
    assert scenario["source"]["status"] == "PENDING"
    failures = {(f["metric"], f["target"]) for f in scenario["failures"]}
    assert ("reask", "thread") in failures and ("user_friction", "thread") in failures  # read from the scores
    reask = next(f for f in scenario["failures"] if f["metric"] == "reask" and f["target"] == "thread")
    assert reask["reason"] and reask["evidence"], reask  # comment and metadata of the score
    assert scenario["goal"] == "My order number is 4411. Where is my order?"  # no judge: the first request
    assert "identifiers up front" in scenario["persona"] and "shows frustration" in scenario["persona"]
    assert [m["content"] for m in scenario["transcript"] if m["role"] == "user"] == [t[0] for t in FAILING_TURNS]
    assert scenario["max_turns"] == len(FAILING_TURNS) + 2

    # the same conversation from the store (and from Langfuse again) is the same scenario: nothing added
    again = invoke("scenarios", "export", "--from", "store", "--out", str(out))
    assert again.exit_code == 0 and "0 new scenario(s) written" in again.stderr and "1 already there" in again.stderr
    assert invoke("scenarios", "export", "--from", "langfuse", "--out", str(out)).exit_code == 0
    assert len(lines(out)) == 1

    # filters: a metric that did not fail, a time range before the item, the resolved items
    for extra in (["--metric", "tool_errors"], ["--until", "2h"], ["--review-status", "resolved"]):
        none = invoke("scenarios", "export", "--from", "langfuse", *extra)
        assert none.exit_code == 0 and none.stdout == "" and "0 scenario(s) from langfuse" in none.stderr, extra


def test_a_session_the_reviewer_called_a_false_alarm_is_left_out(langfuse: FakeLangfuseServer) -> None:
    langfuse.seed_session("sess-bad", FAILING_TURNS, start=datetime.now(UTC) - timedelta(hours=1))
    assert invoke("run", "--once", "--source", "langfuse").exit_code == 0
    langfuse.seed_score("tracing-eval verdict", "false_alarm", session_id="sess-bad", source="ANNOTATION")
    res = invoke("scenarios", "export", "--from", "langfuse", "--format", "eval")
    assert res.exit_code == 0 and res.stdout == "", res.output


def test_a_missing_queue_is_a_clear_error(langfuse: FakeLangfuseServer) -> None:
    res = invoke("scenarios", "export", "--from", "langfuse")
    assert res.exit_code == 2
    assert "Langfuse has no annotation queue named 'tracing-eval review'" in res.stderr
