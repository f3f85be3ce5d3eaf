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

SIGNALS: tuple[tuple[str, re.Pattern[str]], ...] = (
    (
        "transcript_line",
        re.compile(r"(?im)^\W{0,3}\[\d+\]\s*(user|assistant|tool|system)\b|\(turn \d+\)\s*:|^-{2,}\s*turn \d+"),
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


def suspected_injection(thread: Thread, first: int | None = None, last: int | None = None) -> list[dict[str, Any]]:
    """Messages (of turns `first`..`last`, by default all) whose content carries an injection signal:
    `[{"message": n, "signals": [...]}]`, tool call arguments and results included."""
    found: list[dict[str, Any]] = []
    for turn in thread.turns:
        if (first is not None and turn.index < first) or (last is not None and turn.index > last):
            continue
        for m in turn.messages:
            texts = [
                m.content,
                *(str(c.result or "") for c in m.tool_calls),
                *(str(c.error or "") for c in m.tool_calls),
            ]
            signals = sorted({name for name, pattern in SIGNALS for text in texts if text and pattern.search(text)})
            if signals and m.position is not None:
                found.append({"message": m.position, "signals": signals})
    return found
