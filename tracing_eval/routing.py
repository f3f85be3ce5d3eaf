"""Review routing: which results send a thread for review, where to, and with what priority.

Pure functions over plain data. Each route (`[[review.routes]]`) watches some metrics and fires on a
result that fails (its score is below the route's `below`, or it failed its own threshold when
`below` is unset), carries one of the route's labels, or errored (when `include_errors`). A thread
goes to the union of the destinations of every route that fired, with the highest priority among
them. A `*` watches every metric but the advisory ones (`review.advisory`, by default `user_friction`:
its verdicts are not precise enough on human labels to route on their own); a rule that names an
advisory metric routes on it. With no routes configured, one implicit route is built from `review.metrics`, `labels` and
`include_errors` that sends to the local queue and every enabled review sink.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from tracing_eval.config import ReviewSettings, RouteSettings
from tracing_eval.model import MetricResult, Status

LOCAL = "local"
#: Name of the implicit route used when `review.routes` is empty.
DEFAULT_ROUTE = "default"
#: Priorities from lowest to highest.
PRIORITIES: tuple[str, ...] = ("low", "normal", "high", "urgent")


@dataclass(frozen=True)
class RoutingDecision:
    """Where a failing thread goes and why.

    `reasons` has one item per routed result: `metric, target, score, threshold, label, status,
    reason`, plus `route` (the highest-priority route it fired), that route's `priority`, and
    `routes` (every route it fired).
    """

    reasons: list[dict[str, Any]]
    destinations: frozenset[str]
    priority: str
    routes: list[str] = field(default_factory=list)

    @property
    def local(self) -> bool:
        """Whether the thread goes to the local review queue."""
        return LOCAL in self.destinations

    @property
    def sinks(self) -> list[str]:
        """Destinations delivered through the outbox (everything but the local queue), sorted."""
        return sorted(self.destinations - {LOCAL})

    def payload_fields(self) -> dict[str, Any]:
        """Fields to add to the `review` outbox payload so sinks can show them."""
        return {"priority": self.priority, "routes": self.routes, "destinations": sorted(self.destinations)}


def effective_routes(review: ReviewSettings, review_sinks: Iterable[str] = ()) -> list[RouteSettings]:
    """The configured routes, or the implicit one when none are configured."""
    if review.routes:
        return list(review.routes)
    return [
        RouteSettings(
            name=DEFAULT_ROUTE,
            metrics=list(review.metrics),
            labels=list(review.labels),
            include_errors=review.include_errors,
            destinations=[LOCAL, *sorted(set(review_sinks) - {LOCAL})],
        )
    ]


def unknown_destinations(review: ReviewSettings, review_sinks: Iterable[str]) -> dict[str, list[str]]:
    """Route name -> destinations that are neither `local` nor an enabled review sink (check at startup)."""
    available = {LOCAL, *review_sinks}
    bad = {r.name: sorted(set(r.destinations) - available) for r in review.routes}
    return {name: dests for name, dests in bad.items() if dests}


def watches(rule: RouteSettings, metric: str, advisory: frozenset[str] = frozenset()) -> bool:
    """Whether a route watches a metric: named, or covered by `*` and not advisory."""
    return metric in rule.metrics or ("*" in rule.metrics and metric not in advisory)


def fires(result: MetricResult, rule: RouteSettings, advisory: frozenset[str] = frozenset()) -> bool:
    """Whether one result triggers one route."""
    if not watches(rule, result.metric, advisory):
        return False
    if result.status is Status.ERROR:
        return rule.include_errors
    if result.status is not Status.OK:
        return False  # skipped / not applicable: nothing to review
    if result.label is not None and result.label in rule.labels:
        return True
    if rule.below is not None:
        return result.score is not None and result.score < rule.below
    return result.passed is False


def route(
    results: list[MetricResult], review: ReviewSettings, review_sinks: Iterable[str] = ()
) -> RoutingDecision | None:
    """Route a thread's results; None when no route fires (or review is off).

    `review_sinks` are the enabled sinks that take review items (e.g. `webhook`, `langfuse`).
    Destinations that are not `local` or one of them are dropped, so no outbox row waits for a
    sink that is not running; `unknown_destinations` reports such routes up front.
    """
    if not review.enabled:
        return None
    sinks = set(review_sinks)
    available = {LOCAL, *sinks}
    advisory = frozenset(review.advisory)
    rank = {p: i for i, p in enumerate(PRIORITIES)}
    rules = sorted(effective_routes(review, sinks), key=lambda r: -rank[r.priority])  # stable: config order on ties
    reasons: list[dict[str, Any]] = []
    fired: set[int] = set()
    for r in results:
        hits = [i for i, rule in enumerate(rules) if fires(r, rule, advisory) and set(rule.destinations) & available]
        if not hits:
            continue
        fired.update(hits)
        names = list(dict.fromkeys(rules[i].name for i in hits))
        reasons.append({**_reason(r), "route": names[0], "routes": names, "priority": rules[hits[0]].priority})
    if not reasons:
        return None
    chosen = [rules[i] for i in sorted(fired)]
    destinations = frozenset(d for rule in chosen for d in rule.destinations if d in available)
    return RoutingDecision(reasons, destinations, chosen[0].priority, list(dict.fromkeys(rule.name for rule in chosen)))


def _reason(r: MetricResult) -> dict[str, Any]:
    return {
        "metric": r.metric,
        "target": "thread" if r.turn_index is None else f"turn {r.turn_index}",
        "score": r.score,
        "threshold": r.threshold,
        "label": r.label,
        "status": r.status.value,
        "reason": r.reason or (r.error or ""),
    }
