"""Rough edges a new user hit on the command line: each one a clear line, output that fits a terminal."""

from __future__ import annotations

import json
import re
import socket
import tomllib
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from tests.conftest import EXAMPLES, REPO
from tracing_eval import app, registry
from tracing_eval.cli import SINK_NAMES, SOURCE_SPECS, main

GENAI = f"otlp-file:{EXAMPLES / 'otel-genai.otlp.jsonl'}"


def invoke(*args: str, columns: int = 250) -> Any:
    return CliRunner(env={"COLUMNS": str(columns)}).invoke(main, list(args), catch_exceptions=False)


@pytest.fixture
def no_langfuse_keys(settings: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("LANGFUSE_PUBLIC_KEY", "LANGFUSE_SECRET_KEY", "TRACING_EVAL_LANGFUSE__PUBLIC_KEY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("LANGFUSE_BASE_URL", "http://127.0.0.1:9")


# -- Langfuse keys missing: one line, never a traceback -------------------------------------------

MISSING = "Langfuse keys missing: set LANGFUSE_PUBLIC_KEY and LANGFUSE_SECRET_KEY"


@pytest.mark.parametrize("args", [["--source", "langfuse"], ["--sink", "langfuse"]], ids=["source", "sink"])
def test_doctor_without_langfuse_keys_prints_a_fail_langfuse_line(no_langfuse_keys: None, args: list[str]) -> None:
    res = invoke("doctor", *args)
    assert res.exit_code == 1, res.output
    fails = [line for line in res.stdout.splitlines() if line.startswith("FAIL")]
    assert fails == [f"FAIL langfuse: {MISSING}"]
    assert "Traceback" not in res.output


def test_run_and_backfill_without_langfuse_keys_are_one_error_line(no_langfuse_keys: None) -> None:
    for args in (["run", "--once", "--source", "langfuse"], ["backfill", "--since", "1h"]):
        res = invoke(*args)
        assert res.exit_code == 2, res.output
        assert [line for line in res.stderr.splitlines() if line.startswith("error:")] == [f"error: {MISSING}"]
        assert "Traceback" not in res.output


# -- run --once on a file that is not there --------------------------------------------------------


def test_run_once_on_a_missing_file_fails_and_names_it(settings: Any) -> None:
    res = invoke("run", "--once", "--source", "otlp-file:missing.jsonl", "--source", GENAI)
    assert res.exit_code == 2
    assert res.stderr.strip() == "error: source otlp-file: no such file: missing.jsonl"
    assert invoke("results", "--format", "jsonl").stdout == ""  # nothing was read or scored


# -- run --help names what --source and --sink take -------------------------------------------------


def test_run_help_lists_every_source_and_sink() -> None:
    text = " ".join(invoke("run", "--help").stdout.split())
    assert f"{SOURCE_SPECS} (repeatable" in text
    assert set(re.split(r",\s*|\s+or\s+", SOURCE_SPECS)) == {"otlp-http", "otlp-file:PATH", "langfuse"}
    assert f"Result sinks, {SINK_NAMES}" in text
    listed = set(re.split(r",\s*|\s+or\s+", SINK_NAMES))
    assert listed == set(registry.sinks()) == {"langfuse", "otlp", "webhook"}  # "local is always on", said next to it
    assert "local is always on" in text
    for spec in ("otlp-http", "otlp-file:x.jsonl", "langfuse"):
        app.source_specs([spec], app.Settings())  # each spec the help names is accepted


# -- doctor and a taken receiver port ---------------------------------------------------------------


def test_doctor_reports_the_receiver_port_taken(settings: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        monkeypatch.setenv("TRACING_EVAL_HTTP__ADDRESS", f"127.0.0.1:{port}")
        res = invoke("doctor", "--source", "otlp-http")
    assert res.exit_code == 1
    [line] = [x for x in res.stdout.splitlines() if x.startswith("FAIL")]
    assert line.startswith(f"FAIL source otlp-http: cannot listen on 127.0.0.1:{port}:")
    assert "is a sidecar already running?" in line
    free = invoke("doctor", "--source", "otlp-http")  # the port is free again
    assert free.exit_code == 0, free.output
    assert f"ok   source otlp-http: receiver will listen on 127.0.0.1:{port}" in free.stdout


# -- the review queue on a terminal and as data -------------------------------------------------------


@pytest.fixture
def reviewed(settings: Any) -> list[dict[str, Any]]:
    """The examples scored once; the open review items as `review list --format jsonl` gives them."""
    assert invoke("run", "--once", "--source", GENAI).exit_code == 0
    res = invoke("review", "list", "--format", "jsonl")
    assert res.exit_code == 0, res.output
    return [json.loads(line) for line in res.stdout.splitlines()]


def test_review_list_jsonl_has_every_item_with_its_reasons(reviewed: list[dict[str, Any]]) -> None:
    assert len(reviewed) == 4
    for item in reviewed:
        assert set(item) == {
            "id",
            "thread_key",
            "thread_version",
            "status",
            "reasons",
            "created_at",
            "resolved_at",
            "resolution",
        }
        assert item["status"] == "open" and item["thread_key"].startswith("otlp:genai/") and item["reasons"]
        assert all({"metric", "target", "score", "label", "reason"} <= set(r) for r in item["reasons"])
    by_thread = {i["thread_key"]: {r["metric"] for r in i["reasons"]} for i in reviewed}
    assert by_thread["otlp:genai/support-cancel-failed"] == {"tool_errors"}


def test_review_list_fits_80_columns_one_line_per_item(reviewed: list[dict[str, Any]]) -> None:
    text = invoke("review", "list", columns=80).stdout
    lines = text.splitlines()
    assert max(len(line) for line in lines) <= 80
    for item in reviewed:
        metrics = ", ".join(sorted({r["metric"] for r in item["reasons"]}))
        assert re.search(rf"^\s*{item['id']}\s+{re.escape(item['thread_key'])}\s+1\s+open\s+{metrics}\s*$", text, re.M)
    assert len(lines) <= len(reviewed) + 5  # title, blank, header, rule, trailing blank


def test_results_and_run_tables_fit_80_columns(settings: Any) -> None:
    run = invoke("run", "--once", "--source", GENAI, columns=80)
    assert run.exit_code == 0
    results = invoke("results", columns=80)
    for text in (run.stdout, results.stdout):
        assert text.strip() and max(len(line) for line in text.splitlines()) <= 80


def test_review_show_has_the_conversation(reviewed: list[dict[str, Any]]) -> None:
    [item] = [i for i in reviewed if i["thread_key"] == "otlp:genai/support-reask-order"]
    res = invoke("review", "show", str(item["id"]), columns=80)
    assert res.exit_code == 0, res.output
    text = res.stdout
    assert max(len(line) for line in text.splitlines()) <= 80
    conversation = text[text.index("conversation") :]
    turns = re.findall(r"^\[turn (\d+)\]", conversation, re.M)
    assert turns == ["0", "1", "2", "3"]
    flat = " ".join(conversation.split())
    assert "user: Hi, my order A48213 hasn't arrived yet." in flat
    assert 'assistant called lookup_order({"order_id": "A48213"}) ->' in flat
    assert "Could you please provide your order number?" in flat  # the re-ask the item is about
    assert "reask on turn 2" in text


# -- eval --out: the results go to the file, not to the terminal as well ---------------------------


def test_eval_out_writes_the_file_and_shows_only_the_summary(settings: Any, tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    res = invoke("eval", str(EXAMPLES / "transcripts.jsonl"), "--out", str(out))
    assert res.exit_code == 0, res.output
    written = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(written) == 7
    assert "Metrics" in res.stdout and "coverage" in res.stdout
    assert not any(r["thread_id"] in res.stdout for r in written), "the per-thread table went to stdout too"
    assert f"wrote 7 thread result(s) to {out}" in " ".join(res.stderr.split())
    explicit = invoke("eval", str(EXAMPLES / "transcripts.jsonl"), "--out", str(out), "--format", "jsonl")
    assert [json.loads(line) for line in explicit.stdout.splitlines()] == written  # --format given: honoured


# -- the documented review routing can match -------------------------------------------------------


def documented_labels() -> dict[str, set[str]]:
    """Metric -> the labels docs/metrics.md's catalogue table gives it (the backticked words of its scale)."""
    rows = re.findall(r"^\| `(\w+)` \| [^|]+ \| ([^|]+) \|", (REPO / "docs" / "metrics.md").read_text(), re.M)
    return {metric: set(re.findall(r"`(\w+)`", scale)) for metric, scale in rows}


def routing_examples() -> list[dict[str, Any]]:
    """The rules of the TOML examples in docs/review.md and config.example.toml that route on labels."""
    blocks = re.findall(r"```toml\n(.*?)```", (REPO / "docs" / "review.md").read_text(), re.S)
    commented = re.findall(
        r"^# (\[\[review\.routes\]\]\n(?:# .*\n)+)", (REPO / "config.example.toml").read_text(), re.M
    )
    blocks += [re.sub(r"^# ", "", b, flags=re.M) for b in commented]
    rules = []
    for block in blocks:
        doc = tomllib.loads(block)
        review = doc.get("review", {})
        rules += [r for r in [review, *review.get("routes", [])] if r.get("labels")]
    return rules


def test_every_label_a_documented_route_names_is_one_its_metrics_can_give() -> None:
    labels = documented_labels()
    assert {"repetition", "tool_errors", "refusal_loop"} <= labels.keys() and "masked_error" not in set().union(
        *labels.values()
    )
    rules = routing_examples()
    assert len(rules) >= 2
    for rule in rules:
        metrics = rule.get("metrics", ["*"])
        watched = labels.keys() if metrics == ["*"] else [m for m in metrics if m in labels]
        possible = set().union(*(labels[m] for m in watched))
        assert set(rule["labels"]) <= possible, (rule, possible)
