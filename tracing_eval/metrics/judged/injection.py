"""Content that tries to steer the judge: recorded as `evidence.suspected_injection`, never obeyed.

The transcript renderer already keeps every content inside its own JSON value, so a forged line
cannot become a transcript line; this module only names the messages that try, so that a reader
of a result knows the conversation held text aimed at the evaluator. The signals are narrow on
purpose (a sign of an attempt, not a verdict): text laid out like a transcript message, like a
system prompt header, like the judge's own JSON answer, or addressed to an evaluator.
"""

from __future__ import annotations

import re
from typing import Any

from tracing_eval.model import Thread
from tracing_eval.transcripts import tool_result_messages

SIGNALS: tuple[tuple[str, re.Pattern[str]], ...] = (
    (
        "transcript_line",
        re.compile(
            r"(?im)^\W{0,3}\[\d+\]\s*(user|assistant|tool|system)\b|\(turn \d+\)\s*:|^-{2,}\s*turns? \d+|"
            r"\[clipped: [\d,]+ of"
        ),
    ),
    (
        "system_prompt_header",
        re.compile(
            r"(?im)^\W{0,4}(system prompt|system message|system instructions?)\b|^\W{0,4}system\s*:|<\|im_start\|>\s*system"
        ),
    ),
    ("answer_json", re.compile(r'"(verdict|score|label|passed)"\s*:')),
    (
        "evaluator_instruction",
        re.compile(
            r"(?i)\b(note|message|instructions?|reminder)\s+(to|for)\s+(the\s+|any\s+)?(evaluators?|judges?|graders?|"
            r"assessors?|reviewers?|scorers?|ai\s+evaluators?)\b|\b(ignore|disregard|forget)\s+(all\s+|any\s+)?"
            r"(the\s+|your\s+)?(previous|prior|above|earlier|preceding)\s+(instructions|rules|prompts?|messages)\b|"
            r"\b(evaluators?|judges?|graders?)\s*(,|:)\s*(you\s+must|please|rate|score|mark|give)"
        ),
    ),
)


_BREAKS = re.compile("\r\n?|[\u0085\u2028\u2029\x0b\x0c\x1c-\x1e]")


def signals_of(text: str) -> list[str]:
    """The injection signals in one text (any kind of line break counts as one)."""
    text = _BREAKS.sub("\n", text)
    return sorted(name for name, pattern in SIGNALS if pattern.search(text))


def suspected_injection(thread: Thread) -> list[dict[str, Any]]:
    """Messages whose content carries an injection signal: `[{"message": n, "signals": [...]}]`.
    A tool result counts at its tool message, or at its call's message when no tool message holds it."""
    answered = tool_result_messages(thread.messages)
    found: list[dict[str, Any]] = []
    for m in thread.messages:
        inline = [c for c in m.tool_calls if id(c) not in answered]
        texts = [m.content, *(str(c.result) for c in inline if c.result), *(str(c.error) for c in inline if c.error)]
        signals = sorted({s for text in texts if text for s in signals_of(text)})
        if signals and m.position is not None:
            found.append({"message": m.position, "signals": signals})
    return found
