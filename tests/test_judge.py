"""The judge client against the fake OpenAI server with the real `openai` client, and its limiter.

Assertions are on what the server received (count, order, bodies) and on counters, not on speed.
"""

from __future__ import annotations

import asyncio
import json
import random
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Annotated, Any

import pytest

from tests.support.fakes.openai_server import FakeOpenAIServer, Handler, Reply, ScriptedHandler
from tracing_eval.config import JudgeSettings
from tracing_eval.judge import (
    SYSTEM_PROMPT,
    Answer,
    HourlyBudget,
    JudgeCache,
    JudgeClient,
    MemoryCache,
    cache_key,
    cost_usd,
    decode_answer,
    schema_name,
    strict_compatible,
)
from tracing_eval.metrics.judged import answers
from tracing_eval.metrics.judged.base import Judge, JudgeError, JudgeRequest, JudgeUsage, MalformedAnswer
from tracing_eval.ratelimit import AdaptiveLimiter, backoff_delay, retry_after_seconds
from tracing_eval.store.sql import SqlStore

MODEL = "gpt-4o-mini"
TRANSCRIPT = "[turn 1]\nuser: Where is my order A48213?\nassistant: It shipped yesterday."
SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"verdict": {"type": "string", "enum": ["yes", "no"]}, "reason": {"type": "string"}},
    "required": ["verdict", "reason"],
    "additionalProperties": False,
}
LABELS = {"yes": 1.0, "no": 0.0}


def ask(metric: str = "politeness", transcript: str = TRANSCRIPT, instructions: str = "Is the assistant polite?"):
    return JudgeRequest(metric=metric, transcript=transcript, instructions=instructions, schema=SCHEMA)


class Verdict(answers.Answer):
    verdict: Annotated[str, answers.one_of(LABELS)]
    reason: answers.Text


def verdict(data: Any) -> str:
    return Verdict.parser()(data).verdict


def answer(label: str = "yes") -> Reply:
    return Reply(json.dumps({"verdict": label, "reason": "because"}))


def always(label: str = "yes", delay: float = 0.0) -> Handler:
    return lambda _request: Reply(json.dumps({"verdict": label, "reason": "because"}), delay=delay)


def script(*replies: Reply, transcript: str = TRANSCRIPT) -> ScriptedHandler:
    return ScriptedHandler({transcript: list(replies)})


@asynccontextmanager
async def judge_at(
    server: FakeOpenAIServer,
    judge_cache: JudgeCache | None = None,
    clock: Callable[[], float] | None = None,
    **kw: Any,
) -> AsyncIterator[JudgeClient]:
    settings = JudgeSettings(model=MODEL, base_url=server.base_url, api_key="test", **kw)
    extra: dict[str, Any] = {"clock": clock} if clock else {}
    client = JudgeClient(
        settings, judge_cache, retry_base_seconds=0.01, retry_cap_seconds=0.05, rng=random.Random(0), **extra
    )
    try:
        yield client
    finally:
        await client.close()


def bodies(server: FakeOpenAIServer) -> list[dict[str, Any]]:
    return [e.body or {} for e in server.requests]


# -- request shape ------------------------------------------------------------------------------


async def test_json_schema_request_shape_and_shared_prefix() -> None:
    with FakeOpenAIServer(always(), prefix_cache=True) as server:
        async with judge_at(server) as judge:
            first, u1 = await judge.ask(ask("politeness"), verdict)
            second, u2 = await judge.ask(ask("criterion:brevity", instructions="Is it brief?"), verdict)
    assert (first, second) == ("yes", "yes")
    a, b = bodies(server)
    assert a["model"] == MODEL and a["temperature"] == 0 and a["seed"] == 42
    assert a["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "politeness", "schema": SCHEMA, "strict": True},
    }
    assert b["response_format"]["json_schema"]["name"] == "criterion_brevity"
    assert [m["role"] for m in a["messages"]] == ["system", "user", "user"]
    assert a["messages"][0]["content"] == SYSTEM_PROMPT
    assert a["messages"][1]["content"] == TRANSCRIPT  # transcript first ...
    assert a["messages"][2]["content"] == "Is the assistant polite?"  # ... then the metric's instructions
    assert a["messages"][:2] == b["messages"][:2]  # the same prefix for every metric of the thread
    assert u1.cached_input_tokens == 0 and u2.cached_input_tokens > 0  # so the provider cache serves it


async def test_json_object_mode_puts_the_schema_in_the_instructions() -> None:
    with FakeOpenAIServer(always(), response_formats=("text", "json_object")) as server:
        async with judge_at(server, structured_output="json_object") as judge:
            value, _ = await judge.ask(ask(), verdict)
    assert value == "yes"
    [body] = bodies(server)
    assert body["response_format"] == {"type": "json_object"}
    assert body["temperature"] == 0 and body["seed"] == 42
    assert [m["role"] for m in body["messages"]] == ["system", "user", "user"]
    assert body["messages"][1]["content"] == TRANSCRIPT
    instructions = body["messages"][2]["content"]
    assert instructions.startswith("Is the assistant polite?")
    assert json.loads(instructions.split("JSON schema:\n", 1)[1]) == SCHEMA


async def test_endpoint_without_schema_support_is_a_clear_error() -> None:
    with FakeOpenAIServer(always(), response_formats=("text", "json_object")) as server:
        async with judge_at(server) as judge:
            with pytest.raises(JudgeError, match='structured_output = "json_object"'):
                await judge.ask(ask(), verdict)
    assert [e.status for e in server.requests] == [400]  # a 400 is not retried


def test_schema_name_and_strict_mode() -> None:
    assert schema_name("criterion:tone of voice") == "criterion_tone_of_voice"
    assert schema_name(":::") == "answer" and len(schema_name("x" * 100)) == 64
    assert strict_compatible(SCHEMA)
    assert not strict_compatible({**SCHEMA, "additionalProperties": True})
    assert not strict_compatible({**SCHEMA, "required": ["verdict"]})
    nested = {
        "type": "object",
        "properties": {
            "items": {"type": "array", "items": {"type": "object", "properties": {"a": {"type": "string"}}}}
        },
        "required": ["items"],
        "additionalProperties": False,
    }
    assert not strict_compatible(nested)
    nested["properties"]["items"]["items"] |= {"required": ["a"], "additionalProperties": False}
    assert strict_compatible(nested)


# -- answers and the corrective re-ask ----------------------------------------------------------


async def test_parse_success_returns_value_and_usage() -> None:
    with FakeOpenAIServer(script(answer("no"))) as server:
        async with judge_at(server) as judge:
            value, usage = await judge.ask(ask(), verdict)
    assert value == "no"
    [ex] = server.requests
    assert ex.usage is not None
    assert (usage.calls, usage.cache_hits) == (1, 0)
    assert (usage.input_tokens, usage.output_tokens) == (ex.usage["prompt_tokens"], ex.usage["completion_tokens"])


async def test_invalid_json_is_corrected_on_one_reask() -> None:
    with FakeOpenAIServer(script(Reply("The assistant was polite."), answer("yes"))) as server:
        async with judge_at(server) as judge:
            value, usage = await judge.ask(ask(), verdict)
    assert value == "yes" and usage.calls == 2 and judge.reasks == 1
    first, second = bodies(server)
    assert second["messages"][:3] == first["messages"]
    assert second["messages"][3] == {"role": "assistant", "content": "The assistant was polite."}
    correction = second["messages"][4]
    assert correction["role"] == "user"
    assert "not valid JSON" in correction["content"] and "only a JSON object" in correction["content"]
    assert second["response_format"] == first["response_format"]


async def test_unknown_label_from_the_parser_gets_a_reask() -> None:
    bad = Reply(json.dumps({"verdict": "maybe", "reason": "unsure"}))
    with FakeOpenAIServer(script(bad, answer("no"))) as server:
        async with judge_at(server) as judge:
            value, _ = await judge.ask(ask(), verdict)
    assert value == "no"
    correction = bodies(server)[1]["messages"][4]["content"]
    assert "'verdict' must be one of yes, no; got 'maybe'" in correction


async def test_malformed_twice_raises_with_the_reason_never_a_default() -> None:
    missing = Reply(json.dumps({"verdict": "yes"}))
    with FakeOpenAIServer(script(missing, Reply('{"verdict": "yes", '))) as server:
        async with judge_at(server) as judge:
            with pytest.raises(JudgeError, match="not valid JSON") as err:
                await judge.ask(ask(), verdict)
    assert "required field(s) missing: reason" in str(err.value)  # the first reason is kept too
    assert len(server.requests) == 2  # one re-ask, no more
    assert "required field(s) missing: reason" in bodies(server)[1]["messages"][4]["content"]
    assert judge.usage.calls == 2  # the tokens spent still count


def test_decode_answer_reasons() -> None:
    assert decode_answer(Answer('```json\n{"verdict": "yes", "reason": "r"}\n```'), SCHEMA)["verdict"] == "yes"
    cases = {
        Answer(""): "empty",
        Answer("[1]"): "must be a JSON object",
        Answer('{"verdict": "yes"', finish_reason="length"): "cut off",
        Answer("", refusal="I cannot help"): "refused: I cannot help",
    }
    for bad, reason in cases.items():
        with pytest.raises(MalformedAnswer, match=reason):
            decode_answer(bad, SCHEMA)


# -- rate limits, errors, timeouts, concurrency --------------------------------------------------


async def test_rate_limit_waits_for_retry_after_and_halves_the_cap() -> None:
    with FakeOpenAIServer(script(Reply.rate_limited(retry_after=0.2), answer())) as server:
        async with judge_at(server, max_concurrency=4) as judge:
            value, usage = await judge.ask(ask(), verdict)
            limit, decreases = judge.limiter.limit, judge.limiter.decreases
    assert value == "yes" and usage.calls == 1
    limited, ok = server.requests
    assert (limited.status, ok.status) == (429, 200)
    assert ok.received_at - limited.received_at >= 0.2 - 0.05  # Retry-After honoured, not the 10 ms backoff
    assert (limit, decreases) == (2, 1)
    assert (judge.rate_limited, judge.retries) == (1, 1)


async def test_retry_after_pauses_other_calls() -> None:
    other = "[turn 1]\nuser: hello"
    handler = ScriptedHandler({TRANSCRIPT: [Reply.rate_limited(retry_after=0.3), answer()], other: [answer("no")]})
    with FakeOpenAIServer(handler) as server:
        async with judge_at(server, max_concurrency=4) as judge:
            first = asyncio.create_task(judge.ask(ask(), verdict))
            while not server.requests:
                await asyncio.sleep(0.005)
            while judge.limiter.pause_left() == 0:  # the 429 has been seen
                await asyncio.sleep(0.005)
            assert (await judge.ask(ask(transcript=other), verdict))[0] == "no"
            assert (await first)[0] == "yes"
    limited = server.requests[0]
    later = [e for e in server.requests if e.body and e.body["messages"][1]["content"] == other]
    assert later[0].received_at - limited.received_at >= 0.3 - 0.05


async def test_server_error_then_success() -> None:
    with FakeOpenAIServer(script(Reply.failure(500, "boom"), answer())) as server:
        async with judge_at(server, max_concurrency=4) as judge:
            value, _ = await judge.ask(ask(), verdict)
    assert value == "yes"
    assert [e.status for e in server.requests] == [500, 200]
    assert judge.retries == 1 and judge.limiter.limit == 4  # only 429 lowers the cap


async def test_retry_budget_runs_out() -> None:
    with FakeOpenAIServer(script(*[Reply.failure(503, "overloaded")] * 3)) as server:
        async with judge_at(server, max_retries=2) as judge:
            with pytest.raises(JudgeError, match=r"after 3 attempt\(s\): HTTP 503"):
                await judge.ask(ask(), verdict)
    assert len(server.requests) == 3


async def test_timeout_is_retried_then_a_judge_error() -> None:
    with FakeOpenAIServer(always(delay=0.5)) as server:
        async with judge_at(server, timeout_seconds=0.1, max_retries=1) as judge:
            with pytest.raises(JudgeError, match="timed out after 0.1 s"):
                await judge.ask(ask(), verdict)
    assert len(server.requests) == 2 and judge.retries == 1


async def test_concurrency_cap_bounds_requests_in_flight() -> None:
    with FakeOpenAIServer(always(delay=0.1)) as server:
        async with judge_at(server, max_concurrency=3) as judge:
            results = await asyncio.gather(*(judge.ask(ask(transcript=f"thread {i}"), verdict) for i in range(10)))
            assert judge.limiter.in_flight == 0
    assert [v for v, _ in results] == ["yes"] * 10
    assert len(server.requests) == 10
    assert 2 <= server.max_in_flight <= 3


# -- cache ----------------------------------------------------------------------------------------


async def _second_ask_is_cached(cache: JudgeCache) -> None:
    with FakeOpenAIServer(script(Reply("not json"), answer("no"))) as server:
        async with judge_at(server, cache, input_price_per_mtok=1.0, output_price_per_mtok=4.0) as judge:
            first, paid = await judge.ask(ask(), verdict)
            again, free = await judge.ask(ask(), verdict)
        async with judge_at(server, cache) as fresh_client:  # the cache outlives a client
            third, _ = await fresh_client.ask(ask(), verdict)
    assert first == again == third == "no"
    assert len(server.requests) == 2  # the answer and its re-ask; nothing after
    assert paid.calls == 2 and paid.cost_usd > 0
    assert free == JudgeUsage(cache_hits=1)  # no call, no tokens, no cost
    assert (judge.usage.calls, judge.usage.cache_hits) == (2, 1)


async def test_cache_hit_in_the_sql_store(store: SqlStore) -> None:
    await _second_ask_is_cached(store)
    assert await store.cache_get("no such key") is None


async def test_cache_hit_in_memory() -> None:
    cache = MemoryCache()
    await _second_ask_is_cached(cache)
    assert len(cache) == 1


async def test_cache_off_in_settings_asks_again() -> None:
    with FakeOpenAIServer(always()) as server:
        async with judge_at(server, MemoryCache(), cache=False) as judge:
            await judge.ask(ask(), verdict)
            await judge.ask(ask(), verdict)
    assert len(server.requests) == 2


def test_cache_key_covers_what_decides_the_answer() -> None:
    messages = [{"role": "user", "content": "x"}]
    fmt = {"type": "json_object"}
    base = cache_key(MODEL, "https://api.example.com/v1", messages, fmt, 0.0, 42)
    assert base == cache_key(MODEL, "https://API.example.com/v2", messages, fmt, 0.0, 42)  # host, not path
    for other in (
        cache_key("gpt-4o", "https://api.example.com/v1", messages, fmt, 0.0, 42),
        cache_key(MODEL, "https://other.example.com/v1", messages, fmt, 0.0, 42),
        cache_key(MODEL, "https://api.example.com/v1", [{"role": "user", "content": "y"}], fmt, 0.0, 42),
        cache_key(MODEL, "https://api.example.com/v1", messages, {"type": "text"}, 0.0, 42),
        cache_key(MODEL, "https://api.example.com/v1", messages, fmt, 0.5, 42),
        cache_key(MODEL, "https://api.example.com/v1", messages, fmt, 0.0, 7),
    ):
        assert other != base


# -- usage, cost, budgets -------------------------------------------------------------------------


async def test_token_accounting_matches_the_server() -> None:
    handler = ScriptedHandler(
        {
            "thread a": [answer(), answer()],
            "thread b": [Reply("oops"), answer("no")],
        }
    )
    with FakeOpenAIServer(handler, prefix_cache=True) as server:
        async with judge_at(server) as judge:
            usages = [
                (await judge.ask(ask("m1", "thread a"), verdict))[1],
                (await judge.ask(ask("m2", "thread a", "Other question?"), verdict))[1],
                (await judge.ask(ask("m1", "thread b"), verdict))[1],
            ]
    total = JudgeUsage()
    for u in usages:
        total.add(u)
    reported = server.token_totals()
    assert total.calls == 4
    assert (total.input_tokens, total.output_tokens, total.cached_input_tokens) == (
        reported["prompt_tokens"],
        reported["completion_tokens"],
        reported["cached_tokens"],
    )
    assert total.cached_input_tokens > 0
    assert judge.usage == total
    assert judge.usage_by_metric["m1"].calls == 3 and judge.usage_by_metric["m2"].calls == 1


async def test_cost_from_prices() -> None:
    prices = {"input_price_per_mtok": 2.5, "cached_input_price_per_mtok": 1.25, "output_price_per_mtok": 10.0}
    with FakeOpenAIServer(always(), prefix_cache=True) as server:
        async with judge_at(server, **prices) as judge:
            await judge.ask(ask("m1"), verdict)
            _, usage = await judge.ask(ask("m2", instructions="Second question?"), verdict)
    ex = server.requests[1].usage or {}
    cached = ex["prompt_tokens_details"]["cached_tokens"]
    expected = ((ex["prompt_tokens"] - cached) * 2.5 + cached * 1.25 + ex["completion_tokens"] * 10.0) / 1e6
    assert cached > 0 and usage.cost_usd == pytest.approx(expected)


def test_cached_input_falls_back_to_the_input_price() -> None:
    settings = JudgeSettings(input_price_per_mtok=2.0, output_price_per_mtok=8.0)
    assert cost_usd(settings, 1_000_000, 400_000, 500_000) == pytest.approx(2.0 + 4.0)


async def test_thread_token_budget() -> None:
    with FakeOpenAIServer(always()) as server:
        async with judge_at(server, max_tokens_per_thread=10) as judge:
            thread = judge.for_thread("thread-1")
            assert isinstance(thread, Judge) and isinstance(judge, Judge)
            await thread.ask(ask("m1"), verdict)  # starts under the budget, ends over it
            with pytest.raises(JudgeError, match="token budget of 10 tokens per thread"):
                await thread.ask(ask("m2"), verdict)
            assert (await judge.for_thread("thread-2").ask(ask("m2"), verdict))[0] == "yes"
    assert len(server.requests) == 2
    assert thread.usage.calls == 1 and thread.budget.used == thread.usage.input_tokens + thread.usage.output_tokens
    assert set(thread.usage_by_metric) == {"m1"}


async def test_hourly_token_budget_slides() -> None:
    now = [1000.0]
    with FakeOpenAIServer(always()) as server:
        async with judge_at(server, clock=lambda: now[0], max_tokens_per_hour=10) as judge:
            await judge.ask(ask("m1"), verdict)
            now[0] += 1800
            with pytest.raises(JudgeError, match="token budget of 10 tokens per hour"):
                await judge.ask(ask("m2"), verdict)
            now[0] += 1801
            await judge.ask(ask("m2"), verdict)
    assert len(server.requests) == 2


def test_hourly_budget_counts_only_the_last_hour() -> None:
    now = [0.0]
    budget = HourlyBudget(100, clock=lambda: now[0])
    budget.spend(60)
    now[0] = 1000
    budget.spend(30)
    assert budget.used() == 90
    now[0] = 3600
    assert budget.used() == 30


# -- configuration and the doctor check ----------------------------------------------------------


async def test_from_settings_and_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    assert JudgeClient.from_settings(JudgeSettings(model=MODEL)) is None
    with FakeOpenAIServer(always()) as server:
        monkeypatch.setenv("OPENAI_API_KEY", "key-from-env")
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        judge = JudgeClient.from_settings(JudgeSettings(model=MODEL))
        assert judge is not None
        async with judge:
            assert judge.endpoint == server.base_url
            await judge.ask(ask(), verdict)
    assert server.requests[0].headers["authorization"] == "Bearer key-from-env"


async def test_check_describes_a_working_endpoint() -> None:
    with FakeOpenAIServer(lambda _r: Reply('{"ok": true}')) as server:
        async with judge_at(server) as judge:
            line = await judge.check()
    assert MODEL in line and server.base_url in line and "json_schema" in line
    assert bodies(server)[0]["response_format"]["type"] == "json_schema"


@pytest.mark.parametrize(
    ("reply", "formats", "message"),
    [
        (Reply.failure(401, "Incorrect API key provided"), None, "authentication failed"),
        (Reply.failure(404, "The model does not exist"), None, "check judge.model"),
        (Reply('{"ok": true}'), ("text", "json_object"), 'structured_output = "json_object"'),
        (Reply("Sure, I am here!"), None, "not with the requested JSON"),
    ],
)
async def test_check_says_what_is_wrong(reply: Reply, formats: tuple[str, ...] | None, message: str) -> None:
    kw = {"response_formats": formats} if formats else {}
    with FakeOpenAIServer(lambda _r: reply, **kw) as server:
        async with judge_at(server) as judge:
            with pytest.raises(JudgeError, match=message):
                await judge.check()


async def test_check_unreachable_endpoint() -> None:
    with FakeOpenAIServer(always()) as server:
        pass  # started and stopped: nothing listens on its port any more
    async with judge_at(server) as judge:
        with pytest.raises(JudgeError, match="cannot reach"):
            await judge.check()


# -- the limiter and retry timing (pure) ---------------------------------------------------------


async def test_limiter_caps_holders_fifo() -> None:
    limiter = AdaptiveLimiter(2)
    order: list[int] = []
    peak = 0

    async def work(i: int) -> None:
        nonlocal peak
        async with limiter.slot():
            order.append(i)
            peak = max(peak, limiter.in_flight)
            await asyncio.sleep(0.01)

    await asyncio.gather(*(work(i) for i in range(6)))
    assert peak == 2 and order == list(range(6)) and limiter.in_flight == 0


async def test_limiter_halves_once_per_burst_and_regrows_slowly() -> None:
    limiter = AdaptiveLimiter(8)
    burst = [await limiter.acquire() for _ in range(3)]
    for permit in burst:
        limiter.rate_limited(permit)
        limiter.release()
    assert (limiter.limit, limiter.decreases) == (4, 1)  # three 429s of one burst halve once
    limiter.succeeded(burst[0])  # started before the decrease: does not count
    for _ in range(3):
        async with limiter.slot() as permit:
            limiter.succeeded(permit)
    assert limiter.limit == 4
    async with limiter.slot() as permit:
        limiter.succeeded(permit)  # the fourth success in a row at limit 4
    assert limiter.limit == 5
    for _ in range(10):
        async with limiter.slot() as permit:
            limiter.rate_limited(permit)
    assert limiter.limit == 1  # the floor


async def test_limiter_never_grows_past_its_maximum() -> None:
    limiter = AdaptiveLimiter(2)
    for _ in range(10):
        async with limiter.slot() as permit:
            limiter.succeeded(permit)
    assert limiter.limit == 2 and limiter.increases == 0


async def test_limiter_shrinking_holds_back_waiters() -> None:
    limiter = AdaptiveLimiter(4)
    held = [await limiter.acquire() for _ in range(4)]
    limiter.rate_limited(held[0])
    waiter = asyncio.create_task(limiter.acquire())
    limiter.release()
    limiter.release()
    await asyncio.sleep(0)
    assert not waiter.done() and limiter.in_flight == 2  # at the new limit of 2: still waiting
    limiter.release()
    await asyncio.sleep(0)
    assert waiter.done() and limiter.in_flight == 2


async def test_limiter_pause_holds_new_calls_until_retry_after() -> None:
    limiter = AdaptiveLimiter(4)
    async with limiter.slot() as permit:
        limiter.rate_limited(permit, retry_after=0.1)
    assert limiter.pause_left() > 0
    waiter = asyncio.create_task(limiter.acquire())
    for _ in range(5):
        await asyncio.sleep(0)
    assert not waiter.done()
    await waiter
    assert limiter.pause_left() == 0
    limiter.release()


async def test_limiter_cancelled_waiter_frees_its_place() -> None:
    limiter = AdaptiveLimiter(1)
    first = await limiter.acquire()
    gone = asyncio.create_task(limiter.acquire())
    kept = asyncio.create_task(limiter.acquire())
    await asyncio.sleep(0)
    gone.cancel()
    await asyncio.sleep(0)
    limiter.release()
    await asyncio.wait_for(kept, 1)
    assert gone.cancelled() and limiter.in_flight == 1
    limiter.succeeded(first)
    limiter.release()
    assert limiter.in_flight == 0


def test_backoff_is_exponential_capped_and_jittered() -> None:
    rng = random.Random(1)
    for retry, ceiling in [(1, 1.0), (2, 2.0), (3, 4.0), (6, 10.0), (20, 10.0)]:
        delays = {backoff_delay(retry, base=1.0, cap=10.0, rng=rng) for _ in range(20)}
        assert all(ceiling / 2 <= d <= ceiling for d in delays) and len(delays) > 1


def test_retry_after_header_forms() -> None:
    assert retry_after_seconds({"retry-after": "7"}) == 7.0
    assert retry_after_seconds({"retry-after-ms": "250", "retry-after": "7"}) == 0.25
    assert retry_after_seconds({"retry-after": "Wed, 21 Oct 2015 07:28:30 GMT"}, now=1445412500.0) == 10.0
    assert retry_after_seconds({"retry-after": "soon"}) is None
    assert retry_after_seconds({"retry-after": "-3"}) is None
    assert retry_after_seconds({}) is None
