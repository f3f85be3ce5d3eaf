"""A thread still active is scored where it changed: a turn evaluation scores the turns from the first
one whose trace was assembled again, and the turns before it keep the results recorded for them. The
metrics that start their per-turn work there (`MetricBase.evaluate_from`) give exactly the results a
whole evaluation gives for those turns; the evaluation once the thread is idle scores every turn."""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import BACKENDS, DATASETS
from tests.support.scripted_judge import ScriptedJudge
from tracing_eval.config import DETERMINISTIC_PACK, Settings
from tracing_eval.evaluate import evaluate_all
from tracing_eval.ingest import make_batch
from tracing_eval.metrics.catalogue import build_metrics
from tracing_eval.model import MetricResult, Span, Thread
from tracing_eval.pipeline import Pipeline, first_changed_turn
from tracing_eval.store.sql import SqlStore
from tracing_eval.transcripts import thread_from_json_line, thread_from_messages

SETTLE, IDLE = 60.0, 300.0


def _dataset_threads(name: str, n: int) -> list[Thread]:
    with (DATASETS / name).open("rb") as f:
        return [thread_from_json_line(line, i) for i, line in enumerate(itertools.islice(f, n), 1)]


def _same(results: list[MetricResult]) -> list[dict[str, Any]]:
    return [r.model_dump(exclude={"duration_ms"}) for r in results]


#: the user repeats a request two turns later: the flag of turn 2 reads the words of turn 0
REPEATED_REQUEST = thread_from_messages(
    "repeated",
    [
        {"role": "user", "content": "Book a table for four people at Nando's tonight at seven."},
        {"role": "assistant", "content": "Which area are you in?"},
        {"role": "user", "content": "Cambridge city centre."},
        {"role": "assistant", "content": "There are several restaurants in the centre."},
        {"role": "user", "content": "Book a table for four people at Nando's tonight at seven."},
        {"role": "assistant", "content": "Done, your reference is ABC123."},
    ],
)


@pytest.mark.parametrize("metric", ["user_friction", "response_hygiene", "tool_errors", "reask"])
def test_evaluate_from_gives_the_whole_evaluations_results_of_those_turns(metric: str) -> None:
    [m] = build_metrics(Settings(), [metric]).deterministic
    threads = [
        REPEATED_REQUEST,
        *_dataset_threads("tau_airline_gpt4o.jsonl", 25),
        *_dataset_threads("uss_sgd_mwoz.jsonl", 25),
        *_dataset_threads("dstc9_interactive.jsonl", 10),
    ]
    compared = 0
    for thread in threads:
        whole = m.evaluate(thread)
        for first in range(1, len(thread.turns)):
            expected = [r for r in whole if r.turn_index is not None and r.turn_index >= first]
            got = [r for r in m.evaluate_from(thread, first) if r.turn_index is not None and r.turn_index >= first]
            assert _same(got) == _same(expected), (thread.key, first)
            compared += len(expected)
    assert compared > 200  # the threads have per-turn results to compare


def _turn(conversation: str, n: int, user: str, answer: str, *, extra: str = "") -> list[Span]:
    """Turn `n` of a conversation: one `chat` span, its trace id `n` in hex, with the user's message and the answer."""
    history = [{"role": "user", "parts": [{"type": "text", "content": user}]}]
    attrs = {
        "gen_ai.operation.name": "chat",
        "gen_ai.conversation.id": conversation,
        "gen_ai.input.messages": json.dumps(history),
        "gen_ai.output.messages": json.dumps(
            [{"role": "assistant", "parts": [{"type": "text", "content": answer + extra}]}]
        ),
    }
    start = 1_000_000_000 * (n + 1)
    return [
        Span(trace_id=f"{n:032x}", span_id=f"{n:016x}", name="chat", start_ns=start, end_ns=start + 5, attributes=attrs)
    ]


TURNS = [
    ("Where is my order A48213?", "Could you give me your order number?"),
    ("I told you, it is A48213!!", "Could you give me your order number please?"),
    ("No, that's not what I asked. A48213.", "Order A48213 ships tomorrow."),
    ("Thanks.", "You're welcome. {{ user.name }}"),
]


async def _results(store: SqlStore, key: str) -> dict[tuple[str, str], tuple[int, dict[str, Any]]]:
    return {
        (s.target, s.result.metric): (s.thread_version, s.result.model_dump(exclude={"duration_ms"}))
        for s in await store.results(key)
    }


@pytest.mark.parametrize("backend", BACKENDS, indirect=True)
async def test_a_growing_thread_scores_its_new_turns_and_ends_as_a_whole_evaluation(
    store: SqlStore, settings: Settings, tmp_path: Path
) -> None:
    settings = settings.model_copy(
        update={
            "schedule": settings.schedule.model_copy(
                update={"turn_settle_seconds": SETTLE, "thread_idle_seconds": IDLE}
            )
        }
    )
    clock = [0.0]
    pipeline = Pipeline(
        store=store,
        settings=settings,
        metrics=build_metrics(settings, DETERMINISTIC_PACK),
        owner="test",
        clock=lambda: clock[0],
    )
    key = "otlp:conv-1"
    versions: list[int] = []
    for n, (user, answer) in enumerate(TURNS):
        clock[0] = 1000.0 * n
        await store.ingest(make_batch(_turn("conv-1", n, user, answer), []), clock[0])
        clock[0] += SETTLE + 1
        stats = await pipeline.tick(deliver=False)
        assert (stats.turn_evaluations, stats.threads_evaluated) == (1, 0)
        found = await _results(store, key)
        versions.append(max(v for v, _ in found.values()))
        # this turn was scored at this version; every earlier turn kept the version it was scored at
        scored = {(r["turn_index"], v) for v, r in found.values() if r["turn_index"] is not None}
        assert scored == {(k, versions[k]) for k in range(n + 1)}
        assert len(set(versions)) == n + 1

    # a late span of the first turn changes its trace: every turn is scored again
    clock[0] += 10
    await store.ingest(make_batch(_turn("conv-1", 0, *TURNS[0], extra=" (edited)"), []), clock[0])
    clock[0] += SETTLE + 1
    assert (await pipeline.tick(deliver=False)).turn_evaluations == 1
    found = await _results(store, key)
    latest = max(v for v, _ in found.values())
    assert {v for v, r in found.values() if r["turn_index"] is not None} == {latest}

    clock[0] += IDLE
    assert (await pipeline.tick(deliver=False)).threads_evaluated == 1
    active = await _results(store, key)

    # the same conversation ingested whole into a new store and evaluated once idle
    other = SqlStore(f"sqlite+aiosqlite:///{tmp_path / 'whole.db'}")
    await other.open()
    try:
        spans = [s for n, (u, a) in enumerate(TURNS) for s in _turn("conv-1", n, u, a, extra=" (edited)" * (n == 0))]
        await other.ingest(make_batch(spans, []), 0.0)
        whole = Pipeline(store=other, settings=settings, metrics=pipeline.metrics, owner="test", clock=lambda: 0.0)
        assert (await whole.tick(settle_all=True, deliver=False)).threads_evaluated == 1
        once = await _results(other, key)
    finally:
        await other.close()
    assert {k: r for k, (_, r) in active.items()} == {k: r for k, (_, r) in once.items()}
    assert any(r["turn_index"] is not None for _, r in once.values())


def test_first_changed_turn() -> None:
    thread = Thread(
        key="k",
        turns=[{"index": i, "trace_id": f"t{i}"} for i in range(4)],  # type: ignore[list-item]
    )
    assert first_changed_turn(thread, {"t3"}) == 3
    assert first_changed_turn(thread, {"t3", "t1"}) == 1
    assert first_changed_turn(thread, set()) == 0  # nothing assembled: every turn
    thread.turns[2].trace_id = None
    assert first_changed_turn(thread, {"t3"}) == 0  # a turn without a trace id: every turn


async def test_a_turn_evaluation_judges_only_the_turns_from_the_first_changed_one() -> None:
    """With nothing to reuse (a new judge model, say), a turn evaluation still asks only about the new
    turns; the evaluation of the idle thread asks about every turn."""
    metrics = build_metrics(Settings(), ["turn_relevancy"])
    judge = ScriptedJudge({"turn_relevancy": lambda body: {"reason": "on topic", "verdict": "yes"}})
    active = await evaluate_all(REPEATED_REQUEST, metrics, judge, turns_only=True, from_turn=1)
    assert len(judge.requests) == 2
    assert sorted(r.turn_index for r in active) == [1, 2]
    idle = await evaluate_all(REPEATED_REQUEST, metrics, judge)
    assert len(judge.requests) == 2 + 3
    assert sorted(r.turn_index for r in idle if r.turn_index is not None) == [0, 1, 2]
