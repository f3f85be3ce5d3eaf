"""`scenarios export` from the store and the local review queue, in every format, without duplicates.

The store is filled the production way (`run --once` over the bundled OTLP examples). DeepEval and
RAGAS rows are validated against those libraries' own JSON schemas (`ConversationalGolden`,
`MultiTurnSample`, written by `bench/interop.py`, which also loads the files in both libraries).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from click.testing import CliRunner

from tests.conftest import EXAMPLES, REPO
from tests.support.fakes.openai_server import FakeOpenAIServer, Reply
from tests.support.fakes.schema_judge import SchemaJudge
from tracing_eval.cli import main
from tracing_eval.scenario_formats import ragas_messages
from tracing_eval.transcripts import thread_from_json_line

SCHEMAS = REPO / "tests" / "data" / "interop"
SOURCE = f"--source=otlp-file:{EXAMPLES / 'otel-genai.otlp.jsonl'}"


def invoke(*args: str) -> Any:
    return CliRunner(env={"COLUMNS": "250"}).invoke(main, list(args), catch_exceptions=False)


def lines(text: str) -> list[dict[str, Any]]:
    return [json.loads(x) for x in text.splitlines() if x.strip()]


@pytest.fixture
def scored(settings: Any) -> dict[str, dict[str, Any]]:
    """The examples scored into the store: stored records by thread key."""
    assert invoke("run", "--once", SOURCE).exit_code == 0
    return {r["thread_key"]: r for r in lines(invoke("results", "--format", "jsonl").stdout)}


def failing_keys(scored: dict[str, dict[str, Any]], metric: str | None = None) -> set[str]:
    return {
        key
        for key, rec in scored.items()
        if any(
            m["passed"] is False and (metric is None or name == metric)
            for name, m in [*rec["metrics"].items(), *(x for t in rec["turns"] for x in t["metrics"].items())]
        )
    }


def test_failed_threads_become_scenarios_and_a_second_export_adds_nothing(
    scored: dict[str, Any], tmp_path: Path
) -> None:
    out = tmp_path / "scenarios.jsonl"
    res = invoke("scenarios", "export", "--out", str(out))
    assert res.exit_code == 0, res.output
    found = lines(out.read_text())
    assert {s["source"]["thread_key"] for s in found} == failing_keys(scored)
    assert len({s["id"] for s in found}) == len(found)
    for s in found:
        rec = scored[s["source"]["thread_key"]]
        users = [m["content"] for m in s["transcript"] if m["role"] == "user"]
        assert s["goal"] == users[0] and s["goal_source"] == "first_user_message"  # no judge configured
        assert s["max_turns"] == len(users) + 2 and s["persona"].startswith("A user who ")
        assert s["stop_condition"] and s["expected_outcome"].startswith("By the end of the conversation")
        for f in s["failures"]:
            m = rec["metrics"][f["metric"]] if f["target"] == "thread" else None
            if m is not None:
                assert (f["score"], f["label"], f["reason"], f["evidence"]) == (
                    m["score"],
                    m["label"],
                    m["reason"],
                    m["evidence"],
                )
        # the transcript is eval input: it parses back to the same number of turns
        thread = thread_from_json_line(json.dumps({"thread_id": s["id"], "turns": s["transcript"]}), 1)
        assert len(thread.turns) == len(rec["turns"])
    before = out.read_bytes()
    again = invoke("scenarios", "export", "--out", str(out))
    assert again.exit_code == 0 and f"0 new scenario(s) written to {out}, {len(found)} already there" in again.stderr
    assert out.read_bytes() == before


def test_filters_by_metric_label_and_time(scored: dict[str, Any]) -> None:
    tools = lines(invoke("scenarios", "export", "--metric", "tool_errors").stdout)
    assert {s["source"]["thread_key"] for s in tools} == failing_keys(scored, "tool_errors") != set()
    assert all({f["metric"] for f in s["failures"]} == {"tool_errors"} for s in tools)
    labelled = lines(invoke("scenarios", "export", "--label", "high").stdout)
    assert labelled and all(f["label"] == "high" for s in labelled for f in s["failures"])
    assert invoke("scenarios", "export", "--since", "2999-01-01T00:00:00Z").stdout == ""
    assert len(lines(invoke("scenarios", "export", "--limit", "1").stdout)) == 1
    bad = invoke("scenarios", "export", "--since", "last tuesday")
    assert bad.exit_code == 2 and "--since" in bad.stderr


def test_the_review_queue_by_status(scored: dict[str, Any]) -> None:
    items = invoke("review", "list").stdout
    assert "otlp:" in items
    open_ = lines(invoke("scenarios", "export", "--from", "review").stdout)
    assert open_ and all(s["source"]["origin"] == "review" and s["source"]["review_status"] == "open" for s in open_)
    first = open_[-1]["source"]["review_item"]
    assert invoke("review", "resolve", str(first), "--note", "real bug").exit_code == 0
    resolved = lines(invoke("scenarios", "export", "--from", "review", "--review-status", "resolved").stdout)
    assert [s["source"]["review_item"] for s in resolved] == [first]
    assert len(lines(invoke("scenarios", "export", "--from", "review").stdout)) == len(open_) - 1
    every = lines(invoke("scenarios", "export", "--from", "review", "--review-status", "all").stdout)
    assert len(every) == len(open_)


@pytest.fixture
def goal_judge(settings: Any, monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeOpenAIServer]:
    schema_answer = SchemaJudge()

    def handler(request: dict[str, Any]) -> Reply:
        text = json.dumps(request["messages"])
        if "state the user's primary goal" in text:
            return Reply(json.dumps({"goal": "Get the order cancelled or find out why it cannot be."}))
        return schema_answer(request)

    with FakeOpenAIServer(handler) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-a-key")
        monkeypatch.setenv("TRACING_EVAL_JUDGE__MODEL", "judge-test")
        yield server


def test_the_goal_comes_from_task_success_or_the_judge(goal_judge: FakeOpenAIServer, monkeypatch: Any) -> None:
    monkeypatch.setenv("TRACING_EVAL_METRICS__ENABLED", json.dumps(["tool_errors", "reask", "repetition"]))
    assert invoke("run", "--once", SOURCE).exit_code == 0  # no task_success in the store
    asked = len(goal_judge.requests)
    inferred = lines(invoke("scenarios", "export").stdout)
    assert inferred and all(s["goal_source"] == "judge" for s in inferred)
    assert {s["goal"] for s in inferred} == {"Get the order cancelled or find out why it cannot be."}
    assert len(goal_judge.requests) - asked == len(inferred)  # one goal call per scenario

    monkeypatch.setenv("TRACING_EVAL_METRICS__ENABLED", json.dumps(["tool_errors", "task_success"]))
    monkeypatch.setenv("TRACING_EVAL_STORE__URL", "sqlite+aiosqlite:///with-task-success.db")
    assert invoke("run", "--once", SOURCE).exit_code == 0
    stored = {r["thread_key"]: r for r in lines(invoke("results", "--format", "jsonl").stdout)}
    asked = len(goal_judge.requests)
    known = lines(invoke("scenarios", "export").stdout)
    rows = {r["thread_id"]: r for r in lines(invoke("scenarios", "export", "--format", "eval").stdout)}
    assert len(goal_judge.requests) == asked  # the goal task_success inferred is reused: no call
    assert known and set(rows) == {s["id"] for s in known}
    for s in known:
        evidence = stored[s["source"]["thread_key"]]["metrics"]["task_success"]["evidence"]
        assert (s["goal"], s["goal_source"], s["criteria"]) == (
            evidence["task_description"],
            "task_success",
            evidence["success_criteria"],
        )
        assert rows[s["id"]]["task_description"] == s["goal"]
        assert rows[s["id"]]["success_criteria"] == s["criteria"]


def test_deepeval_and_ragas_rows_match_the_libraries_models(scored: dict[str, Any], tmp_path: Path) -> None:
    golden_schema = json.loads((SCHEMAS / "deepeval_conversational_golden.schema.json").read_text())
    sample_schema = json.loads((SCHEMAS / "ragas_multi_turn_sample.schema.json").read_text())
    scenarios = {s["id"]: s for s in lines(invoke("scenarios", "export").stdout)}
    goldens = json.loads(invoke("scenarios", "export", "--format", "deepeval").stdout)
    assert [g["name"] for g in goldens] == list(scenarios)
    for g in goldens:
        jsonschema.validate(g, golden_schema)
        s = scenarios[g["name"]]
        assert (g["scenario"], g["expected_outcome"], g["user_description"]) == (
            s["goal"],
            s["expected_outcome"],
            s["persona"],
        )
    samples = lines(invoke("scenarios", "export", "--format", "ragas").stdout)
    assert [x["scenario_id"] for x in samples] == list(scenarios)
    for x in samples:
        jsonschema.validate(x, sample_schema)
        assert x["reference"] == scenarios[x["scenario_id"]]["expected_outcome"]
        assert_ragas_order(x["user_input"])
    # a DeepEval file grows like the JSON lines ones: a second export into it adds nothing
    out = tmp_path / "goldens.json"
    assert invoke("scenarios", "export", "--format", "deepeval", "--out", str(out)).exit_code == 0
    again = invoke("scenarios", "export", "--format", "deepeval", "--out", str(out))
    assert "0 new scenario(s)" in again.stderr and len(json.loads(out.read_text())) == len(scenarios)


def assert_ragas_order(messages: list[dict[str, Any]]) -> None:
    """RAGAS refuses a tool message that does not follow a tool call (or another tool message)."""
    for i, m in enumerate(messages):
        if m["type"] == "tool":
            before = messages[i - 1] if i else {}
            assert before.get("type") == "tool" or before.get("tool_calls"), (i, messages)


def test_ragas_messages_keep_tool_calls_and_fold_orphan_tool_results() -> None:
    transcript = [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "cancel A1"},
        {"role": "assistant", "content": "", "tool_calls": [{"function": {"name": "cancel", "arguments": '{"id": "A1"}'}}]},
        {"role": "tool", "content": "ok"},
        {"role": "assistant", "content": "Cancelled."},
        {"role": "tool", "content": "late result"},
    ]  # fmt: skip
    out = ragas_messages(transcript)
    assert [m["type"] for m in out] == ["human", "ai", "tool", "ai", "ai"]
    assert out[1]["tool_calls"] == [{"name": "cancel", "args": {"id": "A1"}}]
    assert out[4]["content"] == "[tool result] late result"
    assert_ragas_order(out)


def test_a_file_of_another_kind_is_not_overwritten(scored: dict[str, Any], tmp_path: Path) -> None:
    other = tmp_path / "notes.jsonl"
    other.write_text('{"hello": "world"}\n')
    res = invoke("scenarios", "export", "--out", str(other))
    assert res.exit_code == 2 and "line 1: no 'id', so it was not written in this format" in res.stderr
    assert other.read_text() == '{"hello": "world"}\n'
