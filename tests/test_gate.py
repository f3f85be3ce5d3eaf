"""The CI gate fails loudly: every way it can fail is one clear line and a documented exit code.

Exit codes of `eval`: 0 done (gate passed), 1 the gate failed, 2 bad input or baseline, 3 the judge
cannot be used. The judge is the loopback OpenAI-compatible fake through the real `openai` client.
"""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from tests.conftest import EXAMPLES
from tests.support.fakes.openai_server import FakeOpenAIServer, Reply
from tests.support.fakes.schema_judge import SchemaJudge
from tracing_eval import gate
from tracing_eval.cli import main

LINES = {json.loads(x)["thread_id"]: x for x in (EXAMPLES / "transcripts.jsonl").read_text().splitlines()}
GOOD = [k for k in LINES if "loop" not in k]


def invoke(*args: str) -> Any:
    return CliRunner(env={"COLUMNS": "250"}).invoke(main, list(args), catch_exceptions=False)


def errors(res: Any) -> list[str]:
    return [line for line in res.stderr.splitlines() if line.startswith("error:")]


def write_threads(path: Path, swap: dict[str, str] | None = None) -> Path:
    """The clean example threads; `swap` gives a thread (by id) the turns of another one."""
    lines = []
    for key in GOOD:
        source = json.loads(LINES[(swap or {}).get(key, key)])
        lines.append(json.dumps({**source, "thread_id": key}))
    path.write_text("\n".join(lines) + "\n")
    return path


def judge_env(monkeypatch: pytest.MonkeyPatch, server: FakeOpenAIServer, retries: int = 0) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-a-key")
    monkeypatch.setenv("TRACING_EVAL_JUDGE__MODEL", "judge-test")
    monkeypatch.setenv("TRACING_EVAL_JUDGE__MAX_RETRIES", str(retries))


@pytest.fixture
def judge(settings: Any, monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer(SchemaJudge()) as server:
        judge_env(monkeypatch, server)
        yield server


# -- exit 0 ----------------------------------------------------------------------------------------


def test_an_unchanged_run_passes_in_both_baseline_forms(settings: Any, tmp_path: Path) -> None:
    threads = write_threads(tmp_path / "threads.jsonl")
    made = invoke("eval", str(threads), "--format", "jsonl", "--out", str(tmp_path / "base.jsonl"))
    assert made.exit_code == 0, made.output
    assert (tmp_path / "base.jsonl").read_text() == made.stdout
    same = invoke("eval", str(threads), "--baseline", str(tmp_path / "base.jsonl"), "--tolerance", "0.03")
    assert same.exit_code == 0, same.output
    assert f"gate passed on {len(GOOD)} threads" in same.stderr and not errors(same)
    summary = invoke("eval", str(threads), "--runs", "3", "--out", str(tmp_path / "base.json"))
    assert summary.exit_code == 0, summary.output
    again = invoke("eval", str(threads), "--runs", "2", "--baseline", str(tmp_path / "base.json"))
    assert again.exit_code == 0, again.output
    # the table shows coverage next to the mean
    assert "coverage" in summary.stdout and "Metrics over 3 runs" in summary.stdout


def test_a_three_run_baseline_holds_means_std_devs_and_per_thread_verdicts(judge: Any, tmp_path: Path) -> None:
    threads = write_threads(tmp_path / "threads.jsonl")
    res = invoke("eval", str(threads), "--runs", "3", "--out", str(tmp_path / "base.json"), "--format", "json")
    assert res.exit_code == 0, res.output
    doc = json.loads((tmp_path / "base.json").read_text())
    assert doc["tracing_eval_baseline"] == 1 and doc["runs"] == 3 and doc["threads"] == len(GOOD)
    ts = doc["metrics"]["task_success"]
    assert len(ts["run_means"]) == 3 and ts["std"] == 0.0 and ts["coverage"] == 1.0
    assert ts["per_run"]["ok"] == len(GOOD)
    assert doc["verdicts"]["support-cancel-failed"]["tool_errors"] == [False, False, False]
    assert len(doc["cells"]) == 3 and set(doc["cells"][0]) == set(GOOD)
    # three runs judged afresh: no answer was reused across runs
    judged = [r for r in judge.requests if r.path.endswith("/chat/completions")]
    one_run = sum(1 for r in judged if "task_success" in json.dumps(r.body.get("response_format")))
    assert one_run == 3 * len(GOOD) * 3  # goal, criteria, verdicts per thread, in each of 3 runs
    printed = json.loads(res.stdout)
    assert {r["run"] for r in printed["threads"]} == {1, 2, 3}
    assert printed["metrics"]["task_success"]["mean"] == ts["mean"]


# -- exit 1 ----------------------------------------------------------------------------------------


def test_a_mean_below_the_tolerance_fails_and_names_the_metric(settings: Any, tmp_path: Path) -> None:
    base = tmp_path / "base.json"
    assert invoke("eval", str(write_threads(tmp_path / "a.jsonl")), "--runs", "2", "--out", str(base)).exit_code == 0
    worse = write_threads(tmp_path / "b.jsonl", swap={"support-cancel-ok": "support-repetition-loop"})
    res = invoke("eval", str(worse), "--baseline", str(base), "--tolerance", "0.03")
    assert res.exit_code == 1, res.output
    regressions = [line for line in res.stderr.splitlines() if line.startswith("regression")]
    assert any(line.startswith("regression repetition: mean ") and "below baseline" in line for line in regressions)
    assert any(
        "support-cancel-ok repetition: passed in all 2 baseline run(s), now fails" in x for x in res.stderr.splitlines()
    )


def test_a_baseline_metric_missing_from_the_run_fails(judge: Any, tmp_path: Path, monkeypatch: Any) -> None:
    threads = write_threads(tmp_path / "threads.jsonl")
    base = tmp_path / "base.jsonl"
    assert invoke("eval", str(threads), "--out", str(base)).exit_code == 0
    monkeypatch.delenv("TRACING_EVAL_JUDGE__MODEL")  # the same gate, now without a judge
    res = invoke("eval", str(threads), "--baseline", str(base))
    assert res.exit_code == 1, res.output
    assert "judge tier skipped" in res.stderr
    assert "regression task_success: in the baseline but not in this run" in res.stderr
    assert "no metric fell" not in res.stderr and "gate passed" not in res.stderr


def test_lost_coverage_and_new_errors_fail(settings: Any, tmp_path: Path, monkeypatch: Any) -> None:
    threads = write_threads(tmp_path / "threads.jsonl")
    base = tmp_path / "base.jsonl"
    with FakeOpenAIServer(SchemaJudge()) as good:
        judge_env(monkeypatch, good)
        assert invoke("eval", str(threads), "--out", str(base)).exit_code == 0
    with FakeOpenAIServer(SchemaJudge(broken=frozenset({"failure_rate"}))) as broken:
        judge_env(monkeypatch, broken)
        res = invoke("eval", str(threads), "--baseline", str(base))
    assert res.exit_code == 1, res.output
    assert f"regression failure_rate: {len(GOOD)} error result(s) per run, baseline 0" in res.stderr
    assert (
        "regression failure_rate: coverage 0.0000 (scored / applicable results) is below baseline 1.0000" in res.stderr
    )
    # the closing summary says why, by cause
    assert f"malformed judge answer: {len(GOOD)} (failure_rate {len(GOOD)})" in res.stderr


def test_coverage_is_compared_with_its_own_tolerance() -> None:
    def runs(skipped: int) -> gate.RunSet:
        """11 threads of metric m: the first `skipped` skipped, the others scored 1.0."""
        scored = gate.Cell(counts={"ok": 1}, score=1.0, passed=True)
        return gate.RunSet(
            [{f"t{i}": {"m": gate.Cell(counts={"skipped": 1}) if i < skipped else scored} for i in range(11)}]
        )

    report = gate.compare(runs(1), runs(0), tolerance=0.03, coverage_tolerance=0.05)
    assert report.failures == [
        "m: coverage 0.9091 (scored / applicable results) is below baseline 1.0000 - coverage tolerance 0.05"
    ]
    assert gate.compare(runs(1), runs(0), tolerance=0.03, coverage_tolerance=0.1).passed


# -- exit 2 ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("content", "says"),
    [
        ("", "is empty"),
        ("not json at all\n", "line 1 is not JSON"),
        ('{"hello": "world"}', "line 1 is neither a tracing-eval baseline nor `eval` output"),
        ("[1, 2]", "is JSON but not a tracing-eval baseline"),
        (LINES["support-order-status"] + "\n", "is a transcript (eval input), not eval output"),
        ('{"id": "scn-1", "goal": "x", "transcript": []}\n', "is a scenario (scenarios export), not eval output"),
        ('{"tracing_eval_baseline": 7, "cells": []}', "is a baseline of format 7"),
        ('{"thread_id": "a", "metrics": {"m": {"score": 1}}, "turns": []}\n', "a metric result without score"),
    ],
)
def test_a_wrong_baseline_file_is_one_clear_error(settings: Any, tmp_path: Path, content: str, says: str) -> None:
    base = tmp_path / "wrong.jsonl"
    base.write_text(content)
    res = invoke("eval", str(write_threads(tmp_path / "threads.jsonl")), "--baseline", str(base))
    assert res.exit_code == 2, res.output
    assert len(errors(res)) == 1 and says in errors(res)[0], res.stderr
    assert res.stdout == ""  # nothing was evaluated


def test_an_unrelated_baseline_is_an_error_before_anything_is_evaluated(settings: Any, tmp_path: Path) -> None:
    other = tmp_path / "other.jsonl"
    other.write_text(LINES["support-refusal-loop"] + "\n")
    base = tmp_path / "base.jsonl"
    assert invoke("eval", str(other), "--out", str(base)).exit_code == 0
    res = invoke("eval", str(write_threads(tmp_path / "threads.jsonl")), "--baseline", str(base))
    assert res.exit_code == 2
    assert errors(res) == [
        f"error: baseline {base} shares no thread ids with {tmp_path / 'threads.jsonl'} (1 baseline threads): "
        "is it the baseline of another file?"
    ]


# -- exit 3 ----------------------------------------------------------------------------------------


def test_a_judged_metric_without_a_judge_is_an_error_not_an_empty_table(settings: Any, monkeypatch: Any) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    res = invoke("eval", str(EXAMPLES / "transcripts.jsonl"), "--metrics", "task_success")
    assert res.exit_code == 3
    assert errors(res) == [
        "error: task_success: needs a judge and none is configured (set TRACING_EVAL_JUDGE__MODEL and OPENAI_API_KEY)"
    ]
    assert res.stdout == ""


def test_an_unreachable_judge_is_one_line_and_no_retry_flood(settings: Any, monkeypatch: Any, tmp_path: Path) -> None:
    with socket.socket() as closed:  # bound, never listening: connections are refused
        closed.bind(("127.0.0.1", 0))
        monkeypatch.setenv("OPENAI_BASE_URL", f"http://127.0.0.1:{closed.getsockname()[1]}/v1")
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-a-key")
        monkeypatch.setenv("TRACING_EVAL_JUDGE__MODEL", "judge-test")
        res = invoke("eval", str(EXAMPLES / "transcripts.jsonl"), "--out", str(tmp_path / "out.jsonl"))
    assert res.exit_code == 3
    assert len(res.stderr.strip().splitlines()) == 1, res.stderr
    assert errors(res)[0].startswith("error: judge unusable: cannot reach http://127.0.0.1:")
    assert not (tmp_path / "out.jsonl").exists()


def test_a_judge_that_fails_mid_run_stops_being_called_and_the_run_fails(
    settings: Any, monkeypatch: Any, tmp_path: Path
) -> None:
    answer = SchemaJudge()

    def handler(request: dict[str, Any]) -> Reply:
        name = request.get("response_format", {}).get("json_schema", {}).get("name")
        return answer(request) if name == "connection_check" else Reply.failure(503, "overloaded")

    with FakeOpenAIServer(handler) as server:
        judge_env(monkeypatch, server, retries=1)
        monkeypatch.setenv("TRACING_EVAL_JUDGE__MAX_CONCURRENCY", "1")
        res = invoke("eval", str(EXAMPLES / "transcripts.jsonl"), "--out", str(tmp_path / "out.jsonl"))
        asked = [json.dumps(r.body) for r in server.requests[1:]]
    assert res.exit_code == 3, res.output
    assert errors(res) == [
        "error: judge unusable: judge call failed after 2 attempt(s): HTTP 503: Error code: 503 - overloaded ("
        + str(tmp_path / "out.jsonl")
        + " not written)"
    ]
    # once a call had failed after its retry, nothing more was sent: every call was about the first thread
    assert asked and all("B20417" in body for body in asked), len(asked)
    assert "judge call retried" not in res.stderr  # retries are counted, not logged one by one
    summary = res.stderr.split("results ended in error:")[1]
    assert "judge server error: " in summary and " retries, " in res.stderr
    assert not (tmp_path / "out.jsonl").exists()


def test_error_causes_are_read_from_the_judge_messages() -> None:
    assert gate.error_cause("judge failed: judge call failed after 4 attempt(s): cannot reach http://x: boom") == (
        "judge unreachable"
    )
    assert gate.error_cause("judge failed: judge call failed after 1 attempt(s): timed out after 60 s") == (
        "judge unreachable"
    )
    assert gate.error_cause("judge failed: authentication failed (HTTP 401: no); check judge.api_key") == (
        "judge refused the request"
    )
    assert gate.error_cause("judge failed: rate limited (HTTP 429); the endpoint asks to wait 300 s") == (
        "judge rate limited"
    )
    assert gate.error_cause("judge failed: malformed answer after one corrective re-ask: x") == "malformed judge answer"
    assert gate.error_cause("judge failed: token budget of 10 tokens per thread exhausted (12 used)") == (
        "judge token budget exhausted"
    )
    assert gate.error_cause("metric failed: KeyError: 'x'") == "metric raised KeyError"
    assert gate.error_cause("invalid option: temperature must be a number") == "invalid metric option"
