"""`conversational_flow` (L7): does the conversation flow? One holistic judge call, V5+.

Flow is a property of the sequence, so the judge gives one verdict for the whole thread instead
of per-turn scores that an average would dilute. Needs at least two exchanges.
"""

from __future__ import annotations

from typing import Annotated

from tracing_eval.metrics.deterministic.views import located
from tracing_eval.metrics.judged.answers import Answer, Numbers, Text, one_of
from tracing_eval.metrics.judged.base import V5_PLUS, JudgeContext
from tracing_eval.metrics.judged.question import Question, VerdictMetric
from tracing_eval.metrics.results import not_applicable
from tracing_eval.model import MetricResult, Thread

INSTRUCTIONS = """\
TASK: conversational flow. Does the assistant pick up the user's signals turn after turn and keep \
the exchange coherent and moving?
Verdicts:
- fully: natural and coherent; it responds to the user's signals in every turn; no needless \
clarifying questions.
- mostly: smooth, with small awkwardness (one redundant clarification, a slightly off tone).
- partial: noticeable friction (several missed signals or awkward transitions), but the \
conversation progresses.
- minor: frequent redundant clarifications, misread intent or awkward jumps that make the user \
repeat themselves.
- none: broken: it ignores the user's signals, drifts into irrelevant tangents, contradicts \
earlier turns or blocks progress.
Rules:
- Judge the conversation as a whole, not as an average of turns: one badly broken turn pulls the \
verdict down.
- Later turns weigh more than earlier ones.
- Length, verbosity and politeness earn nothing.
Examples (not part of the conversation above):
1. [1] user: "Book me a flight to Lisbon on Friday." [2] assistant: "Morning or evening?" [3] user: \
"Morning." [4] assistant: "TP1351 leaves at 08:10 for EUR 120. Book it?" [5] user: "Yes." [6] \
assistant: "Booked, confirmation K7Q2." -> fully: each reply follows the user's last signal.
2. [1] user: "My script fails with KeyError: 'id'." [2] assistant: "Which language is it?" [3] \
user: "Python, as the error says." [4] assistant: "Which Python version?" [5] user: "3.12, does it \
matter?" [6] assistant: "Use row.get('id') or check the key exists before reading it." -> partial: \
two needless questions before the fix.
3. [1] user: "How do I reset my router?" [2] assistant: "What's your favourite colour?" [3] user: \
"What? The router!" [4] assistant: "Blue is a calming colour." -> none: it ignores the user and \
drifts off.
Answer in JSON: key_issues (the problems found, each with the numbers of the messages where it \
shows; empty if none), then reason (one or two sentences), then verdict."""


class KeyIssue(Answer):
    """A key issue: what went wrong, and the messages where it shows."""

    issue: Text
    messages: Numbers


class FlowAnswer(Answer):
    key_issues: list[KeyIssue]
    reason: Text
    verdict: Annotated[str, one_of(V5_PLUS)]


class ConversationalFlow(VerdictMetric):
    """Thread-scope holistic conversational flow (V5+)."""

    name = "conversational_flow"
    version = "2"
    default_threshold = 0.7
    description = "The conversation flows: user signals followed, coherent, no needless detours (judge, V5+)."
    scale = V5_PLUS
    answer = FlowAnswer
    instructions = INSTRUCTIONS

    def question(self, thread: Thread, ctx: JudgeContext) -> Question[Answer] | list[MetricResult]:
        answered = [t for t in thread.turns if any(m.content.strip() or m.tool_calls for m in t.assistant_messages)]
        if len(answered) < 2:
            return [not_applicable(self.spec, "fewer than two exchanges with an assistant reply")]
        return self.ask({"numbers": {x.position for x in located(thread)}})
