"""An OpenAI-compatible HTTP server on loopback, with scripted answers, for tests and examples.

The real `openai` client talks to it over HTTP: `POST /v1/chat/completions` (plain JSON or
`stream=true` server-sent events ending in `[DONE]`) and `GET /v1/models`. What it answers is
decided by a handler, `(request_json) -> Reply`; a `Reply` carries text and/or tool calls, or an
HTTP error with headers (429 + `Retry-After`), and an optional delay. Token usage is counted
deterministically from the text (`count_tokens`). Every request is recorded, and so is the most
requests ever in flight at once. `response_format` is checked the way OpenAI checks it (a 400
otherwise), optionally against the formats an endpoint supports; `prefix_cache=True` reports
`prompt_tokens_details.cached_tokens` for message prefixes seen before.

    with FakeOpenAIServer(ScriptedHandler({"hi": [Reply("hello")]})) as server:
        client = openai.OpenAI(base_url=server.base_url, api_key="test")

Handlers run on the server's event loop: keep them quick and use `Reply.delay` for latency.
"""

from __future__ import annotations

import asyncio
import hashlib
import inspect
import json
import random
import re
import threading
import time
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any

from starlette.applications import Starlette
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from tests.support.fakes.loopback import LoopbackServer

Json = dict[str, Any]
Handler = Callable[[Json], "Reply | Awaitable[Reply]"]

_TOKEN = re.compile(r"\w+|[^\w\s]")
_PIECE = re.compile(r"\s*\S+")
_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    404: "not_found_error",
    429: "rate_limit_exceeded",
    500: "server_error",
    503: "service_unavailable",
}


def count_tokens(text: str | None) -> int:
    """Deterministic stand-in for a tokenizer: one token per word and per punctuation mark."""
    return len(_TOKEN.findall(text or ""))


def message_text(message: Mapping[str, Any]) -> str:
    """The text of an OpenAI chat message: its content (string or text parts) and tool calls."""
    content = message.get("content")
    if isinstance(content, list):
        content = " ".join(p.get("text", "") for p in content if isinstance(p, dict))
    calls = " ".join(
        f"{(tc.get('function') or {}).get('name', '')} {(tc.get('function') or {}).get('arguments', '')}"
        for tc in message.get("tool_calls") or []
    )
    return " ".join(x for x in (str(content or ""), calls) if x)


def prompt_tokens(request: Mapping[str, Any]) -> int:
    """Tokens of every message's role and text (tool definitions are not counted)."""
    return sum(1 + count_tokens(message_text(m)) for m in request.get("messages") or [])


_SCHEMA_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


def response_format_error(request: Mapping[str, Any], supported: Iterable[str]) -> str | None:
    """Why OpenAI would reject the request's `response_format` (None when it is fine)."""
    fmt = request.get("response_format")
    if fmt is None:
        return None
    kind = fmt.get("type") if isinstance(fmt, dict) else None
    if kind not in ("text", "json_object", "json_schema"):
        return f"Invalid value for 'response_format.type': {kind!r}."
    if kind not in supported:
        return f"'response_format' of type '{kind}' is not supported with this model."
    if kind == "json_object":
        said = " ".join(message_text(m) for m in request.get("messages") or [])
        if "json" not in said.lower():
            return (
                "'messages' must contain the word 'json' in some form, to use 'response_format' of type 'json_object'."
            )
    if kind == "json_schema":
        spec = fmt.get("json_schema")
        if not isinstance(spec, dict) or not _SCHEMA_NAME.match(str(spec.get("name", ""))):
            return "'response_format.json_schema.name' must match ^[a-zA-Z0-9_-]{1,64}$."
        if not isinstance(spec.get("schema"), dict):
            return "'response_format.json_schema.schema' must be a JSON schema object."
    return None


def _prefix_digests(messages: Sequence[Any]) -> list[str]:
    """Digests of messages[:1], messages[:2], ...: what a provider's prefix cache is keyed on."""
    out, h = [], hashlib.sha256()
    for m in messages:
        h.update(json.dumps(m, sort_keys=True).encode())
        out.append(h.copy().hexdigest())
    return out


def first_user_message(request: Mapping[str, Any]) -> str:
    """Script key: the text of the first user message, which stays fixed for a whole conversation."""
    for m in request.get("messages") or []:
        if m.get("role") == "user":
            return message_text(m)
    return ""


@dataclass(frozen=True)
class ToolCall:
    """A function call the fake model asks for; the id is derived from the request when omitted."""

    name: str
    arguments: Mapping[str, Any] | str = field(default_factory=dict)
    id: str | None = None

    @property
    def arguments_json(self) -> str:
        return self.arguments if isinstance(self.arguments, str) else json.dumps(self.arguments)


@dataclass(frozen=True)
class Reply:
    """One scripted answer: text and/or tool calls, or an HTTP error (`status` >= 400)."""

    content: str | None = None
    tool_calls: Sequence[ToolCall] = ()
    finish_reason: str | None = None
    status: int = 200
    error: Json | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    delay: float = 0.0
    model: str | None = None

    @classmethod
    def failure(cls, status: int, message: str, *, code: str | None = None, **kw: Any) -> Reply:
        """An OpenAI-style error body `{"error": {message, type, param, code}}`."""
        kind = _ERROR_TYPES.get(status, "api_error")
        body = {"error": {"message": message, "type": kind, "param": None, "code": code or kind}}
        return cls(status=status, error=body, **kw)

    @classmethod
    def rate_limited(
        cls, retry_after: float = 1, message: str = "Rate limit reached. Please retry.", **kw: Any
    ) -> Reply:
        """A 429 with `Retry-After` (seconds) that the `openai` client raises as `RateLimitError`."""
        headers = {"retry-after": f"{retry_after:g}", **dict(kw.pop("headers", {}))}
        return cls.failure(429, message, headers=headers, **kw)

    def resolved_finish_reason(self) -> str:
        return self.finish_reason or ("tool_calls" if self.tool_calls else "stop")


@dataclass
class Exchange:
    """A request the server received and what it answered (usage only for successful completions)."""

    method: str
    path: str
    headers: dict[str, str]
    body: Json | None
    status: int = 0
    reply: Reply | None = None
    usage: Json | None = None
    received_at: float = 0.0
    error: str | None = None


class ScriptError(LookupError):
    """A scripted handler has no answer left for a request."""


class ScriptedHandler:
    """Pops the next reply from a per-conversation script chosen by `key(request)`."""

    def __init__(
        self,
        scripts: Mapping[str, Iterable[Reply]],
        key: Callable[[Json], str] = first_user_message,
    ) -> None:
        self._scripts = {k: deque(v) for k, v in scripts.items()}
        self._key = key
        self._lock = threading.Lock()

    def __call__(self, request: Json) -> Reply:
        key = self._key(request)
        with self._lock:
            script = self._scripts.get(key)
            if not script:
                state = "exhausted" if script is not None else "unknown"
                raise ScriptError(f"no scripted reply left for {key[:80]!r} ({state} script)")
            return script.popleft()

    def remaining(self) -> dict[str, int]:
        """Replies not yet used, per script key (all zero once every script ran to its end)."""
        with self._lock:
            return {k: len(v) for k, v in self._scripts.items()}


_WORDS = (
    "the order shipment refund account tracking number delivery customer support agent request "
    "status update answer question policy carrier package address payment invoice thanks"
).split()


class SeededHandler:
    """Pseudo-random text replies, reproducible from `seed` and the request content, in any order.

    `delay` is seconds or a `(low, high)` range; `error_rate` is the share of 429 replies. The
    text depends only on the request; delay and errors also on how often it was seen, so a
    retried request can succeed (the n-th attempt is still reproducible).
    """

    def __init__(
        self,
        seed: int = 0,
        *,
        words: tuple[int, int] = (5, 30),
        delay: float | tuple[float, float] = 0.0,
        error_rate: float = 0.0,
        retry_after: float = 1,
    ) -> None:
        self.seed, self.words, self.delay = seed, words, delay
        self.error_rate, self.retry_after = error_rate, retry_after
        self._attempts: dict[str, int] = {}
        self._lock = threading.Lock()

    def __call__(self, request: Json) -> Reply:
        digest = hashlib.sha256(json.dumps(request, sort_keys=True).encode()).hexdigest()
        with self._lock:
            attempt = self._attempts.get(digest, 0)
            self._attempts[digest] = attempt + 1
        chance = random.Random(f"{self.seed}:{digest}:{attempt}")
        delay = chance.uniform(*self.delay) if isinstance(self.delay, tuple) else self.delay
        if chance.random() < self.error_rate:
            return Reply.rate_limited(self.retry_after, delay=delay)
        words = random.Random(f"{self.seed}:{digest}")
        text = " ".join(words.choice(_WORDS) for _ in range(words.randint(*self.words)))
        return Reply(text.capitalize() + ".", delay=delay)


def _stable_id(prefix: str, request: Json, salt: str) -> str:
    digest = hashlib.sha256(json.dumps([request.get("messages"), salt], sort_keys=True).encode()).hexdigest()
    return f"{prefix}{digest[:24]}"


def _usage(request: Json, reply: Reply) -> Json:
    completion = count_tokens(reply.content) + sum(
        count_tokens(f"{tc.name} {tc.arguments_json}") for tc in reply.tool_calls
    )
    prompt = prompt_tokens(request)
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}


def _tool_call_json(request: Json, reply: Reply) -> list[Json]:
    return [
        {
            "id": tc.id or _stable_id("call_", request, f"{i}:{tc.name}:{tc.arguments_json}"),
            "type": "function",
            "function": {"name": tc.name, "arguments": tc.arguments_json},
        }
        for i, tc in enumerate(reply.tool_calls)
    ]


def completion_body(request: Json, reply: Reply, usage: Json) -> Json:
    """A `chat.completion` object for a non-streaming request."""
    message: Json = {"role": "assistant", "content": reply.content, "refusal": None}
    if reply.tool_calls:
        message["tool_calls"] = _tool_call_json(request, reply)
    return {
        "id": _stable_id("chatcmpl-", request, "completion"),
        "object": "chat.completion",
        "created": int(time.time()),
        "model": reply.model or request.get("model", "fake-model"),
        "system_fingerprint": "fp_fake",
        "choices": [
            {"index": 0, "message": message, "logprobs": None, "finish_reason": reply.resolved_finish_reason()}
        ],
        "usage": usage,
    }


def completion_chunks(request: Json, reply: Reply, usage: Json) -> list[Json]:
    """The `chat.completion.chunk` objects of a streamed answer, usage last if asked for."""
    include_usage = bool((request.get("stream_options") or {}).get("include_usage"))
    base = {
        "id": _stable_id("chatcmpl-", request, "completion"),
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": reply.model or request.get("model", "fake-model"),
        "system_fingerprint": "fp_fake",
    }

    def chunk(delta: Json, finish: str | None = None) -> Json:
        out = {**base, "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}]}
        if include_usage:
            out["usage"] = None
        return out

    chunks = [chunk({"role": "assistant", "content": "" if reply.content is not None else None, "refusal": None})]
    chunks += [chunk({"content": piece}) for piece in _PIECE.findall(reply.content or "")]
    for i, tc in enumerate(_tool_call_json(request, reply)):
        head = {
            "index": i,
            "id": tc["id"],
            "type": "function",
            "function": {"name": tc["function"]["name"], "arguments": ""},
        }
        chunks.append(chunk({"tool_calls": [head]}))
        args = tc["function"]["arguments"]
        for start in range(0, len(args), 16):
            chunks.append(chunk({"tool_calls": [{"index": i, "function": {"arguments": args[start : start + 16]}}]}))
    chunks.append(chunk({}, reply.resolved_finish_reason()))
    if include_usage:
        chunks.append({**base, "choices": [], "usage": usage})
    return chunks


async def _wait_unless_disconnected(request: Request, seconds: float) -> bool:
    """Sleep `seconds`; False as soon as the client hangs up (e.g. its timeout fired)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + seconds
    while (left := deadline - loop.time()) > 0:
        await asyncio.sleep(min(left, 0.05))
        if await request.is_disconnected():
            return False
    return True


async def _sse(chunks: list[Json]) -> AsyncIterator[bytes]:
    for c in chunks:
        yield b"data: " + json.dumps(c).encode() + b"\n\n"
        await asyncio.sleep(0)
    yield b"data: [DONE]\n\n"


class FakeOpenAIServer:
    """Serves the OpenAI chat API from `handler` on 127.0.0.1 in a background thread."""

    def __init__(
        self,
        handler: Handler,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        models: Sequence[str] = ("gpt-4o-mini",),
        response_formats: Iterable[str] = ("text", "json_object", "json_schema"),
        prefix_cache: bool = False,
    ) -> None:
        self.handler = handler
        self.host, self.port, self.models = host, port, tuple(models)
        self.response_formats = frozenset(response_formats)
        self.prefix_cache = prefix_cache
        self.in_flight = 0
        self.max_in_flight = 0
        self._prefixes: set[str] = set()
        self._exchanges: list[Exchange] = []
        self._lock = threading.Lock()
        self._http: LoopbackServer | None = None
        self.app = Starlette(
            routes=[
                Route("/v1/chat/completions", self._chat, methods=["POST"]),
                Route("/v1/models", self._list_models, methods=["GET"]),
            ]
        )

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}/v1"

    @property
    def requests(self) -> list[Exchange]:
        """Every request received so far, in arrival order (a copy)."""
        with self._lock:
            return list(self._exchanges)

    def token_totals(self) -> dict[str, int]:
        """Prompt, completion, total and cached prompt tokens over every successful completion."""
        totals = {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0, "cached_tokens": 0}
        for e in self.requests:
            usage = e.usage or {}
            for k in ("prompt_tokens", "completion_tokens", "total_tokens"):
                totals[k] += usage.get(k, 0)
            totals["cached_tokens"] += (usage.get("prompt_tokens_details") or {}).get("cached_tokens", 0)
        return totals

    def _cached_tokens(self, body: Json) -> int:
        """Prompt tokens of the longest message prefix served before (then remember this one's)."""
        messages = body.get("messages") or []
        digests = [f"{body.get('model')}:{d}" for d in _prefix_digests(messages)]
        with self._lock:
            hit = max((i + 1 for i, d in enumerate(digests) if d in self._prefixes), default=0)
            self._prefixes.update(digests)
        return sum(1 + count_tokens(message_text(m)) for m in messages[:hit])

    def clear(self) -> None:
        with self._lock:
            self._exchanges.clear()
            self.max_in_flight = self.in_flight

    def _record(self, request: Request, body: Json | None) -> Exchange:
        ex = Exchange(request.method, request.url.path, dict(request.headers), body, received_at=time.time())
        with self._lock:
            self._exchanges.append(ex)
        return ex

    async def _list_models(self, request: Request) -> Response:
        ex = self._record(request, None)
        ex.status = 200
        data = [{"id": m, "object": "model", "created": 0, "owned_by": "fake"} for m in self.models]
        return JSONResponse({"object": "list", "data": data})

    async def _chat(self, request: Request) -> Response:
        with self._lock:
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            return await self._answer_chat(request)
        finally:
            with self._lock:
                self.in_flight -= 1

    async def _answer_chat(self, request: Request) -> Response:
        try:
            body = await request.json()
        except ValueError:
            body = None
        except ClientDisconnect:  # the client died mid-request (e.g. a replica killed on purpose)
            return Response(status_code=499)
        ex = self._record(request, body if isinstance(body, dict) else None)
        if not isinstance(body, dict) or not isinstance(body.get("messages"), list):
            ex.status = 400
            return JSONResponse(Reply.failure(400, "body must be a JSON object with 'messages'").error, status_code=400)
        if (problem := response_format_error(body, self.response_formats)) is not None:
            ex.status, ex.error = 400, problem
            return JSONResponse(Reply.failure(400, problem, code="invalid_response_format").error, status_code=400)
        try:
            reply = self.handler(body)
            if inspect.isawaitable(reply):
                reply = await reply
        except Exception as exc:  # a broken script is a 500 the test can see, not a hung client
            ex.status, ex.error = 500, f"{type(exc).__name__}: {exc}"
            return JSONResponse(Reply.failure(500, ex.error).error, status_code=500)
        ex.reply = reply
        if reply.delay > 0 and not await _wait_unless_disconnected(request, reply.delay):
            ex.status, ex.error = 499, "client closed the connection during the delay"
            return Response(status_code=499)
        ex.status = reply.status
        if reply.status >= 400:
            error = reply.error or Reply.failure(reply.status, f"fake error {reply.status}").error
            return JSONResponse(error, status_code=reply.status, headers=dict(reply.headers))
        ex.usage = _usage(body, reply)
        if self.prefix_cache:
            ex.usage["prompt_tokens_details"] = {"cached_tokens": self._cached_tokens(body)}
        if body.get("stream"):
            return StreamingResponse(
                _sse(completion_chunks(body, reply, ex.usage)),
                media_type="text/event-stream",
                headers=dict(reply.headers),
            )
        return JSONResponse(
            completion_body(body, reply, ex.usage), status_code=reply.status, headers=dict(reply.headers)
        )

    def start(self) -> FakeOpenAIServer:
        """Bind an ephemeral port (unless one was given) and serve until `stop()`."""
        self._http = LoopbackServer(self.app, self.host, self.port, name="fake-openai").start()
        self.port = self._http.port
        return self

    def stop(self) -> None:
        if self._http is not None:
            self._http.stop()
        self._http = None

    def __enter__(self) -> FakeOpenAIServer:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()
