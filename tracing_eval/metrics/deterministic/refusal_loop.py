"""D3 `refusal_loop`: runs of consecutive refusing assistant replies (V5− labels none/partial/fully).

A refusal is matched by regexes after folding curly apostrophes ("I can't help with", "I'm sorry,
but", "as an AI", "outside my scope", ...). A run of two that recovers is `partial`; a run of three
or more, or a thread that ends on two refusals, is `fully` (eval_lib treats refusal loops as fully).
"""

from __future__ import annotations

import re

from tracing_eval.metrics.base import MetricBase
from tracing_eval.metrics.deterministic.views import Located, replies
from tracing_eval.model import MetricResult, Scope, Thread, not_applicable, score_result

NAME = "refusal_loop"
VERSION = "1"
DEFAULT_THRESHOLD = 0.7
WEIGHTS: dict[str, float] = {"none": 1.0, "partial": 0.7, "fully": 0.0}

_CANNOT = r"\bi(?:\s+can ?not|\s+can'?t|\s+won'?t|\s+will not|(?:\s+am|'?m)\s+(?:unable|not able) to)"
_ACTION = (
    r"(?:help|assist|provide|do|answer|comply|support|share|give|fulfil+|process|complete|discuss|continue|make"
    r"|create|generate|offer|engage)"
)
REFUSAL = re.compile(
    rf"{_CANNOT}\s+(?:\w+\s+){{0,2}}{_ACTION}\b"
    r"|\bi'?m sorry,? but\b|\bi am sorry,? but\b|\bsorry,? but i\b"
    r"|\bas an ai\b"
    r"|\bi (?:do not|don't) have access\b"
    r"|\b(?:outside|beyond) (?:of )?(?:my|the) scope\b"
    r"|\bi can only (?:help|assist|answer|discuss)\b"
    r"|\b(?:not allowed|not permitted|not able) to (?:help|assist|provide|share|discuss|do)\b"
    r"|\bunable to (?:help|assist) with\b",
    re.IGNORECASE,
)
_APOSTROPHES = str.maketrans({"\u2019": "'", "\u2018": "'", "\u02bc": "'"})


def is_refusal(text: str) -> bool:
    return bool(REFUSAL.search(text.translate(_APOSTROPHES)))


def runs(flags: list[bool]) -> list[tuple[int, int]]:
    """(start, length) of every run of consecutive True values."""
    out: list[tuple[int, int]] = []
    start = None
    for k, flag in enumerate([*flags, False]):
        if flag and start is None:
            start = k
        elif not flag and start is not None:
            out.append((start, k - start))
            start = None
    return out


def verdict(flags: list[bool]) -> str:
    found = runs(flags)
    longest = max((n for _, n in found), default=0)
    trailing = found[-1][1] if found and found[-1][0] + found[-1][1] == len(flags) else 0
    if longest >= 3 or trailing >= 2:
        return "fully"
    if longest == 2:
        return "partial"
    return "none"


class RefusalLoop(MetricBase):
    """Thread-scope runs of refusals without progress."""

    name = NAME
    version = VERSION
    tier = "deterministic"
    scopes = ("thread",)
    default_threshold = DEFAULT_THRESHOLD
    description = "Consecutive refusals by the assistant (V5−: none/partial/fully)."

    def evaluate(self, thread: Thread) -> list[MetricResult]:
        items: list[Located] = replies(thread)
        if not items:
            return [not_applicable(NAME, "no assistant replies with text", version=VERSION)]
        flags = [is_refusal(x.text) for x in items]
        label = verdict(flags)
        found = runs(flags)
        longest = max((n for _, n in found), default=0)
        evidence = {
            "refusal_messages": [x.position for x, f in zip(items, flags, strict=True) if f],
            "runs": [{"positions": [x.position for x in items[s : s + n]], "length": n} for s, n in found if n >= 2],
            "longest_run": longest,
            "ends_in_refusal": bool(flags[-1]),
            "refusals": sum(flags),
            "replies": len(items),
        }
        reason = {
            "none": f"{sum(flags)} refusal(s), never two in a row",
            "partial": "two refusals in a row, then the assistant moved on",
            "fully": f"refusal loop: longest run {longest}"
            + (", and the thread ends on refusals" if flags[-1] else ""),
        }[label]
        return [
            score_result(
                NAME,
                WEIGHTS[label],
                threshold=self.spec.threshold,
                scope=Scope.THREAD,
                label=label,
                reason=reason,
                evidence=evidence,
                version=VERSION,
            )
        ]
