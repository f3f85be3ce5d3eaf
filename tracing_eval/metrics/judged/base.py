"""What judged metrics share: the judge interface they call, their context, scales and result helpers.

A judged metric renders nothing itself: the transcript is rendered once per thread (so every
metric's prompt starts with the same prefix and providers' prompt caching serves the thread),
and each metric adds its own instructions and a JSON schema for the answer.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar, runtime_checkable

from tracing_eval.metrics.base import MetricSpec
from tracing_eval.model import MetricResult, Scope, Status, Thread

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
    """The judge could not give a usable answer (after the corrective re-ask, retries or budget)."""


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
    """One question to the judge: the shared transcript first, then this metric's instructions."""

    metric: str
    transcript: str
    instructions: str
    schema: Mapping[str, Any]  # JSON schema (an object) the answer must follow
    thread_key: str | None = None


@runtime_checkable
class Judge(Protocol):
    """The one door to LLM judges (implemented by `tracing_eval.judge.JudgeClient`)."""

    model: str

    async def ask(self, request: JudgeRequest, parse: Callable[[Any], T]) -> tuple[T, JudgeUsage]:
        """Ask, parse the JSON answer with `parse` (which raises MalformedAnswer), re-ask once on a
        malformed answer, and return the parsed value with the usage. Raises JudgeError."""
        ...


@dataclass
class JudgeContext:
    """Everything a judged metric may use besides the thread."""

    judge: Judge
    transcript: str
    deterministic: list[MetricResult] = field(default_factory=list)
    options: dict[str, Any] = field(default_factory=dict)  # this metric's options (config, thread metadata)
    reuse: dict[tuple[str, str], MetricResult] = field(default_factory=dict)  # (metric, turn content hash)

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


def judge_error(spec: MetricSpec, exc: Exception, *, turn_index: int | None = None) -> MetricResult:
    """A judged metric that failed: status error with the reason, never a default score."""
    return MetricResult(
        metric=spec.name,
        metric_version=spec.version,
        scope=Scope.THREAD if turn_index is None else Scope.TURN,
        turn_index=turn_index,
        status=Status.ERROR,
        error=f"{type(exc).__name__}: {exc}",
        reason=f"judge failed: {exc}",
        threshold=spec.threshold,
    )


def skipped(spec: MetricSpec, reason: str, *, turn_index: int | None = None) -> MetricResult:
    return MetricResult(
        metric=spec.name,
        metric_version=spec.version,
        scope=Scope.THREAD if turn_index is None else Scope.TURN,
        turn_index=turn_index,
        status=Status.SKIPPED,
        reason=reason,
        threshold=spec.threshold,
    )


def verdict_schema(scale: Mapping[str, float], details: str) -> dict[str, Any]:
    """`{verdict: a label of the scale, <details>: [strings], reason}`, strict-mode friendly."""
    return {
        "type": "object",
        "properties": {
            "verdict": {"type": "string", "enum": list(scale)},
            details: {"type": "array", "items": {"type": "string"}},
            "reason": {"type": "string"},
        },
        "required": ["verdict", details, "reason"],
        "additionalProperties": False,
    }


def text_of(data: Any, key: str) -> str:
    """A string field of the answer (stripped); anything else is a malformed answer."""
    value = data.get(key) if isinstance(data, dict) else None
    if not isinstance(value, str):
        raise MalformedAnswer(f"{key!r} must be a string; got {value!r}")
    return value.strip()


def strings_of(data: Any, key: str) -> list[str]:
    """A list-of-strings field of the answer; anything else is a malformed answer."""
    value = data.get(key) if isinstance(data, dict) else None
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise MalformedAnswer(f"{key!r} must be a list of strings; got {value!r}")
    return [v.strip() for v in value]


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
    result = MetricResult(
        metric=spec.name,
        metric_version=spec.version,
        scope=Scope.TURN,
        turn_index=turn_index,
        score=prior.score,
        label=prior.label,
        passed=None if spec.threshold is None else prior.score >= spec.threshold,
        threshold=spec.threshold,
        reason=prior.reason,
        evidence={**prior.evidence, **(evidence or {}), "reused": True},
        judge_model=prior.judge_model,
        input_hash=key,
    )
    return result


def label_of(data: Any, key: str, scale: Mapping[str, float]) -> str:
    """The label under `key`, which must be one of the scale's labels (else MalformedAnswer)."""
    if not isinstance(data, dict):
        raise MalformedAnswer("the answer must be a JSON object")
    value = data.get(key)
    if not isinstance(value, str) or value.strip().lower() not in scale:
        raise MalformedAnswer(f"{key!r} must be one of {', '.join(scale)}; got {value!r}")
    return value.strip().lower()
