"""L5 `turn_relevancy`: is each reply relevant to the conversation window it answers?

For every turn i with an assistant reply, one judge call (all issued at once) asks whether the
last assistant reply of turn i is relevant given turns [i-W+1 .. i] (option `window`, default 5).
The judge reads the shared full transcript and is told the window bounds. Per-turn results score
1 (`relevant`) or 0 (`irrelevant`); the thread result is #relevant / #judged turns, over the turns
that could be judged (the others are listed in its evidence).

Reuse: a verdict depends on the whole window, so each turn result carries
`input_hash` = hash of (W, the window turns' content hashes). A prior result from `ctx.reuse`
(keyed by (name, input_hash)) is taken only when its metric version and judge model match too;
a turn whose window changed is judged again.
"""

from __future__ import annotations

import asyncio
import hashlib
from dataclasses import dataclass
from typing import Any

from tracing_eval.metrics.base import MetricBase
from tracing_eval.metrics.deterministic.views import replies
from tracing_eval.metrics.judged.base import (
    JudgeContext,
    JudgeError,
    JudgeRequest,
    JudgeUsage,
    judge_error,
    label_of,
    reuse_prior,
    text_of,
    with_usage,
)
from tracing_eval.model import MetricResult, Scope, Status, Thread, Turn, not_applicable, score_result

NAME = "turn_relevancy"
VERSION = "1"
DEFAULT_WINDOW = 5
_VERDICTS = {"yes": 1.0, "no": 0.0}

INSTRUCTIONS = """\
TASK: turn relevancy.
Judge only message [{message}], the last assistant reply of turn {turn}. Its context is the window \
of turns {first} to {turn} (the last {window} turns at most); ignore everything after turn {turn}. \
Answer yes if the reply addresses what the user asked or needs at that point of the window, or \
moves it forward sensibly (a needed clarifying question counts). Answer no if it is off topic, \
answers a different or stale request, repeats itself without progress, or ignores the user's \
latest message. Give a short reason."""

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"verdict": {"type": "string", "enum": list(_VERDICTS)}, "reason": {"type": "string"}},
    "required": ["verdict", "reason"],
    "additionalProperties": False,
}


@dataclass(frozen=True)
class Verdict:
    verdict: str
    reason: str


def parse(data: Any) -> Verdict:
    verdict = label_of(data, "verdict", _VERDICTS)
    return Verdict(verdict, text_of(data, "reason"))


@dataclass(frozen=True)
class Window:
    turn: Turn
    message: int  # position of the judged reply
    first: int  # index of the first turn in the window
    size: int
    key: str  # reuse key: W and the window turns' content hashes


def windows(thread: Thread, size: int) -> list[Window]:
    """One window per turn with an assistant reply: that turn and up to size-1 turns before it."""
    last_reply = {x.turn: x.position for x in replies(thread)}
    out = []
    for k, turn in enumerate(thread.turns):
        if turn.index not in last_reply:
            continue
        span = thread.turns[max(0, k - size + 1) : k + 1]
        digest = hashlib.sha256(f"{size}|{','.join(t.content_hash for t in span)}".encode()).hexdigest()[:32]
        out.append(Window(turn, last_reply[turn.index], span[0].index, size, digest))
    return out


def window_size(options: dict[str, Any]) -> int:
    value = options.get("window", DEFAULT_WINDOW)
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ValueError(f"option 'window' must be a positive integer, got {value!r}")
    return value


class TurnRelevancy(MetricBase):
    """Per-turn relevance of the last reply over a sliding window of turns, and the thread's share."""

    name = NAME
    version = VERSION
    tier = "judge"
    scopes = ("turn", "thread")
    description = "Share of replies relevant to the sliding window of turns they answer (option `window`)."

    async def evaluate(self, thread: Thread, ctx: JudgeContext) -> list[MetricResult]:
        try:
            size = window_size(ctx.options)
        except ValueError as exc:
            return [judge_error(self.spec, exc)]
        todo = windows(thread, size)
        if not todo:
            return [not_applicable(NAME, "no assistant replies with text", version=VERSION)]
        reused = {w.turn.index: r for w in todo if (r := self._reused(w, ctx)) is not None}
        fresh = [w for w in todo if w.turn.index not in reused]
        judged = await asyncio.gather(*(self._judge(w, thread, ctx) for w in fresh))
        total = JudgeUsage()
        for _, usage in judged:
            total.add(usage)
        by_turn = reused | {w.turn.index: r for w, (r, _) in zip(fresh, judged, strict=True)}
        results = [by_turn[w.turn.index] for w in todo]
        return [*results, self._thread_result(results, total, ctx, size)]

    def _reused(self, w: Window, ctx: JudgeContext) -> MetricResult | None:
        return reuse_prior(self.spec, ctx.reuse.get((NAME, w.key)), w.key, ctx, w.turn.index, self._evidence(w))

    @staticmethod
    def _evidence(w: Window) -> dict[str, Any]:
        return {"message": w.message, "window": [w.first, w.turn.index]}

    async def _judge(self, w: Window, thread: Thread, ctx: JudgeContext) -> tuple[MetricResult, JudgeUsage]:
        instructions = INSTRUCTIONS.format(message=w.message, turn=w.turn.index, first=w.first, window=w.size)
        request = JudgeRequest(NAME, ctx.transcript, instructions, SCHEMA, thread.key)
        try:
            answer, usage = await ctx.judge.ask(request, parse)
        except JudgeError as exc:
            return judge_error(self.spec, exc, turn_index=w.turn.index), JudgeUsage()
        relevant = answer.verdict == "yes"
        result = score_result(
            NAME,
            1.0 if relevant else 0.0,
            threshold=self.spec.threshold,
            scope=Scope.TURN,
            turn_index=w.turn.index,
            label="relevant" if relevant else "irrelevant",
            reason=answer.reason,
            evidence=self._evidence(w),
            version=VERSION,
        )
        result.input_hash = w.key
        return with_usage(result, usage, ctx.judge.model), usage

    def _thread_result(
        self, turns: list[MetricResult], usage: JudgeUsage, ctx: JudgeContext, size: int
    ) -> MetricResult:
        ok = [r for r in turns if r.status == Status.OK]
        failed = [r.turn_index for r in turns if r.status != Status.OK]
        if not ok:
            result = judge_error(self.spec, JudgeError(f"no turn could be judged ({len(failed)} failed)"))
            return with_usage(result, usage, ctx.judge.model)
        irrelevant = [r.turn_index for r in ok if r.label == "irrelevant"]
        score = 1.0 - len(irrelevant) / len(ok)
        reason = f"{len(ok) - len(irrelevant)} of {len(ok)} judged replies are relevant to their window of {size} turns"
        if failed:
            reason += f"; {len(failed)} turn(s) could not be judged"
        result = score_result(
            NAME,
            score,
            threshold=self.spec.threshold,
            label="relevant" if not irrelevant else "irrelevant",
            reason=reason,
            evidence={
                "window": size,
                "judged_turns": len(ok),
                "irrelevant_turns": irrelevant,
                "unjudged_turns": failed,
                "reused_turns": [r.turn_index for r in ok if r.evidence.get("reused")],
            },
            version=VERSION,
        )
        return with_usage(result, usage, ctx.judge.model)
