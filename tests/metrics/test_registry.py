"""The metric registry: metrics register by subclassing, other packages add theirs through the
`tracing_eval.metrics` entry-point group, and a config naming an unknown metric is a clear error."""

import asyncio
from pathlib import Path
from typing import Any

import pytest

from tracing_eval.config import DETERMINISTIC_PACK, JUDGED_PACK, ConfigError, Settings
from tracing_eval.evaluate import evaluate_all, evaluate_thread
from tracing_eval.metrics import registry
from tracing_eval.metrics.base import MetricBase, MetricSpec
from tracing_eval.metrics.catalogue import MetricSet, build_metrics
from tracing_eval.metrics.judged.question import QuestionMetric, VerdictMetric
from tracing_eval.metrics.registry import RegistryError, metric_classes
from tracing_eval.model import MetricResult, Scope, Thread
from tracing_eval.transcripts import thread_from_messages

ACME_MODULE = '''
from tracing_eval.metrics.base import MetricBase
from tracing_eval.metrics.results import ok


class LongestReply(MetricBase):
    """Shorter replies score higher: 1 - longest reply / 1000 characters."""

    name = "acme_longest_reply"
    version = "1"
    tier = "deterministic"
    scopes = ("thread",)
    description = "The longest assistant reply, as a share of 1000 characters (lower is better)."

    def evaluate(self, thread):
        longest = max((len(m.content) for m in thread.messages if m.role == "assistant"), default=0)
        return [ok(self.spec, 1 - longest / 1000, reason=f"longest reply {longest} characters")]
'''


def chat(*texts: str) -> Thread:
    roles = ("user", "assistant")
    return thread_from_messages("t", [{"role": roles[i % 2], "content": t} for i, t in enumerate(texts)])


@pytest.fixture
def scratch_registry(monkeypatch: pytest.MonkeyPatch) -> Any:
    """Metrics defined or loaded in a test stay out of the other tests' registry."""
    monkeypatch.setattr(registry, "_REGISTERED", dict(metric_classes()))
    registry.reload_entry_points()
    yield
    registry.reload_entry_points()


def test_every_packaged_metric_is_registered_once_by_its_class() -> None:
    classes = metric_classes()
    assert set(classes) == {*DETERMINISTIC_PACK, *JUDGED_PACK}
    for name, cls in classes.items():
        assert cls.name == name and cls.__dict__["name"] == name  # written once, in its class
    # the bases name no metric and are not registered
    assert not {QuestionMetric, VerdictMetric, MetricBase} & set(classes.values())


def test_a_package_adds_a_metric_through_the_entry_point(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, scratch_registry: Any
) -> None:
    (tmp_path / "acme_metrics.py").write_text(ACME_MODULE)
    info = tmp_path / "acme_metrics-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: acme-metrics\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(f"[{registry.GROUP}]\nacme = acme_metrics\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(__import__("sys").modules, "acme_metrics", raising=False)
    registry.reload_entry_points()

    settings = Settings()
    settings.metrics.enabled = [*DETERMINISTIC_PACK, "acme_longest_reply"]
    settings.metrics.thresholds = {"acme_longest_reply": 0.99}
    metrics = build_metrics(settings)
    assert metrics.names[-1] == "acme_longest_reply" and not metrics.judged
    [result] = [r for r in evaluate_thread(chat("hi", "x" * 50), metrics.deterministic) if r.metric.startswith("acme")]
    assert (result.score, result.passed, result.threshold) == (0.95, False, 0.99)
    assert result.reason == "longest reply 50 characters"


def test_an_entry_point_that_does_not_load_is_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, scratch_registry: Any
) -> None:
    info = tmp_path / "broken-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: broken\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(f"[{registry.GROUP}]\nbroken = no_such_module_here\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    registry.reload_entry_points()
    with pytest.raises(
        RegistryError, match=r"entry point broken = no_such_module_here of tracing_eval.metrics cannot be"
    ):
        metric_classes()


def test_two_metrics_may_not_share_a_name(scratch_registry: Any) -> None:
    with pytest.raises(RegistryError, match=r"metric name 'repetition' is taken by .*Repetition; .*Copy needs"):

        class Copy(MetricBase):
            name = "repetition"
            version = "1"
            tier = "deterministic"
            scopes = ("thread",)
            description = "a copy"


def test_a_metric_without_its_declarations_is_refused(scratch_registry: Any) -> None:
    with pytest.raises(RegistryError, match=r"metric 'half' \(.*Half\) does not set 'description'"):

        class Half(MetricBase):
            name = "half"
            version = "1"
            tier = "deterministic"
            scopes = ("thread",)


def test_unknown_metric_in_config_names_the_key_and_the_known_ones() -> None:
    settings = Settings()
    settings.metrics.enabled = ["repetition", "repetiton"]
    with pytest.raises(ConfigError) as caught:
        build_metrics(settings)
    message = str(caught.value)
    assert message.startswith(
        "unknown metric(s) repetiton in [metrics] enabled (TRACING_EVAL_METRICS__ENABLED); known: "
    )
    assert all(name in message for name in [*DETERMINISTIC_PACK, *JUDGED_PACK])


class Spy:
    """A thread-only metric that counts its calls."""

    def __init__(self) -> None:
        self.spec = MetricSpec("spy", "1", "deterministic", ("thread",), 0.7, "counts calls")
        self.calls = 0

    def evaluate(self, thread: Thread) -> list[MetricResult]:
        self.calls += 1
        return []


def test_turns_only_runs_no_thread_only_metric_and_returns_no_thread_result() -> None:
    spy = Spy()
    built = build_metrics(Settings(), DETERMINISTIC_PACK)
    metrics = MetricSet(deterministic=[*built.deterministic, spy])
    thread = chat("Hi, my order is late.", "Sorry! What is the order number?", "It's 4471.", "Thanks, on its way.")
    active = asyncio.run(evaluate_all(thread, metrics, None, turns_only=True))
    idle = asyncio.run(evaluate_all(thread, metrics, None))
    assert spy.calls == 1  # only the idle run
    assert active and all(r.scope is Scope.TURN for r in active)
    per_turn = {m.spec.name for m in built.deterministic if "turn" in m.spec.scopes}
    assert {r.metric for r in active} == per_turn - {"tool_errors"}  # no tool call: one thread-scope n/a
    assert not {"repetition", "refusal_loop", "thread_stats"} & per_turn  # the thread-only ones did not run
    strip = [r.model_dump(exclude={"duration_ms"}) for r in active]
    assert strip == [r.model_dump(exclude={"duration_ms"}) for r in idle if r.scope is Scope.TURN]


def test_the_built_in_metrics_are_declared_under_the_entry_point_group() -> None:
    from importlib.metadata import entry_points

    declared = {e.value for e in entry_points(group=registry.GROUP)}
    assert {"tracing_eval.metrics.deterministic", "tracing_eval.metrics.judged"} <= declared


def test_a_verdict_answer_must_put_the_evidence_and_the_reason_before_the_verdict(scratch_registry: Any) -> None:
    from tracing_eval.metrics.judged.answers import Answer, Text

    class Backwards(Answer):
        verdict: Text
        reason: Text
        items: list[str]

    with pytest.raises(TypeError, match=r"must have the fields <items>, reason, verdict; has \['verdict'"):

        class Flow(VerdictMetric):
            name = "backwards_flow"
            version = "1"
            tier = "judge"
            scopes = ("thread",)
            description = "verdict first"
            answer = Backwards

    assert "backwards_flow" not in registry._REGISTERED
