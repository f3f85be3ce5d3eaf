"""Security: the receiver's bearer token, and no secret in anything the sidecar or the CLI prints.

Every secret is set the way an operator sets it (environment variables), the log level is debug, and
each run goes through the failure paths that log errors: refused OTLP requests, a judge endpoint that
answers 401, Langfuse keys it refuses, sinks that cannot deliver, a store that cannot be reached, a bad
configuration, a tick that fails. All of stdout and stderr is captured and searched for every secret.
"""

from __future__ import annotations

import gzip
import json
import sqlite3
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import structlog
from google.rpc import status_pb2
from sqlalchemy.engine import make_url

from tests.conftest import EXAMPLES, pg_database
from tests.support.fakes.langfuse_server import FakeLangfuseServer
from tests.support.fakes.openai_server import FakeOpenAIServer, Reply
from tests.support.otlp_payloads import genai_turn_spans, trace_request
from tests.support.sidecar_process import LIVENESS_DEADLINE, Sidecar, clean_env, cli, free_port, running_sidecar
from tests.support.sidecar_process import results as stored_results
from tracing_eval import logging as te_logging

TOKEN = "rx-SECRET-token-4c2b9e17d0"
SECRETS = {
    "OPENAI_API_KEY": "sk-proj-SECRET-openai-5f1e9c0b7d2a4e6f",
    "LANGFUSE_SECRET_KEY": "sk-lf-SECRET-langfuse-a8d3c1e7",
    "TRACING_EVAL_RECEIVER__AUTH_TOKEN": TOKEN,
    "TRACING_EVAL_SINKS__WEBHOOK__SECRET": "whsec-SECRET-hmac-7e1f3a",
    "store password": "pg-SECRET-password-93bd",
    "webhook URL password": "hook-SECRET-password-11aa",
    "OTLP sink header": "otlp-SECRET-header-61c0",
}
#: What the fake judge endpoint answers: OpenAI's 401, which shows only the key's last four characters.
JUDGE_401 = Reply.failure(401, "Incorrect API key provided: sk-proj-****4e6f.", code="invalid_api_key")
PB = {"content-type": "application/x-protobuf"}


def leaked(text: str) -> list[str]:
    return [name for name, value in SECRETS.items() if value in text]


def secret_env(openai: FakeOpenAIServer, langfuse: FakeLangfuseServer) -> dict[str, str]:
    """Every secret set from the environment; the judge and Langfuse endpoints refuse the keys."""
    return {
        "OPENAI_API_KEY": SECRETS["OPENAI_API_KEY"],
        "OPENAI_BASE_URL": openai.base_url,
        "TRACING_EVAL_JUDGE__MODEL": "judge-model",
        "TRACING_EVAL_JUDGE__MAX_RETRIES": "0",
        "LANGFUSE_PUBLIC_KEY": "pk-lf-public",
        "LANGFUSE_SECRET_KEY": SECRETS["LANGFUSE_SECRET_KEY"],
        "LANGFUSE_BASE_URL": langfuse.base_url,
        "TRACING_EVAL_LANGFUSE__MAX_RETRIES": "0",
        "TRACING_EVAL_RECEIVER__AUTH_TOKEN": TOKEN,
        "TRACING_EVAL_SINKS__WEBHOOK__SECRET": SECRETS["TRACING_EVAL_SINKS__WEBHOOK__SECRET"],
        "TRACING_EVAL_SINKS__OTLP__HEADERS": json.dumps({"authorization": f"Bearer {SECRETS['OTLP sink header']}"}),
        "TRACING_EVAL_LOGGING__LEVEL": "debug",
        "TRACING_EVAL_LOGGING__FORMAT": "json",
    }


@pytest.fixture(scope="module")
def endpoints() -> Iterator[tuple[FakeOpenAIServer, FakeLangfuseServer]]:
    with FakeOpenAIServer(lambda _request: JUDGE_401) as openai, FakeLangfuseServer() as langfuse:
        yield openai, langfuse


def store_rows(db: Path) -> dict[str, int]:
    with sqlite3.connect(db) as conn:
        return {t: conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in ("spans", "span_events", "threads")}


def wait_until(car: Sidecar, what: str, done: Callable[[], bool]) -> None:
    deadline = time.monotonic() + LIVENESS_DEADLINE
    while not done():
        assert car.alive(), f"the sidecar died waiting for {what}:\n{car.log()[-4000:]}"
        assert time.monotonic() < deadline, f"never saw {what}:\n{car.log()[-4000:]}"
        time.sleep(0.2)


# -- the bearer token ------------------------------------------------------------------------------


def test_with_a_token_the_sidecar_refuses_requests_without_it_and_stores_nothing(tmp_path: Path) -> None:
    env = clean_env(tmp_path, {"TRACING_EVAL_RECEIVER__AUTH_TOKEN": TOKEN, "TRACING_EVAL_LOGGING__LEVEL": "debug"})
    body = trace_request(genai_turn_spans("secured", "Where is my order?", "It ships tomorrow.")).SerializeToString()
    refused = [
        ("/v1/traces", PB, body),
        ("/v1/traces", {**PB, "authorization": "Bearer wrong-token"}, body),
        ("/v1/traces", {**PB, "authorization": TOKEN}, body),  # no scheme
        ("/v1/traces", {**PB, "authorization": f"Basic {TOKEN}"}, body),
        ("/v1/traces", {**PB, "authorization": f"Bearer {TOKEN}x"}, body),
        ("/v1/traces", {**PB, "authorization": f"Bearer {TOKEN[:-1]}"}, body),
        ("/v1/traces", {**PB, "authorization": "Bearer"}, body),
        ("/v1/traces", {**PB, "x-api-key": TOKEN}, body),
        ("/v1/logs", PB, b""),
        ("/v1/traces", {**PB, "content-encoding": "gzip"}, gzip.compress(body)),
        ("/v1/traces", PB, b"\x0a\xff\xff"),  # a bad payload is refused for the token before it is read
        ("/v1/traces", {"content-type": "application/json", "authorization": "Bearer nope"}, b"{}"),
        ("/v1/traces", {**PB, "authorization": f"Bearer {TOKEN}\xa0".encode("latin-1")}, body),  # not a blank
        ("/v1/traces", {"content-type": "text/plain"}, body),  # the token before the content type: 401, not 415
    ]
    with running_sidecar(tmp_path, env) as car, httpx.Client(base_url=car.base) as http:
        for path, headers, content in refused:
            r = http.post(path, content=content, headers=headers)
            assert r.status_code == 401, (headers, r.status_code, r.text)
            assert r.headers["www-authenticate"] == "Bearer"
            if headers["content-type"] != "application/json":
                status = status_pb2.Status()
                status.ParseFromString(r.content)
                assert (status.code, status.message) == (16, "missing or wrong bearer token")
            else:
                assert r.json() == {"code": 16, "message": "missing or wrong bearer token"}
        assert store_rows(tmp_path / "store.db") == {"spans": 0, "span_events": 0, "threads": 0}

        right = {**PB, "authorization": f"Bearer {TOKEN}"}
        assert http.post("/v1/traces", content=body, headers=right).status_code == 200
        assert http.post("/v1/logs", content=b"", headers=right).status_code == 200
        assert store_rows(tmp_path / "store.db") == {"spans": 2, "span_events": 0, "threads": 1}
        metrics = http.get("/metrics").text
        assert f'tracing_eval_receiver_rejects_total{{reason="unauthorized"}} {len(refused)}.0' in metrics
        assert car.stop() == 0
    log = car.log()
    # refusals are counted one by one, and logged without flooding: one line per reason per 10 s
    assert 1 <= log.count("OTLP request refused") <= 2, log
    assert TOKEN not in log


# -- no secret in the output -----------------------------------------------------------------------


@pytest.mark.parametrize("fmt", ["json", "console"])
def test_no_secret_appears_in_the_sidecar_output(
    tmp_path: Path, endpoints: tuple[FakeOpenAIServer, FakeLangfuseServer], fmt: str
) -> None:
    """A sidecar with every secret set, through refused requests, a judge that answers 401, Langfuse
    refusing the keys, sinks that cannot deliver (the webhook URL carries a password), and finally a tick
    that fails (its table is gone): nothing it prints, nor the stored results, holds a secret."""
    openai, langfuse = endpoints
    closed = free_port()
    env = clean_env(
        tmp_path,
        {
            **secret_env(openai, langfuse),
            "TRACING_EVAL_LOGGING__FORMAT": fmt,
            "TRACING_EVAL_SINKS__ENABLED": '["local", "webhook", "otlp"]',
            "TRACING_EVAL_SINKS__WEBHOOK__URLS": json.dumps(
                [f"http://review:{SECRETS['webhook URL password']}@127.0.0.1:{closed}/hook"]
            ),
            "TRACING_EVAL_SINKS__OTLP__ENDPOINT": openai.base_url.removesuffix("/v1") + "/no-such-otlp/v1/logs",
            "TRACING_EVAL_SINKS__OTLP__TIMEOUT_SECONDS": "2",
        },
    )
    spans = genai_turn_spans("secret-run", "Cancel order A48213.", "I could not cancel it.", tool_error="timed out")
    body = trace_request(spans).SerializeToString()
    with running_sidecar(tmp_path, env, "--source", "langfuse") as car, httpx.Client(base_url=car.base) as http:
        assert http.post("/v1/traces", content=body, headers=PB).status_code == 401
        assert http.post("/v1/traces", content=body, headers={**PB, "authorization": "Bearer x"}).status_code == 401
        assert (
            http.post("/v1/traces", content=body, headers={**PB, "authorization": f"Bearer {TOKEN}"}).status_code == 200
        )
        bad = http.post("/v1/traces", content=b"\x0a\xff", headers={**PB, "authorization": f"Bearer {TOKEN}"})
        assert bad.status_code == 400

        def delivery_failed() -> bool:
            log = car.log()
            webhook = '"sink": "webhook"' in log or "sink=webhook" in log
            return "sink delivery failed" in log and webhook and "source pull failed" in log

        wait_until(car, "a failed webhook delivery", delivery_failed)
        results = json.dumps(stored_results(car))
        assert "authentication failed" in results  # the judge's 401, kept as the metric's error
        with sqlite3.connect(tmp_path / "store.db") as conn:
            conn.execute("DROP TABLE outbox")  # the next tick fails and logs its exception
        wait_until(car, "a failed delivery round", lambda: "delivery round failed" in car.log())
        car.stop()  # its last delivery fails too: the exit code says so
    log = car.log()
    assert "OTLP request refused" in log and "unauthorized" in log
    if fmt == "json":  # libraries' messages too (uvicorn, OpenTelemetry, httpx, APScheduler)
        assert [line for line in log.splitlines() if not line.startswith("{")] == []
    assert not leaked(log), f"secrets in the {fmt} log: {leaked(log)}"
    assert not leaked(results), f"secrets in the stored results: {leaked(results)}"


@pytest.fixture(scope="module")
def pg_url_with_password() -> Iterator[str]:
    """A fresh PostgreSQL database, addressed by a URL with a password (the server trusts local users)."""
    with pg_database() as url:
        yield make_url(url).set(password=SECRETS["store password"]).render_as_string(hide_password=False)


def closed_store() -> str:
    return f"postgresql+asyncpg://tracing:{SECRETS['store password']}@127.0.0.1:{free_port()}/tracing"


FILE_SOURCE = f"otlp-file:{EXAMPLES / 'otel-genai.otlp.jsonl'}"
Step = tuple[list[str], int, str]  # arguments, exit code, evidence in the output that the failure path ran
CLI_RUNS: dict[str, tuple[dict[str, Any], list[Step]]] = {
    "doctor": ({}, [(["doctor", "--source", "langfuse"], 1, "Incorrect API key provided")]),
    "doctor, store unreachable": (
        {"TRACING_EVAL_STORE__URL": closed_store},
        [(["doctor"], 1, "cannot open the store")],
    ),
    "run --once, then results": (
        {},
        [
            (["run", "--once", "--source", FILE_SOURCE, "--source", "langfuse"], 0, "source pull failed"),
            (["results", "--format", "jsonl"], 0, "authentication failed"),
        ],
    ),
    "run --once, console": (
        {"TRACING_EVAL_LOGGING__FORMAT": "console"},
        [(["run", "--once", "--source", FILE_SOURCE], 0, "evaluated")],
    ),
    "run --once, store unreachable": (
        {"TRACING_EVAL_STORE__URL": closed_store},
        [(["run", "--once", "--source", FILE_SOURCE], 2, "cannot open the store")],
    ),
    "eval": ({}, [(["eval", str(EXAMPLES / "transcripts.jsonl"), "--format", "jsonl"], 3, "authentication failed")]),
    "bad config": (
        {
            "TRACING_EVAL_JUDGE__TEMPERATURE": SECRETS["OPENAI_API_KEY"],
            "TRACING_EVAL_RECEIVER__AUTH_TOKENN": TOKEN,
            "TRACING_EVAL_STORE__PASSWORD": SECRETS["store password"],
        },
        [(["run", "--once", "--source", FILE_SOURCE], 2, "invalid configuration")],
    ),
}


@pytest.mark.parametrize("name", list(CLI_RUNS))
def test_no_secret_appears_in_cli_output(
    tmp_path: Path, endpoints: tuple[FakeOpenAIServer, FakeLangfuseServer], pg_url_with_password: str, name: str
) -> None:
    """`doctor`, `run --once`, `results`, `eval` and a bad configuration, with every secret set and the
    store on PostgreSQL under a password; each fails where it should and prints no secret."""
    extra, steps = CLI_RUNS[name]
    extra = {k: v() if callable(v) else v for k, v in extra.items()}
    env = clean_env(tmp_path, {**secret_env(*endpoints), "TRACING_EVAL_STORE__URL": pg_url_with_password, **extra})
    for args, code, evidence in steps:
        proc = cli(*args, env=env, cwd=tmp_path)
        output = proc.stdout + proc.stderr
        assert proc.returncode == code, output[-3000:]
        assert evidence in output, output[-3000:]
        assert not leaked(output), f"secrets in `{' '.join(args)}` output: {leaked(output)}"


def _connect(url: str) -> None:
    raise ConnectionError("connection refused")


def test_a_logged_exception_shows_no_local_variables(capsys: pytest.CaptureFixture[str]) -> None:
    """The smallest form of the console leak: a traceback with the frames' local variables prints
    whatever secret a frame holds in a plain string (a URL with a password, a header)."""
    saved = structlog.get_config()
    try:
        for fmt in ("console", "json"):
            te_logging.configure("debug", fmt)
            log = structlog.get_logger("test_security")
            try:
                _connect(f"postgresql://tracing:{SECRETS['store password']}@db/tracing")
            except ConnectionError:
                log.exception("tick failed; the next tick retries")
            log.info("configured", api_key=SECRETS["OPENAI_API_KEY"], authorization=f"Bearer {TOKEN}")
            err = capsys.readouterr().err
            assert "ConnectionError" in err and "configured" in err
            assert not leaked(err), f"{fmt}: {leaked(err)}\n{err[-2000:]}"
    finally:
        structlog.configure(**saved)
