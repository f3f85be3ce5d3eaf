"""The whole pipeline on PostgreSQL: `run --once` over the examples with the store URL from the
environment, then `results` and `review` reading it back; a second run changes nothing."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import text

from tests.conftest import EXAMPLES
from tests.test_cli import invoke, jsonl
from tracing_eval.store.sql import SqlStore


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


async def _autovacuum_server_setting(store: SqlStore) -> str:
    async with store.engine.connect() as conn:
        return str((await conn.execute(text("SHOW autovacuum"))).scalar())


@pytest.mark.parametrize("backend", ["postgresql"], indirect=True)
async def test_the_store_names_autovacuum_off_on_the_server_and_on_its_tables(store: SqlStore) -> None:
    server_off = await _autovacuum_server_setting(store) == "off"
    found = await store.maintenance_problems()
    assert [p for p in found if "off on this PostgreSQL server" in p] == (found[:1] if server_off else [])
    assert not [p for p in found if "table(s)" in p]

    async with store.engine.begin() as conn:
        await conn.execute(text("ALTER TABLE outbox SET (autovacuum_enabled = false)"))
        await conn.execute(text("ALTER TABLE results SET (autovacuum_enabled = off)"))
    tables = [p for p in await store.maintenance_problems() if "table(s)" in p]
    assert len(tables) == 1 and "table(s) outbox, results:" in tables[0] and "RESET (autovacuum_enabled)" in tables[0]

    async with store.engine.begin() as conn:
        await conn.execute(text("ALTER TABLE outbox RESET (autovacuum_enabled)"))
        await conn.execute(text("ALTER TABLE results RESET (autovacuum_enabled)"))
    assert not [p for p in await store.maintenance_problems() if "table(s)" in p]


async def test_a_sqlite_store_has_no_maintenance_problem(store: SqlStore) -> None:
    assert await store.maintenance_problems() == []


@pytest.mark.parametrize("backend", ["postgresql"], indirect=True)
async def test_doctor_fails_and_run_warns_when_autovacuum_cannot_clean_the_outbox(
    store: SqlStore, store_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with store.engine.begin() as conn:
        await conn.execute(text("ALTER TABLE outbox SET (autovacuum_enabled = false)"))
    monkeypatch.setenv("TRACING_EVAL_STORE__URL", store_url)
    source = f"--source=otlp-file:{EXAMPLES / 'otel-genai.otlp.jsonl'}"

    checked = await asyncio.to_thread(invoke, "doctor", source)
    assert checked.exit_code == 1, checked.output
    said = " ".join(checked.stdout.split())  # rich wraps long lines
    assert "FAIL store maintenance: autovacuum is disabled for table(s) outbox:" in said
    assert "never cleaned up" in said

    ran = await asyncio.to_thread(invoke, "run", "--once", source)
    assert ran.exit_code == 0, ran.output
    assert "store maintenance" in ran.stderr and "table(s) outbox" in " ".join(ran.stderr.split())
