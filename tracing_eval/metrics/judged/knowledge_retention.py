"""L3 `knowledge_retention`: does the assistant keep what the user told it?

One judge call over the numbered conversation. The judge names the first user message that
states a fact, and gives verdicts `ok` / `forgot` / `contradicted` on the assistant messages after
it. Asking again for something the user already gave is `forgot`; asking to clarify or confirm it
is `ok`. The deterministic `reask` findings are passed as hints to confirm or reject.

Eligible messages are the assistant replies with text after the first fact; eligible messages the
judge does not list count as `ok`. A message with several verdicts is bad once.
Score = 1 - bad / eligible; label `contradicted` > `forgot` > `retained`. Thread scope, with the
bad message numbers in the evidence. Not applicable with fewer than two exchanges, or when the
judge finds no fact followed by a reply.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

from tracing_eval.metrics.base import MetricBase
from tracing_eval.metrics.deterministic.views import Located, located
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

NAME = "knowledge_retention"
VERSION = "1"
VERDICTS = ("ok", "forgot", "contradicted")
_LABELS = dict.fromkeys(VERDICTS, 0.0)  # label_of checks membership only

INSTRUCTIONS = """\
TASK: knowledge retention.
Facts are what the user said about themselves or their request: names, numbers, ids, dates, \
preferences, constraints, earlier answers. First give the number [n] of the first user message \
that states such a fact (null if the user never states one). Then, for assistant messages after it, \
check each against everything the user had said before that message:
- ok: consistent with the known facts; asking to clarify an ambiguous fact or to confirm it is ok;
- forgot: the assistant ignores a known fact, or asks again for information the user already gave;
- contradicted: the assistant states something that conflicts with a known fact.
List every assistant message that is forgot or contradicted (ok ones may be listed or omitted), \
with the fact concerned and a short reason. Finish with a one-sentence overall reason."""

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "first_fact_message": {"type": ["integer", "null"]},
        "verdicts": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "message": {"type": "integer"},
                    "verdict": {"type": "string", "enum": list(VERDICTS)},
                    "fact": {"type": "string"},
                    "reason": {"type": "string"},
                },
                "required": ["message", "verdict", "fact", "reason"],
                "additionalProperties": False,
            },
        },
        "reason": {"type": "string"},
    },
    "required": ["first_fact_message", "verdicts", "reason"],
    "additionalProperties": False,
}


@dataclass(frozen=True)
class Verdict:
    message: int
    verdict: str
    fact: str
    reason: str


@dataclass(frozen=True)
class Answer:
    first_fact: int | None
    verdicts: list[Verdict]
    reason: str


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def parser(positions: set[int], users: set[int], replies: list[int]) -> Callable[[Any], Answer]:
    """Parse the answer: the first fact is a user message, bad verdicts are on replies after it."""

    def parse(data: Any) -> Answer:
        if not isinstance(data, dict) or not isinstance(data.get("verdicts"), list):
            raise MalformedAnswer("expected an object with a 'verdicts' list")
        first = data.get("first_fact_message")
        if first is not None and (not _is_int(first) or first not in users):
            raise MalformedAnswer(f"first_fact_message {first!r} is not a user message number")
        eligible = {p for p in replies if first is not None and p > first}
        verdicts = []
        for raw in data["verdicts"]:
            if not isinstance(raw, dict):
                raise MalformedAnswer("each verdict must be an object")
            verdict = label_of(raw, "verdict", _LABELS)
            message = raw.get("message")
            if not _is_int(message) or message not in positions:
                raise MalformedAnswer(f"message {message!r} does not exist in the conversation")
            if verdict == "ok":
                continue  # ok is the default for every eligible reply
            if message not in eligible:
                raise MalformedAnswer(f"message {message!r} is not an assistant reply after the first user fact")
            verdicts.append(Verdict(message, verdict, text_of(raw, "fact"), text_of(raw, "reason")))
        return Answer(first, verdicts, text_of(data, "reason"))

    return parse


def reask_hints(ctx: JudgeContext) -> str:
    """The deterministic re-asks, as lines for the judge to confirm or reject."""
    found = ctx.deterministic_result("reask")
    reasks = found.evidence.get("reasks", []) if found is not None else []
    if not reasks:
        return ""
    lines = [
        f"- message [{r['asked_at']}] asks for the {r['slot']} given at message [{r['given_at']}] ({r['value']})"
        for r in reasks
    ]
    return "\nA rule-based check flagged these possible re-asks; confirm or reject each:\n" + "\n".join(lines)


def _exchanges(items: list[Located]) -> int:
    return len({x.turn for x in items if x.role == "assistant" and x.text.strip()})


class KnowledgeRetention(MetricBase):
    """Thread-scope share of assistant replies that neither forget nor contradict the user's facts."""

    name = NAME
    version = VERSION
    tier = "judge"
    scopes = ("thread",)
    description = "Share of assistant replies after the user's first fact that neither forget nor contradict it."

    async def evaluate(self, thread: Thread, ctx: JudgeContext) -> list[MetricResult]:
        items = located(thread)
        if _exchanges(items) < 2:
            return [not_applicable(NAME, "a single exchange has nothing to retain", version=VERSION)]
        users = {x.position for x in items if x.role == "user" and x.text.strip()}
        replies = [x.position for x in items if x.role == "assistant" and x.text.strip()]
        turn_of = {x.position: x.turn for x in items}
        request = JudgeRequest(NAME, ctx.transcript, INSTRUCTIONS + reask_hints(ctx), SCHEMA, thread.key)
        try:
            answer, usage = await ctx.judge.ask(request, parser({x.position for x in items}, users, replies))
        except JudgeError as exc:
            return [judge_error(self.spec, exc)]
        eligible = [p for p in replies if answer.first_fact is not None and p > answer.first_fact]
        if not eligible:
            result = not_applicable(NAME, "no assistant reply follows a fact the user gave", version=VERSION)
            result.evidence = {"first_fact_message": answer.first_fact}
            return [with_usage(result, usage, ctx.judge.model)]
        bad = sorted({v.message for v in answer.verdicts})
        kinds = {v.verdict for v in answer.verdicts}
        label = "contradicted" if "contradicted" in kinds else "forgot" if "forgot" in kinds else "retained"
        result = score_result(
            NAME,
            1.0 - len(bad) / len(eligible),
            threshold=self.spec.threshold,
            label=label,
            reason=answer.reason,
            evidence={
                "first_fact_message": answer.first_fact,
                "eligible_messages": len(eligible),
                "bad_messages": bad,
                "bad_turns": sorted({turn_of[p] for p in bad}),
                "verdicts": [asdict(v) for v in answer.verdicts],
            },
            version=VERSION,
        )
        return [with_usage(result, usage, ctx.judge.model)]
