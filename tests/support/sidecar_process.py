"""A `tracing-eval run` sidecar in a subprocess, its output in a file, for the bad-input and security tests."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

LIVENESS_DEADLINE = 90.0  # how long to wait for the worker before calling it hung (not a speed check)
#: Variables of the developer's shell that would change what the sidecar does.
_FOREIGN = ("TRACING_EVAL_", "OPENAI_", "LANGFUSE_", "OTEL_")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def clean_env(tmp_path: Path, extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment without the caller's tracing-eval, OpenAI, Langfuse and OTel settings, plus `extra`;
    a SQLite store in `tmp_path` and a fast schedule unless `extra` says otherwise."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(_FOREIGN)}
    env.update(
        {
            "TRACING_EVAL_STORE__URL": f"sqlite+aiosqlite:///{tmp_path / 'store.db'}",
            "TRACING_EVAL_SCHEDULE__TICK_SECONDS": "0.3",
            "TRACING_EVAL_SCHEDULE__TURN_SETTLE_SECONDS": "0.3",
            "TRACING_EVAL_SCHEDULE__THREAD_IDLE_SECONDS": "0.8",
            "TRACING_EVAL_RECEIVER__GRPC_ADDRESS": "",  # parallel sidecars would contend for 4317; tests pick ports
            "COLUMNS": "200",
        }
    )
    env.update(extra or {})
    return env


def cli(*args: str, env: Mapping[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    """`tracing-eval ARGS`, stdout and stderr captured (not checked)."""
    return subprocess.run(
        [sys.executable, "-m", "tracing_eval", *args],
        env=dict(env),
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=LIVENESS_DEADLINE,
    )


@dataclass
class Sidecar:
    base: str
    env: dict[str, str]
    cwd: Path
    proc: subprocess.Popen[bytes]
    output: Path

    def alive(self) -> bool:
        return self.proc.poll() is None

    def log(self) -> str:
        return self.output.read_text(errors="replace")

    def stop(self) -> int:
        """SIGTERM, then wait for the drain; the exit code."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                return self.proc.wait(timeout=LIVENESS_DEADLINE)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
                raise AssertionError(f"the sidecar did not stop on SIGTERM:\n{self.log()[-4000:]}") from None
        return int(self.proc.returncode)


@contextmanager
def running_sidecar(
    tmp_path: Path, env: Mapping[str, str], *args: str, output: str = "sidecar.log"
) -> Iterator[Sidecar]:
    """`tracing-eval run --source otlp-http ARGS` on a free port, up once /healthz answers."""
    port = free_port()
    path = tmp_path / output
    with path.open("wb") as out:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "tracing_eval",
                "run",
                "--source",
                "otlp-http",
                "--http",
                f"127.0.0.1:{port}",
                *args,
            ],
            env=dict(env),
            cwd=tmp_path,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
        car = Sidecar(f"http://127.0.0.1:{port}", dict(env), tmp_path, proc, path)
        try:
            deadline = time.monotonic() + LIVENESS_DEADLINE
            while True:
                try:
                    if httpx.get(f"{car.base}/healthz").status_code == 200:
                        break
                except httpx.HTTPError:
                    pass
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise AssertionError(f"the sidecar did not start:\n{car.log()[-4000:]}")
                time.sleep(0.1)
            yield car
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()


def results(car: Sidecar) -> list[dict[str, Any]]:
    """What `tracing-eval results --format jsonl` prints for the sidecar's store."""
    proc = cli("results", "--format", "jsonl", env=car.env, cwd=car.cwd)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return [json.loads(line) for line in proc.stdout.splitlines() if line.strip()]


def wait_for_results(car: Sidecar, thread_keys: set[str]) -> list[dict[str, Any]]:
    """Stored results once every thread in `thread_keys` has thread-level metrics (bounded wait)."""
    deadline = time.monotonic() + LIVENESS_DEADLINE
    while True:
        records = results(car)
        if thread_keys <= {r["thread_key"] for r in records if r["metrics"]}:
            return records
        assert car.alive(), f"the sidecar died:\n{car.log()[-4000:]}"
        assert time.monotonic() < deadline, f"no results for {thread_keys}; last: {records}\n{car.log()[-4000:]}"
        time.sleep(0.3)
