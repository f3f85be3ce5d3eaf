"""Synthetic multi-turn LLM traffic, recorded with the real OTel SDK and encoded like its exporter.

Each turn is one trace of four spans, as an agent framework records it: an agent root, a chat call
that asks for a tool, the tool call, and a second chat call that answers. Chat spans carry the whole
message history, so spans grow along the conversation. Two styles:

- `openinference`: flattened `llm.input_messages.N.message.*` plus the request/response JSON in
  `input.value` / `output.value`, `session.id` on every span (what openinference-instrumentation-openai
  records under `using_session`);
- `genai`: OTel GenAI semantic conventions, `gen_ai.input.messages` / `gen_ai.output.messages` JSON with
  parts, `gen_ai.conversation.id`.

Spans are batched in finish order, `batch_size` per request (BatchSpanProcessor's default is 512),
encoded with `encode_spans` and gzipped the way the OTLP/HTTP exporter does (GzipFile, default level).
"""

from __future__ import annotations

import gzip
import io
import json
import random
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, SpanLimits, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, Tracer

STYLES = ("openinference", "genai")
MODEL = "gpt-4o-2024-08-06"

_WORDS = (
    "order refund shipping account invoice delivery address package tracking number customer support "
    "please thanks could would update change cancel reservation flight booking seat baggage payment card "
    "credit balance policy window days business within receipt email confirm confirmed check status "
    "available option options today tomorrow morning evening week month store item items return exchange "
    "size colour warranty repair replacement technician appointment schedule reschedule time slot "
    "the a an and or but if then so because when where which that this those these is are was were be "
    "been have has had do does did can will may might should must not no yes also only just still again "
    "your my our their its we you they it he she i me us them here there now already soon later first "
    "second next last new old same different other more less most least very really quite about into "
    "from with without for of on in at by to up down over under after before between during per"
).split()


def prose(rng: random.Random, chars: int) -> str:
    """Plausible sentence-like text of about `chars` characters (compresses like prose)."""
    out: list[str] = []
    size = 0
    while size < chars:
        sentence = " ".join(rng.choice(_WORDS) for _ in range(rng.randint(6, 16)))
        out.append(sentence[0].upper() + sentence[1:] + ".")
        size += len(out[-1]) + 1
    return " ".join(out)


@dataclass
class Sizes:
    """Approximate characters per message. With 10 turns the defaults give GenAI spans of about
    3.4 KB and OpenInference spans of about 7 KB (it stores the history twice): 5 KB on average."""

    system: int = 630
    user: int = 155
    assistant: int = 295
    tool_result: int = 180


@dataclass
class Conversation:
    """One conversation's running state: id, style and the OpenAI-format history so far."""

    conv_id: str
    user_id: str
    style: str
    system: str
    history: list[dict[str, Any]] = field(default_factory=list)


def _oi_messages(prefix: str, messages: list[dict[str, Any]]) -> dict[str, Any]:
    attrs: dict[str, Any] = {}
    for i, m in enumerate(messages):
        base = f"{prefix}{i}.message."
        attrs[base + "role"] = m["role"]
        if m.get("content"):
            attrs[base + "content"] = m["content"]
        if m.get("tool_call_id"):
            attrs[base + "tool_call_id"] = m["tool_call_id"]
        for j, tc in enumerate(m.get("tool_calls") or []):
            tcb = f"{base}tool_calls.{j}.tool_call."
            attrs[tcb + "id"] = tc["id"]
            attrs[tcb + "function.name"] = tc["function"]["name"]
            attrs[tcb + "function.arguments"] = tc["function"]["arguments"]
    return attrs


def _genai_messages(messages: list[dict[str, Any]]) -> str:
    out = []
    for m in messages:
        parts: list[dict[str, Any]] = []
        if m.get("content"):
            if m["role"] == "tool":
                parts.append({"type": "tool_call_response", "id": m["tool_call_id"], "response": m["content"]})
            else:
                parts.append({"type": "text", "content": m["content"]})
        for tc in m.get("tool_calls") or []:
            parts.append(
                {
                    "type": "tool_call",
                    "id": tc["id"],
                    "name": tc["function"]["name"],
                    "arguments": json.loads(tc["function"]["arguments"]),
                }
            )
        out.append({"role": m["role"], "parts": parts})
    return json.dumps(out)


def _llm_attrs(
    conv: Conversation, messages: list[dict[str, Any]], answer: dict[str, Any], rng: random.Random
) -> dict[str, Any]:
    prompt_tokens = sum(len(m.get("content") or "") for m in messages) // 4
    completion_tokens = len(answer.get("content") or "") // 4 + 20
    if conv.style == "openinference":
        request = {
            "model": MODEL,
            "messages": messages,
            "temperature": 0.2,
            "tools": [{"type": "function", "function": {"name": "lookup_order"}}],
        }
        response = {
            "id": f"chatcmpl-{rng.getrandbits(64):x}",
            "object": "chat.completion",
            "model": MODEL,
            "choices": [
                {"index": 0, "message": answer, "finish_reason": "tool_calls" if answer.get("tool_calls") else "stop"}
            ],
            "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens},
        }
        return {
            "openinference.span.kind": "LLM",
            "session.id": conv.conv_id,
            "user.id": conv.user_id,
            "llm.model_name": MODEL,
            "llm.provider": "openai",
            "llm.system": "openai",
            "llm.invocation_parameters": json.dumps({"temperature": 0.2}),
            "input.value": json.dumps(request),
            "input.mime_type": "application/json",
            "output.value": json.dumps(response),
            "output.mime_type": "application/json",
            **_oi_messages("llm.input_messages.", messages),
            **_oi_messages("llm.output_messages.", [answer]),
            "llm.token_count.prompt": prompt_tokens,
            "llm.token_count.completion": completion_tokens,
            "llm.token_count.total": prompt_tokens + completion_tokens,
        }
    return {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "openai",
        "gen_ai.conversation.id": conv.conv_id,
        "gen_ai.request.model": MODEL,
        "gen_ai.response.model": MODEL,
        "gen_ai.request.temperature": 0.2,
        "gen_ai.response.id": f"chatcmpl-{rng.getrandbits(64):x}",
        "gen_ai.response.finish_reasons": ["tool_calls" if answer.get("tool_calls") else "stop"],
        "gen_ai.system_instructions": json.dumps([{"type": "text", "content": conv.system}]),
        "gen_ai.input.messages": _genai_messages([m for m in messages if m["role"] != "system"]),
        "gen_ai.output.messages": _genai_messages([answer]),
        "gen_ai.usage.input_tokens": prompt_tokens,
        "gen_ai.usage.output_tokens": completion_tokens,
    }


def _record_turn(
    tracer: Tracer, conv: Conversation, turn: int, sizes: Sizes, rng: random.Random, use_tool: bool
) -> None:
    """Record one turn (root, [chat -> tool call, tool,] chat -> answer) and extend the history."""
    user = {"role": "user", "content": prose(rng, sizes.user)}
    call_id = f"call_{rng.getrandbits(48):x}"
    args = json.dumps({"order_id": f"W{rng.randint(1000000, 9999999)}", "include_history": True})
    ask_tool = {
        "role": "assistant",
        "content": None,
        "tool_calls": [{"id": call_id, "type": "function", "function": {"name": "lookup_order", "arguments": args}}],
    }
    result = {
        "role": "tool",
        "tool_call_id": call_id,
        "content": json.dumps({"status": "shipped", "note": prose(rng, sizes.tool_result)}),
    }
    answer = {"role": "assistant", "content": prose(rng, sizes.assistant)}
    before = [{"role": "system", "content": conv.system}, *conv.history, user]
    oi = conv.style == "openinference"
    if oi:
        root_name, root_attrs = (
            "agent.run",
            {
                "openinference.span.kind": "AGENT",
                "session.id": conv.conv_id,
                "user.id": conv.user_id,
                "input.value": user["content"],
                "input.mime_type": "text/plain",
            },
        )
        tool_name, tool_attrs = (
            "lookup_order",
            {
                "openinference.span.kind": "TOOL",
                "session.id": conv.conv_id,
                "tool.name": "lookup_order",
                "tool.id": call_id,
                "input.value": args,
                "output.value": result["content"],
            },
        )
    else:
        root_name, root_attrs = (
            "invoke_agent support",
            {
                "gen_ai.operation.name": "invoke_agent",
                "gen_ai.agent.name": "support",
                "gen_ai.conversation.id": conv.conv_id,
                "gen_ai.provider.name": "openai",
            },
        )
        tool_name, tool_attrs = (
            "execute_tool lookup_order",
            {
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": "lookup_order",
                "gen_ai.tool.call.id": call_id,
                "gen_ai.tool.call.arguments": args,
                "gen_ai.tool.call.result": result["content"],
            },
        )
    with tracer.start_as_current_span(root_name, attributes={**root_attrs, "turn.index": turn}) as root:
        if use_tool:
            with tracer.start_as_current_span(
                f"chat {MODEL}", kind=SpanKind.CLIENT, attributes=_llm_attrs(conv, before, ask_tool, rng)
            ):
                pass
            with tracer.start_as_current_span(tool_name, attributes=tool_attrs):
                pass
            before = [*before, ask_tool, result]
        with tracer.start_as_current_span(
            f"chat {MODEL}", kind=SpanKind.CLIENT, attributes=_llm_attrs(conv, before, answer, rng)
        ):
            pass
        if oi:
            root.set_attribute("output.value", answer["content"])
    conv.history += [user, ask_tool, result, answer] if use_tool else [user, answer]


def _provider(style: str) -> tuple[TracerProvider, InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    resource = Resource.create(
        {"service.name": f"support-agent-{style}", "service.version": "1.4.2", "deployment.environment": "bench"}
    )
    # OpenInference flattens one attribute per message field; the SDK's default cap of 128 would drop history.
    provider = TracerProvider(resource=resource, span_limits=SpanLimits(max_span_attributes=10_000))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider, exporter


def gzip_like_exporter(data: bytes) -> bytes:
    """What the OTLP/HTTP exporter sends with Compression.Gzip: GzipFile at its default level."""
    buf = io.BytesIO()
    with gzip.GzipFile(fileobj=buf, mode="w") as gz:
        gz.write(data)
    return buf.getvalue()


@dataclass
class Workload:
    """gzip-compressed ExportTraceServiceRequest bodies plus what they contain."""

    bodies: list[bytes]
    styles: list[str]  # style of each body
    body_spans: list[int]  # spans in each body
    spans: int
    raw_bytes: int  # serialized protobuf, before gzip
    span_bytes: int  # sum of serialized Span messages
    conversations: int
    traces: int


def _batches(spans: list[ReadableSpan], size: int) -> Iterator[list[ReadableSpan]]:
    for i in range(0, len(spans), size):
        yield spans[i : i + size]


def build(
    conversations: int,
    turns: int,
    *,
    styles: tuple[str, ...] = STYLES,
    batch_size: int = 512,
    sizes: Sizes | None = None,
    tool_every: int = 2,
    seed: int = 7,
    first: int = 0,
) -> Workload:
    """Record `conversations` x `turns` turns, turns of different conversations interleaved in time;
    every `tool_every`-th turn of a conversation calls a tool (four spans instead of two). Conversation
    ids are numbered from `first`."""
    rng = random.Random(seed)
    sizes = sizes or Sizes()
    providers = {s: _provider(s) for s in styles}
    tracers = {s: p.get_tracer("bench.agent") for s, (p, _) in providers.items()}
    convs = [
        Conversation(
            f"conv-{first + i:06d}", f"user-{rng.randint(1, 10**6)}", styles[i % len(styles)], prose(rng, sizes.system)
        )
        for i in range(conversations)
    ]
    for turn in range(turns):
        for conv in convs:
            _record_turn(tracers[conv.style], conv, turn, sizes, rng, turn % tool_every == tool_every - 1)
    per_style: dict[str, list[tuple[bytes, int]]] = {}
    raw = span_bytes = n_spans = 0
    for style, (provider, exporter) in providers.items():
        finished = list(exporter.get_finished_spans())
        provider.shutdown()
        n_spans += len(finished)
        for batch in _batches(finished, batch_size):
            request = encode_spans(batch)
            data = request.SerializeToString()
            raw += len(data)
            span_bytes += sum(s.ByteSize() for rs in request.resource_spans for ss in rs.scope_spans for s in ss.spans)
            per_style.setdefault(style, []).append((gzip_like_exporter(data), len(batch)))
    bodies: list[bytes] = []
    body_styles: list[str] = []
    body_spans: list[int] = []
    longest = max(len(v) for v in per_style.values())
    for i in range(longest):  # the services export concurrently: alternate their requests
        for style in styles:
            if i < len(per_style.get(style, [])):
                body, count = per_style[style][i]
                bodies.append(body)
                body_styles.append(style)
                body_spans.append(count)
    return Workload(bodies, body_styles, body_spans, n_spans, raw, span_bytes, conversations, conversations * turns)
