"""D8 `thread_stats`: raw numbers about a thread, with no score and no pass/fail.

Abandonment: the conversation ends on a user message that is not a closing ("thanks", "bye"),
or the last user message shows annoyance at the assistant, asks for a human it was not offered, or
shouts (D5's cues). Thanks with exclamation marks ("Thank you!!!") are a closing, not frustration. A
thread that ends in a successful hand-off (a `transfer_to_human_agents` call) is `handed_off`, not
abandoned: the user accepted a person, they did not leave. A last "forget it" / "never mind" after a
reply that reported a failure is giving up, so abandonment even when the assistant answered it; a bare
"no" to "anything else?" is a closing.
"""

from __future__ import annotations

from typing import Any

from tracing_eval.metrics.base import MetricBase
from tracing_eval.metrics.deterministic.friction_cues import (
    ANNOYANCE,
    ANNOYANCE_NEEDS,
    FAILURE_REPLY,
    Cue,
    asks_for_a_human,
    reads,
)
from tracing_eval.metrics.deterministic.response_hygiene import ends_in_handoff
from tracing_eval.metrics.deterministic.user_friction import shouting
from tracing_eval.model import MetricResult, Scope, Thread
from tracing_eval.text import Folded

#: a last user message that closes the conversation is not abandonment; one that goes on to ask
#: something ("Thanks! One more question: is there wifi?") is left unanswered
CLOSING = Cue(
    r"^\W*(?:ok(?:ay)?|thanks?|thank you|thx|great|perfect|bye|goodbye|cheers|got it|that'?s all|no,? that'?s it)\b"
    r"[^?]*$"
    r"|\b(?:thank you|thanks|bye|goodbye|see (?:ya|you)|talk to you later|ttyl"
    r"|have (?:a|yourself a) (?:\w+ )?(?:day|night|evening|weekend|one))\b[^?]*$|###stop###"
    # "No, that is all.", "Nope, that should do it!", "I'm all set", "No, I don't need anything else"
    r"|\b(?:that|this|it)(?:'s|\s+is|\s+was|'ll\s+be|\s+will\s+be|\s+would\s+be|\s+should\s+be)\s+(?:\w+\s+)?"
    r"(?:all|it|everything)\b(?!\s+(?:wrong|right|the same|over|about|for|in|of|from|on)\b)[^?]*$"
    r"|\b(?:that|it)\s+(?:should|will|would)\s+do(?:\s+it)?\b[^?]*$"
    r"|\b(?:i'?m|i am|we'?re|we are)\s+(?:all\s+)?(?:set|good|fine|done(?!\s+with))\b[^?]*$"
    r"|\b(?:i|we)\s+(?:don'?t|do not)\s+need\s+anything(?:\s+else)?\b[^?]*$"
    r"|\b(?:got|have)\s+everything\s+(?:i|we)\s+need|\bnothing(?:\s+else)?(?:\s+at\s+all)?\s*[.!]*\s*$"
    r"|\bappreciate\b[^?]*$|\benjoy the rest of your\b|^\W*(?:\w+\W+)?you,?\s+(?:too|as well)\b"
    r"|^\W*(?:cool|sweet|awesome|nice|sounds (?:good|great|perfect)|all good|ty|tysm|tyvm|will do|👍|🙏|👌)\W*$"
    # thanks and goodbyes in the languages the tier recognises
    r"|\b(?:gracias|merci|danke|obrigad[oa]|grazie|adi[oó]s|tsch[uü]ss|tchau|ciao)\b[^?]*$"
)
#: a bare "no" is a closing when the reply asked whether the user needs anything more
BARE_NO = Folded(r"^\W*(?:no|nope|nah)\W*$")
ANYTHING_ELSE = Folded(r"\b(?:anything|something) else\b|\bany other (?:questions?|help)\b")
#: the user gives up: "forget it", "never mind" (after a reply that reported a failure, see `stats`)
GIVE_UP = Folded(
    r"^\W*(?:(?:ok(?:ay)?|oh|ugh|well|fine|no|nah|sigh)\W+)*(?:(?:forget (?:it|about it)|never\s*mind|don'?t bother)\b[^?]*"
    r"|whatever\W*)$"
)


def percentile(values: list[float], q: float) -> float | None:
    """Linear-interpolated percentile (q in [0, 100]); None for no values."""
    if not values:
        return None
    xs = sorted(values)
    k = (len(xs) - 1) * q / 100
    lo = int(k)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (k - lo)


def _total(values: list[int | None]) -> int | None:
    known = [v for v in values if v is not None]
    return sum(known) if known else None


def _reply_before_last_user(thread: Thread) -> str:
    """The reply the user saw before their last message ("" when there is none)."""
    for k in range(len(thread.turns) - 1, -1, -1):
        if thread.turns[k].user_text.strip():
            return thread.turns[k - 1].assistant_text if k > 0 else ""
    return ""


def stats(thread: Thread) -> dict[str, Any]:
    messages = thread.messages
    user = [m for m in messages if m.role == "user" and m.content.strip()]
    assistant = [m for m in messages if m.role == "assistant"]
    replies = [m for m in assistant if m.content.strip()]
    calls = [tc for m in assistant for tc in m.tool_calls]
    user_chars = sum(len(m.content) for m in user)
    reply_chars = sum(len(m.content) for m in replies)
    latencies = [
        (t.ended_ns - t.started_ns) / 1e6
        for t in thread.turns
        if t.started_ns and t.ended_ns and t.ended_ns >= t.started_ns
    ]
    last = next(
        (m for m in reversed(messages) if m.role in ("user", "assistant") and (m.content.strip() or m.tool_calls)), None
    )
    ends_with_user = last is not None and last.role == "user"
    last_user = user[-1].content.replace("\u2019", "'") if user else ""
    reply_before = _reply_before_last_user(thread) if last_user else ""
    frustrated_end = bool(last_user) and (
        reads(ANNOYANCE, ANNOYANCE_NEEDS, last_user, last_user.lower() if last_user.isascii() else None)
        or asks_for_a_human(last_user, reply_before)
        or shouting(last_user)
        or bool(GIVE_UP.search(last_user) and FAILURE_REPLY.search(reply_before))
    )
    closed = bool(CLOSING.search(last_user)) or bool(BARE_NO.search(last_user) and ANYTHING_ELSE.search(reply_before))
    handed_off = bool(thread.turns) and ends_in_handoff(thread.turns[-1])
    turns = len(thread.turns)
    p50, p95 = percentile(latencies, 50), percentile(latencies, 95)
    return {
        "turns": turns,
        "messages": len(messages),
        "user_messages": len(user),
        "assistant_messages": len(assistant),
        "assistant_replies": len(replies),
        "tool_calls": len(calls),
        "tool_errors": sum(tc.failed for tc in calls),
        "tool_calls_per_turn": round(len(calls) / turns, 4) if turns else 0.0,
        "user_chars": user_chars,
        "assistant_chars": reply_chars,
        "assistant_user_length_ratio": round(reply_chars / user_chars, 4) if user_chars else None,
        "latency_ms_p50": None if p50 is None else round(p50, 3),
        "latency_ms_p95": None if p95 is None else round(p95, 3),
        "latency_turns": len(latencies),
        "input_tokens": _total([t.input_tokens for t in thread.turns]),
        "output_tokens": _total([t.output_tokens for t in thread.turns]),
        "ends_with_user": ends_with_user,
        "handed_off": handed_off,
        "abandoned": not handed_off and ((ends_with_user and not closed) or frustrated_end),
        "turn_errors": sum(1 for t in thread.turns if t.error),
    }


class ThreadStats(MetricBase):
    """Thread-scope raw statistics: turns, messages, tool calls, latency, tokens, abandonment (no pass/fail)."""

    name = "thread_stats"
    version = "9"
    tier = "deterministic"
    scopes = ("thread",)
    needs_answer = False
    default_threshold = None
    description = "Raw thread numbers (turns, messages, tool calls and errors, latency, tokens, abandonment)."

    def evaluate(self, thread: Thread) -> list[MetricResult]:
        evidence = stats(thread)
        reason = f"{evidence['turns']} turns, {evidence['tool_calls']} tool calls ({evidence['tool_errors']} failed)"
        if evidence["abandoned"]:
            reason += "; the user left without a closing"
        return [
            MetricResult(
                metric=self.name,
                metric_version=self.version,
                scope=Scope.THREAD,
                score=None,
                passed=None,
                threshold=None,
                label=None,
                reason=reason,
                evidence=evidence,
            )
        ]
