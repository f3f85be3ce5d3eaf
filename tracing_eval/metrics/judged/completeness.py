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

from tracing_eval.metrics.base import MetricBase
from tracing_eval.metrics.deterministic.views import located
from tracing_eval.metrics.judged.base import (
    JudgeContext,
    JudgeError,
    JudgeRequest,
    MalformedAnswer,
    judge_error,
    label_of,
    text_of,
    with_usage,
)
from tracing_eval.model import MetricResult, Thread, not_applicable, score_result

NAME = "completeness"
VERSION = "1"
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
Give the numbers [n] of the messages where the intention was stated and settled, and a short reason. \
Greetings and small talk are not intentions. Finish with a one-sentence overall reason."""

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "intentions": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "intention": {"type": "string"},
                    "status": {"type": "string", "enum": list(STATUSES)},
                    "messages": {"type": "array", "items": {"type": "integer"}},
                    "reason": {"type": "string"},
                },
                "required": ["intention", "status", "messages", "reason"],
                "additionalProperties": False,
            },
        },
        "reason": {"type": "string"},
    },
    "required": ["intentions", "reason"],
    "additionalProperties": False,
}


@dataclass(frozen=True)
class Intention:
    intention: str
    status: str
    messages: list[int]
    reason: str


@dataclass(frozen=True)
class Answer:
    intentions: list[Intention]
    reason: str

    def count(self, status: str) -> int:
        return sum(i.status == status for i in self.intentions)


def parser(positions: set[int]) -> Callable[[Any], Answer]:
    """Parse the answer; message numbers must exist in the thread."""

    def parse(data: Any) -> Answer:
        if not isinstance(data, dict) or not isinstance(data.get("intentions"), list):
            raise MalformedAnswer("expected an object with an 'intentions' list")
        items = []
        for raw in data["intentions"]:
            if not isinstance(raw, dict) or not isinstance(raw.get("intention"), str):
                raise MalformedAnswer("each intention needs an 'intention' text")
            status = label_of(raw, "status", _LABELS)
            numbers = raw.get("messages")
            if not isinstance(numbers, list) or not all(
                isinstance(n, int) and not isinstance(n, bool) for n in numbers
            ):
                raise MalformedAnswer("'messages' must be a list of message numbers")
            unknown = sorted(set(numbers) - positions)
            if unknown:
                raise MalformedAnswer(f"message numbers {unknown} do not exist in the conversation")
            items.append(Intention(raw["intention"], status, sorted(set(numbers)), text_of(raw, "reason")))
        return Answer(items, text_of(data, "reason"))

    return parse


class Completeness(MetricBase):
    """Thread-scope share of the user's intentions that were met (withdrawn ones excluded)."""

    name = NAME
    version = VERSION
    tier = "judge"
    scopes = ("thread",)
    description = "Share of the user's intentions that the conversation fulfilled (withdrawn ones excluded)."

    async def evaluate(self, thread: Thread, ctx: JudgeContext) -> list[MetricResult]:
        items = located(thread)
        if not any(x.role == "user" and x.text.strip() for x in items):
            return [not_applicable(NAME, "no user messages", version=VERSION)]
        if not any(x.role == "assistant" and x.text.strip() for x in items):
            return [not_applicable(NAME, "no assistant replies with text", version=VERSION)]
        request = JudgeRequest(NAME, ctx.transcript, INSTRUCTIONS, SCHEMA, thread.key)
        try:
            answer, usage = await ctx.judge.ask(request, parser({x.position for x in items}))
        except JudgeError as exc:
            return [judge_error(self.spec, exc)]
        fulfilled, unfulfilled = answer.count("fulfilled"), answer.count("unfulfilled")
        pending = fulfilled + unfulfilled
        score = fulfilled / pending if pending else 1.0
        result = score_result(
            NAME,
            score,
            threshold=self.spec.threshold,
            label="complete" if score >= 1.0 else "incomplete",
            reason=answer.reason,
            evidence={
                "fulfilled": fulfilled,
                "withdrawn": answer.count("withdrawn"),
                "unfulfilled": unfulfilled,
                "intentions": [asdict(i) for i in answer.intentions],
            },
            version=VERSION,
        )
        return [with_usage(result, usage, ctx.judge.model)]
