"""`tracing-eval calibrate` on small files in the shared dataset schema, and its errors."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from tracing_eval.cli import main
from tracing_eval.metrics.deterministic.refusal_loop import RefusalLoop
from tracing_eval.metrics.deterministic.user_friction import UserFriction
from tracing_eval.transcripts import thread_from_json_line

REFUSAL = "I'm sorry, but I can't help with that request."
ANSWER = "The capital of France is Paris; it has been the capital for centuries."


def invoke(*args: str) -> Any:
    return CliRunner(env={"COLUMNS": "200"}).invoke(main, list(args), catch_exceptions=False)


def write(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def single_exchange(i: int, reply: str, label: str, quality: list[Any]) -> dict[str, Any]:
    return {
        "thread_id": f"x{i}",
        "turns": [{"role": "user", "content": f"question number {i}?"}, {"role": "assistant", "content": reply}],
        "thread_labels": {"response": label, "quality": {"raw": quality, "mean": 0}},
        "turn_labels": [{"turn_index": 1, "labels": {"response": label}}],
    }


@pytest.fixture
def xs(tmp_path: Path) -> Path:
    # 6 refusals people call refusals, 1 they call compliance, 2 answers they call refusals (label
    # noise no detector can follow), 5 answers they call compliance: tp 6, fp 1, fn 2, tn 5
    cases = [(REFUSAL, "full_refusal")] * 6 + [(REFUSAL, "full_compliance")] + [(ANSWER, "partial_refusal")] * 2
    cases += [(ANSWER, "full_compliance")] * 5
    rows = [
        single_exchange(i, r, lab, [1, 2, "N/A"] if r == REFUSAL else [3, 3, 2]) for i, (r, lab) in enumerate(cases)
    ]
    return write(tmp_path / "xs.jsonl", rows)


def test_reply_level_refusals_against_hand_counts(xs: Path) -> None:
    # the detector's own evidence says which replies it flags; the CLI must join them to the labels
    flagged = [
        1 in RefusalLoop(None).evaluate(thread_from_json_line(line, n))[0].evidence["refusal_messages"]
        for n, line in enumerate(xs.read_text().splitlines(), 1)
    ]
    assert flagged == [True] * 7 + [False] * 7
    res = invoke(
        "calibrate", str(xs), "--label", "turn_labels.response", "--metric", "refusal_loop",
        "--positive", "full_refusal,partial_refusal", "--format", "json", "--bootstrap", "200",
    )  # fmt: skip
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    (r,) = doc["results"]
    assert r["level"] == "reply" and r["units"] == 14
    assert r["confusion"] == {"tp": 6, "fp": 1, "fn": 2, "tn": 5}
    # po = 11/14, chance = (7*8 + 7*6) / 14^2 = 0.5 -> kappa = 4/7
    assert r["stats"]["kappa"] == pytest.approx(4 / 7, abs=1e-4)
    assert r["stats"]["precision"] == pytest.approx(6 / 7, abs=1e-4)
    assert r["stats"]["recall"] == pytest.approx(6 / 8, abs=1e-4)
    assert r["stats"]["false_alarm_rate"] == pytest.approx(1 / 6, abs=1e-4)
    lo, hi = r["intervals"]["kappa"]
    assert lo <= r["stats"]["kappa"] <= hi
    again = invoke(
        "calibrate", str(xs), "--label", "turn_labels.response", "--metric", "refusal_loop",
        "--positive", "full_refusal,partial_refusal", "--format", "json", "--bootstrap", "200",
    )  # fmt: skip
    assert json.loads(again.stdout) == doc, "the bootstrap is seeded: the same command prints the same figures"


def test_thread_level_lists_of_annotators_and_spearman(xs: Path) -> None:
    # quality: refusals [1, 2, N/A] (mean 1.5), answers [3, 3, 2] (mean 2.67); "N/A" is left out
    res = invoke(
        "calibrate", str(xs), "--label", "thread_labels.quality.raw", "--metric", "refusal_loop",
        "--positive", "<=2", "--aggregate", "majority", "--value", "evidence.refusals",
        "--format", "json", "--bootstrap", "0",
    )  # fmt: skip
    assert res.exit_code == 0, res.output
    (r,) = json.loads(res.stdout)["results"]
    assert r["level"] == "thread"
    # one refusal is no loop: the thread result passes everywhere, so nothing is flagged
    assert r["confusion"] == {"tp": 0, "fp": 0, "fn": 7, "tn": 7}
    assert r["stats"]["kappa"] == 0.0
    # ordered by the number of refusals: more refusals go with a lower rating, rho = -1 on two tied groups
    assert r["stats"]["spearman"] == pytest.approx(-1.0)
    assert r["stats"]["roc_auc"] == 1.0
    assert r["intervals"] == {}
    any_low = invoke(
        "calibrate", str(xs), "--label", "thread_labels.quality.raw", "--metric", "refusal_loop",
        "--positive", "<=2", "--aggregate", "any", "--value", "evidence.refusals",
        "--format", "json", "--bootstrap", "0",
    )  # fmt: skip
    (r,) = json.loads(any_low.stdout)["results"]
    assert r["human_positive"] == 14, "with `any`, the one 2 among the answers' votes makes them positive"
    assert r["stats"]["roc_auc"] is None, "no negatives left"


def test_turn_level_user_friction_by_message_index(tmp_path: Path) -> None:
    turns = [
        {"role": "user", "content": "I need the status of order 4471."},
        {"role": "assistant", "content": "Could you give me the order number?"},
        {"role": "user", "content": "I already told you, it is 4471."},
        {"role": "assistant", "content": "Thanks, order 4471 ships tomorrow."},
        {"role": "user", "content": "What time do you open tomorrow?"},
        {"role": "assistant", "content": "We open at nine."},
    ]
    labels = [
        {"turn_index": 0, "labels": {"satisfaction": [3, 3, 3]}},
        {"turn_index": 2, "labels": {"satisfaction": [1, 2, 3]}},
        {"turn_index": 4, "labels": {"satisfaction": [2, 4, 4]}},
    ]
    path = write(
        tmp_path / "uss.jsonl", [{"thread_id": "u1", "turns": turns, "thread_labels": {}, "turn_labels": labels}]
    )
    per_turn = {
        r.turn_index: r.passed is False
        for r in UserFriction(None).evaluate(thread_from_json_line(path.read_text(), 1))
        if r.turn_index is not None
    }
    assert per_turn == {0: False, 1: True, 2: False}
    res = invoke(
        "calibrate", str(path), "--label", "turn_labels.satisfaction", "--metric", "user_friction",
        "--positive", "<=2", "--aggregate", "majority", "--format", "json", "--bootstrap", "0",
    )  # fmt: skip
    assert res.exit_code == 0, res.output
    (r,) = json.loads(res.stdout)["results"]
    assert r["level"] == "turn" and r["units"] == 3
    assert r["confusion"] == {"tp": 1, "fp": 0, "fn": 0, "tn": 2}


def test_all_deterministic_metrics_in_one_table(xs: Path) -> None:
    res = invoke(
        "calibrate", str(xs), "--label", "thread_labels.response", "--positive", "full_refusal,partial_refusal"
    )
    assert res.exit_code == 0, res.output
    for name in ("repetition", "reask", "refusal_loop", "tool_errors", "user_friction", "response_hygiene"):
        assert name in res.stdout
    assert "thread_stats" not in res.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--label", "response"], "write thread_labels.KEY or turn_labels.KEY"),
        (["--label", "thread_labels.nothing"], "no line of the file has this label"),
        (["--label", "thread_labels.quality"], "is an object with keys raw, mean; address one of them"),
        (["--label", "thread_labels.response", "--metric", "nonsense"], "unknown metric(s) nonsense"),
        (["--label", "thread_labels.response", "--positive", "<=x"], "'x' is not a number"),
        (["--label", "thread_labels.response", "--flag", "fully", "--threshold", "0.5"], "not several"),
        (["--label", "turn_labels.response", "--level", "thread"], "thread level compares thread_labels"),
        (
            ["--label", "turn_labels.response", "--metric", "tool_errors", "--level", "reply"],
            "metric tool_errors lists no replies in its evidence",
        ),
        (["--label", "thread_labels.response", "--metric", "refusal_loop"], "give --positive"),
    ],
)
def test_clear_errors(xs: Path, args: list[str], message: str) -> None:
    res = invoke("calibrate", str(xs), *args)
    assert res.exit_code == 2
    assert message in " ".join(res.output.split())


def test_missing_file_and_bad_lines_name_the_file(tmp_path: Path) -> None:
    res = invoke("calibrate", str(tmp_path / "nope.jsonl"), "--label", "thread_labels.x")
    assert res.exit_code == 2 and "nope.jsonl does not exist" in res.output
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"thread_id": "a", "turns": []}\nnot json\n', encoding="utf-8")
    res = invoke("calibrate", str(bad), "--label", "thread_labels.x")
    assert res.exit_code == 2 and "bad.jsonl:line 2: not valid JSON" in " ".join(res.output.split())
    out_of_range = write(
        tmp_path / "range.jsonl",
        [
            {
                "thread_id": "a",
                "turns": [{"role": "user", "content": "hi"}],
                "turn_labels": [{"turn_index": 5, "labels": {"r": 1}}],
            }
        ],
    )
    res = invoke("calibrate", str(out_of_range), "--label", "turn_labels.r", "--metric", "user_friction")
    assert res.exit_code == 2 and "turn_index 5 is not a message of the thread" in " ".join(res.output.split())


def test_flag_by_an_evidence_field(tmp_path: Path) -> None:
    # thread_stats has no verdict; `abandoned` in its evidence is the flag (the thread ends on the user)
    ends_on_user = [
        {"role": "user", "content": "where is my parcel?"},
        {"role": "assistant", "content": "Let me check."},
    ]
    ends_on_user.append({"role": "user", "content": "hello? anyone there? where is it"})
    answered = [
        {"role": "user", "content": "where is my parcel?"},
        {"role": "assistant", "content": "It arrives today."},
    ]
    rows = [
        {"thread_id": "a", "turns": ends_on_user, "thread_labels": {"ok": 0}},
        {"thread_id": "b", "turns": answered, "thread_labels": {"ok": 1}},
    ]
    path = write(tmp_path / "t.jsonl", rows)
    res = invoke(
        "calibrate", str(path), "--label", "thread_labels.ok", "--metric", "thread_stats", "--positive", "==0",
        "--flag-evidence", "abandoned", "--value", "evidence.abandoned", "--format", "json", "--bootstrap", "0",
    )  # fmt: skip
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert doc["flagged_when"] == "evidence abandoned is set"
    assert doc["results"][0]["confusion"] == {"tp": 1, "fp": 0, "fn": 0, "tn": 1}
    assert doc["results"][0]["stats"]["roc_auc"] == 1.0
