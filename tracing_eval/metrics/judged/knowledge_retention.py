"""L3 `knowledge_retention`: does the assistant keep what the user told it?

One judge call over the numbered conversation. The judge names the first user message that
states a fact, then gives a verdict on every assistant reply after it that depends on an earlier
fact (uses it, should use it, or asks for it again): `ok`, `forgot` or `contradicted`. Asking
again for something the user already gave is `forgot`; asking to clarify or confirm it is `ok`.
The deterministic `reask` findings are passed as hints to confirm or reject. Message numbers are
`enum`s of the thread's user messages and assistant replies.

Score = 1 - bad / judged replies (a reply with several verdicts counts once, at its worst); label
`contradicted` > `forgot` > `retained`. Thread scope, with the bad message numbers in the
evidence. Not applicable with fewer than two exchanges, or when no reply depends on a fact.
"""

from __future__ import annotations

from typing import Annotated, Self

from pydantic import model_validator

from tracing_eval.metrics.deterministic.views import Located, located
from tracing_eval.metrics.judged.answers import Answer, Reply, Text, UserMessage, one_of
from tracing_eval.metrics.judged.base import JudgeContext
from tracing_eval.metrics.judged.question import Question, QuestionMetric, scored
from tracing_eval.metrics.judged.transcript import json_string
from tracing_eval.metrics.results import not_applicable, ok
from tracing_eval.model import MetricResult, Thread

VERDICTS = ("ok", "forgot", "contradicted")
_RANK = {v: k for k, v in enumerate(VERDICTS)}

INSTRUCTIONS = """\
TASK: knowledge retention.
Facts are what the user said about themselves or their request: names, numbers, ids, dates, \
preferences, constraints, earlier answers. First give the number of the first user message that \
states such a fact (null if the user never states one). Then give a verdict for EVERY assistant \
reply after it that depends on a fact the user gave before that reply: it uses the fact, should \
have used it, or asks for it. Check each against everything the user had said before it:
- ok: consistent with the known facts; asking to clarify an ambiguous fact or to confirm it is ok;
- forgot: the assistant ignores a known fact, or asks again for information the user already gave;
- contradicted: the assistant states something that conflicts with a known fact.
Replies that do not touch any fact get no verdict. A fact that sits in content not shown (clipped, \
or turns not shown) is unknown: do not call a reply forgetful for missing it.
Answer in JSON: first_fact_message; verdicts, each with the message, the fact concerned, a short \
reason, then the verdict; then a one-sentence overall reason."""


class Verdict(Answer):
    message: Reply
    fact: Text
    reason: Text
    verdict: Annotated[str, one_of(VERDICTS)]


class RetentionAnswer(Answer):
    """The first user fact, then verdicts on the assistant replies after it."""

    first_fact_message: UserMessage | None
    verdicts: list[Verdict]
    reason: Text

    @model_validator(mode="after")
    def _after_first_fact(self) -> Self:
        first = self.first_fact_message
        for v in self.verdicts:
            if first is None or v.message <= first:
                raise ValueError(f"message {v.message} is not an assistant reply after the first user fact")
        return self


def reask_hints(ctx: JudgeContext) -> str:
    """The deterministic re-asks, as lines for the judge to confirm or reject."""
    found = ctx.deterministic_result("reask")
    reasks = found.evidence.get("reasks", []) if found is not None else []
    if not reasks:
        return ""
    lines = [
        f"- message [{r['asked_at']}] asks for the {r['slot']} given at message [{r['given_at']}] "
        f"(value {json_string(str(r['value']))})"
        for r in reasks
    ]
    return "\nA rule-based check flagged these possible re-asks; confirm or reject each:\n" + "\n".join(lines)


def _exchanges(items: list[Located]) -> int:
    return len({x.turn for x in items if x.role == "assistant" and x.text.strip()})


def worst(verdicts: list[Verdict]) -> dict[int, Verdict]:
    """One verdict per reply: the worst one it got."""
    out: dict[int, Verdict] = {}
    for v in verdicts:
        if v.message not in out or _RANK[v.verdict] > _RANK[out[v.message].verdict]:
            out[v.message] = v
    return out


class KnowledgeRetention(QuestionMetric):
    """Thread-scope share of fact-dependent assistant replies that neither forget nor contradict."""

    name = "knowledge_retention"
    version = "2"
    description = "Share of assistant replies depending on the user's facts that neither forget nor contradict them."

    def question(self, thread: Thread, ctx: JudgeContext) -> Question[RetentionAnswer] | list[MetricResult]:
        items = located(thread)
        if _exchanges(items) < 2:
            return [not_applicable(self.spec, "a single exchange has nothing to retain")]
        users = {x.position for x in items if x.role == "user" and x.text.strip()}
        replies = {x.position for x in items if x.role == "assistant" and x.text.strip()}
        turn_of = {x.position: x.turn for x in items}

        def result(answer: RetentionAnswer) -> list[MetricResult]:
            judged = worst(answer.verdicts)
            if not judged:
                why = "no assistant reply depends on a fact the user gave"
                return [not_applicable(self.spec, why, evidence={"first_fact_message": answer.first_fact_message})]
            bad = sorted(p for p, v in judged.items() if v.verdict != "ok")
            kinds = {v.verdict for v in judged.values()}
            label = "contradicted" if "contradicted" in kinds else "forgot" if "forgot" in kinds else "retained"
            evidence = {
                "first_fact_message": answer.first_fact_message,
                "judged_messages": sorted(judged),
                "bad_messages": bad,
                "bad_turns": sorted({turn_of[p] for p in bad}),
                "verdicts": [v.model_dump() for v in answer.verdicts],
            }
            return [ok(self.spec, 1.0 - len(bad) / len(judged), label=label, reason=answer.reason, evidence=evidence)]

        found = ctx.deterministic_result("reask")
        reasks = found.evidence.get("reasks", []) if found is not None else []
        keep = frozenset(turn_of[p] for r in reasks for p in (r.get("asked_at"), r.get("given_at")) if p in turn_of)
        return Question(
            self.spec,
            INSTRUCTIONS + reask_hints(ctx),
            RetentionAnswer.response_schema(users=users, replies=replies),
            RetentionAnswer.parser(users=users, replies=replies),
            scored(result),
            keep,
        )
