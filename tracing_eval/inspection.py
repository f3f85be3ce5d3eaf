"""`tracing-eval inspect`: how the spans of one trace or thread were read, span by span.

For each span: the role it got (llm call, tool, agent, other) and what decided it, the messages and
tool call read from it with the convention that read them; for each trace, the turn that came out
(or why none did). Pure functions: `inspect_traces` builds plain data, `render` lays it out.
"""

from __future__ import annotations

from typing import Any

from rich.console import Group
from rich.markup import escape
from rich.text import Text

from tracing_eval import conventions
from tracing_eval.assemble import thread_from_traces
from tracing_eval.conventions.values import dumps
from tracing_eval.model import Message, Span, ToolCall, Turn

#: in text output: the last messages of a span's input shown, and the characters of a text
SHOWN_INPUTS = 3
SHOWN_CHARS = 120


def _message(m: Message) -> dict[str, Any]:
    out: dict[str, Any] = {"role": m.role, "content": m.content}
    if m.tool_calls:
        out["tool_calls"] = [_call(c) for c in m.tool_calls]
    if m.tool_call_id:
        out["tool_call_id"] = m.tool_call_id
    if m.finish_reason:
        out["finish_reason"] = m.finish_reason
    return out


def _call(c: ToolCall) -> dict[str, Any]:
    return {"id": c.id, "name": c.name, "arguments": c.arguments, "result": c.result, "error": c.error}


def _depths(spans: list[Span]) -> dict[str, int]:
    by_id = {s.span_id: s for s in spans}
    depths: dict[str, int] = {}
    for s in spans:
        depth, seen, parent = 0, {s.span_id}, s.parent_id
        while parent in by_id and parent not in seen:
            seen.add(parent)
            depth += 1
            parent = by_id[parent].parent_id
        depths[s.span_id] = depth
    return depths


def _span(span: Span, depth: int) -> dict[str, Any]:
    read = conventions.read_span(span)
    return {
        "span_id": span.span_id,
        "parent_id": span.parent_id,
        "name": span.name,
        "depth": depth,
        "role": read.kind,
        "role_from": read.kind_from,
        "thread_id": read.thread_id,
        "inputs_from": read.inputs_from,
        "inputs": [_message(m) for m in read.inputs],
        "outputs_from": read.outputs_from,
        "outputs": [_message(m) for m in read.outputs],
        "tool_call": _call(read.tool) if read.tool else None,
        "error": conventions.span_error(span),
    }


def _turn(turn: Turn) -> dict[str, Any]:
    return {
        "index": turn.index,
        "user": turn.user_text,
        "tool_calls": [_call(c) for c in turn.tool_calls],
        "answer": None if turn.answer_unknown else turn.assistant_text,
        "answer_unknown": turn.answer_unknown.model_dump() if turn.answer_unknown else None,
        "error": turn.error,
    }


def inspect_traces(thread_key: str, traces: list[list[Span]], only_trace: str | None = None) -> dict[str, Any]:
    """What was read from each trace of a thread (or from `only_trace` alone), as plain data."""
    thread = thread_from_traces(thread_key, traces)
    turns = {t.trace_id: t for t in thread.turns}
    missing = {u.trace_id: u for u in thread.unreadable}
    out = []
    for spans in sorted(traces, key=lambda t: min((s.start_ns for s in t), default=0)):
        if not spans or (only_trace and spans[0].trace_id != only_trace):
            continue
        ordered = sorted({s.span_id: s for s in spans}.values(), key=lambda s: s.start_ns)
        depths = _depths(ordered)
        trace_id = ordered[0].trace_id
        turn = turns.get(trace_id)
        out.append(
            {
                "trace_id": trace_id,
                "spans": [_span(s, depths[s.span_id]) for s in ordered],
                "turn": _turn(turn) if turn else None,
                "no_turn": missing[trace_id].model_dump() if trace_id in missing else None,
            }
        )
    return {"thread_key": thread_key, "conversation_id": thread.conversation_id, "traces": out}


# -- text -----------------------------------------------------------------------------------------


def _short(value: Any, limit: int = SHOWN_CHARS) -> str:
    text = value if isinstance(value, str) else dumps(value)
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _call_text(c: dict[str, Any]) -> str:
    result = "" if c["result"] is None else f" = {_short(c['result'], 60)}"
    error = f" [red](error: {escape(_short(c['error'], 60))})[/red]" if c.get("error") else ""
    return f"[magenta]{escape(c['name'])}[/magenta]({escape(_short(c['arguments'], 60))}){escape(result)}{error}"


def _message_text(m: dict[str, Any]) -> str:
    parts = [f'"{escape(_short(m["content"]))}"'] if m["content"] or not m.get("tool_calls") else []
    parts += [f"→ {_call_text(c)}" for c in m.get("tool_calls", [])]
    return f"{m['role']}: " + " ".join(parts)


def _messages_lines(label: str, source: str | None, messages: list[dict[str, Any]], pad: str) -> list[str]:
    if not messages:
        return []
    shown = messages if label == "out" else messages[-SHOWN_INPUTS:]
    earlier = len(messages) - len(shown)
    head = f"{pad}  [dim]{label} ({source}{f', {earlier} earlier not shown' if earlier else ''})[/dim]"
    return [head, *(f"{pad}    {_message_text(m)}" for m in shown)]


_ROLE_STYLE = {"llm": "bold green", "tool": "bold magenta", "agent": "bold cyan", "other": "dim"}


def render(report: dict[str, Any]) -> Group:
    """The report as indented text: spans with their role and readings, then the turn of each trace."""
    lines = [f"[bold]thread[/bold] {escape(report['thread_key'])}  conversation {report['conversation_id']}"]
    for trace in report["traces"]:
        lines.append(f"\n[bold]trace[/bold] {trace['trace_id']}")
        for s in trace["spans"]:
            pad = "  " * (s["depth"] + 1)
            style = _ROLE_STYLE[s["role"]]
            lines.append(f"{pad}{escape(s['name'])}  [{style}]{s['role']}[/{style}] [dim]({s['role_from']})[/dim]")
            lines += _messages_lines("in", s["inputs_from"], s["inputs"], pad)
            lines += _messages_lines("out", s["outputs_from"], s["outputs"], pad)
            if s["tool_call"]:
                lines.append(f"{pad}  [dim]tool call[/dim] {_call_text(s['tool_call'])}")
            if s["error"]:
                lines.append(f"{pad}  [red]error: {escape(_short(s['error']))}[/red]")
        lines += _turn_lines(trace)
    if not report["traces"]:
        lines.append("no spans stored for it")
    return Group(*(Text.from_markup(line) for line in lines))


def _turn_lines(trace: dict[str, Any]) -> list[str]:
    turn = trace["turn"]
    if turn is None:
        missing = trace["no_turn"] or {}
        return [
            f"  [bold red]→ no turn[/bold red]: no user message or answer was read from {missing.get('spans', 0)} span(s)"
        ]
    lines = [f'  [bold]→ turn {turn["index"]}[/bold]  user: "{escape(_short(turn["user"]))}"']
    lines += [f"      tool: {_call_text(c)}" for c in turn["tool_calls"]]
    if turn["answer_unknown"]:
        unknown = turn["answer_unknown"]
        lines.append(
            f"      [bold red]answer unknown[/bold red]: looked for on {escape(unknown['span_name'])!r}, which had "
            + escape(", ".join(unknown["attributes"]) or "no attributes")
        )
    else:
        lines.append(f'      answer: "{escape(_short(turn["answer"]))}"')
    if turn["error"]:
        lines.append(f"      [red]error: {escape(_short(turn['error']))}[/red]")
    return lines
