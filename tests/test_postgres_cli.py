"""The whole pipeline on PostgreSQL: `run --once` over the examples with the store URL from the
environment, then `results` and `review` reading it back; a second run changes nothing."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.conftest import EXAMPLES
from tests.test_cli import invoke, jsonl


@pytest.mark.parametrize("backend", ["postgresql"], indirect=True)
def test_run_once_on_postgresql_scores_the_examples_and_a_second_run_changes_nothing(
    store_url: str, settings: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert settings.store.url == store_url  # the fixture also moved the test into its tmp folder
    assert store_url.startswith("postgresql+asyncpg://")
    monkeypatch.setenv("TRACING_EVAL_STORE__URL", store_url)  # as a deployment sets it
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
    assert not (Path.cwd() / "tracing-eval.db").exists()  # no SQLite file on the side: all in PostgreSQL

    second = invoke("run", "--once", *sources)
    assert "pulled 0 spans, evaluated 0 threads" in second.stderr
    assert jsonl(invoke("results", "--format", "jsonl").stdout) == stored

    shown = invoke("review", "show", "1")
    assert shown.exit_code == 0 and "review item 1" in shown.stdout
    assert invoke("review", "resolve", "1", "--note", "fixed the prompt").exit_code == 0
    assert "fixed the prompt" in invoke("review", "list", "--all").stdout


def test_doctor_and_run_name_an_unreachable_postgresql_without_its_password(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("TRACING_EVAL_STORE__URL", "postgresql+asyncpg://tester:s3cret@127.0.0.1:1/nowhere")
    res = invoke("run", "--once", f"--source=otlp-file:{EXAMPLES / 'otel-genai.otlp.jsonl'}")
    assert res.exit_code == 2
    assert "cannot open the store at postgresql+asyncpg://tester:***@127.0.0.1:1/nowhere" in res.stderr
    assert "s3cret" not in res.output
