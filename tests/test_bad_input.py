"""Bad input: every request of the malformed-OTLP corpus gets its answer, stores nothing it should not,
and the receiver keeps going; in process (the receiver's routes over a real store) and over a running sidecar.

The corpus (`tests/corpus/otlp/`, described by its `manifest.json`) is written by
`tests/corpus/make_otlp_corpus.py`; the first test checks that the committed files are its output.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import httpx
import pytest
from google.protobuf import json_format
from google.rpc import status_pb2
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceResponse
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse
from sqlalchemy import func, select
from starlette.applications import Starlette

from tests.conftest import BACKENDS
from tests.corpus import make_otlp_corpus
from tests.support.otlp_payloads import genai_turn_spans, trace_request
from tests.support.sidecar_process import clean_env, running_sidecar, wait_for_results
from tracing_eval.config import ReceiverSettings
from tracing_eval.connectors.otlp.decode import OtlpDecodeError, media_type
from tracing_eval.connectors.otlp.receiver import OtlpReceiver
from tracing_eval.store import schema as t
from tracing_eval.store.sql import SqlStore

CORPUS = Path(__file__).parent / "corpus" / "otlp"
MANIFEST = json.loads((CORPUS / "manifest.json").read_text())
ITEMS: list[dict[str, Any]] = MANIFEST["items"]
LIMIT: int = MANIFEST["max_body_bytes"]
PB = {"content-type": "application/x-protobuf"}
RPC_CODES = {400: 3, 413: 8}  # INVALID_ARGUMENT, RESOURCE_EXHAUSTED


def body(item: dict[str, Any]) -> bytes:
    return (CORPUS / item["file"]).read_bytes()


def valid_request(conversation: str) -> bytes:
    return trace_request(
        genai_turn_spans(conversation, "Where is my order A48213?", "It ships tomorrow.")
    ).SerializeToString()


def answer(item: dict[str, Any], r: httpx.Response) -> tuple[str, int]:
    """(message, rejected count) of a receiver answer: the error message, or partial_success of a 200."""
    ct = r.headers.get("content-type", "").split(";")[0]
    if ct not in ("application/json", "application/x-protobuf"):
        return r.text, 0
    if r.status_code == 200:
        logs = item["path"] == "/v1/logs"
        resp: Any = ExportLogsServiceResponse() if logs else ExportTraceServiceResponse()
        if ct == "application/json":
            json_format.Parse(r.content, resp)
        else:
            resp.ParseFromString(r.content)
        ps = resp.partial_success
        return ps.error_message, ps.rejected_log_records if logs else ps.rejected_spans
    st = status_pb2.Status()
    if ct == "application/json":
        json_format.Parse(r.content, st)
    else:
        st.ParseFromString(r.content)
    assert st.code == RPC_CODES[r.status_code], f"{item['file']}: google.rpc code {st.code}"
    return st.message, 0


def problems(item: dict[str, Any], r: httpx.Response) -> list[str]:
    """How the answer differs from what the manifest says (empty when it is right)."""
    name = item["file"]
    if r.status_code != item["status"]:
        return [f"{name}: status {r.status_code}, expected {item['status']} ({r.text[:300]!r})"]
    out = []
    message, rejected = answer(item, r)
    if item["message"] not in message or (item["message"] == "" and message):
        out.append(f"{name}: message {message[:300]!r} does not contain {item['message']!r}")
    if rejected != item["rejected"]:
        out.append(f"{name}: {rejected} rejected, expected {item['rejected']}")
    if r.status_code != 415:  # the answer is in the request's encoding
        try:
            expected = media_type(item["headers"].get("content-type"))
        except OtlpDecodeError:
            expected = "?"
        if r.headers.get("content-type") != expected:
            out.append(f"{name}: answered as {r.headers.get('content-type')!r}, expected {expected!r}")
    return out


async def snapshot(store: SqlStore) -> dict[str, Any]:
    """Row counts of what ingest writes, and every thread's version."""
    async with store.engine.connect() as conn:
        counts = {
            name: (await conn.execute(select(func.count()).select_from(table))).scalar()
            for name, table in (
                ("spans", t.spans),
                ("events", t.span_events),
                ("traces", t.traces),
                ("threads", t.threads),
            )
        }
        versions = dict((await conn.execute(select(t.threads.c.key, t.threads.c.version))).all())
    return {**counts, "versions": versions}


def client(receiver: OtlpReceiver) -> httpx.AsyncClient:
    app = Starlette(routes=receiver.routes())  # an exception would be a 500, like under uvicorn
    return httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app, raise_app_exceptions=False), base_url="http://receiver"
    )


def test_the_corpus_is_what_the_script_writes() -> None:
    files = make_otlp_corpus.render()
    on_disk = {p.name for p in CORPUS.iterdir()}
    assert on_disk == set(files), "run: .venv/bin/python tests/corpus/make_otlp_corpus.py"
    changed = [name for name, data in files.items() if (CORPUS / name).read_bytes() != data]
    assert not changed, f"stale corpus files {changed[:5]}; run: .venv/bin/python tests/corpus/make_otlp_corpus.py"
    counts = MANIFEST["counts"]
    assert counts["items"] == len(ITEMS) >= 50
    assert {"400", "413", "415", "200"} <= set(counts["by_status"])


@pytest.mark.parametrize("backend", BACKENDS, indirect=True)
async def test_one_receiver_answers_every_request_and_keeps_going(store: SqlStore) -> None:
    """The corpus in order through one receiver over a real store, a valid request after every item: each
    gets exactly its status and message, refused requests change nothing, accepted ones store what they
    carry (no more, no less), and every valid request after a bad one is answered 200 and stored."""
    rx = OtlpReceiver(store, ReceiverSettings(max_body_bytes=LIMIT))
    found: list[str] = []
    async with client(rx) as c:
        for n, item in enumerate(ITEMS):
            before = await snapshot(store)
            r = await c.post(item["path"], content=body(item), headers=item["headers"])
            found += problems(item, r)
            after = await snapshot(store)
            stored = (after["spans"] - before["spans"], after["events"] - before["events"])
            if item["status"] != 200 and after != before:
                found.append(f"{item['file']}: refused, but the store changed")
            elif item["status"] == 200 and stored != (item["spans"], item["events"]):
                found.append(
                    f"{item['file']}: stored (spans, events) {stored}, expected {(item['spans'], item['events'])}"
                )
            alive = await c.post("/v1/traces", content=valid_request(f"alive-{n}"), headers=PB)
            if alive.status_code != 200 or (await snapshot(store))["spans"] != after["spans"] + 2:
                found.append(f"after {item['file']}: a valid request got {alive.status_code} and was not stored")
    assert not found, "\n".join(found)
    keys = set(await store.thread_keys())
    assert {f"otlp:alive-{n}" for n in range(len(ITEMS))} <= keys
    assert rx.counters.rejected.get("bad_payload") == sum(i["status"] == 400 for i in ITEMS)
    assert rx.counters.rejected.get("too_large") == sum(i["status"] == 413 for i in ITEMS)
    assert rx.counters.rejected.get("unsupported_media_type") == sum(i["status"] == 415 for i in ITEMS)


async def test_a_gzip_body_of_two_members_is_read_whole(store: SqlStore) -> None:
    """RFC 1952: a gzip body is a series of members, each part of the body. Two protobuf messages
    one after the other are one message holding both's spans, so both conversations are stored."""
    first = valid_request("member-1")
    second = valid_request("member-2")
    rx = OtlpReceiver(store, ReceiverSettings())
    async with client(rx) as c:
        r = await c.post(
            "/v1/traces",
            content=gzip.compress(first, mtime=0) + gzip.compress(second, mtime=0),
            headers={**PB, "content-encoding": "gzip"},
        )
    assert r.status_code == 200, r.text
    assert set(await store.thread_keys()) == {"otlp:member-1", "otlp:member-2"}, "a member was dropped"


def test_a_running_sidecar_answers_the_corpus_and_still_evaluates(tmp_path: Path) -> None:
    env = clean_env(tmp_path, {"TRACING_EVAL_RECEIVER__MAX_BODY_BYTES": str(LIMIT)})
    with running_sidecar(tmp_path, env) as car:
        found: list[str] = []
        with httpx.Client(base_url=car.base, timeout=30) as http:
            for item in ITEMS:
                try:
                    found += problems(item, http.post(item["path"], content=body(item), headers=item["headers"]))
                except httpx.HTTPError as exc:
                    found.append(f"{item['file']}: no answer ({type(exc).__name__}: {exc})")
            assert car.alive(), car.log()[-4000:]
            r = http.post("/v1/traces", content=valid_request("after-the-corpus"), headers=PB)
            assert r.status_code == 200
        records = wait_for_results(car, {"otlp:after-the-corpus"})
        after = next(x for x in records if x["thread_key"] == "otlp:after-the-corpus")
        assert len(after["turns"]) == 1 and after["metrics"]
        assert car.alive() and httpx.get(f"{car.base}/healthz").status_code == 200
        assert car.stop() == 0
    assert not found, "\n".join(found)
