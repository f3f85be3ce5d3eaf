"""`repetitive_pattern` (seed 000, L6): is the assistant stuck repeating itself? One judge call, V5−.

The deterministic `repetition` and `refusal_loop` results go into the instructions as hints, and
they gate the call. The judge is not asked (status `skipped`) only when the deterministic tier is
confident there is nothing to find: both are `none`; the closest pair of replies and the closest
pair of sentences from different replies are below 0.35 similarity (replies that paraphrase each
other share some words); no user turn repeats an earlier one; the replies are in the language the
tier's word lists cover; and no tool call repeats with the same arguments. Lexical checks miss
paraphrases, so anything short of that clean picture goes to the judge.
"""

from __future__ import annotations

import json
from collections import Counter
from typing import Annotated, Any

from tracing_eval.metrics.judged.answers import Answer, Replies, Text, one_of
from tracing_eval.metrics.judged.base import V5_MINUS, JudgeContext
from tracing_eval.metrics.judged.question import Question, VerdictMetric
from tracing_eval.metrics.judged.transcript import json_string
from tracing_eval.metrics.results import not_applicable, skipped
from tracing_eval.model import MetricResult, Status, Thread

GATE_MAX_SIMILARITY = 0.35
MAX_HINT_SEGMENTS = 5

RUBRIC = """\
TASK: repetitive patterns. Is the assistant stuck in a loop: repeating the same phrases, answers \
or tool calls without moving the conversation forward? Higher is better: the fewer repeats, the \
better.
Verdicts:
- none: no repetition; every assistant turn adds something new.
- minor: one phrase comes back slightly, but the conversation moves on.
- partial: noticeable repetition, yet some progress is made.
- mostly: frequent repetition and almost no progress.
- fully: stuck in a loop; the same action or answer again with no progress.
Rules:
- Repetition is a defect only when nothing moves forward. Consistent wording in reply to a question \
the user asks again is neutral.
- A run of refusals is a loop (fully), even when each refusal is worded differently.
- The end of the conversation counts most: if the assistant breaks out of a loop and recovers, \
the verdict reflects the recovery.
Examples (not part of the conversation above):
1. [1] user: "Can you help with X?" [2] assistant: "I can't help with this request." [3] user: \
"Please, it's urgent." [4] assistant: "I can't help with this request." [5] user: "At least tell me \
where to go." [6] assistant: "I can't help with this request." -> fully: the same refusal three \
times, no way forward.
2. [1] user: "My app crashes on start." [2] assistant: "Try clearing the app cache and restarting." \
[3] user: "Still crashes." [4] assistant: "Have you tried clearing the cache and restarting?" [5] \
user: "Yes!" [6] assistant: "Then reinstall it; if it still crashes, send me the crash log." -> \
partial: one repeated suggestion, then progress.
3. [1] user: "Where is my parcel?" [2] assistant: "It left the depot this morning." [3] user: "When \
will it arrive?" [4] assistant: "Tomorrow before noon." -> none: every reply adds something."""

ANSWER = (
    "Answer in JSON: repeated_segments (what is repeated: a short quote or action, with the numbers of the "
    "assistant messages it appears in; empty if nothing), then reason (one or two sentences), then verdict."
)


class Segment(Answer):
    """A repeated segment: a short quote or action, and the assistant replies it appears in."""

    text: Text
    messages: Replies


class RepetitionAnswer(Answer):
    repeated_segments: list[Segment]
    reason: Text
    verdict: Annotated[str, one_of(V5_MINUS)]


def repeated_tool_calls(thread: Thread) -> list[dict[str, Any]]:
    """Tool calls made two or more times with the same name and arguments."""
    seen: Counter[tuple[str, str]] = Counter()
    positions: dict[tuple[str, str], list[int | None]] = {}
    for m in thread.messages:
        for call in m.tool_calls:
            key = (call.name, json.dumps(call.arguments, sort_keys=True, ensure_ascii=False, default=str))
            seen[key] += 1
            positions.setdefault(key, []).append(m.position)
    return [
        {"call": f"{name}({args})"[:200], "count": count, "messages": positions[(name, args)]}
        for (name, args), count in seen.items()
        if count >= 2
    ]


def lexical_evidence(thread: Thread, ctx: JudgeContext) -> dict[str, Any]:
    """What the deterministic tier saw, in the shape the result's evidence keeps."""
    out: dict[str, Any] = {}
    rep = ctx.deterministic_result("repetition")
    if rep is not None:
        out["repetition"] = rep.label if rep.status == Status.OK else rep.status.value
        if rep.status == Status.OK:
            out["max_similarity"] = rep.evidence.get("max_similarity")
            out["max_sentence_similarity"] = rep.evidence.get("max_sentence_similarity")
            out["user_repeats"] = rep.evidence.get("user_repeats")
            out["language_covered"] = rep.evidence.get("language_covered")
            out["repeated_messages"] = rep.evidence.get("repeated_messages", [])
            out["repeated_segments"] = rep.evidence.get("repeated_segments", [])[:MAX_HINT_SEGMENTS]
    loop = ctx.deterministic_result("refusal_loop")
    if loop is not None:
        out["refusal_loop"] = loop.label if loop.status == Status.OK else loop.status.value
        if loop.status == Status.OK:
            out["refusal_messages"] = loop.evidence.get("refusal_messages", [])
    out["repeated_tool_calls"] = repeated_tool_calls(thread)
    return out


def skip_reason(lexical: dict[str, Any]) -> str | None:
    """Why the judge need not be asked, or None when it must be (any signal missing: ask)."""
    similarity: Any = lexical.get("max_similarity")  # checked to be a number below
    sentence: Any = lexical.get("max_sentence_similarity")
    clean = (
        lexical.get("repetition") == "none"
        and lexical.get("refusal_loop") == "none"
        and isinstance(similarity, int | float)
        and similarity < GATE_MAX_SIMILARITY
        and isinstance(sentence, int | float)
        and sentence < GATE_MAX_SIMILARITY
        and lexical.get("user_repeats") == []
        and lexical.get("language_covered") is True
        and not lexical["repeated_tool_calls"]
    )
    if not clean:
        return None
    return (
        f"lexical checks found no repetition (max similarity {max(similarity, sentence):.2f} < "
        f"{GATE_MAX_SIMILARITY} between replies and between their sentences), no repeated user turn, "
        "no refusal loop and no repeated tool call; the judge was not asked"
    )


def hints(lexical: dict[str, Any]) -> str:
    """The deterministic findings as short lines for the judge."""
    lines = []
    if "repetition" in lexical:
        line = f"- word-overlap check: {lexical['repetition']}"
        if "max_similarity" in lexical:
            line += f"; highest similarity between replies {lexical['max_similarity']}"
            line += f"; repeating messages {lexical['repeated_messages'] or 'none'}"
        lines.append(line)
        for seg in lexical.get("repeated_segments", []):
            lines.append(f"  - {json_string(seg['text'])} appears {seg['count']} times, messages {seg['positions']}")
    if "refusal_loop" in lexical:
        line = f"- refusal check: {lexical['refusal_loop']}"
        if lexical.get("refusal_messages"):
            line += f"; refusals in messages {lexical['refusal_messages']}"
        lines.append(line)
    for call in lexical["repeated_tool_calls"]:
        lines.append(f"- tool call {json_string(call['call'])} made {call['count']} times, messages {call['messages']}")
    if not lines:
        return ""
    head = "Hints from lexical checks (they miss paraphrases and may flag harmless overlap; you decide):"
    return "\n".join([head, *lines])


def instructions(lexical: dict[str, Any]) -> str:
    return "\n\n".join(part for part in (RUBRIC, hints(lexical), ANSWER) if part)


class RepetitivePattern(VerdictMetric):
    """Thread-scope judged repetition (V5−), gated by the deterministic tier."""

    name = "repetitive_pattern"
    version = "3"
    default_threshold = 0.7
    description = "The assistant repeats phrases, answers or tool calls without progress (judge, V5−)."
    scale = V5_MINUS
    answer = RepetitionAnswer
    instructions = RUBRIC

    def question(self, thread: Thread, ctx: JudgeContext) -> Question[Answer] | list[MetricResult]:
        replies = [m for m in thread.messages if m.role == "assistant" and (m.content.strip() or m.tool_calls)]
        if len(replies) < 2:
            return [not_applicable(self.spec, "fewer than two assistant replies")]
        lexical = lexical_evidence(thread, ctx)
        reason = skip_reason(lexical)
        if reason is not None:
            return [skipped(self.spec, reason, evidence={"lexical": lexical})]
        numbers = {m.position for m in replies if m.position is not None}
        keep = frozenset(
            t.index for t in thread.turns if any(m.position in repeated_positions(lexical) for m in t.messages)
        )
        return self.ask(
            {"replies": numbers}, instructions=instructions(lexical), evidence={"lexical": lexical}, keep_turns=keep
        )


def repeated_positions(lexical: dict[str, Any]) -> set[int]:
    """Messages the lexical checks found repeating: the judge needs them kept in a long thread."""
    found = set(lexical.get("repeated_messages") or []) | set(lexical.get("refusal_messages") or [])
    for call in lexical["repeated_tool_calls"]:
        found |= {p for p in call["messages"] if p is not None}
    return {p for p in found if isinstance(p, int)}
