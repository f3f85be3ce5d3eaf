"""The benchmark judge: an OpenAI-compatible chat endpoint with a fixed latency, counting per client.

Every client gets its own base URL, `http://HOST:PORT/c/<client>/v1`, so calls, tokens and the
requests in flight are counted per client from what the server receives. Each call is answered after
exactly `--latency` seconds from its arrival (an asyncio sleep: any number of calls wait at once), with
a valid JSON answer for whatever was asked (`judge_answers.answer`).

Tokens are counted here from the request, with one tokenizer for every client: `tiktoken` o200k_base
(the GPT-4o family's encoding) when it can be loaded offline, else one token per word and per punctuation
mark (the rule of `tests.support.fakes.openai_server.count_tokens`). Input tokens = each message's role and text
plus the usual 3 tokens of framing per message and 3 per request; the JSON schema of `response_format`
(which the provider also reads) is counted separately as schema tokens. Output tokens = the answer text.
The usage in each response carries the same counts (schema tokens included in `prompt_tokens`).

It also estimates what a provider's automatic prefix cache could serve at best (`PrefixCache`), in two
layouts: schema first (OpenAI documents that the structured-output schema is a prefix of the system
message) and messages only (a provider that keeps the schema out of the prefix, or `json_object` mode).

    python bench/judge_server.py --latency 0.2          # prints "PORT <n>" once it listens

Control endpoints: `GET /stats` (per-client counters), `POST /reset`, `GET /records?client=NAME`
(one row per call: arrival, end, kind, tokens), `POST /count` (tokens of `{"texts": [...]}`).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import socket
import sys
import time
from collections.abc import Callable, Hashable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import uvicorn  # noqa: E402
from judge_answers import answer, json_schema_of  # noqa: E402
from starlette.applications import Starlette  # noqa: E402
from starlette.requests import Request  # noqa: E402
from starlette.responses import JSONResponse, Response  # noqa: E402
from starlette.routing import Route  # noqa: E402

from tests.support.fakes.openai_server import Reply, completion_body  # noqa: E402

Json = dict[str, Any]
#: o200k_base's file in tiktoken's cache layout (sha1 of its download URL); LiteLLM's package ships a copy.
O200K_FILE = "fb374d419588a4632f3f557e76b4b70aebbca790"
_WORDS = re.compile(r"\w+|[^\w\s]")  # the fallback: the rule of tests/support/fakes/openai_server.count_tokens


def tokenizer() -> tuple[str, Callable[[str], Sequence[Hashable]]]:
    """o200k_base through tiktoken if its file is in TIKTOKEN_CACHE_DIR, else words and punctuation marks."""
    cache = Path(os.environ.get("TIKTOKEN_CACHE_DIR", "/nonexistent")) / O200K_FILE
    if not cache.is_file():  # never let tiktoken download it: only registries are reachable from here
        print(f"tokenizer: regex word/punctuation count (no {cache})", file=sys.stderr)
        return "regex word/punctuation", _WORDS.findall
    try:
        import tiktoken

        enc = tiktoken.get_encoding("o200k_base")
        enc.encode("probe")
    except Exception as exc:  # no tiktoken, or its encoding file cannot be fetched here
        print(f"tokenizer: regex word/punctuation count (tiktoken unavailable: {exc})", file=sys.stderr)
        return "regex word/punctuation", _WORDS.findall
    return "tiktoken o200k_base", lambda text: enc.encode(text, disallowed_special=())


class PrefixCache:
    """What a provider's automatic prefix cache could serve, at best: OpenAI's rules (a prefix of at least
    1024 tokens, in steps of 128, identical to an earlier request's), with nothing ever evicted and every
    earlier request already cached. Tokens are hashed in 128-token blocks, each hash chained to the last."""

    BLOCK = 128
    MINIMUM = 1024

    def __init__(self) -> None:
        self.seen: set[int] = set()

    def serve(self, tokens: Sequence[Hashable]) -> int:
        h, hit, chain = 0, 0, []
        for k in range(len(tokens) // self.BLOCK):
            h = hash((h, tuple(tokens[k * self.BLOCK : (k + 1) * self.BLOCK])))
            chain.append(h)
            if h in self.seen and hit == k:
                hit = k + 1
        self.seen.update(chain)
        cached = hit * self.BLOCK
        return cached if cached >= self.MINIMUM else 0


def _message_text(message: Json) -> str:
    content = message.get("content")
    if isinstance(content, list):
        content = " ".join(p.get("text", "") for p in content if isinstance(p, dict))
    return str(content or "")


@dataclass
class Record:
    arrival: float
    end: float = 0.0
    kind: str = ""
    status: int = 200
    input_tokens: int = 0
    schema_tokens: int = 0
    output_tokens: int = 0
    cacheable_schema_first: int = 0
    cacheable_messages_only: int = 0


_SUMS = (
    "input_tokens",
    "schema_tokens",
    "output_tokens",
    "cacheable_schema_first",
    "cacheable_messages_only",
)


@dataclass
class ClientStats:
    in_flight: int = 0
    max_in_flight: int = 0
    records: list[Record] = field(default_factory=list)
    cache_schema_first: PrefixCache = field(default_factory=PrefixCache)
    cache_messages_only: PrefixCache = field(default_factory=PrefixCache)

    def summary(self) -> Json:
        ok = [r for r in self.records if r.status == 200]
        kinds: dict[str, Json] = {}
        for r in ok:
            k = kinds.setdefault(r.kind, {"calls": 0, **dict.fromkeys(_SUMS, 0)})
            k["calls"] += 1
            for name in _SUMS:
                k[name] += getattr(r, name)
        return {
            "calls": len(ok),
            "errors": len(self.records) - len(ok),
            **{name: sum(getattr(r, name) for r in ok) for name in _SUMS},
            "max_in_flight": self.max_in_flight,
            "first_arrival": min((r.arrival for r in self.records), default=None),
            "last_end": max((r.end for r in self.records), default=None),
            "by_kind": dict(sorted(kinds.items())),
        }


class JudgeServer:
    def __init__(self, latency: float, bodies: Path | None = None) -> None:
        self.latency = latency
        self.bodies = bodies
        self.tokenizer_name, self.encode = tokenizer()
        self.clients: dict[str, ClientStats] = {}
        self.in_flight = 0
        self.max_in_flight = 0
        self.app = Starlette(
            routes=[
                Route("/c/{client}/v1/chat/completions", self.chat, methods=["POST"]),
                Route("/c/{client}/v1/models", self.models, methods=["GET"]),
                Route("/stats", self.stats, methods=["GET"]),
                Route("/records", self.records, methods=["GET"]),
                Route("/reset", self.reset, methods=["POST"]),
                Route("/count", self.count_texts, methods=["POST"]),
            ]
        )

    def count_input(self, body: Json, stats: ClientStats, record: Record) -> None:
        """Input and schema tokens, and what a prefix cache could serve of them."""
        tokens: list[Hashable] = []
        framing = 3
        for m in body.get("messages") or []:
            tokens += self.encode(str(m.get("role", "")))
            tokens += self.encode(_message_text(m))
            framing += 3
        found = json_schema_of(body)
        schema = list(self.encode(json.dumps(found[1], separators=(",", ":")))) if found else []
        record.input_tokens = len(tokens) + framing
        record.schema_tokens = len(schema)
        # OpenAI: "the structured output schema serves as a prefix to the system message"
        record.cacheable_schema_first = stats.cache_schema_first.serve(schema + tokens)
        record.cacheable_messages_only = stats.cache_messages_only.serve(tokens)

    async def chat(self, request: Request) -> Response:
        loop = asyncio.get_running_loop()
        started = loop.time()
        client = request.path_params["client"]
        stats = self.clients.setdefault(client, ClientStats())
        record = Record(arrival=time.time())
        stats.records.append(record)
        stats.in_flight += 1
        stats.max_in_flight = max(stats.max_in_flight, stats.in_flight)
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            body = await request.json()
            if not isinstance(body, dict) or not isinstance(body.get("messages"), list):
                record.status = 400
                return JSONResponse(Reply.failure(400, "body must be an object with 'messages'").error, 400)
            content, record.kind = answer(body)
            self.count_input(body, stats, record)
            record.output_tokens = len(self.encode(content))
            if self.bodies is not None:
                with (self.bodies / f"{client}.jsonl").open("a") as f:
                    f.write(json.dumps({"kind": record.kind, "request": body, "answer": content}) + "\n")
            prompt = record.input_tokens + record.schema_tokens
            usage = {
                "prompt_tokens": prompt,
                "completion_tokens": record.output_tokens,
                "total_tokens": prompt + record.output_tokens,
            }
            reply = completion_body(body, Reply(content), usage)
            await asyncio.sleep(max(0.0, self.latency - (loop.time() - started)))
            return JSONResponse(reply)
        except Exception as exc:  # a bug here must show as an error the bench reports, not a hang
            record.status = 500
            print(f"judge server: {type(exc).__name__}: {exc}", file=sys.stderr)
            return JSONResponse(Reply.failure(500, f"{type(exc).__name__}: {exc}").error, 500)
        finally:
            record.end = time.time()
            stats.in_flight -= 1
            self.in_flight -= 1

    async def models(self, request: Request) -> Response:
        return JSONResponse({"object": "list", "data": [{"id": "gpt-4o-mini", "object": "model", "owned_by": "bench"}]})

    async def stats(self, request: Request) -> Response:
        return JSONResponse(
            {
                "latency": self.latency,
                "tokenizer": self.tokenizer_name,
                "max_in_flight": self.max_in_flight,
                "clients": {name: s.summary() for name, s in self.clients.items()},
            }
        )

    async def records(self, request: Request) -> Response:
        stats = self.clients.get(request.query_params.get("client", ""), ClientStats())
        return JSONResponse([asdict(r) for r in stats.records])

    async def count_texts(self, request: Request) -> Response:
        """Tokens of each text in `{"texts": [...]}`, with the same tokenizer."""
        texts = (await request.json()).get("texts") or []
        return JSONResponse({"tokens": [len(self.encode(str(t))) for t in texts]})

    async def reset(self, request: Request) -> Response:
        self.clients.clear()
        self.max_in_flight = self.in_flight
        return JSONResponse({"ok": True})


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--latency", type=float, default=0.2, help="seconds from arrival to answer, every call")
    ap.add_argument("--bodies", type=Path, help="folder: append every request and answer to <client>.jsonl")
    ap.add_argument("--core", type=int, help="pin the server to this core")
    args = ap.parse_args()
    if args.core is not None:
        os.sched_setaffinity(0, {args.core})
    if args.bodies:
        args.bodies.mkdir(parents=True, exist_ok=True)
    server = JudgeServer(args.latency, args.bodies)
    # IPPROTO_TCP, not the default 0: asyncio sets TCP_NODELAY only on sockets whose proto says TCP; without
    # it, Nagle holds each response's body until the client's delayed ACK (about 40 ms on Linux loopback)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((args.host, args.port))
    print(f"PORT {sock.getsockname()[1]} TOKENIZER {server.tokenizer_name}", flush=True)
    config = uvicorn.Config(server.app, log_level="warning", lifespan="off", backlog=4096, access_log=False)
    uvicorn.Server(config).run(sockets=[sock])


if __name__ == "__main__":
    main()
