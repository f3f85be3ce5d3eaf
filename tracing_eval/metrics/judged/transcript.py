"""The thread as the judge reads it: conversation content as data, within a token budget.

Layout (the judge's system message explains it):

    SYSTEM PROMPT OF THE ASSISTANT:
    "You are the support agent of ..."
    CONVERSATION:
    --- turn 0
    [1] user: "Where is my order A48213?"
    [2] assistant calls get_order({"id":"A48213"}) -> [3]
    [3] tool: {"status":"shipped"}

Every content is one JSON value on its message's line (a JSON string, or the JSON a tool
returned), so no content can forge a transcript line, a header or the end of its own message.
Each tool result is shown once: at its tool message, or inline after its call when there is no
tool message. Text that does not fit its cap keeps its head and tail, with a `[clipped: ...]`
marker outside the JSON; a thread over its token budget keeps its first and last turns and the
turns a metric needs, with a `--- ... not shown` line for each gap. Message numbers are the
thread's own positions, so they stay the same whatever is left out.
"""

from __future__ import annotations

import json
import math
import re
from bisect import bisect_left, bisect_right
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from tracing_eval.metrics.judged.injection import suspected_injection
from tracing_eval.model import Message, Thread, ToolCall, Turn
from tracing_eval.transcripts import tool_result_messages

#: Line breaks that JSON leaves unescaped but readers may honour.
_RAW_BREAKS = {"\u0085": "\\u0085", "\u2028": "\\u2028", "\u2029": "\\u2029"}
_BREAKS = re.compile("[\u0085\u2028\u2029]")
_PIECES = re.compile(r"\w+|[^\w\s]")
_PLAIN_NAME = re.compile(r"^[\w.:/@-]{1,128}$")
MIN_CLIP_CHARS = 400


# -- tokens -----------------------------------------------------------------------------------------


def _wide(ch: str) -> bool:
    o = ord(ch)
    return 0x2E80 <= o <= 0x9FFF or 0xAC00 <= o <= 0xD7AF or 0xF900 <= o <= 0xFAFF


def estimate_tokens(text: str) -> int:
    """Tokens of `text`, estimated on the high side without a tokenizer.

    Each punctuation mark is one token; a word of ASCII letters one per 4 letters; digits one per 3;
    mixed letters and digits one per 2; CJK one per character, other scripts one per 3 characters.
    On the shared datasets this is 1.3-1.6 times o200k's count in total and below it for about
    1% of single messages, so a budget in these tokens holds for the judge's tokenizer. It is never
    above `len(text)`, so text of at most N characters needs no estimate to fit N tokens.
    """
    n = 0
    for piece in _PIECES.findall(text):
        if not (piece[0].isalnum() or piece[0] == "_"):
            n += 1
        elif piece.isascii():
            n += -(-len(piece) // (4 if piece.isalpha() else 3 if piece.isdigit() else 2))
        else:
            wide = sum(1 for ch in piece if _wide(ch))
            n += wide + -(-(len(piece) - wide) // 3)
    return n


# -- content as data --------------------------------------------------------------------------------


def _escape_breaks(encoded: str) -> str:
    return _BREAKS.sub(lambda m: _RAW_BREAKS[m.group()], encoded)


def json_string(text: str) -> str:
    """`text` as one JSON string on one line (no raw line break of any kind survives)."""
    return _escape_breaks(json.dumps(text, ensure_ascii=False))


def json_value(value: Any) -> str:
    """A JSON value on one line, compact."""
    return _escape_breaks(json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str))


def _as_json(text: str) -> Any:
    """The JSON object or array `text` holds, else None."""
    stripped = text.strip()
    if not stripped or stripped[0] not in "{[":
        return None
    try:
        return json.loads(stripped)
    except ValueError:
        return None


@dataclass(frozen=True)
class Data:
    """A content as the judge sees it: its JSON, and how many characters were clipped from it."""

    shown: str
    clipped: int = 0
    total: int = 0


def data(value: Any, cap: int) -> Data:
    """`value` (text or JSON data) as one JSON value on one line, at most about `cap` characters:
    longer content keeps its head (two thirds) and tail, with a marker outside the JSON."""
    if value is None:
        return Data('""')
    parsed = _as_json(value) if isinstance(value, str) else value
    text = json_value(parsed) if parsed is not None else str(value)
    if len(text) <= cap:
        return Data(text if parsed is not None else json_string(text))
    head, tail = text[: cap * 2 // 3], text[len(text) - cap // 3 :]
    hidden = len(text) - len(head) - len(tail)
    marker = f"[clipped: {hidden:,} of {len(text):,} characters not shown]"
    return Data(f"{json_string(head)} {marker} {json_string(tail)}", hidden, len(text))


def _name(name: str) -> str:
    return name if _PLAIN_NAME.match(name) else json_string(name)


# -- limits and results -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Limits:
    """How much of a thread one judge request may show.

    `budget_tokens` is the whole transcript (estimated tokens); the caps are characters of one
    content before head-and-tail clipping. The system prompt may take at most half the budget.
    """

    budget_tokens: int = 96_000
    tool_chars: int = 8_000
    message_chars: int = 24_000

    def tighter(self) -> Limits | None:
        """Half the content caps, or None when they are at their minimum already."""
        if self.tool_chars <= MIN_CLIP_CHARS and self.message_chars <= MIN_CLIP_CHARS:
            return None
        return Limits(
            self.budget_tokens, max(MIN_CLIP_CHARS, self.tool_chars // 2), max(MIN_CLIP_CHARS, self.message_chars // 2)
        )


@dataclass
class Rendered:
    """A rendered transcript and what it left out."""

    text: str
    budget_tokens: int
    clipped: dict[int, dict[str, int]] = field(default_factory=dict)  # message -> {hidden, of} characters
    elided_turns: list[int] = field(default_factory=list)
    system_prompt_clipped: dict[str, int] | None = None
    system_prompt_not_shown: int | None = None  # characters of a system prompt left out on purpose

    @cached_property
    def tokens(self) -> int:
        return estimate_tokens(self.text)

    @property
    def over_budget(self) -> bool:
        return len(self.text) > self.budget_tokens and self.tokens > self.budget_tokens

    def notes(self) -> dict[str, Any]:
        """What was not shown, for a result's evidence (empty when everything was)."""
        out: dict[str, Any] = {}
        if self.clipped:
            out["clipped_messages"] = sorted(self.clipped)
        if self.elided_turns:
            out["elided_turns"] = self.elided_turns
        if self.system_prompt_clipped:
            out["system_prompt_clipped"] = self.system_prompt_clipped
        if self.system_prompt_not_shown:
            out["system_prompt_not_shown"] = {"of": self.system_prompt_not_shown}
        return out


# -- rendering --------------------------------------------------------------------------------------


class _Lines:
    """The lines of one rendering, collecting what was clipped."""

    def __init__(self, limits: Limits, answered: dict[int, Message]) -> None:
        self.limits = limits
        self.answered = answered
        self.clipped: dict[int, dict[str, int]] = {}

    def _content(self, position: int, value: Any, cap: int) -> str:
        shown = data(value, cap)
        if shown.clipped:
            self.clipped[position] = {"hidden": shown.clipped, "of": shown.total}
        return shown.shown

    def call(self, call: ToolCall, position: int) -> str:
        """`name(arguments) -> [m]` (the result's message), or the result itself when no message holds it."""
        args = data(call.arguments if call.arguments is not None else {}, self.limits.tool_chars)
        if args.clipped:
            seen = self.clipped.setdefault(position, {"hidden": 0, "of": 0})
            seen["hidden"] += args.clipped
            seen["of"] += args.total
        line = f"{_name(call.name)}({args.shown})"
        answer = self.answered.get(id(call))
        if answer is not None and answer.position is not None:
            return f"{line} -> {'ERROR in ' if call.error else ''}[{answer.position}]"
        if call.error:
            return f"{line} -> ERROR: {self._content(position, call.error, self.limits.tool_chars)}"
        if call.result is None:
            return f"{line} -> (no result recorded)"
        return f"{line} -> {self._content(position, call.result, self.limits.tool_chars)}"

    def message(self, m: Message, position: int) -> list[str]:
        if m.role == "tool":
            return [f"[{position}] tool: {self._content(position, m.content, self.limits.tool_chars)}"]
        calls = [self.call(c, position) for c in m.tool_calls]
        if calls and not m.content:
            return [f"[{position}] {m.role} calls {calls[0]}", *(f"    and calls {c}" for c in calls[1:])]
        lines = [f"[{position}] {m.role}: {self._content(position, m.content, self.limits.message_chars)}"]
        return lines + [f"    calls {c}" for c in calls]


@dataclass(frozen=True)
class Layout:
    """What every rendering of one thread reads, worked out once per thread, so that rendering the
    window of each turn of a long thread does not walk the whole thread each time."""

    positions: dict[int, int]  # message number by `id(message)` (its position, or its running index)
    answered: dict[int, Message]  # the tool message answering each call, by `id(call)`
    order: dict[int, int]  # where each turn stands in `thread.turns`, by `id(turn)`
    leading: list[tuple[int, int] | None]  # lowest and highest message number of `thread.turns[:k]`
    indices: list[int] | None  # the turns' indices when they increase along the thread (they do when assembled)


def layout(thread: Thread) -> Layout:
    """The `Layout` of `thread`."""
    positions: dict[int, int] = {}
    leading: list[tuple[int, int] | None] = [None]
    k = 0
    for turn in thread.turns:
        span = leading[-1]
        for m in turn.messages:
            number = positions[id(m)] = m.position if m.position is not None else k
            span = (min(span[0], number), max(span[1], number)) if span else (number, number)
            k += 1
        leading.append(span)
    indices = [t.index for t in thread.turns]
    increasing = all(a < b for a, b in zip(indices, indices[1:], strict=False))
    return Layout(
        positions,
        tool_result_messages(thread.messages),
        {id(t): k for k, t in enumerate(thread.turns)},
        leading,
        indices if increasing else None,
    )


#: The line that stands for a system prompt a metric does not show (its definition does not need it).
SYSTEM_NOT_SHOWN = "SYSTEM PROMPT OF THE ASSISTANT: not shown (this question does not use it)"


def _system_block(prompt: str | None, budget_tokens: int) -> tuple[list[str], dict[str, int] | None]:
    """The system prompt as a JSON string; over half the budget it is clipped, and says so."""
    if not prompt:
        return [], None
    encoded = json_string(prompt)
    allowed = budget_tokens // 2
    if len(encoded) <= allowed or (tokens := estimate_tokens(encoded)) <= allowed:
        return ["SYSTEM PROMPT OF THE ASSISTANT:", encoded], None
    cap = math.floor(len(prompt) * allowed / tokens)
    shown = data(prompt, max(MIN_CLIP_CHARS, cap))
    while estimate_tokens(shown.shown) > allowed and cap > MIN_CLIP_CHARS:  # the marker and cut words count too
        cap = cap * 9 // 10
        shown = data(prompt, max(MIN_CLIP_CHARS, cap))
    head = "SYSTEM PROMPT OF THE ASSISTANT (clipped to fit the judge's token budget):"
    return [head, shown.shown], {"hidden": shown.clipped, "of": shown.total}


def _gap(first: Turn, last: Turn, numbers: tuple[int, int] | None, why: str) -> str:
    """The line for turns `first` to `last`, not shown, whose messages are numbered within `numbers`."""
    span = f"turn {first.index}" if first is last else f"turns {first.index} to {last.index}"
    if numbers:
        span += f" (messages [{numbers[0]}] to [{numbers[1]}])"
    return f"--- {span} not shown: {why}; what they held is unknown"


def _run_gap(run: list[Turn], positions: dict[int, int], why: str) -> str:
    numbers = [positions[id(m)] for t in run for m in t.messages]
    return _gap(run[0], run[-1], (min(numbers), max(numbers)) if numbers else None, why)


def _render(
    thread: Thread,
    limits: Limits,
    turns: list[Turn],
    keep: frozenset[int],
    until: int | None,
    before: str,
    show_system: bool,
    where: Layout,
) -> Rendered:
    positions = where.positions
    lines = _Lines(limits, where.answered)
    prompt = thread.system_prompt
    not_shown = len(prompt) if prompt and prompt.strip() and not show_system else None
    if not_shown:
        system, system_clipped = [SYSTEM_NOT_SHOWN], None
    else:
        system, system_clipped = _system_block(prompt, limits.budget_tokens)
    blocks: list[tuple[Turn, list[str]]] = []
    for turn in turns:
        body = [f"--- turn {turn.index}"]
        for m in turn.messages:
            number = positions[id(m)]
            if until is not None and number > until:
                break
            body += lines.message(m, number)
        blocks.append((turn, body))

    head = [*system, "CONVERSATION:"]
    first_index = where.order.get(id(turns[0]), 0) if turns else 0
    if first_index > 0:
        head.append(_gap(thread.turns[0], thread.turns[first_index - 1], where.leading[first_index], before))
    shown = [t.index for t, _ in blocks]
    elided: list[int] = []
    chars = sum(len(line) + 1 for _, body in blocks for line in body) + sum(len(line) + 1 for line in head)
    cost = {} if chars <= limits.budget_tokens else {t.index: estimate_tokens("\n".join(b)) for t, b in blocks}
    fixed = estimate_tokens("\n".join(head)) if cost else 0
    if cost and fixed + sum(cost.values()) > limits.budget_tokens and len(blocks) > 2:
        must = {shown[0], shown[-1]} | (keep & set(shown))
        room = limits.budget_tokens - fixed - sum(cost[i] for i in must) - 40 * len(shown)
        chosen = set(must)
        for i in reversed(shown):  # the most recent turns first
            if i not in chosen and cost[i] <= room:
                chosen.add(i)
                room -= cost[i]
        elided = [i for i in shown if i not in chosen]

    out = list(head)
    run: list[Turn] = []
    for turn, body in blocks:
        if turn.index in elided:
            run.append(turn)
            continue
        if run:
            out.append(_run_gap(run, positions, "left out to fit the judge's token budget"))
            run = []
        out += body
    if run:
        out.append(_run_gap(run, positions, "left out to fit the judge's token budget"))
    text = "\n".join(out)
    hidden = {positions[id(m)] for t in turns if t.index in elided for m in t.messages}
    clipped = {p: c for p, c in lines.clipped.items() if p not in hidden}
    return Rendered(text, limits.budget_tokens, clipped, elided, system_clipped, not_shown)


def _fit(
    thread: Thread,
    limits: Limits,
    turns: list[Turn],
    keep: frozenset[int],
    until: int | None,
    before: str,
    show_system: bool,
    where: Layout,
) -> Rendered:
    """Render; while over budget, halve the content caps (clipping more, always with a marker)."""
    current = limits
    rendered = _render(thread, limits, turns, keep, until, before, show_system, where)
    while rendered.over_budget and (tighter := current.tighter()) is not None:
        current = tighter
        rendered = _render(thread, current, turns, keep, until, before, show_system, where)
    return rendered


def render_thread(
    thread: Thread, limits: Limits | None = None, keep: Iterable[int] = (), where: Layout | None = None
) -> Rendered:
    """The whole thread; over the budget, turns are left out, except the first, the last and `keep`."""
    where = where or layout(thread)
    return _fit(thread, limits or Limits(), list(thread.turns), frozenset(keep), None, "", True, where)


def render_window(
    thread: Thread,
    first: int,
    last: int,
    until: int | None = None,
    limits: Limits | None = None,
    system_prompt: bool = True,
    where: Layout | None = None,
) -> Rendered:
    """The past of one judged reply: the system prompt and turns `first`..`last` (turn indices),
    up to message number `until` (nothing after it), with a line saying earlier turns are not shown.

    With `system_prompt=False` a line saying that the system prompt is not shown stands in its
    place, and the notes record its length. `where` is the thread's `layout`, when it is at hand."""
    where = where or layout(thread)
    if where.indices is not None:
        turns = thread.turns[bisect_left(where.indices, first) : bisect_right(where.indices, last)]
    else:
        turns = [t for t in thread.turns if first <= t.index <= last]
    keep = frozenset(t.index for t in turns)
    return _fit(thread, limits or Limits(), turns, keep, until, "before this window", system_prompt, where)


class Transcripts:
    """One thread's renderings for the judge, each made once per evaluation.

    `whole()` is the same text for every thread metric whenever the thread fits its budget (one
    shared prefix); only a thread over budget gets a rendering per set of turns to keep.
    """

    def __init__(self, thread: Thread, limits: Limits | None = None) -> None:
        self.thread = thread
        self.limits = limits or Limits()
        self._whole: dict[frozenset[int], Rendered] = {}
        self._windows: dict[tuple[int, int, int | None, bool], Rendered] = {}
        self._injection: list[dict[str, Any]] | None = None

    @cached_property
    def layout(self) -> Layout:
        """The thread's `Layout`, shared by all its renderings."""
        return layout(self.thread)

    @cached_property
    def _turn_of(self) -> dict[int | None, int]:
        """The turn index of each message position."""
        return {m.position: t.index for t in self.thread.turns for m in t.messages}

    def whole(self, keep: Iterable[int] = ()) -> Rendered:
        full = self._whole.get(frozenset())
        if full is None:
            full = self._whole[frozenset()] = render_thread(self.thread, self.limits, where=self.layout)
        if not full.elided_turns:
            return full
        key = frozenset(keep)
        if key not in self._whole:
            self._whole[key] = render_thread(self.thread, self.limits, key, self.layout)
        return self._whole[key]

    def window(self, first: int, last: int, until: int | None = None, system_prompt: bool = True) -> Rendered:
        key = (first, last, until, system_prompt)
        if key not in self._windows:
            self._windows[key] = render_window(self.thread, first, last, until, self.limits, system_prompt, self.layout)
        return self._windows[key]

    def injection(self, first: int = 0, last: int | None = None, until: int | None = None) -> list[dict[str, Any]]:
        """`evidence.suspected_injection` for the whole thread, or for turns `first`..`last` up to
        message `until` (what a window shows)."""
        if self._injection is None:
            self._injection = suspected_injection(self.thread)
        if not self._injection:
            return []
        turn_of = self._turn_of
        return [
            x
            for x in self._injection
            if first <= turn_of.get(x["message"], -1) <= (last if last is not None else len(self.thread.turns))
            and (until is None or x["message"] <= until)
        ]
