"""Spans -> turns -> threads. One trace is one turn; turns that share a conversation id form a thread.

A turn's messages are: the user message(s) at the tail of the first model call's input history,
the assistant tool-call messages and tool results produced inside the trace, and the final answer
(the root's output when it has one, else the last model call's output).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Literal

from pydantic import BaseModel, ConfigDict

from tracing_eval import conventions
from tracing_eval.conventions.values import result_text
from tracing_eval.model import Message, Span, Thread, ToolCall, Turn, Unreadable
from tracing_eval.store.base import StoredThread
from tracing_eval.tool_results import looks_like_tool_error
from tracing_eval.transcripts import link_tool_results

_IO = tuple[list[Message], list[Message]]  # (input messages, output messages) of one span


def _unique(spans: Iterable[Span]) -> list[Span]:
    """Spans by start time; a span delivered twice keeps its last copy."""
    by_id: dict[str, Span] = {}
    for span in spans:
        by_id[span.span_id] = span
    return sorted(by_id.values(), key=lambda s: s.start_ns)


def _root(spans: list[Span]) -> Span:
    ids = {s.span_id for s in spans}
    roots = [s for s in spans if not s.parent_id or s.parent_id not in ids]
    return (roots or spans)[0]


def _has_ancestor_in(span: Span, selected: set[str], by_id: dict[str, Span]) -> bool:
    seen, parent = {span.span_id}, span.parent_id
    while parent and parent not in seen:
        if parent in selected:
            return True
        seen.add(parent)
        parent = by_id[parent].parent_id if parent in by_id else None
    return False


def _outermost(spans: list[Span], selected: set[str], by_id: dict[str, Span]) -> list[Span]:
    """The selected spans with no selected ancestor (nested instrumentations report one call twice)."""
    return [s for s in spans if s.span_id in selected and not _has_ancestor_in(s, selected, by_id)]


def _wrappers(with_content: set[str], io: dict[str, _IO], by_id: dict[str, Span]) -> set[str]:
    """Spans read as model calls that produced nothing themselves but hold a model call that did
    (an agent loop step that repeats the input messages): they never count as the call."""
    out: set[str] = set()
    for sid in (s for s in with_content if io[s][1]):
        seen, parent = {sid}, by_id[sid].parent_id
        while parent and parent not in seen and parent in by_id:
            if parent in with_content and not io[parent][1]:
                out.add(parent)
            seen.add(parent)
            parent = by_id[parent].parent_id
    return out


def _user_tail(history: list[Message]) -> list[Message]:
    """The messages after the last assistant/tool message (the new user input), system excluded."""
    messages = [m for m in history if m.role != "system"]
    last = max((i for i, m in enumerate(messages) if m.role in ("assistant", "tool")), default=-1)
    return messages[last + 1 :]


def _new_tool_results(history: list[Message]) -> list[Message]:
    last = max((i for i, m in enumerate(history) if m.role == "assistant"), default=-1)
    return [m for m in history[last + 1 :] if m.role == "tool"]


def _link_tool_spans(messages: list[Message], tool_spans: list[Span]) -> list[ToolCall]:
    """Attach each tool span to the assistant's call (by call id, else by name in order);
    return the calls of tool spans that match no call."""
    calls = [tc for m in messages if m.role == "assistant" for tc in m.tool_calls]
    unmatched = []
    for span in tool_spans:
        found = conventions.tool_call(span)
        if found is None:
            continue
        open_calls = [c for c in calls if c.span_id is None]
        match = next((c for c in open_calls if found.id and c.id == found.id), None)
        match = match or next((c for c in open_calls if c.name == found.name), None)
        if match is None:
            unmatched.append(found)
            continue
        match.span_id = found.span_id
        match.id = match.id or found.id
        match.arguments = match.arguments if match.arguments is not None else found.arguments
        match.result = match.result if match.result is not None else found.result
        match.error = conventions.span_error(span) or match.error or found.error
        if match.error is None and looks_like_tool_error(match.result):
            match.error = result_text(match.result)[:500]
    return unmatched


def _sum(values: list[int | None]) -> int | None:
    known = [v for v in values if v is not None]
    return sum(known) if known else None


def _body(calls: list[Span], io: dict[str, _IO], root_final: Message | None) -> tuple[list[Message], int | None]:
    """Tool-call messages and tool results in call order, then the final answer; and where it starts."""
    body: list[Message] = []
    seen_results: set[str] = set()
    final_at: int | None = None
    for n, call in enumerate(calls):
        history, outputs = io[call.span_id]
        if n > 0:
            for m in _new_tool_results(history):
                if m.tool_call_id is None or m.tool_call_id not in seen_results:
                    body.append(m)
                    seen_results.update([m.tool_call_id] if m.tool_call_id else [])
        is_final = n == len(calls) - 1 and root_final is None
        for m in outputs:
            if m.role != "assistant" or not (m.tool_calls or is_final):
                continue
            if is_final and not m.tool_calls and final_at is None:
                final_at = len(body)
            body.append(m)
    if root_final is not None:
        if root_final.finish_reason is None and calls:  # how the last model call ended (e.g. `length`)
            answers = [m for m in io[calls[-1].span_id][1] if m.role == "assistant"]
            root_final.finish_reason = answers[-1].finish_reason if answers else None
        final_at = len(body)
        body.append(root_final)
    return body, final_at


class _Readings:
    """What the conventions read from the spans of one trace (unique, by start time: `_unique`),
    each read once, and its root."""

    def __init__(self, spans: list[Span]) -> None:
        self.spans = spans
        self.root = _root(spans)
        self.kinds = {s.span_id: conventions.span_kind(s) for s in spans}
        self._inputs: dict[str, list[Message]] = {}

    @classmethod
    def of(cls, spans: Iterable[Span]) -> _Readings | None:
        """The readings of a trace given as its spans in any order (None for no spans)."""
        unique = _unique(spans)
        return cls(unique) if unique else None

    def inputs(self, span: Span) -> list[Message]:
        """The span's input messages as far as a turn needs them (`conventions.turn_inputs`)."""
        found = self._inputs.get(span.span_id)
        if found is None:
            found = self._inputs[span.span_id] = conventions.turn_inputs(span)
        return found


def turn_from_trace(spans: list[Span], index: int = 0, readings: _Readings | None = None) -> Turn | None:
    """One trace -> one turn; None when the trace holds no recognisable LLM content."""
    readings = readings or _Readings.of(spans)
    if readings is None:
        return None
    spans, root = readings.spans, readings.root
    by_id = {s.span_id: s for s in spans}
    kinds = readings.kinds
    llm_ids = {s.span_id for s in spans if kinds[s.span_id] == "llm"}
    io = {sid: (readings.inputs(by_id[sid]), conventions.output_messages(by_id[sid])) for sid in llm_ids}
    with_content = {sid for sid, (i, o) in io.items() if i or o}
    calls = _outermost(spans, with_content - _wrappers(with_content, io, by_id), by_id)
    llm_spans = _outermost(spans, llm_ids, by_id)
    tool_spans = _outermost(spans, {s.span_id for s in spans if kinds[s.span_id] == "tool"}, by_id)

    root_is_call = root.span_id in with_content
    user = _user_tail(io[calls[0].span_id][0]) if calls else []
    if not user and not root_is_call:
        user = _user_tail(readings.inputs(root))
    # the root's answer wins only when it says something: an empty or missing answer on an outer
    # span never hides the answer of the model call inside it
    root_answers = [] if root_is_call else [m for m in conventions.output_messages(root) if m.role == "assistant"]
    root_final = root_answers[-1] if root_answers and (root_answers[-1].content.strip() or not calls) else None
    if root_final is not None:  # agent frameworks pad their result (Strands adds a newline)
        root_final.content = root_final.content.strip()
    body, final_at = _body(calls, io, root_final)
    if not user and not body:
        return None

    messages = [*user, *body]
    link_tool_results(messages)
    unmatched = _link_tool_spans(messages, tool_spans)
    if unmatched:  # tool spans no assistant message asked for: one call message before the answer
        at = len(user) + (len(body) if final_at is None else final_at)
        messages.insert(at, Message(role="assistant", tool_calls=unmatched))

    answered_by = calls[-1] if calls else (llm_spans[-1] if llm_spans else root)
    error = conventions.span_error(root)
    unknown = None
    if error is None and not _answer_read(body, final_at):
        if final_at is not None:  # an empty answer no finish reason vouches for: unknown, not empty
            messages.remove(body[final_at])
        unknown = unreadable("unknown_answer", [answered_by])
    usage = [conventions.usage(s) for s in llm_spans] or [conventions.usage(root)]
    return Turn(
        index=index,
        messages=messages,
        trace_id=root.trace_id,
        root_span_id=root.span_id,
        response_id=conventions.response_id(answered_by) or conventions.response_id(root),
        model=conventions.model(answered_by)
        or next(filter(None, map(conventions.model, llm_spans)), None)
        or conventions.model(root),
        started_ns=root.start_ns,
        ended_ns=root.end_ns or max(s.end_ns for s in spans),
        input_tokens=_sum([u[0] for u in usage]),
        output_tokens=_sum([u[1] for u in usage]),
        error=error,
        answer_unknown=unknown,
    )


def _answer_read(body: list[Message], final_at: int | None) -> bool:
    """Whether the turn's answer was read: a final answer with text, or an empty one whose finish
    reason was read with it; without a final answer, a turn that ended in a tool call."""
    if final_at is None:
        return any(m.tool_calls for m in body)
    final = body[final_at]
    return bool(final.content.strip() or final.tool_calls or final.finish_reason)


def unreadable(reason: Literal["unknown_answer", "no_turn"], spans: list[Span]) -> Unreadable:
    """Where content could not be read: the first span, and the attribute and event names of all."""
    names = {k for s in spans for k in s.attributes} | {f"event:{e.name}" for s in spans for e in s.events}
    first = spans[0]
    return Unreadable(
        reason=reason,
        trace_id=first.trace_id,
        span_id=first.span_id,
        span_name=first.name,
        spans=len(spans),
        attributes=sorted(names),
    )


def system_prompt(spans: list[Span], readings: _Readings | None = None) -> str | None:
    """The system prompt of a trace: `gen_ai.system_instructions` or system-role input messages,
    from the first model call that has one (agent spans and the root as fallbacks)."""
    readings = readings or _Readings.of(spans)
    if readings is None:
        return None
    spans, root = readings.spans, readings.root
    kinds = readings.kinds
    ordered = [s for s in spans if kinds[s.span_id] == "llm"]
    ordered += [s for s in spans if kinds[s.span_id] == "agent" or s is root]
    for span in ordered:
        found = conventions.system_instructions(span, readings.inputs(span))
        if found:
            return found
    return None


class TracePart(BaseModel):
    """What one trace contributes to its thread: its turn (None when it yields none, with where the
    content was looked for), system prompt and conversation id. Kept by the store per trace revision,
    so a trace is assembled once, and stands for the trace after retention deleted its spans."""

    model_config = ConfigDict(extra="forbid")

    trace_id: str
    start_ns: int = 0
    turn: Turn | None = None
    system_prompt: str | None = None
    conversation_id: str | None = None
    environment: str | None = None
    unreadable: Unreadable | None = None


def part_is_current(data: bytes) -> bool:
    """Whether a stored part holds everything a part holds now: parts stored before the trace's
    environment was kept lack it, and their traces are assembled again while their spans remain."""
    return b'"environment":' in data


def trace_part(spans: list[Span]) -> TracePart:
    """Assemble one trace (it must have spans)."""
    readings = _Readings(_unique(spans))
    system = system_prompt(spans, readings)  # before the turn: assembling it changes what was read
    turn = turn_from_trace(spans, readings=readings)
    root = readings.root
    first = [root, *(s for s in readings.spans if s is not root)]  # the root first
    return TracePart(
        trace_id=root.trace_id,
        start_ns=root.start_ns,
        turn=turn,
        system_prompt=system,
        conversation_id=next(filter(None, map(conventions.thread_id, first)), None),
        environment=next(filter(None, map(conventions.environment, first)), None),
        unreadable=unreadable("no_turn", first) if turn is None else None,
    )


def thread_from_parts(key: str, parts: list[TracePart], *, source: str = "otlp", version: int = 1) -> Thread:
    """Turns ordered by root start time, re-indexed 0..n-1, with transcript positions set; traces
    that yielded no turn are listed in `Thread.unreadable`."""
    ordered = sorted(parts, key=lambda p: (p.start_ns, p.trace_id))
    turns = sorted((p.turn for p in ordered if p.turn is not None), key=lambda t: t.started_ns)
    position = 0
    for i, turn in enumerate(turns):
        turn.index = i
        for message in turn.messages:
            message.position = position
            position += 1
    return Thread(
        key=key,
        source=source,
        conversation_id=next(filter(None, (p.conversation_id for p in ordered)), None),
        system_prompt=next(filter(None, (p.system_prompt for p in ordered)), None),
        turns=turns,
        version=version,
        unreadable=[p.unreadable for p in ordered if p.unreadable is not None],
    )


def thread_from_traces(key: str, traces: list[list[Span]], *, source: str = "otlp", version: int = 1) -> Thread:
    """`thread_from_parts` over traces given as their spans (empty traces are skipped)."""
    return thread_from_parts(key, [trace_part(spans) for spans in traces if spans], source=source, version=version)


def parts_from_stored(stored: StoredThread) -> tuple[list[TracePart], dict[str, tuple[int, bytes]]]:
    """The part of every trace the store holds for a thread: stored parts as they are, the other
    traces assembled. Also returns the newly assembled parts (trace id -> (revision, stored form))
    for the store to keep."""
    parts = [TracePart.model_validate_json(data) for data in stored.parts.values()]
    fresh: dict[str, tuple[int, bytes]] = {}
    for trace_id, spans in stored.traces.items():
        part = trace_part(spans)
        fresh[trace_id] = (stored.revisions[trace_id], part.model_dump_json().encode())
        parts.append(part)
    return parts, fresh


def thread_from_stored(
    stored: StoredThread, *, source: str = "otlp", version: int = 1
) -> tuple[Thread, dict[str, tuple[int, bytes]]]:
    """The thread from what the store holds (see `parts_from_stored`), and the newly assembled parts."""
    parts, fresh = parts_from_stored(stored)
    return thread_from_parts(stored.key, parts, source=source, version=version), fresh
