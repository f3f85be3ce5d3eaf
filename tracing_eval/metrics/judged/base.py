"""What judged metrics share: the judge interface they call, their context, scales and result helpers.

A judged metric renders nothing itself: `JudgeContext.transcripts` renders the thread once per
shape (the whole thread for thread metrics, so every one of them sends the same prefix that
providers' prompt caching serves; one window of the past per judged reply for per-turn metrics),
and each metric adds its own instructions and a JSON schema for the answer.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar, runtime_checkable

from tracing_eval.config import JudgeSettings
from tracing_eval.metrics.base import MetricSpec
from tracing_eval.metrics.judged.transcript import Rendered, Transcripts
from tracing_eval.metrics.results import ok
from tracing_eval.model import MetricResult, Status, Thread

T = TypeVar("T")

#: V5+ (success): eval_lib's verdict weights.
V5_PLUS: dict[str, float] = {"fully": 1.0, "mostly": 0.9, "partial": 0.7, "minor": 0.3, "none": 0.0}
#: V5- (defects, inverted so that higher is better).
V5_MINUS: dict[str, float] = {"none": 1.0, "minor": 0.9, "partial": 0.7, "mostly": 0.3, "fully": 0.0}
#: FR6 (behaviour under uncertainty).
FR6: dict[str, float] = {
    "hallucination": 0.0,
    "stall": 0.4,
    "mixed": 0.6,
    "honest_fallback": 1.0,
    "alternative_proposed": 1.0,
    "not_applicable": 1.0,
}


class JudgeError(Exception):
    """The judge could not give a usable answer (after the corrective re-ask, retries or budget).

    `usage` is what the failed question still cost (the calls that were answered).
    """

    def __init__(self, message: str, usage: JudgeUsage | None = None) -> None:
        super().__init__(message)
        self.usage = usage if usage is not None else JudgeUsage()


class MalformedAnswer(ValueError):
    """Raised by a metric's parser: the answer does not fit (missing field, unknown label, ...)."""


@dataclass
class JudgeUsage:
    """Tokens and cost of judge calls; add them up per metric and per thread."""

    calls: int = 0
    cache_hits: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cached_input_tokens: int = 0
    cost_usd: float = 0.0

    def add(self, other: JudgeUsage) -> JudgeUsage:
        self.calls += other.calls
        self.cache_hits += other.cache_hits
        self.input_tokens += other.input_tokens
        self.output_tokens += other.output_tokens
        self.cached_input_tokens += other.cached_input_tokens
        self.cost_usd += other.cost_usd
        return self


@dataclass(frozen=True)
class JudgeRequest:
    """One question to the judge: the transcript first (none for a question about a goal alone),
    then this metric's instructions."""

    metric: str
    transcript: str | None
    instructions: str
    schema: Mapping[str, Any]  # JSON schema (an object) the answer must follow
    thread_key: str | None = None

    def digest(self) -> str:
        """Hash of exactly what the request shows the judge (transcript, instructions, schema)."""
        sent = [self.transcript, self.instructions, self.schema]
        return hashlib.sha256(json.dumps(sent, sort_keys=True, default=dict).encode()).hexdigest()[:32]


@runtime_checkable
class Judge(Protocol):
    """The one door to LLM judges (implemented by `tracing_eval.judge.JudgeClient`)."""

    model: str
    settings: JudgeSettings

    async def ask(self, request: JudgeRequest, parse: Callable[[Any], T]) -> tuple[T, JudgeUsage]:
        """Ask, parse the JSON answer with `parse` (which raises MalformedAnswer), re-ask once on a
        malformed answer, and return the parsed value with the usage. Raises JudgeError."""
        ...


@dataclass
class JudgeContext:
    """Everything a judged metric may use besides the thread."""

    judge: Judge
    transcripts: Transcripts
    deterministic: list[MetricResult] = field(default_factory=list)
    options: dict[str, Any] = field(default_factory=dict)  # this metric's options (config, thread metadata)
    reuse: dict[tuple[str, str], MetricResult] = field(default_factory=dict)  # (metric, input hash)
    #: a thread still active: per-turn metrics judge only the turns from this one on (earlier turns
    #: have not changed since they were scored; the idle thread's evaluation judges them all)
    from_turn: int = 0

    def deterministic_result(self, metric: str, turn_index: int | None = None) -> MetricResult | None:
        return next((r for r in self.deterministic if r.metric == metric and r.turn_index == turn_index), None)


@runtime_checkable
class JudgedMetric(Protocol):
    spec: MetricSpec

    async def evaluate(self, thread: Thread, ctx: JudgeContext) -> list[MetricResult]: ...


def with_usage(result: MetricResult, usage: JudgeUsage, model: str) -> MetricResult:
    """Record the judge model, tokens and cost on a result."""
    result.judge_model = model
    result.input_tokens = usage.input_tokens
    result.output_tokens = usage.output_tokens
    result.cost_usd = round(usage.cost_usd, 6)
    return result


MAX_ENUM = 150  # message numbers listed as an enum up to this many (OpenAI caps enum values per schema)


def message_schema(numbers: Collection[int]) -> dict[str, Any]:
    """An integer that must be one of the message numbers (an `enum`; for very long threads a range)."""
    values = sorted(set(numbers))
    if not values:
        return {"type": "integer", "enum": [-1]}  # nothing may be named: no number is valid
    if len(values) <= MAX_ENUM:
        return {"type": "integer", "enum": values}
    return {"type": "integer", "minimum": values[0], "maximum": values[-1]}


def strict_object(properties: Mapping[str, Any]) -> dict[str, Any]:
    """A strict-mode object schema: every property required, in the given order, nothing else."""
    return {
        "type": "object",
        "properties": dict(properties),
        "required": list(properties),
        "additionalProperties": False,
    }


def annotate(result: MetricResult, rendered: Rendered | None, injection: list[dict[str, Any]]) -> MetricResult:
    """Record on a result what its transcript left out and which messages tried to steer the judge."""
    notes = rendered.notes() if rendered is not None else {}
    if notes:
        result.evidence["transcript"] = notes
    if injection:
        result.evidence["suspected_injection"] = injection
    return result


def reuse_prior(
    spec: MetricSpec,
    prior: MetricResult | None,
    key: str,
    ctx: JudgeContext,
    turn_index: int,
    evidence: dict[str, Any] | None = None,
) -> MetricResult | None:
    """A prior per-turn result carried over to this run, or None when it may not be reused.

    Reusable: status ok, the same metric version, the same `input_hash` (what it judged), and the
    same judge model (or none recorded). The copy costs nothing now and is marked `evidence.reused`.
    """
    if (
        prior is None
        or prior.status != Status.OK
        or prior.score is None
        or prior.metric_version != spec.version
        or prior.input_hash != key
        or prior.judge_model not in (None, ctx.judge.model)
    ):
        return None
    found = {**prior.evidence, **(evidence or {}), "reused": True}
    result = ok(spec, prior.score, turn_index=turn_index, label=prior.label, reason=prior.reason, evidence=found)
    result.judge_model, result.input_hash = prior.judge_model, key
    return result
