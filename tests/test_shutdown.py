"""SIGTERM always ends the sidecar (issue 14, item 4), on SQLite and PostgreSQL: an upload that
stalls mid-body (with a body timeout far longer than the drain) no longer keeps the worker from
draining, giving back its leases and exiting. The deadline is a liveness guard: the old worker was
still running after 60 s with `drain_seconds = 10`.
"""

from __future__ import annotations

import signal
import socket
import subprocess
from pathlib import Path

import httpx
import pytest

from tests.conftest import BACKENDS
from tests.support.otlp_payloads import genai_turn_spans, trace_request
from tests.support.sidecar_process import LIVENESS_DEADLINE, clean_env, running_sidecar

pytestmark = pytest.mark.parametrize("backend", BACKENDS, indirect=True)


def test_sigterm_ends_the_worker_while_an_upload_is_stalled(tmp_path: Path, store_url: str) -> None:
    env = clean_env(
        tmp_path,
        {
            "TRACING_EVAL_STORE__URL": store_url,
            "TRACING_EVAL_SCHEDULE__DRAIN_SECONDS": "2",
            "TRACING_EVAL_RECEIVER__BODY_TIMEOUT_SECONDS": "600",
        },
    )
    with running_sidecar(tmp_path, env) as car:
        body = trace_request(genai_turn_spans("before-stop", "Hi?", "Hello.")).SerializeToString()
        assert httpx.post(f"{car.base}/v1/traces", content=body, headers={"content-type": "application/x-protobuf"})
        host, port = car.base.removeprefix("http://").rsplit(":", 1)
        stalled = socket.create_connection((host, int(port)))
        stalled.sendall(
            b"POST /v1/traces HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-protobuf\r\n"
            b"Content-Length: 100000\r\n\r\n" + body[:10]  # and then nothing more
        )
        # a request sent after it is answered: by then the server has taken the stalled one's head
        after = trace_request(genai_turn_spans("after-the-stall", "Hi?", "Hello.")).SerializeToString()
        assert httpx.post(f"{car.base}/v1/traces", content=after, headers={"content-type": "application/x-protobuf"})
        car.proc.send_signal(signal.SIGTERM)
        try:
            code = car.proc.wait(timeout=LIVENESS_DEADLINE)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"SIGTERM did not end the worker:\n{car.log()[-4000:]}") from None
        finally:
            stalled.close()
    log = car.log()
    assert code == 0, log[-4000:]
    assert "stopping: draining the current tick" in log and log.rstrip().endswith("stopped"), log[-2000:]
