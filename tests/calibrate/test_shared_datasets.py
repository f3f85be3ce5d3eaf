"""`calibrate` on the four shared datasets: every label is joined to a unit, none is lost."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from tests.conftest import DATASETS
from tracing_eval.cli import main


def labelled(path: Path, label: str) -> int:
    """Units that carry the label, counted from the file itself."""
    section, _, key = label.partition(".")
    first = key.split(".")[0]
    n = 0
    for line in path.read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        if section == "thread_labels":
            n += first in row["thread_labels"]
        else:
            n += sum(first in t["labels"] for t in row["turn_labels"])
    return n


@pytest.mark.parametrize(
    ("dataset", "args"),
    [
        ("xstest_completions", ["--metric", "refusal_loop", "--label", "turn_labels.response",
                                "--positive", "full_refusal,partial_refusal"]),
        ("uss_sgd_mwoz", ["--metric", "user_friction", "--label", "turn_labels.satisfaction", "--positive", "<=2",
                          "--aggregate", "majority"]),
        ("dstc9_interactive", ["--metric", "repetition", "--label", "thread_labels.diverse.raw", "--positive", "<3",
                               "--aggregate", "any", "--flag", "mostly,fully", "--value", "evidence.repeated_messages"]),
        ("tau_airline_gpt4o", ["--metric", "refusal_loop", "--label", "thread_labels.task_success",
                               "--positive", "==0"]),
    ],
)  # fmt: skip
def test_every_label_of_a_shared_dataset_is_a_unit(dataset: str, args: list[str]) -> None:
    path = DATASETS / f"{dataset}.jsonl"
    res: Any = CliRunner().invoke(
        main, ["calibrate", str(path), *args, "--format", "json", "--bootstrap", "0"], catch_exceptions=False
    )
    assert res.exit_code == 0, res.output
    (r,) = json.loads(res.stdout)["results"]
    label = args[args.index("--label") + 1]
    assert r["units"] + sum(r["left_out"].values()) == labelled(path, label)
    assert r["left_out"] == {}
    c = r["confusion"]
    assert c["tp"] + c["fn"] == r["human_positive"] and c["tp"] + c["fp"] == r["flagged"]
    assert 0 < r["human_positive"] < r["units"]
    assert all(v is None or -1.0 <= v <= 1.0 for v in r["stats"].values())
