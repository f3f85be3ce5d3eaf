"""L2 `completeness`: were the user's intentions met by the end of the conversation?

One judge call lists every intention the user expressed, each `fulfilled`, `withdrawn` (the user
dropped or replaced it) or `unfulfilled`, with the message numbers it rests on. Score =
fulfilled / (fulfilled + unfulfilled); withdrawn intentions do not count, and a thread with none
pending scores 1.0. Label `complete` at 1.0, else `incomplete`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

from tracing_eval.metrics.deterministic.views import located
from tracing_eval.metrics.judged.base import (
    JudgeContext,
    items_of,
    label_of,
    message_schema,
    numbers_of,
    strict_object,
    text_of,
)
from tracing_eval.metrics.judged.question import Question, QuestionMetric, scored
from tracing_eval.model import MetricResult, Thread, not_applicable, score_result

NAME = "completeness"
VERSION = "2"
STATUSES = ("fulfilled", "withdrawn", "unfulfilled")
_LABELS = dict.fromkeys(STATUSES, 0.0)  # label_of checks membership only

INSTRUCTIONS = """\
TASK: conversation completeness.
List every distinct intention the user expressed in the conversation above (a question to answer, \
a task to perform, a problem to solve). For each one decide its status at the end of the conversation:
- fulfilled: the assistant answered or carried it out, or clearly resolved it;
- withdrawn: the user dropped it, replaced it with another request, or said it was no longer needed;
- unfulfilled: it is still open, was answered only in part, was refused without an alternative, \
or the assistant claimed it was done when it was not.
Greetings and small talk are not intentions. When the outcome rests on content that was not shown \
(clipped, or turns not shown), judge by what is shown and say so in the reason.
Answer in JSON: intentions, each with the intention, the numbers of the messages where it was \
stated and settled, a short reason, then its status; then a one-sentence overall reason."""


def schema(numbers: set[int]) -> dict[str, Any]:
    item = strict_object(
        {
            "intention": {"type": "string"},
            "messages": {"type": "array", "items": message_schema(numbers)},
            "reason": {"type": "string"},
            "status": {"type": "string", "enum": list(STATUSES)},
        }
    )
    return strict_object({"intentions": {"type": "array", "items": item}, "reason": {"type": "string"}})


@dataclass(frozen=True)
class Intention:
    intention: str
    messages: list[int]
    reason: str
    status: str


@dataclass(frozen=True)
class Answer:
    intentions: list[Intention]
    reason: str

    def count(self, status: str) -> int:
        return sum(i.status == status for i in self.intentions)


def parser(positions: set[int]) -> Callable[[Any], Answer]:
    """Parse the answer; message numbers must exist in the thread."""

    def parse(data: Any) -> Answer:
        items = [
            Intention(
                text_of(raw, "intention"),
                numbers_of(raw, "messages", positions),
                text_of(raw, "reason"),
                label_of(raw, "status", _LABELS),
            )
            for raw in items_of(data, "intentions")
        ]
        return Answer(items, text_of(data, "reason"))

    return parse


class Completeness(QuestionMetric):
    """Thread-scope share of the user's intentions that were met (withdrawn ones excluded)."""

    name = NAME
    version = VERSION
    tier = "judge"
    scopes = ("thread",)
    description = "Share of the user's intentions that the conversation fulfilled (withdrawn ones excluded)."

    def question(self, thread: Thread, ctx: JudgeContext) -> Question[Answer] | list[MetricResult]:
        items = located(thread)
        if not any(x.role == "user" and x.text.strip() for x in items):
            return [not_applicable(NAME, "no user messages", version=VERSION)]
        if not any(x.role == "assistant" and x.text.strip() for x in items):
            return [not_applicable(NAME, "no assistant replies with text", version=VERSION)]
        numbers = {x.position for x in items}

        def result(answer: Answer) -> list[MetricResult]:
            fulfilled, unfulfilled = answer.count("fulfilled"), answer.count("unfulfilled")
            pending = fulfilled + unfulfilled
            score = fulfilled / pending if pending else 1.0
            evidence = {
                "fulfilled": fulfilled,
                "withdrawn": answer.count("withdrawn"),
                "unfulfilled": unfulfilled,
                "intentions": [asdict(i) for i in answer.intentions],
            }
            label = "complete" if score >= 1.0 else "incomplete"
            return [
                score_result(
                    NAME,
                    score,
                    threshold=self.spec.threshold,
                    label=label,
                    reason=answer.reason,
                    evidence=evidence,
                    version=VERSION,
                )
            ]

        return Question(self.spec, INSTRUCTIONS, schema(numbers), parser(numbers), scored(result))
