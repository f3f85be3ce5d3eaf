"""The command line: `eval` contract and baseline gate, `run --once` on the examples, results and review."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from tests.conftest import DATASETS, EXAMPLES
from tracing_eval.cli import main

CONTRACT = {"score", "label", "passed", "status", "reason", "evidence"}
STATUSES = {"ok", "skipped", "not_applicable", "error"}


def invoke(*args: str) -> Any:
    return CliRunner(env={"COLUMNS": "250"}).invoke(main, list(args), catch_exceptions=False)


def jsonl(text: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def check_contract(record: dict[str, Any], source_turns: list[dict[str, Any]]) -> None:
    assert set(record) == {"thread_id", "metrics", "turns"}
    for m in [*record["metrics"].values(), *(x for t in record["turns"] for x in t["metrics"].values())]:
        assert set(m) == CONTRACT and m["status"] in STATUSES
        assert m["score"] is None or 0.0 <= m["score"] <= 1.0
    assert [t["index"] for t in record["turns"]] == list(range(len(record["turns"])))
    assert all(t["metrics"] for t in record["turns"]), "every turn gets at least one per-turn result"
    assistant = {i for i, m in enumerate(source_turns) if m["role"] == "assistant"}
    rep = record["metrics"].get("repetition", {}).get("evidence", {})
    assert set(rep.get("repeated_messages", [])) <= assistant
    reask = record["metrics"].get("reask", {}).get("evidence", {})
    assert set(reask.get("reasked_messages", [])) <= assistant


def test_eval_jsonl_follows_the_contract_on_the_example_transcripts(settings: Any) -> None:
    source = {
        json.loads(x)["thread_id"]: json.loads(x)["turns"]
        for x in (EXAMPLES / "transcripts.jsonl").read_text().splitlines()
    }
    res = invoke("eval", str(EXAMPLES / "transcripts.jsonl"), "--format", "jsonl")
    assert res.exit_code == 0, res.output
    records = {r["thread_id"]: r for r in jsonl(res.stdout)}
    assert set(records) == set(source)
    for key, rec in records.items():
        check_contract(rec, source[key])
    assert records["support-repetition-loop"]["metrics"]["repetition"]["label"] == "fully"
    assert records["support-refusal-loop"]["metrics"]["refusal_loop"]["label"] == "fully"
    reask = records["support-reask-order"]["metrics"]["reask"]
    assert reask["passed"] is False and reask["evidence"]["reasked_messages"] == [10]
    tools = records["support-cancel-failed"]["metrics"]["tool_errors"]
    assert tools["passed"] is False and tools["score"] == 0.0
    assert records["support-order-status"]["metrics"]["tool_errors"]["passed"] is True
    assert all(m["passed"] is not False for m in records["support-order-status"]["metrics"].values())


@pytest.mark.slow
@pytest.mark.parametrize(("name", "threads"), [("tau_airline_gpt4o.jsonl", 200), ("dstc9_interactive.jsonl", 2200)])
def test_eval_runs_the_datasets_to_the_end(settings: Any, tmp_path: Path, name: str, threads: int) -> None:
    source = [json.loads(x) for x in (DATASETS / name).read_text().splitlines() if x.strip()]
    out = tmp_path / "out.jsonl"
    res = invoke("eval", str(DATASETS / name), "--format", "jsonl", "--out", str(out))
    assert res.exit_code == 0, res.output
    records = jsonl(res.stdout)
    assert len(records) == threads and out.read_text() == res.stdout
    for rec, src in zip(records, source, strict=True):
        assert rec["thread_id"] == src["thread_id"]
        check_contract(rec, src["turns"])


def test_baseline_gate_passes_unchanged_and_fails_on_a_regression(settings: Any, tmp_path: Path) -> None:
    lines = [json.loads(x) for x in (EXAMPLES / "transcripts.jsonl").read_text().splitlines()]
    clean = lines[0]["turns"]  # the loop threads' ids with a clean conversation: the baseline's version
    good = tmp_path / "good.jsonl"
    good.write_text(
        "".join(json.dumps({**x, "turns": clean if "loop" in x["thread_id"] else x["turns"]}) + "\n" for x in lines)
    )
    base = tmp_path / "base.jsonl"
    assert invoke("eval", str(good), "--out", str(base), "--format", "json").exit_code == 0
    same = invoke("eval", str(good), "--baseline", str(base))
    assert same.exit_code == 0, same.output
    worse = invoke("eval", str(EXAMPLES / "transcripts.jsonl"), "--baseline", str(base), "--tolerance", "0.03")
    assert worse.exit_code == 1
    assert "regression" in worse.stderr and "repetition" in worse.stderr and "refusal_loop" in worse.stderr


def test_eval_reports_bad_lines_and_unknown_metrics(settings: Any, tmp_path: Path) -> None:
    f = tmp_path / "mixed.jsonl"
    good = (EXAMPLES / "transcripts.jsonl").read_text().splitlines()[0]
    f.write_text(good + "\n{not json\n" + '{"thread_id": "x", "turns": [{"role": "robot", "content": "hi"}]}\n')
    res = invoke("eval", str(f), "--format", "jsonl")
    assert res.exit_code == 2
    assert len(jsonl(res.stdout)) == 1  # the good line is still evaluated
    assert "line 2: not valid JSON" in res.stderr and "line 3" in res.stderr and "role must be one of" in res.stderr
    unknown = invoke("eval", str(f), "--metrics", "repetition,nope")
    assert unknown.exit_code == 2 and "unknown metric(s) nope" in unknown.stderr


def test_run_once_scores_the_examples_and_a_second_run_changes_nothing(settings: Any) -> None:
    sources = [f"--source=otlp-file:{EXAMPLES / f}" for f in ("otel-genai.otlp.jsonl", "openinference.otlp.jsonl")]
    first = invoke("run", "--once", *sources)
    assert first.exit_code == 0, first.output
    assert "evaluated 14 threads" in first.stderr and "Review queue" in first.stdout
    stored = jsonl(invoke("results", "--format", "jsonl").stdout)
    assert len(stored) == 14
    by_key = {r["thread_key"]: r for r in stored}
    for app in ("genai", "oi"):
        assert by_key[f"otlp:{app}/support-reask-order"]["metrics"]["reask"]["passed"] is False
        assert by_key[f"otlp:{app}/support-repetition-loop"]["metrics"]["repetition"]["label"] == "fully"
        assert by_key[f"otlp:{app}/support-cancel-failed"]["metrics"]["tool_errors"]["passed"] is False
        assert len(by_key[f"otlp:{app}/support-reask-order"]["turns"]) == 4
    queue = invoke("review", "list").stdout
    assert "support-reask-order" in queue and "support-order-status" not in queue

    second = invoke("run", "--once", *sources)
    assert "pulled 0 spans, evaluated 0 threads" in second.stderr
    assert jsonl(invoke("results", "--format", "jsonl").stdout) == stored


def test_review_show_and_resolve(settings: Any) -> None:
    invoke("run", "--once", f"--source=otlp-file:{EXAMPLES / 'otel-genai.otlp.jsonl'}")
    shown = invoke("review", "show", "1")
    assert shown.exit_code == 0 and "review item 1" in shown.stdout
    assert invoke("review", "resolve", "1", "--note", "fixed the prompt").exit_code == 0
    again = invoke("review", "resolve", "1")
    assert again.exit_code == 2 and "not open" in again.stderr
    assert "fixed the prompt" in invoke("review", "list", "--all").stdout
    assert invoke("review", "show", "999").exit_code == 2


def test_config_mistakes_and_bad_sources_are_clear_errors(settings: Any, tmp_path: Path) -> None:
    cfg = tmp_path / "bad.toml"
    cfg.write_text("[schedule]\ntick_secnds = 1\n")
    res = invoke("run", "--once", "--config", str(cfg), "--source", "otlp-file:x.jsonl")
    assert res.exit_code == 2 and "schedule.tick_secnds: unknown key" in res.stderr
    res = invoke("run", "--once", "--source", "kafka:topic")
    assert res.exit_code == 2 and "unknown source 'kafka:topic'" in res.stderr
    res = invoke("run", "--once", "--source", "otlp-file:x.jsonl", "--sink", "kafka")
    assert res.exit_code == 2 and "unknown or unavailable sink(s) kafka" in res.stderr


def test_error_messages_keep_their_bracketed_toml_sections(settings: Any, tmp_path: Path) -> None:
    cfg = tmp_path / "bad.toml"
    cfg.write_text("[schedule]\ntick_secnds = 1\n")
    res = invoke("results", "--config", str(cfg))
    assert res.exit_code == 2 and "TOML key [schedule] tick_secnds" in res.stderr


def test_doctor_reports_a_sink_that_cannot_work(settings: Any) -> None:
    res = invoke("doctor", "--sink", "webhook")
    assert res.exit_code == 1
    assert "FAIL sinks: sink webhook: set [sinks.webhook] urls" in res.stdout
    assert invoke("doctor").exit_code == 0


def test_a_malformed_store_url_is_one_clear_line_without_the_password(settings: Any, monkeypatch: Any) -> None:
    monkeypatch.setenv("TRACING_EVAL_STORE__URL", "postgresql+asyncpg://u:hunter2@host:notaport/db")
    res = invoke("results")
    assert res.exit_code == 2 and "store.url is not usable" in res.stderr and "hunter2" not in res.output
    doctor = invoke("doctor")
    assert doctor.exit_code == 1 and "FAIL store" in doctor.stdout and "hunter2" not in doctor.output
