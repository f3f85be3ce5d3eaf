"""Span attributes -> canonical fields, across conventions, with a fixed precedence (DESIGN §5).

One module per convention (`genai`, `openinference`, `traceloop`, `langfuse`, `vercel`); this module
decides which wins. Every function here is pure and never raises on bad attribute content.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import cache
from typing import Any, Literal

from tracing_eval.conventions import genai, langfuse, openinference, traceloop, vercel
from tracing_eval.conventions.values import as_int, as_str, result_text, unwrap_text_blocks
from tracing_eval.model import Message, Span, ToolCall
from tracing_eval.tool_results import looks_like_tool_error

__all__ = [
    "SpanKind",
    "SpanReading",
    "input_messages",
    "model",
    "output_messages",
    "read_span",
    "response_id",
    "span_error",
    "span_kind",
    "span_kind_and_source",
    "system_instructions",
    "thread_id",
    "tool_call",
    "turn_inputs",
    "usage",
]

SpanKind = Literal["llm", "tool", "agent", "other"]
_SPAN_KINDS: dict[str, SpanKind] = {"llm": "llm", "tool": "tool", "agent": "agent", "other": "other"}

THREAD_KEYS = (langfuse.SESSION_ID, "session.id", genai.CONVERSATION_ID, traceloop.SESSION_ID, vercel.SESSION_ID)

# First extractor that yields messages wins (per span and direction).
_INPUTS: tuple[Callable[[Span], list[Message]], ...] = (
    genai.input_messages,
    genai.details_input,
    openinference.input_messages,
    traceloop.input_messages,
    vercel.input_messages,
    genai.legacy_input,
    openinference.value_input,
    traceloop.entity_input,
    langfuse.trace_input,
    langfuse.observation_input,
)
#: The same, with the two readers of long histories that can read only a turn's tail doing so.
_TAILS: dict[Callable[[Span], list[Message]], Callable[[Span], list[Message]]] = {
    genai.input_messages: genai.input_tail,
    openinference.input_messages: openinference.input_tail,
}
_TURN_INPUTS = tuple(_TAILS.get(fn, fn) for fn in _INPUTS)
_OUTPUTS: tuple[Callable[[Span], list[Message]], ...] = (
    genai.output_messages,
    genai.details_output,
    openinference.output_messages,
    traceloop.output_messages,
    vercel.output_messages,
    genai.legacy_output,
    openinference.value_output,
    traceloop.entity_output,
    langfuse.trace_output,
    langfuse.observation_output,
)
_KINDS: tuple[Callable[[Span], str | None], ...] = (
    langfuse.kind,
    openinference.kind,
    genai.kind,
    traceloop.kind,
    vercel.kind,
)
_TOOLS: tuple[Callable[[Span], ToolCall | None], ...] = (
    genai.tool_call,
    openinference.tool_call,
    langfuse.tool_call,
    traceloop.tool_call,
    vercel.tool_call,
)
_EXCEPTION_EVENTS = ("exception", "gen_ai.client.operation.exception")
_MODEL_KEYS = ("gen_ai.response.model", "gen_ai.request.model", "llm.model_name")
_INPUT_TOKEN_KEYS = ("gen_ai.usage.input_tokens", "gen_ai.usage.prompt_tokens", "llm.token_count.prompt")
_OUTPUT_TOKEN_KEYS = ("gen_ai.usage.output_tokens", "gen_ai.usage.completion_tokens", "llm.token_count.completion")


def _safe(fn: Callable[[Span], Any], span: Span) -> Any:
    """Run one extractor; content it cannot read counts as absent."""
    try:
        return fn(span)
    except Exception:  # noqa: BLE001 - attribute content is untrusted; never fail the pipeline on it
        return None


def _first_key(attrs: Mapping[str, Any], keys: tuple[str, ...]) -> str | None:
    for key in keys:
        found = as_str(attrs.get(key))
        if found:
            return found
    return None


def thread_id(span: Span) -> str | None:
    """Conversation id: `langfuse.session.id` > `session.id` > `gen_ai.conversation.id` >
    `traceloop.association.properties.session_id` > `ai.telemetry.metadata.sessionId`; span
    attributes first, then the resource."""
    for attrs in (span.attributes, span.resource):
        if isinstance(attrs, Mapping):
            found = _first_key(attrs, THREAD_KEYS)
            if found:
                return found
    return None


@cache  # a fixed set of extractors; readings ask for it on every span
def _source(fn: Callable[..., Any]) -> str:
    """Where a reading came from, for `tracing-eval inspect`: `openinference.output_messages`."""
    return f"{fn.__module__.rsplit('.', 1)[-1]}.{fn.__name__}"


def span_kind_and_source(span: Span) -> tuple[SpanKind, str]:
    """The span's role and what decided it (a convention's `kind`, or the heuristic that did)."""
    for fn in _KINDS:
        found = _safe(fn, span)
        if found in _SPAN_KINDS:
            return _SPAN_KINDS[found], _source(fn)
    attrs = span.attributes
    if any(key in attrs for key in _MODEL_KEYS):
        return "llm", "heuristic: a model attribute"
    if "gen_ai.tool.name" in attrs or "gen_ai.tool.call.id" in attrs:
        return "tool", "heuristic: gen_ai.tool.* attributes"
    if any(_safe(fn, span) for fn in (genai.has_content, openinference.has_content, traceloop.has_content)):
        return "llm", "heuristic: message content"
    return "other", "nothing matched"


def span_kind(span: Span) -> SpanKind:
    """`llm`, `tool`, `agent` or `other`: Langfuse type > OpenInference kind > GenAI operation >
    Traceloop kind > Vercel AI SDK operation > attribute heuristics (model -> llm, `gen_ai.tool.*`
    -> tool, content -> llm)."""
    return span_kind_and_source(span)[0]


def _exception(span: Span) -> str | None:
    for event in span.events:
        if event.name in _EXCEPTION_EVENTS:
            attrs = event.attributes if isinstance(event.attributes, dict) else {}
            kind, message = as_str(attrs.get("exception.type")), as_str(attrs.get("exception.message"))
            return ": ".join(x for x in (kind, message) if x) or event.name
    return None


def span_error(span: Span) -> str | None:
    """Why the span failed: status ERROR (its message), an `exception` event (`type: message`),
    `error.type`, or Langfuse level ERROR (its status message); None when it did not fail."""
    exception = _exception(span)
    error_type = as_str(span.attributes.get("error.type"))
    langfuse_error = _safe(langfuse.error, span)
    if span.status == "error":
        return as_str(span.status_message) or exception or langfuse_error or error_type or "error"
    return exception or error_type or langfuse_error


def _messages(extractors: tuple[Callable[[Span], list[Message]], ...], span: Span) -> tuple[list[Message], str | None]:
    for fn in extractors:
        found = _safe(fn, span)
        if found:
            return list(found), _source(fn)
    return [], None


def input_messages(span: Span) -> list[Message]:
    """The messages sent to the model (full history, system included), by convention precedence."""
    return _messages(_INPUTS, span)[0]


def turn_inputs(span: Span) -> list[Message]:
    """What assembling a turn needs of the input messages, by the same precedence: the system
    messages, and the messages from the last assistant message on (all of them when there is none).
    The history before that answer is earlier turns'; a long conversation's chat spans are not read
    whole again for every turn. Empty exactly when `input_messages` is."""
    return _messages(_TURN_INPUTS, span)[0]


def output_messages(span: Span) -> list[Message]:
    """The messages the span produced (assistant answers, tool calls), by convention precedence."""
    return _messages(_OUTPUTS, span)[0]


@dataclass(frozen=True)
class SpanReading:
    """Everything the conventions read from one span, and which extractor read each part."""

    kind: SpanKind
    kind_from: str
    inputs: list[Message]
    inputs_from: str | None
    outputs: list[Message]
    outputs_from: str | None
    tool: ToolCall | None
    thread_id: str | None


def read_span(span: Span) -> SpanReading:
    """The span as `tracing-eval inspect` shows it: role, messages, tool call, each with its source."""
    kind, kind_from = span_kind_and_source(span)
    inputs, inputs_from = _messages(_INPUTS, span)
    outputs, outputs_from = _messages(_OUTPUTS, span)
    return SpanReading(kind, kind_from, inputs, inputs_from, outputs, outputs_from, tool_call(span), thread_id(span))


def system_instructions(span: Span, inputs: list[Message] | None = None) -> str | None:
    """`gen_ai.system_instructions` text, else the system-role input messages joined (`inputs`: the
    span's input messages when already read)."""
    found = _safe(genai.system_instructions, span)
    if found:
        return str(found)
    inputs = input_messages(span) if inputs is None else inputs
    system = [m.content for m in inputs if m.role == "system" and m.content.strip()]
    return "\n\n".join(system) or None


def tool_call(span: Span) -> ToolCall | None:
    """The tool call a tool span made, merged across conventions, with its error and span id."""
    found = [c for c in (_safe(fn, span) for fn in _TOOLS) if isinstance(c, ToolCall)]
    if not found:
        return None
    call = found[0]
    for other in found[1:]:
        call.id = call.id or other.id
        call.name = call.name if call.name != "?" else other.name
        call.arguments = call.arguments if call.arguments is not None else other.arguments
        call.result = call.result if call.result is not None else other.result
    call.result = unwrap_text_blocks(call.result)
    call.span_id = span.span_id
    call.error = span_error(span)
    if call.error is None and looks_like_tool_error(call.result):
        call.error = result_text(call.result)[:500]
    return call


def model(span: Span) -> str | None:
    """`gen_ai.response.model` > `gen_ai.request.model` > `llm.model_name` > Langfuse model name."""
    return _first_key(span.attributes, _MODEL_KEYS) or _safe(langfuse.model, span)


def _first_int(attrs: Mapping[str, Any], keys: tuple[str, ...]) -> int | None:
    for key in keys:
        found = as_int(attrs.get(key))
        if found is not None:
            return found
    return None


def usage(span: Span) -> tuple[int | None, int | None]:
    """(input tokens, output tokens) of one span: GenAI, legacy GenAI, OpenInference, Langfuse."""
    lf = _safe(langfuse.usage, span) or (None, None)
    tokens_in = _first_int(span.attributes, _INPUT_TOKEN_KEYS)
    tokens_out = _first_int(span.attributes, _OUTPUT_TOKEN_KEYS)
    return (tokens_in if tokens_in is not None else lf[0], tokens_out if tokens_out is not None else lf[1])


def environment(span: Span) -> str | None:
    """The deployment environment Langfuse files the trace under: `langfuse.environment`."""
    value = span.attributes.get("langfuse.environment")
    return value if isinstance(value, str) and value else None


def response_id(span: Span) -> str | None:
    """`gen_ai.response.id`, else the `id` of the response JSON in OpenInference `output.value`."""
    return as_str(span.attributes.get("gen_ai.response.id")) or _safe(openinference.response_id, span)
