"""L2 `completeness`: were the user's intentions met by the end of the conversation?

One judge call lists every intention the user expressed, each `fulfilled`, `withdrawn` (the user
dropped or replaced it) or `unfulfilled`, with the message numbers it rests on. Score =
fulfilled / (fulfilled + unfulfilled); withdrawn intentions do not count, and a thread with none
pending scores 1.0. Label `complete` at 1.0, else `incomplete`.
"""

from __future__ import annotations

from typing import Annotated

from tracing_eval.metrics.deterministic.views import located
from tracing_eval.metrics.judged.answers import Answer, Numbers, Text, one_of
from tracing_eval.metrics.judged.base import JudgeContext
from tracing_eval.metrics.judged.question import Question, QuestionMetric, scored
from tracing_eval.metrics.results import not_applicable, ok
from tracing_eval.model import MetricResult, Thread

STATUSES = ("fulfilled", "withdrawn", "unfulfilled")

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


class Intention(Answer):
    intention: Text
    messages: Numbers
    reason: Text
    status: Annotated[str, one_of(STATUSES)]


class CompletenessAnswer(Answer):
    intentions: list[Intention]
    reason: Text

    def count(self, status: str) -> int:
        return sum(i.status == status for i in self.intentions)


class Completeness(QuestionMetric):
    """Thread-scope share of the user's intentions that were met (withdrawn ones excluded)."""

    name = "completeness"
    version = "2"
    description = "Share of the user's intentions that the conversation fulfilled (withdrawn ones excluded)."

    def question(self, thread: Thread, ctx: JudgeContext) -> Question[CompletenessAnswer] | list[MetricResult]:
        items = located(thread)
        if not any(x.role == "user" and x.text.strip() for x in items):
            return [not_applicable(self.spec, "no user messages")]
        if not any(x.role == "assistant" and x.text.strip() for x in items):
            return [not_applicable(self.spec, "no assistant replies with text")]
        numbers = {x.position for x in items}

        def result(answer: CompletenessAnswer) -> list[MetricResult]:
            fulfilled, unfulfilled = answer.count("fulfilled"), answer.count("unfulfilled")
            pending = fulfilled + unfulfilled
            score = fulfilled / pending if pending else 1.0
            evidence = {
                "fulfilled": fulfilled,
                "withdrawn": answer.count("withdrawn"),
                "unfulfilled": unfulfilled,
                "intentions": [i.model_dump() for i in answer.intentions],
            }
            label = "complete" if score >= 1.0 else "incomplete"
            return [ok(self.spec, score, label=label, reason=answer.reason, evidence=evidence)]

        answer = CompletenessAnswer
        return Question(
            self.spec,
            INSTRUCTIONS,
            answer.response_schema(numbers=numbers),
            answer.parser(numbers=numbers),
            scored(result),
        )
