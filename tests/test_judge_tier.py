"""The judge tier end to end: `eval` and `run --once` with an OpenAI-compatible judge on loopback."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any

import pytest
from click.testing import CliRunner

from tests.conftest import EXAMPLES
from tests.support.fakes.openai_server import FakeOpenAIServer
from tests.support.fakes.schema_judge import SchemaJudge
from tracing_eval.cli import main
from tracing_eval.config import JUDGED_PACK, load_settings
from tracing_eval.model import MetricResult
from tracing_eval.store.sql import SqlStore

THREAD_ONLY = {"repetitive_pattern", "task_success", "failure_rate", "conversational_flow", "completeness"}


@pytest.fixture
def judge_env(settings: Any, monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer(SchemaJudge(broken=frozenset({"conversational_flow"}))) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-a-key")
        monkeypatch.setenv("TRACING_EVAL_JUDGE__MODEL", "judge-test")
        monkeypatch.setenv("TRACING_EVAL_JUDGE__MAX_RETRIES", "0")
        yield server


def invoke(*args: str) -> Any:
    return CliRunner(env={"COLUMNS": "250"}).invoke(main, list(args), catch_exceptions=False)


async def stored_results() -> list[MetricResult]:
    """Every result in the configured store, as the worker recorded it (tokens and model included)."""
    store = SqlStore(load_settings().store.url)
    await store.open()
    try:
        return [r.result for r in await store.results()]
    finally:
        await store.close()


def jsonl(text: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def test_eval_with_a_judge_scores_every_judged_metric_and_isolates_a_broken_one(judge_env: FakeOpenAIServer) -> None:
    res = invoke("eval", str(EXAMPLES / "transcripts.jsonl"), "--format", "jsonl")
    assert res.exit_code == 0, res.output
    records = {r["thread_id"]: r for r in jsonl(res.stdout)}
    failed = records["support-cancel-failed"]
    for name in JUDGED_PACK:
        assert name in failed["metrics"], name
    flow = failed["metrics"]["conversational_flow"]
    assert flow["status"] == "error" and "judge failed" in flow["reason"] and flow["score"] is None
    for name in ("task_success", "failure_rate", "completeness", "role_adherence"):
        m = failed["metrics"][name]
        assert m["status"] == "ok" and 0.0 <= m["score"] <= 1.0 and m["reason"], (name, m)
    # the schema judge names no fact-dependent reply, so retention has nothing to score
    retention = failed["metrics"]["knowledge_retention"]
    assert retention["status"] == "not_applicable" and "depends on a fact" in retention["reason"]
    assert failed["metrics"]["task_success"]["evidence"]["task_description_source"] == "llm_inferred"
    # per-turn judged results sit on the turns: relevancy on every turn, error handling on the failed one
    assert all("turn_relevancy" in t["metrics"] for t in failed["turns"])
    assert "tool_error_handling" in failed["turns"][0]["metrics"]
    # the deterministic tier still ran; a clean thread's judged repetition was skipped, not judged
    assert failed["metrics"]["tool_errors"]["passed"] is False
    assert records["support-order-status"]["metrics"]["repetitive_pattern"]["status"] == "skipped"
    # the thread metrics were asked in one batched call; the broken part was asked twice (answer +
    # corrective re-ask) per thread, never defaulted, and the other parts kept their answers
    flow_calls = [
        r
        for r in judge_env.requests
        if "conversational_flow"
        in (r.body or {}).get("response_format", {}).get("json_schema", {}).get("schema", {}).get("properties", {})
    ]
    assert len(flow_calls) == 2 * sum(
        1 for r in records.values() if r["metrics"]["conversational_flow"]["status"] == "error"
    )
    assert all(r.body["response_format"]["json_schema"]["name"] == "thread_metrics" for r in flow_calls)
    assert failed["metrics"]["failure_rate"]["evidence"]["batched_with"]


def test_eval_without_a_judge_says_the_judge_tier_was_skipped(settings: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    res = invoke("eval", str(EXAMPLES / "transcripts.jsonl"), "--format", "jsonl")
    assert res.exit_code == 0, res.output
    assert "judge tier skipped" in res.stderr
    records = jsonl(res.stdout)
    lines = (EXAMPLES / "transcripts.jsonl").read_text().splitlines()
    assert len(records) == sum(1 for line in lines if line.strip()) > 0  # every conversation, scored
    for r in records:
        assert set(r["metrics"]).isdisjoint(JUDGED_PACK), r["thread_id"]
        assert r["metrics"]["tool_errors"]["status"] in ("ok", "not_applicable")  # the deterministic tier ran
        assert all(t["metrics"]["response_hygiene"]["status"] == "ok" for t in r["turns"])


def test_run_once_with_a_judge_stores_judged_results_with_tokens(judge_env: FakeOpenAIServer) -> None:
    res = invoke("run", "--once", f"--source=otlp-file:{EXAMPLES / 'otel-genai.otlp.jsonl'}")
    assert res.exit_code == 0, res.output
    stored = {r["thread_key"]: r for r in jsonl(invoke("results", "--format", "jsonl").stdout)}
    thread = stored["otlp:genai/support-cancel-failed"]
    assert thread["metrics"]["task_success"]["status"] == "ok"
    assert thread["metrics"]["conversational_flow"]["status"] == "error"
    calls = len(judge_env.requests)
    judged = [r for r in asyncio.run(stored_results()) if r.metric in JUDGED_PACK and r.status == "ok"]
    assert calls > 0 and judged and all(r.judge_model == "judge-test" for r in judged)
    assert sum(r.input_tokens for r in judged) > 0 and sum(r.output_tokens for r in judged) > 0
    # a second run over the same, unchanged data costs no judge call
    again = invoke("run", "--once", f"--source=otlp-file:{EXAMPLES / 'otel-genai.otlp.jsonl'}")
    assert again.exit_code == 0, again.output
    assert "evaluated 0 threads" in again.stderr
    assert len(judge_env.requests) == calls


def test_doctor_checks_the_judge_endpoint(judge_env: FakeOpenAIServer) -> None:
    res = invoke("doctor")
    assert res.exit_code == 0, res.output
    assert "FAIL" not in res.stdout
    [judge] = [line for line in res.stdout.splitlines() if line.startswith("ok") and " judge: " in line]
    assert f"judge-test at {judge_env.base_url}" in judge and "answers with json_schema structured output" in judge
    [check] = judge_env.requests  # one real call, the connection check
    assert check.status == 200 and check.body is not None and check.body["model"] == "judge-test"
