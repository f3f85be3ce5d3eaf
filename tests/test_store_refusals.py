"""A request the store can never write must not be answered 503 for ever (issue 14, item 1).

Each repro of the review, on SQLite and PostgreSQL: a legal time past 2**63, the same span twice in
one request, NUL in a conversation id. The span at fault is rejected in `partial_success` (or fixed),
the innocent conversation in the same request is stored, and a resend gets the same answer. Data the
store refuses that decode could not foresee is isolated by `store_isolating`; only a store that is
down is a 503.
"""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

import httpx
import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse
from starlette.applications import Starlette

from tests.conftest import BACKENDS
from tests.support.otlp_payloads import genai_turn_spans, trace_request
from tracing_eval.config import ReceiverSettings
from tracing_eval.connectors.otlp.receiver import OtlpReceiver
from tracing_eval.ingest import GroupWriter, store_isolating
from tracing_eval.model import Span, SpanEvent
from tracing_eval.store.base import IngestBatch, IngestRefused
from tracing_eval.store.sql import SqlStore, refused_by_data

pytestmark = pytest.mark.parametrize("backend", BACKENDS, indirect=True)
PB = {"content-type": "application/x-protobuf"}


def client(receiver: OtlpReceiver) -> httpx.AsyncClient:
    return httpx.AsyncClient(
        transport=httpx.ASGITransport(app=Starlette(routes=receiver.routes())), base_url="http://receiver"
    )


def request_with(conversation: str, mutate: Any) -> bytes:
    """An innocent conversation and a second one whose spans `mutate` changes, in one request."""
    req = trace_request(genai_turn_spans("innocent", "Where is my order?", "It ships tomorrow."))
    other = trace_request(genai_turn_spans(conversation, "Hello?", "Hi."))
    mutate(other.resource_spans[0].scope_spans[0].spans)
    req.resource_spans.extend(other.resource_spans)
    return req.SerializeToString()


def partial(r: httpx.Response) -> tuple[int, str]:
    resp = ExportTraceServiceResponse()
    resp.ParseFromString(r.content)
    return resp.partial_success.rejected_spans, resp.partial_success.error_message


async def post_twice(store: SqlStore, body: bytes) -> list[httpx.Response]:
    """The request, and the exporter's resend of it: both must get the same final answer."""
    async with client(OtlpReceiver(store, ReceiverSettings())) as c:
        return [await c.post("/v1/traces", content=body, headers=PB) for _ in range(2)]


@pytest.mark.parametrize("time_ns", [2**63, 2**64 - 1])
async def test_a_time_past_2_63_rejects_that_span_and_stores_the_rest(store: SqlStore, time_ns: int) -> None:
    def late(spans: Any) -> None:
        spans[0].start_time_unix_nano = time_ns

    for r in await post_twice(store, request_with("late", late)):
        assert r.status_code == 200, r.text
        rejected, message = partial(r)
        assert rejected == 1 and f"startTimeUnixNano {time_ns} is out of range" in message
    assert await store.thread_keys() == ["otlp:innocent", "otlp:late"]
    [innocent] = await store.load_traces("otlp:innocent")
    assert len(innocent) == 2
    [late_trace] = await store.load_traces("otlp:late")
    assert len(late_trace) == 1  # the chat span; the root at 2**63 was rejected


async def test_the_same_span_twice_in_one_request_is_stored_once_with_the_last_copy(store: SqlStore) -> None:
    def twice(spans: Any) -> None:
        again = type(spans[0])()
        again.CopyFrom(spans[0])
        again.name = "the second copy"
        spans.append(again)

    for r in await post_twice(store, request_with("twice", twice)):
        assert r.status_code == 200 and partial(r) == (0, "")
    [trace] = await store.load_traces("otlp:twice")
    assert len(trace) == 2 and "the second copy" in {s.name for s in trace}
    assert len((await store.load_traces("otlp:innocent"))[0]) == 2


async def test_nul_in_a_conversation_id_is_dropped_and_everything_is_stored(store: SqlStore) -> None:
    def nul(spans: Any) -> None:
        for s in spans:
            for kv in s.attributes:
                if kv.key == "gen_ai.conversation.id":
                    kv.value.string_value = "with\0nul"

    for r in await post_twice(store, request_with("unused", nul)):
        assert r.status_code == 200 and partial(r) == (0, "")
    assert await store.thread_keys() == ["otlp:innocent", "otlp:withnul"]


def span(trace: str, sid: str, **kw: Any) -> Span:
    return Span(trace_id=trace.ljust(32, "0"), span_id=sid.ljust(16, "0"), name=f"span {sid}", **kw)


async def test_the_store_refusing_data_is_classified_and_isolated_to_the_spans_at_fault(store: SqlStore) -> None:
    """Past decode's checks (a source other than the receiver, or a value decode does not know): the
    database refuses the batch, `store_isolating` halves it until the bad spans are found, and stores
    everything else in the batch, events included."""
    bad = [span("b1", "1", start_ns=2**63), span("b2", "2", start_ns=2**64 - 1)]
    good = [span(f"a{i}", str(i)) for i in range(10)]
    event = SpanEvent(name="gen_ai.client.inference.operation.details", time_ns=5)
    batch = IngestBatch(
        spans=good[:5] + bad[:1] + good[5:] + bad[1:],
        events=[(good[0].trace_id, good[0].span_id, event)],
        conversations={s.trace_id: f"conv-{s.trace_id[:2]}" for s in good + bad},
    )
    with pytest.raises(IngestRefused) as refused:
        await store.ingest(batch, 1.0)
    assert "SELECT" not in refused.value.detail and "INSERT" not in refused.value.detail  # no SQL, no data
    out = await store_isolating(store, batch, 1.0)
    assert (out.stats.spans, out.stats.events, out.refused_spans, out.refused_events) == (10, 1, 2, 0)
    assert len(out.errors) == 2 and all("the store refused it" in e for e in out.errors)
    assert {e.split("(")[1].split("/")[0] for e in out.errors} == {bad[0].trace_id, bad[1].trace_id}
    assert sorted(await store.thread_keys()) == sorted(f"otlp:conv-{s.trace_id[:2]}" for s in good)
    [first] = await store.load_traces(f"otlp:conv-{good[0].trace_id[:2]}")
    assert [e.name for e in first[0].events] == [event.name]


async def test_source_progress_is_written_after_an_isolated_batch(store: SqlStore) -> None:
    batch = IngestBatch(spans=[span("a", "1"), span("b", "2", start_ns=2**63)], source_state={"otlp-file:/x": "1234"})
    out = await store_isolating(store, batch, 1.0)
    assert (out.stats.spans, out.refused_spans) == (1, 1)
    assert await store.get_source_state("otlp-file:/x") == "1234"


async def test_a_store_that_is_down_is_not_mistaken_for_bad_data(store: SqlStore) -> None:
    """No database to write to is transient (503 + Retry-After upstream), never a rejection of the data."""
    down = store.url.replace("store.db", "no-such-folder/store.db").replace("127.0.0.1:5432", "127.0.0.1:1")
    broken = SqlStore(down)
    with pytest.raises(Exception) as exc:
        await broken.ingest(IngestBatch(spans=[span("a", "1")]), 1.0)
    await broken.close()
    assert not isinstance(exc.value, IngestRefused) and refused_by_data(exc.value) is None


async def test_sql_parameters_never_reach_error_messages(store: SqlStore) -> None:
    """Span data and conversation ids stay out of logged store errors (PostgreSQL printed them)."""
    assert store.engine.sync_engine.hide_parameters is True


class Held:
    """`store.ingest` with its first call held until `release` is set, and every batch size noted."""

    def __init__(self, store: SqlStore) -> None:
        self.store, self.sizes, self.release = store, [], asyncio.Event()

    async def ingest(self, batch: IngestBatch, now: float) -> Any:
        self.sizes.append(len(batch.spans))
        if len(self.sizes) == 1:
            await self.release.wait()
        return await self.store.ingest(batch, now)


async def waiting(writer: GroupWriter, n: int) -> None:
    while len(writer._waiting) < n:  # noqa: SLF001 - until n batches wait for the store
        await asyncio.sleep(0.005)


async def writing(held: Held) -> None:
    while not held.sizes:  # until the first transaction is held
        await asyncio.sleep(0.005)


async def test_a_group_the_store_refuses_is_written_batch_by_batch(store: SqlStore) -> None:
    """Requests written together: when the data of one of them is refused, each is written alone, so
    only that request has a span rejected; the others are stored whole with their own counts."""
    held = Held(store)
    writer = GroupWriter(held, 1, lambda: 1.0, together=True)  # type: ignore[arg-type]
    first = asyncio.create_task(writer.write(IngestBatch(spans=[span("f", "1")]), 5.0))
    await writing(held)
    batches = [
        IngestBatch(spans=[span("a", "1"), span("a", "2")], conversations={span("a", "1").trace_id: "conv-a"}),
        IngestBatch(spans=[span("b", "1"), span("b", "2", start_ns=2**63)]),
        IngestBatch(spans=[span("c", "1")], conversations={span("c", "1").trace_id: "conv-c"}),
    ]
    rest = [asyncio.create_task(writer.write(b, 5.0)) for b in batches]
    await waiting(writer, 3)
    held.release.set()
    out = [await first] + [await r for r in rest]
    # the group of three refused, then each alone: the second one is refused again and halved
    assert held.sizes == [1, 5, 2, 2, 1, 1, 1]
    assert [(o.stats.spans, o.refused_spans) for o in out] == [(1, 0), (2, 0), (1, 1), (1, 0)]
    assert "the store refused it" in out[2].errors[0]
    assert {"otlp:conv-a", "otlp:conv-c"} <= set(await store.thread_keys())
    assert len((await store.load_traces("otlp:conv-a"))[0]) == 2


async def test_a_group_stores_what_writing_its_batches_in_turn_would(store: SqlStore) -> None:
    """A span sent twice keeps its last copy; a trace keeps the first conversation id it was given; the
    threads the group changed are counted once, with its first batch."""
    held = Held(store)
    writer = GroupWriter(held, 1, lambda: 1.0, together=True)  # type: ignore[arg-type]
    first = asyncio.create_task(writer.write(IngestBatch(spans=[span("f", "1")]), 5.0))
    await writing(held)
    tid = span("t", "1").trace_id
    batches = [
        IngestBatch(
            spans=[Span(trace_id=tid, span_id="1".ljust(16, "0"), name="first copy")], conversations={tid: "conv-1"}
        ),
        IngestBatch(
            spans=[Span(trace_id=tid, span_id="1".ljust(16, "0"), name="last copy"), span("t", "2")],
            conversations={tid: "conv-2"},
        ),
    ]
    rest = [asyncio.create_task(writer.write(b, 5.0)) for b in batches]
    await waiting(writer, 2)
    held.release.set()
    await first
    out = [await r for r in rest]
    assert held.sizes == [1, 3]
    assert [(o.stats.spans, o.stats.threads_changed) for o in out] == [(1, 1), (2, 0)]
    [trace] = await store.load_traces("otlp:conv-1")
    assert sorted(s.name for s in trace) == ["last copy", "span 2"]
    assert "otlp:conv-2" not in await store.thread_keys()


async def test_a_batch_no_transaction_took_in_time_is_never_written(store: SqlStore) -> None:
    """Timed out or cancelled while waiting: the caller answers 503 (or is gone) and the batch is not
    written later, so the exporter's retry is the only copy."""
    held = Held(store)
    writer = GroupWriter(held, 1, lambda: 1.0, together=True)  # type: ignore[arg-type]
    first = asyncio.create_task(writer.write(IngestBatch(spans=[span("f", "1")]), 5.0))
    await writing(held)
    with pytest.raises(TimeoutError):
        await writer.write(
            IngestBatch(spans=[span("late", "1")], conversations={span("late", "1").trace_id: "late"}), 0.01
        )
    gone = asyncio.create_task(
        writer.write(IngestBatch(spans=[span("gone", "1")], conversations={span("gone", "1").trace_id: "gone"}), 5.0)
    )
    await waiting(writer, 1)
    gone.cancel()
    with pytest.raises(asyncio.CancelledError):
        await gone
    held.release.set()
    assert (await first).stats.spans == 1
    assert held.sizes == [1]
    assert not {"otlp:late", "otlp:gone"} & set(await store.thread_keys())


async def test_a_group_the_store_fails_to_write_fails_every_request_in_it_and_the_next_ones_go_on(
    store: SqlStore,
) -> None:
    """A transient failure (the store is down for a moment) rolls the whole group back: every request
    in it is answered "retry later" and none of it is stored; requests after it are written."""
    held = Held(store)
    failing = {"left": 1}

    async def flaky(batch: IngestBatch, now: float) -> Any:
        if len(batch.spans) > 1 and failing["left"]:
            failing["left"] -= 1
            raise OSError("connection reset")
        return await held.ingest(batch, now)

    writer = GroupWriter(SimpleNamespace(ingest=flaky), 1, lambda: 1.0, together=True)  # type: ignore[arg-type]
    first = asyncio.create_task(writer.write(IngestBatch(spans=[span("f", "1")]), 5.0))
    await writing(held)
    names = ["x", "y", "z"]
    group = [
        asyncio.create_task(
            writer.write(IngestBatch(spans=[span(n, "1")], conversations={span(n, "1").trace_id: n}), 5.0)
        )
        for n in names
    ]
    await waiting(writer, 3)
    held.release.set()
    assert (await first).stats.spans == 1
    outcomes = await asyncio.gather(*group, return_exceptions=True)
    assert all(isinstance(o, OSError) for o in outcomes)
    later = await writer.write(IngestBatch(spans=[span("w", "1")], conversations={span("w", "1").trace_id: "w"}), 5.0)
    assert later.stats.spans == 1
    keys = set(await store.thread_keys())
    assert "otlp:w" in keys and not {f"otlp:{n}" for n in names} & keys


async def test_writers_side_by_side_take_one_batch_each(store: SqlStore) -> None:
    """Without `together` (PostgreSQL), up to `writers` transactions run side by side, one batch each,
    and a batch waits only while all of them are busy."""
    held = Held(store)
    writer = GroupWriter(held, 2, lambda: 1.0, together=False)  # type: ignore[arg-type]
    first = asyncio.create_task(writer.write(IngestBatch(spans=[span("f", "1")]), 5.0))
    await writing(held)  # one writer is held; the other writes what comes next, one at a time
    rest = [asyncio.create_task(writer.write(IngestBatch(spans=[span(n, "1")]), 5.0)) for n in "abcd"]
    assert [o.stats.spans for o in await asyncio.gather(*rest)] == [1, 1, 1, 1]
    assert held.sizes == [1, 1, 1, 1, 1]
    held.release.set()
    assert (await first).stats.spans == 1
