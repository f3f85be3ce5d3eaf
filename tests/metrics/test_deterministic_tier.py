"""The deterministic tier as a whole: protocol, names, robustness on random input, real datasets."""

from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tracing_eval.config import DETERMINISTIC_PACK
from tracing_eval.metrics.base import Metric
from tracing_eval.metrics.registry import metric_classes
from tracing_eval.model import MetricResult, Scope, Status, Thread
from tracing_eval.transcripts import thread_from_json_line, thread_from_messages

DATASETS = Path(__file__).resolve().parents[2].parent / "shared" / "datasets"
NAMES = ["repetition", "reask", "refusal_loop", "tool_errors", "user_friction", "response_hygiene", "thread_stats"]
DETERMINISTIC_METRICS = {name: metric_classes()[name] for name in NAMES}

#: evidence keys every `ok` thread result of a metric carries
THREAD_EVIDENCE = {
    "repetition": {"repeated_messages", "repeated_turns", "pairs", "repeated_segments", "max_similarity"},
    "reask": {"reasked_messages", "reasks", "reask_rate"},
    "refusal_loop": {"refusal_messages", "runs", "longest_run"},
    "tool_errors": {
        "tool_calls",
        "errors",
        "error_rate",
        "failed_calls",
        "unrecovered",
        "repeated_failure",
        "masked_error",
    },
    "user_friction": {"friction_rate", "flagged_turns", "flags"},
    "response_hygiene": {"clean_share", "turns_checked", "failing_turns"},
    "thread_stats": {
        "turns",
        "user_messages",
        "assistant_messages",
        "tool_calls",
        "tool_errors",
        "latency_ms_p95",
        "abandoned",
    },
}
TURN_EVIDENCE = {
    "reask": {"asks", "reasked_messages"},
    "tool_errors": {"failed_calls", "masked_error", "error_rate"},
    "user_friction": {"flags"},
    "response_hygiene": {"failing"},
}


def all_metrics() -> list[Metric]:
    return [cls(None) for cls in DETERMINISTIC_METRICS.values()]


def evaluate_all(thread: Thread) -> list[MetricResult]:
    return [r for m in all_metrics() for r in m.evaluate(thread)]


def assert_contract(thread: Thread, results: list[MetricResult]) -> None:
    """Scores in [0, 1], thresholds applied, names known, every turn covered, evidence present."""
    for r in results:
        assert r.metric in NAMES
        if r.status == Status.OK:
            if r.metric == "thread_stats":
                assert r.score is None and r.passed is None
            else:
                assert r.score is not None and 0.0 <= r.score <= 1.0
                assert r.passed == (r.score >= r.threshold)
                assert r.label
            expected = THREAD_EVIDENCE if r.scope == Scope.THREAD else TURN_EVIDENCE
            assert expected.get(r.metric, set()) <= set(r.evidence), (r.metric, r.scope, r.evidence.keys())
        else:
            assert r.status == Status.NOT_APPLICABLE and r.score is None and r.reason
        if r.scope == Scope.TURN:
            assert 0 <= r.turn_index < len(thread.turns)
    covered = {r.turn_index for r in results if r.scope == Scope.TURN}
    assert covered == {t.index for t in thread.turns}
    for name in NAMES:
        assert sum(1 for r in results if r.metric == name and r.scope == Scope.THREAD) == 1, name


def test_names_in_order_and_specs() -> None:
    assert DETERMINISTIC_PACK == NAMES
    assert {n for n, cls in metric_classes().items() if cls.tier == "deterministic"} == set(NAMES)
    for name, metric in zip(NAMES, all_metrics(), strict=True):
        assert isinstance(metric, Metric)
        assert metric.spec.name == name
        assert metric.spec.tier == "deterministic"
        assert metric.spec.description
        assert metric.spec.version
        assert metric.spec.threshold == (None if name == "thread_stats" else 0.7)


def test_threshold_override_is_used() -> None:
    for name, cls in DETERMINISTIC_METRICS.items():
        if name != "thread_stats":
            assert cls(0.9).spec.threshold == 0.9


def test_empty_thread() -> None:
    thread = Thread(key="empty")
    assert_contract(thread, evaluate_all(thread))


_TEXT = st.one_of(
    st.text(max_size=120),
    st.sampled_from(
        [
            "",
            "   ",
            "I can't help with that.",
            "Have you tried clearing the cache and restarting the app?",
            "My order 8841-22 is late, my email is a@b.co",
            "Could you provide your order number?",
            "Error: not found",
            "{{name}}",
            "None",
            "HELP!!!",
            "Здравствуйте",
            "Done! It has been cancelled successfully.",
        ]
    ),
)
_ARGS = st.one_of(
    st.none(),
    st.text(max_size=20),
    st.dictionaries(st.text(max_size=5), st.integers() | st.text(max_size=5), max_size=3),
)


@st.composite
def raw_messages(draw: Any) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for k in range(draw(st.integers(0, 14))):
        role = draw(st.sampled_from(["system", "user", "user", "assistant", "assistant", "tool"]))
        msg: dict[str, Any] = {"role": role, "content": draw(st.one_of(st.none(), _TEXT))}
        if role == "assistant" and draw(st.booleans()):
            msg["tool_calls"] = [
                {
                    "id": draw(st.sampled_from(["a", "b", f"c{k}"])),
                    "function": {
                        "name": draw(st.sampled_from(["f", "g", "transfer_to_human"])),
                        "arguments": draw(_ARGS),
                    },
                }
                for _ in range(draw(st.integers(1, 3)))
            ]
        if role == "tool":
            msg["tool_call_id"] = draw(st.one_of(st.none(), st.sampled_from(["a", "b", "c0", "c1"])))
        out.append(msg)
    return out


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(raw_messages())
def test_random_transcripts_never_raise_and_keep_the_contract(messages: list[dict[str, Any]]) -> None:
    thread = thread_from_messages("random", messages)
    assert_contract(thread, evaluate_all(thread))


def _first_threads(name: str, n: int = 20) -> list[Thread]:
    path = DATASETS / name  # shared/ sits beside the repository; a missing file fails the test
    with path.open("rb") as fh:
        return [thread_from_json_line(line, k + 1) for k, line in zip(range(n), fh, strict=False)]


@pytest.mark.parametrize("name", ["tau_airline_gpt4o.jsonl", "dstc9_interactive.jsonl"])
def test_dataset_threads_keep_the_contract(name: str) -> None:
    for thread in _first_threads(name):
        assert_contract(thread, evaluate_all(thread))


def test_tau_bench_tool_errors_are_found() -> None:
    threads = _first_threads("tau_airline_gpt4o.jsonl")
    results = [
        r for t in threads for r in DETERMINISTIC_METRICS["tool_errors"](None).evaluate(t) if r.scope == Scope.THREAD
    ]
    failing = [c for r in results if r.status == Status.OK for c in r.evidence["failed_calls"]]
    assert failing, "tau-bench has failed tool calls; tool_errors must see some in the first 20 threads"
    assert all(c["name"] and c["error"] and isinstance(c["position"], int) for c in failing)
    assert any(r.label != "none" for r in results if r.status == Status.OK)
