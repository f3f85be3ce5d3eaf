"""The metric base: a metric declares itself by class attributes and registers by subclassing.

A concrete metric is a subclass of `MetricBase` that sets `name` (once, in its class); defining the
class adds it to the registry (`tracing_eval.metrics.registry`). Classes without their own `name`
are bases (`QuestionMetric`, `VerdictMetric`) and are not registered.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Literal, Protocol, runtime_checkable

from tracing_eval.model import MetricResult, Thread

Tier = Literal["deterministic", "judge"]


@dataclass(frozen=True)
class MetricSpec:
    """What a metric declares about itself."""

    name: str
    version: str
    tier: Tier
    scopes: tuple[str, ...]
    threshold: float | None
    description: str
    #: whether the metric reads the assistant's answers; such a metric is `not_applicable` where an
    #: answer could not be read (`Turn.answer_unknown`)
    needs_answer: bool = True


class MetricBase:
    """Declares a metric by class attributes and builds its `spec`; subclasses add `evaluate`."""

    name: ClassVar[str]
    version: ClassVar[str]
    tier: ClassVar[Tier]
    scopes: ClassVar[tuple[str, ...]]
    default_threshold: ClassVar[float | None] = 0.7
    description: ClassVar[str]
    needs_answer: ClassVar[bool] = True

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "name" in cls.__dict__:  # a metric names itself; a base class does not
            from tracing_eval.metrics.registry import register

            register(cls)

    def __init__(self, threshold: float | None = None) -> None:
        self.spec = MetricSpec(
            name=self.name,
            version=self.version,
            tier=self.tier,
            scopes=self.scopes,
            threshold=self.default_threshold if threshold is None else threshold,
            description=self.description,
            needs_answer=self.needs_answer,
        )

    def evaluate_from(self, thread: Thread, first: int) -> list[MetricResult]:
        """The per-turn results of turns `first` onwards, for a thread still active whose earlier turns
        have not changed since they were scored (the caller drops every other result). The default is
        `evaluate`; a deterministic metric whose per-turn work can start at `first` overrides it."""
        return self.evaluate(thread)  # type: ignore[attr-defined]


@runtime_checkable
class Metric(Protocol):
    spec: MetricSpec

    def evaluate(self, thread: Thread) -> list[MetricResult]:
        """Return this metric's results for the thread: per-turn and/or one thread result."""
        ...
