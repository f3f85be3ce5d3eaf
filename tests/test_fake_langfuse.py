"""The fake Langfuse server speaks the real protocol: real SDK (v4) and raw httpx (v3) against it."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime, timedelta

import httpx
import pytest
from langfuse import Langfuse
from langfuse.api import AsyncLangfuseAPI
from langfuse.api.commons.errors.not_found_error import NotFoundError
from langfuse.api.core.api_error import ApiError
from langfuse.api.scores.types.create_score_request import CreateScoreRequest
from opentelemetry.sdk.trace import TracerProvider

from tests.support.fakes.langfuse_server import FakeLangfuseServer, SeedToolCall

T0 = datetime(2026, 11, 20, 9, 0, tzinfo=UTC)
ORDER_TURNS = [
    ("hi there", "Hello! How can I help?", None, None),
    (
        "where is my order 7?",
        "Order 7 ships today.",
        [SeedToolCall("lookup_order", {"order_id": 7}, {"status": "packed"})],
        None,
    ),
    ("and my refund?", None, None, "upstream timeout"),
]


@pytest.fixture(scope="module")
def _servers() -> Iterator[dict[str, FakeLangfuseServer]]:
    with FakeLangfuseServer("v4") as v4, FakeLangfuseServer("v3") as v3:
        yield {"v4": v4, "v3": v3}


@pytest.fixture
def lf4(_servers: dict[str, FakeLangfuseServer]) -> FakeLangfuseServer:
    _servers["v4"].reset()
    return _servers["v4"]


@pytest.fixture
def lf3(_servers: dict[str, FakeLangfuseServer]) -> FakeLangfuseServer:
    _servers["v3"].reset()
    return _servers["v3"]


@pytest.fixture
def api(lf4: FakeLangfuseServer) -> AsyncLangfuseAPI:
    return AsyncLangfuseAPI(base_url=lf4.base_url, username=lf4.public_key, password=lf4.secret_key)


@pytest.fixture
async def http3(lf3: FakeLangfuseServer) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=lf3.base_url, auth=lf3.auth) as client:
        yield client


@pytest.fixture
async def http4(lf4: FakeLangfuseServer) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=lf4.base_url, auth=lf4.auth) as client:
        yield client


def _window(start: datetime = T0, hours: int = 2) -> dict[str, datetime]:
    return {"from_start_time": start - timedelta(minutes=1), "to_start_time": start + timedelta(hours=hours)}


# ---------------------------------------------------------------- v4 reads


async def test_v4_health_and_observations_with_sdk(lf4: FakeLangfuseServer, api: AsyncLangfuseAPI) -> None:
    lf4.seed_session("s1", ORDER_TURNS, start=T0, user_id="u1", tags=["prod"])
    lf4.seed_session("s2", [("other", "thread", None, None)], start=T0 + timedelta(minutes=5))
    health = await api.health.health()
    assert (health.status, health.version) == ("OK", "4.16.0")

    page = await api.observations.get_many(session_id="s1", fields="core,basic,io", limit=1000, **_window())
    rows = page.data
    assert page.meta.cursor is None
    assert {r.session_id for r in rows} == {"s1"} and {r.user_id for r in rows} == {"u1"}
    starts = [r.start_time for r in rows]
    assert starts == sorted(starts, reverse=True)  # newest first
    assert {r.type for r in rows} == {"SPAN", "GENERATION", "TOOL"}
    roots = [r for r in rows if r.parent_observation_id is None]
    assert len(roots) == 3 and all(r.is_root_observation for r in roots)
    first = min(roots, key=lambda r: r.start_time)
    assert isinstance(first.input, str)  # raw JSON strings, parsed by the client
    assert json.loads(first.input) == [{"role": "user", "content": "hi there"}]
    assert json.loads(first.output) == [{"role": "assistant", "content": "Hello! How can I help?"}]
    failed = max(roots, key=lambda r: r.start_time)
    assert (failed.level, failed.status_message, failed.output) == ("ERROR", "upstream timeout", None)
    tool = next(r for r in rows if r.type == "TOOL")
    assert (tool.name, json.loads(tool.input), json.loads(tool.output)) == (
        "lookup_order",
        {"order_id": 7},
        {"status": "packed"},
    )
    lf4.assert_no_violations()


async def test_v4_field_groups_absent_unless_requested(lf4: FakeLangfuseServer, http4: httpx.AsyncClient) -> None:
    lf4.seed_session("s1", ORDER_TURNS, start=T0)
    r = await http4.get("/api/public/v2/observations", params={"type": "GENERATION", "limit": 1})
    row = r.json()["data"][0]
    assert "input" not in row and "usageDetails" not in row and row["modelId"] is None
    assert row["name"] == "chat-completion"  # basic is a default group
    r = await http4.get("/api/public/v2/observations", params={"type": "GENERATION", "fields": "core,model,usage"})
    row = r.json()["data"][0]
    assert row["providedModelName"] == "gpt-4o-mini" and row["usageDetails"]["total"] > 0
    assert "name" not in row
    lf4.assert_no_violations()


async def test_v4_cursor_pagination_and_time_window(lf4: FakeLangfuseServer, api: AsyncLangfuseAPI) -> None:
    for i in range(6):
        lf4.seed_session(f"s{i}", ORDER_TURNS[:2], start=T0 + timedelta(minutes=10 * i))
    seen: list[str] = []
    cursor = None
    while True:
        page = await api.observations.get_many(limit=7, cursor=cursor, **_window())
        seen += [r.id for r in page.data]
        cursor = page.meta.cursor
        if not cursor:
            break
    total = sum(len(t.observations) for t in lf4.traces)
    assert len(seen) == len(set(seen)) == total
    late = await api.observations.get_many(
        limit=1000, from_start_time=T0 + timedelta(minutes=30), to_start_time=T0 + timedelta(minutes=40)
    )
    assert {r.session_id for r in late.data} == {"s3"}
    roots = await api.observations.get_many(is_root_observation=True, limit=1000, **_window())
    assert len(roots.data) == 12
    lf4.assert_no_violations()


async def test_v4_ingestion_lag_and_growing_sessions(lf4: FakeLangfuseServer, api: AsyncLangfuseAPI) -> None:
    lf4.seed_session("s1", ORDER_TURNS[:1], start=T0)
    lf4.add_trace_to_session("s1", "one more thing", "Sure.", visible_after=60)
    page = await api.observations.get_many(session_id="s1", is_root_observation=True, **_window())
    assert len(page.data) == 1
    lf4.advance(61)
    page = await api.observations.get_many(session_id="s1", is_root_observation=True, **_window())
    assert len(page.data) == 2
    lf4.assert_no_violations()


async def test_v4_legacy_reads_are_gone(lf4: FakeLangfuseServer, http4: httpx.AsyncClient) -> None:
    for path in ("/api/public/traces", "/api/public/sessions", "/api/public/sessions/s1"):
        r = await http4.get(path)
        assert r.status_code == 404, path
    lf4.assert_no_violations()


# ---------------------------------------------------------------- v3 reads


async def test_v3_traces_sessions_and_probe(lf3: FakeLangfuseServer, http3: httpx.AsyncClient) -> None:
    lf3.seed_session("s1", ORDER_TURNS, start=T0, environment="production")
    lf3.seed_session("s2", [("x", "y", None, None)], start=T0 + timedelta(hours=3))
    probe = await http3.get("/api/public/v2/observations", params={"limit": 1})
    assert probe.status_code == 404 and "only available in a Langfuse v4 write mode" in probe.json()["message"]
    assert (await http3.get("/api/public/health")).json()["version"] == "3.225.4"

    params = {"sessionId": "s1", "fromTimestamp": "2026-11-20T08:00:00Z", "toTimestamp": "2026-11-20T10:00:00Z"}
    r = await http3.get("/api/public/traces", params={**params, "fields": "core,io", "limit": 2})
    body = r.json()
    assert body["meta"] == {"page": 1, "limit": 2, "totalItems": 3, "totalPages": 2}
    assert body["data"][0]["observations"] == [] and body["data"][0]["latency"] == -1
    assert body["data"][0]["output"] is None  # newest first: the failed turn
    r = await http3.get("/api/public/traces", params={**params, "page": 2, "limit": 2})
    oldest = r.json()["data"][0]
    assert oldest["input"] == [{"role": "user", "content": "hi there"}]

    detail = (await http3.get(f"/api/public/traces/{lf3.traces[1].id}")).json()
    types = [o["type"] for o in detail["observations"]]
    assert types == ["SPAN", "GENERATION", "TOOL", "GENERATION"]
    gen = detail["observations"][1]
    assert gen["model"] == "gpt-4o-mini" and gen["usageDetails"]["input"] > 0
    assert gen["output"]["tool_calls"][0]["function"]["name"] == "lookup_order"

    sessions = (await http3.get("/api/public/sessions", params={"toTimestamp": "2026-11-20T11:00:00Z"})).json()
    assert [s["id"] for s in sessions["data"]] == ["s1"]
    assert sessions["data"][0]["environment"] == "production"
    session = (await http3.get("/api/public/sessions/s1")).json()
    assert len(session["traces"]) == 3 and "observations" not in session["traces"][0]
    assert (await http3.get("/api/public/sessions/nope")).status_code == 404
    lf3.assert_no_violations()


async def test_same_data_in_both_views() -> None:
    views = {}
    for mode in ("v4", "v3"):
        with FakeLangfuseServer(mode) as lf:
            lf.seed_session("s1", ORDER_TURNS, start=T0)
            async with httpx.AsyncClient(base_url=lf.base_url, auth=lf.auth) as c:
                if mode == "v4":
                    rows = (
                        await c.get("/api/public/v2/observations", params={"isRootObservation": "true", "fields": "io"})
                    ).json()["data"]
                    views[mode] = sorted((r["traceId"], json.loads(r["input"])) for r in rows)
                else:
                    rows = (await c.get("/api/public/traces", params={"sessionId": "s1"})).json()["data"]
                    views[mode] = sorted((r["id"], r["input"]) for r in rows)
            lf.assert_no_violations()
    assert views["v4"] == views["v3"]


# ---------------------------------------------------------------- scores


async def test_v4_single_object_scores_and_upsert_by_date(lf4: FakeLangfuseServer, http4: httpx.AsyncClient) -> None:
    lf4.seed_session("s1", ORDER_TURNS, start=T0)
    score = {"id": "sc-1", "name": "thread_goal_met", "value": 0.5, "sessionId": "s1", "dataType": "NUMERIC"}
    r = await http4.post("/api/public/scores", json=score)
    assert (r.status_code, r.json()) == (200, {"id": "sc-1"})
    await http4.post("/api/public/scores", json={**score, "value": 0.7})
    assert [s.value for s in lf4.scores] == [0.7]  # same id, name and day: replaced
    lf4.advance(timedelta(days=1))
    await http4.post("/api/public/scores", json={**score, "value": 0.9})
    assert sorted(s.value for s in lf4.scores) == [0.7, 0.9]  # v4.16 stamps "now": a new day duplicates
    assert len(lf4.score_requests) == 3 and [w.replaced for w in lf4.score_requests] == [False, True, False]
    lf4.assert_no_violations()


async def test_v4_sdk5_batch_scores_need_a_newer_server(lf4: FakeLangfuseServer, api: AsyncLangfuseAPI) -> None:
    with pytest.raises(ApiError) as err:
        await api.scores.create(request=[CreateScoreRequest(name="x", value=1, session_id="s1")])
    assert err.value.status_code == 400
    assert any("is not of type 'object'" in v for v in lf4.take_violations())


async def test_score_batches_mode_with_sdk() -> None:
    with FakeLangfuseServer("v4", score_batches=True) as lf:
        api = AsyncLangfuseAPI(base_url=lf.base_url, username=lf.public_key, password=lf.secret_key)
        ts = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)
        good = CreateScoreRequest(id="k1", name="relevance", value=0.9, trace_id="t1", timestamp=ts)
        res = await api.scores.create(request=[good])
        assert res.message == "Accepted"  # type: ignore[union-attr]
        again = CreateScoreRequest(id="k1", name="relevance", value=0.4, trace_id="t1", timestamp=ts)
        both = CreateScoreRequest(name="bad", value=1, trace_id="t1", session_id="s1")
        res = await api.scores.create(request=[again, both])
        assert (res.accepted, res.rejected) == (1, 1)  # type: ignore[union-attr]
        assert [(s.id, s.value, s.timestamp) for s in lf.scores] == [("k1", 0.4, ts)]
        assert len(lf.take_violations()) == 1


@pytest.mark.parametrize("batches", [True, False])
def test_sdk_high_level_create_score(batches: bool) -> None:
    """`Langfuse.create_score` posts a JSON list: fine on a >= v4.59 server, a violation on v4.16."""
    key = f"pk-lf-hl-{batches}"  # the SDK keeps one client per public key; a shut-down one drops scores
    with FakeLangfuseServer("v4", public_key=key, score_batches=batches) as lf:
        client = Langfuse(
            public_key=lf.public_key, secret_key=lf.secret_key, base_url=lf.base_url, tracer_provider=TracerProvider()
        )
        ts = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)
        client.create_score(
            name="thread_goal_met", value=0, data_type="BOOLEAN", session_id="s1", score_id="g1", timestamp=ts
        )
        client.flush()
        client.shutdown()
        if batches:
            assert [(s.id, s.string_value, s.timestamp) for s in lf.scores] == [("g1", "False", ts)]
            lf.assert_no_violations()
        else:
            assert lf.scores == [] and any("is not of type 'object'" in v for v in lf.take_violations())


async def test_ingestion_score_create_upserts_on_envelope_timestamp(
    lf4: FakeLangfuseServer, http4: httpx.AsyncClient
) -> None:
    def event(eid: str, ts: str, value: float) -> dict[str, object]:
        body = {"id": "det-1", "name": "turn_relevance", "value": value, "traceId": "t1", "observationId": "o1"}
        return {"id": eid, "timestamp": ts, "type": "score-create", "body": body}

    r = await http4.post(
        "/api/public/ingestion",
        json={"batch": [event("e1", "2026-11-20T10:00:00Z", 0.1), event("e2", "2026-11-20T23:00:00Z", 0.2)]},
    )
    assert r.status_code == 207 and len(r.json()["successes"]) == 2
    assert [s.value for s in lf4.scores] == [0.2]
    await http4.post("/api/public/ingestion", json={"batch": [event("e3", "2026-11-21T00:00:01Z", 0.3)]})
    assert sorted(s.value for s in lf4.scores) == [0.2, 0.3]  # another day: a duplicate row
    assert {s.via for s in lf4.scores} == {"ingestion"}

    trace = {"id": "e4", "timestamp": "2026-11-20T10:00:00Z", "type": "trace-create", "body": {"id": "t9"}}
    bad = event("e5", "2026-11-20T10:00:00Z", 1) | {"body": {"name": "n", "value": 1, "traceId": "t", "oops": 1}}
    r = await http4.post("/api/public/ingestion", json={"batch": [trace, bad]})
    assert r.status_code == 207
    assert [(e["id"], e["status"]) for e in r.json()["errors"]] == [("e4", 400), ("e5", 400)]
    problems = lf4.take_violations()
    assert any("events_only" in p for p in problems) and any("'oops' was unexpected" in p for p in problems)


async def test_v3_scores_read_with_sdk_filters(lf4: FakeLangfuseServer, api: AsyncLangfuseAPI) -> None:
    lf4.seed_score("thread_goal_met", 1, data_type="BOOLEAN", session_id="s1", id="a")
    lf4.seed_score("turn_relevance", 0.4, trace_id="t1", observation_id="o1", id="b")
    lf4.seed_score("tone", "polite", trace_id="t2", id="c")
    page = await api.scores.get_many(session_id="s1", fields="subject,details")
    assert [(s.id, s.value, s.subject.kind) for s in page.data] == [("a", True, "session")]  # type: ignore[union-attr]
    everything = await api.scores.get_many(limit=2)
    assert len(everything.data) == 2 and everything.meta.cursor
    rest = await api.scores.get_many(limit=2, cursor=everything.meta.cursor)
    assert len(rest.data) == 1 and rest.meta.cursor is None
    lf4.assert_no_violations()


async def test_v3_scores_post_single_object_only(lf3: FakeLangfuseServer, http3: httpx.AsyncClient) -> None:
    lf3.seed_session("s1", ORDER_TURNS[:1], start=T0)
    trace_id = lf3.traces[0].id
    r = await http3.post("/api/public/scores", json={"name": "q", "value": 0.5, "traceId": trace_id})
    assert r.status_code == 200
    detail = (await http3.get(f"/api/public/traces/{trace_id}")).json()
    assert [(s["name"], s["value"]) for s in detail["scores"]] == [("q", 0.5)]
    r = await http3.post("/api/public/scores", json=[{"name": "q", "value": 0.5, "traceId": trace_id}])
    assert r.status_code == 400 and lf3.take_violations()


# ---------------------------------------------------------------- configs, queues, comments


async def test_configs_queues_and_comments_with_sdk(lf4: FakeLangfuseServer, api: AsyncLangfuseAPI) -> None:
    lf4.seed_session("s1", ORDER_TURNS[:1], start=T0)
    goal = await api.score_configs.create(name="thread_goal_met", data_type="BOOLEAN")
    assert [c.label for c in goal.categories or []] == ["True", "False"]
    listed = await api.score_configs.get()
    assert [c.id for c in listed.data] == [goal.id] and listed.meta.total_items == 1
    queue = await api.annotation_queues.create_queue(name="review", score_config_ids=[goal.id])
    for _ in range(2):  # no dedup, like the real server
        await api.annotation_queues.create_queue_item(queue.id, object_id="s1", object_type="SESSION")
    items = await api.annotation_queues.list_queue_items(queue.id, status="PENDING")
    assert [i.object_id for i in items.data] == ["s1", "s1"] and len(lf4.queue_items) == 2
    comment = await api.comments.create(
        project_id=lf4.project_id, object_type="SESSION", object_id="s1", content="goal not met: refund"
    )
    assert [c.id for c in lf4.comments] == [comment.id]
    with pytest.raises(NotFoundError):
        await api.annotation_queues.get_queue("nope")
    lf4.assert_no_violations()


async def test_score_values_are_checked_against_configs(lf4: FakeLangfuseServer, http4: httpx.AsyncClient) -> None:
    verdict = lf4.seed_score_config(
        "verdict", "CATEGORICAL", categories=[{"value": 1, "label": "pass"}, {"value": 0, "label": "fail"}]
    )
    quality = lf4.seed_score_config("quality", "NUMERIC", min_value=0, max_value=1)
    flag = lf4.seed_score_config("flag", "BOOLEAN")
    ok = [
        {"name": "verdict", "value": "fail", "configId": verdict.id, "sessionId": "s1"},
        {"name": "quality", "value": 0.3, "configId": quality.id, "sessionId": "s1"},
        {"name": "flag", "value": 1, "configId": flag.id, "sessionId": "s1"},
    ]
    for body in ok:
        assert (await http4.post("/api/public/scores", json=body)).status_code == 200
    assert [(s.data_type, s.value, s.string_value) for s in lf4.scores] == [
        ("CATEGORICAL", 0.0, "fail"),
        ("NUMERIC", 0.3, None),
        ("BOOLEAN", 1.0, "True"),
    ]
    lf4.assert_no_violations()
    bad = [  # (body, status): a value the config refuses is 400, a config that does not exist 404
        ({"name": "verdict", "value": "maybe", "configId": verdict.id, "sessionId": "s1"}, 400),
        ({"name": "quality", "value": 1.5, "configId": quality.id, "sessionId": "s1"}, 400),
        ({"name": "flag", "value": 2, "configId": flag.id, "sessionId": "s1"}, 400),
        ({"name": "renamed", "value": 1, "configId": flag.id, "sessionId": "s1"}, 400),
        ({"name": "flag", "value": 1, "configId": "missing", "sessionId": "s1"}, 404),
    ]
    for body, status in bad:
        r = await http4.post("/api/public/scores", json=body)
        assert r.status_code == status, body
    assert len(lf4.take_violations()) == len(bad)


async def test_config_and_queue_rules(lf4: FakeLangfuseServer, http4: httpx.AsyncClient) -> None:
    r = await http4.post("/api/public/score-configs", json={"name": "x" * 36, "dataType": "NUMERIC"})
    assert r.status_code == 400
    r = await http4.post("/api/public/annotation-queues", json={"name": "q", "scoreConfigIds": []})
    assert r.status_code == 400
    r = await http4.post("/api/public/score-configs", json={"name": "c", "dataType": "CATEGORICAL"})
    assert r.status_code == 400
    assert len(lf4.take_violations()) == 3


# ---------------------------------------------------------------- malformed requests


@pytest.mark.parametrize(
    ("body", "needle"),
    [
        ({"name": "x", "value": 1, "traceId": "t", "unknownField": 1}, "'unknownField' was unexpected"),
        ({"name": "x", "value": 1, "traceId": "t", "dataType": "PERCENT"}, "'PERCENT' is not one of"),
        ({"name": "x", "value": 1, "traceId": "t", "sessionId": "s"}, "exactly one target"),
        ({"name": "x", "value": 1}, "exactly one target"),
        ({"name": "x", "value": 1, "observationId": "o", "sessionId": "s"}, "observationId requires traceId"),
        ({"name": "x", "value": "yes", "traceId": "t", "dataType": "BOOLEAN"}, "numeric value"),
        ({"name": "x", "value": 1, "traceId": "t", "environment": "Prod"}, "Invalid environment"),
        ({"name": "x", "value": 1, "traceId": "t", "source": "EVAL"}, "'EVAL' is not one of"),
    ],
)
async def test_malformed_score_is_a_violation(
    lf4: FakeLangfuseServer, http4: httpx.AsyncClient, body: dict[str, object], needle: str
) -> None:
    r = await http4.post("/api/public/scores", json=body)
    assert r.status_code == 400
    problems = lf4.take_violations()
    assert problems and all(p.startswith("POST /api/public/scores: ") for p in problems)
    assert any(needle in p for p in problems), problems


async def test_auth_and_query_violations(lf4: FakeLangfuseServer) -> None:
    async with httpx.AsyncClient(base_url=lf4.base_url) as anon:
        assert (await anon.get("/api/public/health")).status_code == 200  # no auth needed
        assert (await anon.get("/api/public/v2/observations")).status_code == 401
    async with httpx.AsyncClient(base_url=lf4.base_url, auth=("pk-lf-test", "wrong")) as wrong:
        assert (await wrong.get("/api/public/v3/scores")).status_code == 401
    async with httpx.AsyncClient(base_url=lf4.base_url, auth=lf4.auth) as c:
        assert (await c.get("/api/public/v2/observations", params={"limit": 1001})).status_code == 400
        assert (await c.get("/api/public/v2/observations", params={"fromStartTime": "yesterday"})).status_code == 400
        assert (await c.get("/api/public/v2/observations", params={"fields": "core,everything"})).status_code == 400
        assert (await c.get("/api/public/v3/scores", params={"traceId": "t", "sessionId": "s"})).status_code == 400
        assert (await c.get("/api/public/not-an-endpoint")).status_code == 404
    problems = lf4.take_violations()
    assert len(problems) == 7, problems
    assert sum("401" in p for p in problems) == 2
    lf4.violations.append("x")  # a copy: mutating it changes nothing
    lf4.assert_no_violations()


# ---------------------------------------------------------------- faults


async def test_fail_next_hang_next_and_failure_rate(lf4: FakeLangfuseServer, http4: httpx.AsyncClient) -> None:
    lf4.fail_next(1, status=429, retry_after=2)
    r = await http4.get("/api/public/v3/scores")
    assert r.status_code == 429 and r.headers["retry-after"] == "2"
    assert r.headers["x-ratelimit-remaining"] == "0"
    lf4.fail_next(1, status=500, path="/api/public/scores")
    assert (await http4.get("/api/public/v3/scores")).status_code == 200  # other path untouched
    assert (await http4.post("/api/public/scores", json={"name": "a", "value": 1, "traceId": "t"})).status_code == 500
    assert lf4.scores == []  # the failed write was not processed
    lf4.hang_next(1, seconds=5)
    with pytest.raises(httpx.ReadTimeout):
        await http4.get("/api/public/v3/scores", timeout=0.3)
    assert (await http4.get("/api/public/health")).status_code == 200

    def statuses(seed: int) -> list[int]:
        lf4.set_failure_rate(0.5, seed=seed, statuses=(503,))
        with httpx.Client(base_url=lf4.base_url, auth=lf4.auth) as c:
            return [c.get("/api/public/v3/scores").status_code for _ in range(12)]

    first = statuses(7)
    assert first == statuses(7) and {200, 503} == set(first)
    lf4.set_failure_rate(0)
    lf4.assert_no_violations()
    assert lf4.count("GET /api/public/v3/scores") >= 27


async def test_sdk_retries_injected_429(lf4: FakeLangfuseServer, api: AsyncLangfuseAPI) -> None:
    lf4.fail_next(1, status=429, retry_after=1)
    health = await api.score_configs.get()
    assert health.data == []
    assert lf4.count("GET /api/public/score-configs") == 2
    lf4.assert_no_violations()


async def test_v4_filter_parameter_replaces_simple_filters(lf4: FakeLangfuseServer, http4: httpx.AsyncClient) -> None:
    lf4.seed_session("s1", ORDER_TURNS, start=T0, tags=["vip"])
    lf4.seed_session("s2", ORDER_TURNS[:1], start=T0)
    conditions = [
        {"type": "string", "column": "sessionId", "operator": "=", "value": "s1"},
        {"type": "string", "column": "level", "operator": "=", "value": "ERROR"},
        {"type": "arrayOptions", "column": "tags", "operator": "all of", "value": ["vip"]},
    ]
    params = {"filter": json.dumps(conditions), "sessionId": "s2", "fields": "basic"}  # sessionId is ignored
    rows = (await http4.get("/api/public/v2/observations", params=params)).json()["data"]
    assert {(r["sessionId"], r["type"]) for r in rows} == {("s1", "SPAN"), ("s1", "GENERATION")}
    only_contains = [{"type": "string", "column": "input", "operator": "contains", "value": "refund"}]
    r = await http4.get("/api/public/v2/observations", params={"filter": json.dumps(only_contains)})
    assert r.status_code == 400 and lf4.take_violations()


async def test_v3_scores_and_ingestion(lf3: FakeLangfuseServer, http3: httpx.AsyncClient) -> None:
    event = {"id": "e1", "timestamp": "2026-11-20T10:00:00.000Z", "type": "score-create"}
    batch = [
        event | {"body": {"id": "k", "name": "thread_ok", "value": "pass", "sessionId": "s1"}},
        event | {"id": "e2", "type": "trace-create", "body": {"id": "t1"}},
    ]
    r = await http3.post("/api/public/ingestion", json={"batch": batch})
    assert [s["id"] for s in r.json()["successes"]] == ["e1"] and [e["id"] for e in r.json()["errors"]] == ["e2"]
    assert len(lf3.take_violations()) == 1  # the fake seeds traces, it does not ingest them
    r = await http3.get("/api/public/v3/scores", params={"sessionId": "s1", "fields": "subject"})
    assert [(s["value"], s["dataType"], s["subject"]) for s in r.json()["data"]] == [
        ("pass", "CATEGORICAL", {"kind": "session", "id": "s1"})
    ]
    lf3.assert_no_violations()


async def test_optional_strictness_and_body_limit() -> None:
    with FakeLangfuseServer("v4", require_time_window=True) as lf:
        async with httpx.AsyncClient(base_url=lf.base_url, auth=lf.auth) as c:
            assert (await c.get("/api/public/v2/observations", params=_window_params())).status_code == 200
            lf.assert_no_violations()
            await c.get("/api/public/v2/observations", params={"fromStartTime": "2026-11-20T00:00:00Z"})
            assert any("unbounded read" in v for v in lf.take_violations())
            big = {"name": "x", "value": "y" * (1024 * 1024), "traceId": "t", "dataType": "TEXT"}
            assert (await c.post("/api/public/scores", json=big)).status_code == 413
            assert any("413" in v for v in lf.take_violations())


def _window_params() -> dict[str, str]:
    return {"fromStartTime": "2026-11-20T00:00:00Z", "toStartTime": "2026-11-21T00:00:00Z"}
