"""L5 `turn_relevancy`: is each reply relevant to the conversation window it answers?

For every turn i with an assistant reply, one judge call (all issued at once) asks whether the
last assistant reply of turn i is relevant to its window, turns [i-W+1 .. i] (option `window`,
default 5). The request holds exactly that past: a line saying that earlier turns are not shown,
and the window up to the judged reply, tool calls and results included; nothing that came after
it. So the cost of a thread grows as O(n·W), and a verdict cannot depend on later turns.

The assistant's system prompt is not sent by default (option `system_prompt`, default false): the
metric asks whether a reply is on topic given the turns before it, which the conversation answers,
while obeying the system prompt is `role_adherence`'s question (DeepEval's TurnRelevancyMetric does
not read the role either). A line in the transcript says that it is not shown, and every turn
result's `evidence.transcript.system_prompt_not_shown` records its length; an edit to the system
prompt alone then leaves every window as it was, so reuse keeps the verdicts. Sent once per judged
reply, a policy of a few thousand tokens would otherwise be most of the metric's cost.

Per-turn results score 1 (`relevant`) or 0 (`irrelevant`); the thread result is #relevant /
#judged turns, over the turns that could be judged (the others are listed in its evidence).

Reuse: each turn result carries `input_hash`, the hash of exactly what was sent (window text,
instructions, schema). A prior result from `ctx.reuse` (keyed by (name, input_hash)) is taken
only when its metric version and judge model match too; a turn whose window changed is judged again.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Annotated, Any

from tracing_eval.metrics.base import MetricBase
from tracing_eval.metrics.deterministic.views import replies
from tracing_eval.metrics.judged.answers import Answer, Text, one_of
from tracing_eval.metrics.judged.base import JudgeContext, JudgeRequest, JudgeUsage, annotate, reuse_prior
from tracing_eval.metrics.judged.question import ask_turn, over_turns
from tracing_eval.metrics.judged.transcript import Rendered
from tracing_eval.metrics.results import failed, not_applicable, ok
from tracing_eval.model import MetricResult, Thread, Turn

DEFAULT_WINDOW = 5
_VERDICTS = {"yes": 1.0, "no": 0.0}

INSTRUCTIONS = """\
TASK: turn relevancy.
Judge only the last message shown, [{message}]: the assistant's reply in turn {turn}. What is \
shown is its context: the last {window} turns at most, up to that reply. Answer yes if the reply \
addresses what the user asked or needs at that point, or moves it forward sensibly (a clarifying \
question, a request for details the task needs, or declining the request counts). Answer no if it \
is off topic, answers a different or stale request, repeats itself without progress, or ignores \
the user's latest message. Whether the reply follows the assistant's own rules is not asked here.
Answer in JSON: reason (short), then verdict."""


class Verdict(Answer):
    reason: Text
    verdict: Annotated[str, one_of(_VERDICTS)]


SCHEMA = Verdict.response_schema()
parse = Verdict.parser()


@dataclass(frozen=True)
class Window:
    turn: Turn
    message: int  # position of the judged reply
    first: int  # index of the first turn in the window
    size: int
    system_prompt: bool = False  # whether the request shows the assistant's system prompt


def windows(thread: Thread, size: int, system_prompt: bool = False) -> list[Window]:
    """One window per turn with an assistant reply: that turn and up to size-1 turns before it."""
    last_reply = {x.turn: x.position for x in replies(thread)}
    out = []
    for k, turn in enumerate(thread.turns):
        if turn.index not in last_reply:
            continue
        span = thread.turns[max(0, k - size + 1) : k + 1]
        out.append(Window(turn, last_reply[turn.index], span[0].index, size, system_prompt))
    return out


def request_for(w: Window, thread: Thread, ctx: JudgeContext) -> tuple[JudgeRequest, Rendered]:
    """Exactly what the judge sees for one window: its past, up to the judged reply."""
    rendered = ctx.transcripts.window(w.first, w.turn.index, until=w.message, system_prompt=w.system_prompt)
    instructions = INSTRUCTIONS.format(message=w.message, turn=w.turn.index, window=w.size)
    return JudgeRequest(TurnRelevancy.name, rendered.text, instructions, SCHEMA, thread.key), rendered


def window_size(options: dict[str, Any]) -> int:
    value = options.get("window", DEFAULT_WINDOW)
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ValueError(f"option 'window' must be a positive integer, got {value!r}")
    return value


def shows_system_prompt(options: dict[str, Any]) -> bool:
    value = options.get("system_prompt", False)
    if not isinstance(value, bool):
        raise ValueError(f"option 'system_prompt' must be true or false, got {value!r}")
    return value


class TurnRelevancy(MetricBase):
    """Per-turn relevance of the last reply over a sliding window of turns, and the thread's share."""

    name = "turn_relevancy"
    version = "3"
    tier = "judge"
    scopes = ("turn", "thread")
    description = "Share of replies relevant to the sliding window of turns they answer (option `window`)."

    async def evaluate(self, thread: Thread, ctx: JudgeContext) -> list[MetricResult]:
        try:
            size, system_prompt = window_size(ctx.options), shows_system_prompt(ctx.options)
        except ValueError as exc:
            return [failed(self.spec, exc, "judge failed")]
        todo = [
            (w, *request_for(w, thread, ctx))
            for w in windows(thread, size, system_prompt)
            if w.turn.index >= ctx.from_turn
        ]
        if not todo:
            return [not_applicable(self.spec, "no assistant replies with text")]
        reused = {
            w.turn.index: r for w, req, rendered in todo if (r := self._reused(w, req, rendered, ctx)) is not None
        }
        fresh = [item for item in todo if item[0].turn.index not in reused]
        judged = await asyncio.gather(*(self._judge(w, req, rendered, ctx) for w, req, rendered in fresh))
        total = JudgeUsage()
        for _, usage in judged:
            total.add(usage)
        by_turn = reused | {w.turn.index: r for (w, _, _), (r, _) in zip(fresh, judged, strict=True)}
        results = [by_turn[w.turn.index] for w, _, _ in todo]
        return [*results, self._thread_result(results, total, ctx, size, system_prompt)]

    def _reused(self, w: Window, request: JudgeRequest, rendered: Rendered, ctx: JudgeContext) -> MetricResult | None:
        key = request.digest()
        prior = reuse_prior(self.spec, ctx.reuse.get((self.name, key)), key, ctx, w.turn.index, self._evidence(w))
        return None if prior is None else self._annotated(prior, w, rendered, ctx)

    @staticmethod
    def _evidence(w: Window) -> dict[str, Any]:
        return {"message": w.message, "window": [w.first, w.turn.index]}

    @staticmethod
    def _annotated(result: MetricResult, w: Window, rendered: Rendered, ctx: JudgeContext) -> MetricResult:
        return annotate(result, rendered, ctx.transcripts.injection(w.first, w.turn.index, w.message))

    async def _judge(
        self, w: Window, request: JudgeRequest, rendered: Rendered, ctx: JudgeContext
    ) -> tuple[MetricResult, JudgeUsage]:
        def result(answer: Verdict) -> MetricResult:
            relevant = answer.verdict == "yes"
            label = "relevant" if relevant else "irrelevant"
            evidence = self._evidence(w)
            return ok(
                self.spec,
                float(relevant),
                turn_index=w.turn.index,
                label=label,
                reason=answer.reason,
                evidence=evidence,
            )

        injection = ctx.transcripts.injection(w.first, w.turn.index, w.message)
        return await ask_turn(self.spec, request, parse, result, rendered, injection, ctx, w.turn.index)

    def _thread_result(
        self, turns: list[MetricResult], usage: JudgeUsage, ctx: JudgeContext, size: int, system_prompt: bool
    ) -> MetricResult:
        def share(judged: list[MetricResult], unjudged: list[int | None]) -> MetricResult:
            irrelevant = [r.turn_index for r in judged if r.label == "irrelevant"]
            reason = (
                f"{len(judged) - len(irrelevant)} of {len(judged)} judged replies are relevant to their window "
                f"of {size} turns"
            )
            if unjudged:
                reason += f"; {len(unjudged)} turn(s) could not be judged"
            evidence = {
                "window": size,
                "system_prompt_shown": system_prompt,
                "judged_turns": len(judged),
                "irrelevant_turns": irrelevant,
                "unjudged_turns": unjudged,
                "reused_turns": [r.turn_index for r in judged if r.evidence.get("reused")],
            }
            label = "relevant" if not irrelevant else "irrelevant"
            return ok(self.spec, 1.0 - len(irrelevant) / len(judged), label=label, reason=reason, evidence=evidence)

        return over_turns(self.spec, turns, usage, ctx, share)
