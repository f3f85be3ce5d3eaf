"""`tracing-eval calibrate --source langfuse`: reviewers' ANNOTATION scores against this project's scores,
read from the fake Langfuse (which checks every request against the OpenAPI spec)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any

import pytest
from click.testing import CliRunner

from tests.support.fakes.langfuse_server import FakeLangfuseServer
from tests.support.langfuse_harness import lf_settings
from tests.support.results import score_result
from tracing_eval.cli import main
from tracing_eval.connectors.langfuse.client import LangfuseClient
from tracing_eval.connectors.langfuse.sink import ScoreWriter, Target, build_score
from tracing_eval.model import MetricResult, Scope


@pytest.fixture(params=["v4", "v3"])
def server(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> Iterator[Any]:
    monkeypatch.chdir(tmp_path)
    with FakeLangfuseServer(request.param) as lf:
        monkeypatch.setenv("LANGFUSE_BASE_URL", lf.base_url)
        monkeypatch.setenv("LANGFUSE_PUBLIC_KEY", lf.public_key)
        monkeypatch.setenv("LANGFUSE_SECRET_KEY", lf.secret_key)
        monkeypatch.delenv("LANGFUSE_HOST", raising=False)
        yield lf


def invoke(*args: str) -> Any:
    return CliRunner(env={"COLUMNS": "200"}).invoke(main, list(args), catch_exceptions=False)


def repetition(label: str, score: float) -> MetricResult:
    return score_result("repetition", score, threshold=0.7, scope=Scope.THREAD, label=label, reason="r", evidence={})


def write_ours(server: FakeLangfuseServer, results: dict[str, tuple[MetricResult, Target]]) -> None:
    """This project's scores, written the way the Langfuse sink writes them."""

    async def go() -> None:
        client = LangfuseClient(lf_settings(server))
        try:
            writer = ScoreWriter(client)
            await writer.write(
                [
                    (build_score(i, result, target, None, 1), "2026-01-01T00:00:00Z")
                    for i, (result, target) in results.items()
                ]
            )
        finally:
            await client.aclose()

    asyncio.run(go())


def test_reviewer_scores_against_ours_per_session(server: FakeLangfuseServer) -> None:
    # ours: s1 s2 fail (fully, mostly), s3 s4 s5 pass; reviewers say s1 s3 repeat, s2 s4 s5 do not
    ours = {"s1": ("fully", 0.0), "s2": ("mostly", 0.3), "s3": ("none", 1.0), "s4": ("none", 1.0), "s5": ("minor", 0.9)}
    write_ours(server, {f"id-{s}": (repetition(*v), Target(0, session_id=s)) for s, v in ours.items()})
    for session, verdict in [("s1", "repeats"), ("s2", "fine"), ("s3", "repeats"), ("s4", "fine"), ("s5", "fine")]:
        server.seed_score("loops (human)", verdict, source="ANNOTATION", session_id=session)
    server.seed_score("loops (human)", "repeats", source="ANNOTATION", session_id="s9")  # never evaluated
    server.seed_score("loops (human)", "fine", source="API", session_id="s3")  # not a reviewer's score
    res = invoke(
        "calibrate", "--source", "langfuse", "--since", "7d", "--label", "loops (human)", "--metric", "repetition",
        "--positive", "repeats", "--format", "json", "--bootstrap", "100",
    )  # fmt: skip
    assert res.exit_code == 0, res.output
    (r,) = json.loads(res.stdout)["results"]
    assert r["units"] == 5
    assert r["confusion"] == {"tp": 1, "fp": 1, "fn": 1, "tn": 2}
    assert r["left_out"] == {"not scored by this project": 1}
    assert r["stats"]["precision"] == 0.5 and r["stats"]["recall"] == 0.5
    # AUC over 1 - score: positives 1.0 and 0.0 against negatives 0.7, 0.0, 0.1 -> (3 + 0 + 0.5 * 1) / 6
    assert r["stats"]["roc_auc"] == pytest.approx(3.5 / 6, abs=1e-4)
    assert server.count("GET /api/public/v3/scores") == 2  # the reviewers' scores, then ours in one batch
    server.assert_no_violations()


def test_several_reviewers_on_one_trace_are_aggregated(server: FakeLangfuseServer) -> None:
    result = score_result("user_friction", 0.0, threshold=0.7, scope=Scope.TURN, turn_index=0, label="friction")
    write_ours(server, {"t-1": (result, Target(0, trace_id="t1"))})
    for value in (1.0, 2.0, 4.0):
        server.seed_score("satisfaction", value, source="ANNOTATION", trace_id="t1")
    res = invoke(
        "calibrate", "--source", "langfuse", "--label", "satisfaction", "--metric", "user_friction",
        "--positive", "<=2", "--aggregate", "majority", "--format", "json", "--bootstrap", "0",
    )  # fmt: skip
    assert res.exit_code == 0, res.output
    (r,) = json.loads(res.stdout)["results"]
    assert r["units"] == 1 and r["confusion"]["tp"] == 1
    server.assert_no_violations()


def test_no_reviewer_scores_is_a_clear_error(server: FakeLangfuseServer) -> None:
    server.seed_score("loops (human)", "repeats", source="API", session_id="s1")
    res = invoke("calibrate", "--source", "langfuse", "--label", "loops (human)", "--metric", "repetition")
    assert res.exit_code == 2
    assert "Langfuse has no reviewer scores (source ANNOTATION) named 'loops (human)'" in " ".join(res.output.split())


def test_no_overlap_is_a_clear_error(server: FakeLangfuseServer) -> None:
    server.seed_score("loops (human)", "repeats", source="ANNOTATION", session_id="s1")
    res = invoke("calibrate", "--source", "langfuse", "--label", "loops (human)", "--metric", "repetition")
    assert res.exit_code == 2
    text = " ".join(res.output.split())
    assert "none of the 1 trace(s)/session(s) reviewers scored as 'loops (human)' has a 'repetition' score" in text


def test_langfuse_source_needs_a_metric_and_no_file(server: FakeLangfuseServer, tmp_path: Any) -> None:
    res = invoke("calibrate", "--source", "langfuse", "--label", "x")
    assert res.exit_code == 2 and "--source langfuse needs --metric" in res.output
    res = invoke("calibrate", "x.jsonl", "--source", "langfuse", "--label", "x", "--metric", "repetition")
    assert res.exit_code == 2 and "give no FILE" in res.output
