"""Review routing rules: what fires, where it goes, with which priority."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.results import not_applicable, score_result
from tracing_eval.config import ReviewSettings, RouteSettings, load_settings
from tracing_eval.model import MetricResult, Scope, Status
from tracing_eval.routing import route, unknown_destinations


def ok(
    metric: str, score: float, threshold: float = 0.7, label: str | None = None, turn: int | None = None
) -> MetricResult:
    scope = Scope.THREAD if turn is None else Scope.TURN
    return score_result(metric, score, threshold=threshold, label=label, scope=scope, turn_index=turn, reason="why")


def err(metric: str) -> MetricResult:
    return MetricResult(metric=metric, scope=Scope.THREAD, status=Status.ERROR, error="JudgeError: timeout")


def test_implicit_route_sends_failures_to_local_and_every_review_sink() -> None:
    results = [ok("task_success", 0.4), ok("repetition", 0.9), ok("tool_errors", 0.0, turn=2)]
    decision = route(results, ReviewSettings(), review_sinks={"webhook", "langfuse"})
    assert decision is not None
    assert decision.destinations == {"local", "webhook", "langfuse"}
    assert decision.sinks == ["langfuse", "webhook"] and decision.local
    assert decision.priority == "normal" and decision.routes == ["default"]
    assert [(r["metric"], r["target"], r["route"]) for r in decision.reasons] == [
        ("task_success", "thread", "default"),
        ("tool_errors", "turn 2", "default"),
    ]
    assert decision.reasons[0] == {
        "metric": "task_success",
        "target": "thread",
        "score": 0.4,
        "threshold": 0.7,
        "label": None,
        "status": "ok",
        "reason": "why",
        "route": "default",
        "routes": ["default"],
        "priority": "normal",
    }


def test_nothing_routed() -> None:
    assert route([ok("task_success", 0.9), not_applicable("tool_errors", "no tools")], ReviewSettings()) is None
    assert route([ok("task_success", 0.1)], ReviewSettings(enabled=False)) is None
    assert route([], ReviewSettings()) is None


def test_implicit_route_labels_metrics_and_errors() -> None:
    review = ReviewSettings(metrics=["tool_errors", "failure_rate"], labels=["masked_error"], include_errors=True)
    results = [
        ok("task_success", 0.1),  # not watched
        ok("tool_errors", 0.9, label="masked_error"),  # passes but carries a flagged label
        err("failure_rate"),
    ]
    decision = route(results, review)
    assert decision is not None and decision.destinations == {"local"}
    assert [(r["metric"], r["status"], r["reason"]) for r in decision.reasons] == [
        ("tool_errors", "ok", "why"),
        ("failure_rate", "error", "JudgeError: timeout"),
    ]
    assert route([err("failure_rate")], ReviewSettings()) is None  # errors only when asked


def test_advisory_metrics_route_only_where_a_rule_names_them() -> None:
    friction = ok("user_friction", 0.0, label="friction")
    assert ReviewSettings().advisory == ["user_friction"]
    assert route([friction], ReviewSettings()) is None  # "*" does not watch an advisory metric
    named = route([friction], ReviewSettings(metrics=["*", "user_friction"]))
    assert named is not None and [r["metric"] for r in named.reasons] == ["user_friction"]
    rule = RouteSettings(name="friction", metrics=["user_friction"], priority="low")
    ruled = route([friction, ok("reask", 0.0)], ReviewSettings(routes=[rule, RouteSettings(name="all")]))
    assert ruled is not None and [(r["metric"], r["route"]) for r in ruled.reasons] == [
        ("user_friction", "friction"),
        ("reask", "all"),
    ]
    assert route([friction], ReviewSettings(advisory=[])) is not None  # opted back in


def test_below_overrides_the_metric_threshold() -> None:
    strict = RouteSettings(name="strict", metrics=["task_success"], below=0.3, destinations=["webhook"])
    review = ReviewSettings(routes=[strict])
    assert route([ok("task_success", 0.4)], review, review_sinks={"webhook"}) is None  # fails 0.7, not below 0.3
    decision = route([ok("task_success", 0.2, threshold=0.1)], review, review_sinks={"webhook"})  # passes 0.1
    assert decision is not None and decision.destinations == {"webhook"} and not decision.local


def test_routes_union_destinations_and_take_the_highest_priority() -> None:
    review = ReviewSettings(
        routes=[
            RouteSettings(name="quality", destinations=["local"], priority="low"),
            RouteSettings(name="tools", metrics=["tool_errors"], destinations=["webhook"], priority="urgent"),
            RouteSettings(name="judge down", include_errors=True, metrics=["none"], destinations=["langfuse"]),
        ]
    )
    results = [ok("task_success", 0.2), ok("tool_errors", 0.0, turn=1)]
    decision = route(results, review, review_sinks={"webhook", "langfuse"})
    assert decision is not None
    assert decision.destinations == {"local", "webhook"}
    assert decision.priority == "urgent"
    assert decision.routes == ["tools", "quality"]  # by priority
    tool_reason = decision.reasons[1]
    assert (tool_reason["route"], tool_reason["routes"], tool_reason["priority"]) == (
        "tools",
        ["tools", "quality"],
        "urgent",
    )
    assert decision.payload_fields() == {
        "priority": "urgent",
        "routes": ["tools", "quality"],
        "destinations": ["local", "webhook"],
    }


def test_destinations_that_are_not_enabled_are_dropped_and_reported() -> None:
    review = ReviewSettings(
        routes=[
            RouteSettings(name="hooks", destinations=["webhook"]),
            RouteSettings(name="both", destinations=["local", "langfuse"], priority="high"),
        ]
    )
    assert unknown_destinations(review, {"webhook"}) == {"both": ["langfuse"]}
    decision = route([ok("task_success", 0.1)], review, review_sinks={"webhook"})
    assert decision is not None
    assert decision.destinations == {"local", "webhook"}
    assert route([ok("task_success", 0.1)], ReviewSettings(routes=[review.routes[0]])) is None  # nowhere to go


def test_routes_from_toml(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    cfg = tmp_path / "te.toml"
    cfg.write_text(
        "[[review.routes]]\n"
        'name = "tool failures"\n'
        'metrics = ["tool_errors"]\n'
        "below = 0.5\n"
        'labels = ["masked_error"]\n'
        'destinations = ["local", "webhook"]\n'
        'priority = "high"\n'
    )
    review = load_settings(cfg).review
    decision = route([ok("tool_errors", 0.9, label="masked_error", turn=0)], review, review_sinks={"webhook"})
    assert decision is not None and decision.priority == "high" and decision.sinks == ["webhook"]
