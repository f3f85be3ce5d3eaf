"""The fake OpenAI server, exercised with the real `openai` client over loopback."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from contextlib import contextmanager

import httpx
import openai
import pytest
from pydantic import BaseModel

from tests.support.fakes.openai_server import (
    FakeOpenAIServer,
    Handler,
    Reply,
    ScriptedHandler,
    SeededHandler,
    ToolCall,
    count_tokens,
    prompt_tokens,
)

MODEL = "gpt-4o-mini"


@contextmanager
def serve(handler: Handler) -> Iterator[tuple[FakeOpenAIServer, openai.OpenAI]]:
    with (
        FakeOpenAIServer(handler) as server,
        openai.OpenAI(base_url=server.base_url, api_key="test", max_retries=0) as client,
    ):
        yield server, client


def user(text: str) -> list[dict[str, str]]:
    return [{"role": "system", "content": "Be brief."}, {"role": "user", "content": text}]


def test_count_tokens_is_words_and_punctuation() -> None:
    assert count_tokens("Hello, world!") == 4
    assert count_tokens("") == count_tokens(None) == 0
    assert prompt_tokens({"messages": user("Hi there")}) == (1 + 3) + (1 + 2)  # role + "Be brief." ; role + "Hi there"


def test_text_reply_with_usage_and_recorded_request() -> None:
    with serve(ScriptedHandler({"Hi there": [Reply("Hello, how can I help?")]})) as (server, client):
        resp = client.chat.completions.create(model=MODEL, messages=user("Hi there"), temperature=0)
    assert resp.choices[0].message.content == "Hello, how can I help?"
    assert resp.choices[0].finish_reason == "stop"
    assert resp.model == MODEL
    assert resp.usage is not None
    assert (resp.usage.prompt_tokens, resp.usage.completion_tokens) == (7, 7)
    [ex] = server.requests
    assert (ex.method, ex.path, ex.status) == ("POST", "/v1/chat/completions", 200)
    assert ex.body is not None and ex.body["temperature"] == 0 and ex.body["messages"][1]["content"] == "Hi there"
    assert ex.usage == resp.usage.model_dump(include={"prompt_tokens", "completion_tokens", "total_tokens"})
    assert server.token_totals()["total_tokens"] == 14


def test_tool_calls_have_stable_ids_and_json_arguments() -> None:
    script = [
        Reply(
            tool_calls=[ToolCall("lookup_order", {"order_id": "A48213"}), ToolCall("track_shipment", "{}", id="call_x")]
        )
    ]
    replies = []
    for _ in range(2):
        with serve(ScriptedHandler({"Where is A48213?": list(script)})) as (_, client):
            replies.append(client.chat.completions.create(model=MODEL, messages=user("Where is A48213?")))
    first, again = (r.choices[0] for r in replies)
    assert first.finish_reason == "tool_calls" and first.message.content is None
    calls = first.message.tool_calls or []
    assert [c.function.name for c in calls] == ["lookup_order", "track_shipment"]
    assert json.loads(calls[0].function.arguments) == {"order_id": "A48213"}
    assert calls[0].id.startswith("call_") and calls[1].id == "call_x"
    assert [c.id for c in calls] == [c.id for c in again.message.tool_calls or []]


def test_streaming_text_tool_calls_usage_and_done() -> None:
    script = [
        Reply("Your parcel is out for delivery."),
        Reply(tool_calls=[ToolCall("track_shipment", {"tracking_number": "1Z7Y93E50318834112"})]),
    ]
    with serve(ScriptedHandler({"track": script})) as (server, client):
        chunks = list(
            client.chat.completions.create(
                model=MODEL, messages=user("track"), stream=True, stream_options={"include_usage": True}
            )
        )
        text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
        assert text == "Your parcel is out for delivery."
        assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "stop"
        assert chunks[-1].choices == [] and chunks[-1].usage is not None
        assert chunks[-1].usage.completion_tokens == count_tokens(text)

        args, names, ids = "", "", set()
        stream = client.chat.completions.create(model=MODEL, messages=user("track"), stream=True)
        for c in stream:
            assert c.usage is None
            for d in c.choices[0].delta.tool_calls or []:
                names += (d.function and d.function.name) or ""
                args += (d.function and d.function.arguments) or ""
                ids |= {d.id} - {None}
            finish = c.choices[0].finish_reason
        assert names == "track_shipment" and json.loads(args) == {"tracking_number": "1Z7Y93E50318834112"}
        assert len(ids) == 1 and finish == "tool_calls"
        raw = httpx.post(
            f"{server.base_url}/chat/completions", json={"model": MODEL, "messages": user("x"), "stream": True}
        )
    assert raw.status_code == 500  # no script for "x"; streaming errors are plain JSON errors
    assert "no scripted reply" in raw.json()["error"]["message"]


def test_sse_stream_ends_with_done() -> None:
    with FakeOpenAIServer(lambda req: Reply("a b c")) as server:
        resp = httpx.post(
            f"{server.base_url}/chat/completions", json={"model": MODEL, "messages": user("x"), "stream": True}
        )
    assert resp.headers["content-type"].startswith("text/event-stream")
    events = [line.removeprefix("data: ") for line in resp.text.splitlines() if line.startswith("data: ")]
    assert events[-1] == "[DONE]"
    assert all(json.loads(e)["object"] == "chat.completion.chunk" for e in events[:-1])


def test_rate_limit_surfaces_as_rate_limit_error_with_retry_after() -> None:
    with serve(ScriptedHandler({"Hi": [Reply.rate_limited(retry_after=7)]})) as (server, client):
        with pytest.raises(openai.RateLimitError) as err:
            client.chat.completions.create(model=MODEL, messages=user("Hi"))
    assert err.value.status_code == 429
    assert err.value.response.headers["retry-after"] == "7"
    assert isinstance(err.value.body, dict) and err.value.body["code"] == "rate_limit_exceeded"
    assert [e.status for e in server.requests] == [429]


def test_client_retries_after_429_and_succeeds() -> None:
    script = {"Hi": [Reply.rate_limited(retry_after=0.05), Reply("ok")]}
    with (
        FakeOpenAIServer(ScriptedHandler(script)) as server,
        openai.OpenAI(base_url=server.base_url, api_key="test", max_retries=1) as client,
    ):
        assert client.chat.completions.create(model=MODEL, messages=user("Hi")).choices[0].message.content == "ok"
    assert [e.status for e in server.requests] == [429, 200]


def test_delay_beyond_client_timeout_raises_timeout() -> None:
    with (
        FakeOpenAIServer(lambda req: Reply("late", delay=1.0)) as server,
        openai.OpenAI(base_url=server.base_url, api_key="test", max_retries=0, timeout=0.2) as client,
    ):
        with pytest.raises(openai.APITimeoutError):
            client.chat.completions.create(model=MODEL, messages=user("Hi"))
        deadline = time.monotonic() + 2
        while server.requests[0].status != 499 and time.monotonic() < deadline:
            time.sleep(0.02)
    assert server.requests[0].status == 499  # the server noticed the hang-up and stopped waiting


def test_other_errors_and_models_list() -> None:
    handler = ScriptedHandler({"Hi": [Reply.failure(503, "overloaded", headers={"x-request-id": "r1"})]})
    with serve(handler) as (server, client):
        with pytest.raises(openai.InternalServerError) as err:
            client.chat.completions.create(model=MODEL, messages=user("Hi"))
        assert err.value.status_code == 503 and err.value.response.headers["x-request-id"] == "r1"
        with pytest.raises(openai.InternalServerError, match="exhausted script"):
            client.chat.completions.create(model=MODEL, messages=user("Hi"))
        assert [m.id for m in client.models.list()] == [MODEL]
    assert handler.remaining() == {"Hi": 0}
    assert [e.path for e in server.requests][-1] == "/v1/models"


class Verdict(BaseModel):
    verdict: str
    score: float


def test_json_schema_response_format_reaches_the_handler() -> None:
    seen = []

    def judge(request: dict) -> Reply:
        seen.append(request["response_format"])
        return Reply(json.dumps({"verdict": "pass", "score": 0.9}))

    with serve(judge) as (_, client):
        parsed = client.chat.completions.parse(model=MODEL, messages=user("Judge this."), response_format=Verdict)
    assert parsed.choices[0].message.parsed == Verdict(verdict="pass", score=0.9)
    assert seen[0]["type"] == "json_schema" and seen[0]["json_schema"]["name"] == "Verdict"


def test_seeded_handler_is_reproducible_per_request() -> None:
    req = {"model": MODEL, "messages": user("Summarise the thread.")}
    a, b, other = SeededHandler(3), SeededHandler(3), SeededHandler(4)
    assert a(req) == b(req) and a(req).content != other(req).content
    assert a(req).content != a({**req, "messages": user("Something else")}).content
    assert SeededHandler(1, error_rate=1.0, retry_after=2)(req).status == 429
    delays = {SeededHandler(s, delay=(0.1, 0.2))(req).delay for s in range(5)}
    assert all(0.1 <= d <= 0.2 for d in delays) and len(delays) > 1


def test_seeded_errors_let_retries_through_reproducibly() -> None:
    req = {"model": MODEL, "messages": user("Judge this.")}
    runs = [[h(req) for _ in range(30)] for h in (SeededHandler(7, error_rate=0.5), SeededHandler(7, error_rate=0.5))]
    assert runs[0] == runs[1]
    assert {r.status for r in runs[0]} == {200, 429}
    assert len({r.content for r in runs[0] if r.status == 200}) == 1


async def test_async_client_concurrent_conversations_and_stream() -> None:
    scripts = {f"conversation {i}": [Reply(f"answer {i}.1"), Reply(f"answer {i}.2")] for i in range(8)}
    with FakeOpenAIServer(ScriptedHandler(scripts)) as server:
        async with openai.AsyncOpenAI(base_url=server.base_url, api_key="test", max_retries=0) as client:

            async def converse(i: int) -> list[str]:
                history = user(f"conversation {i}")
                first = await client.chat.completions.create(model=MODEL, messages=history)
                history += [
                    {"role": "assistant", "content": first.choices[0].message.content or ""},
                    {"role": "user", "content": "and then?"},
                ]
                stream = await client.chat.completions.create(model=MODEL, messages=history, stream=True)
                second = "".join([c.choices[0].delta.content or "" async for c in stream])
                return [first.choices[0].message.content or "", second]

            results = await asyncio.gather(*(converse(i) for i in range(8)))
    assert results == [[f"answer {i}.1", f"answer {i}.2"] for i in range(8)]
    assert len(server.requests) == 16 and all(e.status == 200 for e in server.requests)
