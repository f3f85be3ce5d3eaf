"""Every deterministic signal against the human labels of the shared datasets (`docs/metrics.md`).

Each check is one `tracing-eval calibrate` command; this script runs them in-process (with
`--format json`), prints the command and its figures, and a markdown table per signal for the docs.
The figures are what the command prints: rerun any line on its own to see the confusion table.

    .venv/bin/python bench/calibration.py                  # every check, 1000 bootstrap resamples
    .venv/bin/python bench/calibration.py --bootstrap 200 --only refusal
    .venv/bin/python bench/calibration.py --json bench/out/calibration.json

Datasets (`../shared/datasets`, see their README): XSTest v2 completions (Roettger et al. 2024),
USS SGD + MultiWOZ (Sun et al. 2021), DSTC9 Track 3 interactive (Gunasekara et al. 2021),
tau-bench airline gpt-4o trajectories (Yao et al. 2024).
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from click.testing import CliRunner

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tracing_eval.cli import main  # noqa: E402

DATASETS = Path("../shared/datasets")


@dataclass(frozen=True)
class Check:
    signal: str  # the section of docs/metrics.md the figure belongs to
    what: str  # one line: unit and label
    dataset: str
    args: tuple[str, ...]  # after `tracing-eval calibrate FILE`

    def command(self, samples: int | None = None) -> list[str]:
        extra = ["--bootstrap", str(samples)] if samples is not None and samples != 1000 else []
        return ["calibrate", str(DATASETS / self.dataset), *self.args, *extra]


XS, USS, DSTC, TAU = (
    "xstest_completions.jsonl",
    "uss_sgd_mwoz.jsonl",
    "dstc9_interactive.jsonl",
    "tau_airline_gpt4o.jsonl",
)
REFUSALS = "full_refusal,partial_refusal"
CHECKS = [
    Check(
        "refusal",
        "per reply: refusal_messages vs XSTest full or partial refusal",
        XS,
        ("--metric", "refusal_loop", "--label", "turn_labels.response", "--positive", REFUSALS),
    ),
    Check(
        "refusal",
        "per reply: refusal_messages vs XSTest full refusal only",
        XS,
        ("--metric", "refusal_loop", "--label", "turn_labels.response", "--positive", "full_refusal"),
    ),
    Check(
        "user_friction",
        "per user turn: friction vs USS majority of annotators <= 2",
        USS,
        (
            "--metric",
            "user_friction",
            "--label",
            "turn_labels.satisfaction",
            "--positive",
            "<=2",
            "--aggregate",
            "majority",
        ),
    ),  # fmt: skip
    Check(
        "user_friction",
        "per user turn: friction vs USS mean satisfaction <= 2",
        USS,
        ("--metric", "user_friction", "--label", "turn_labels.satisfaction", "--positive", "<=2"),
    ),
    Check(
        "user_friction",
        "per thread: fails vs USS overall satisfaction, majority <= 2",
        USS,
        (
            "--metric",
            "user_friction",
            "--label",
            "thread_labels.overall_satisfaction",
            "--positive",
            "<=2",
            "--aggregate",
            "majority",
        ),
    ),  # fmt: skip
    Check(
        "user_friction",
        "per thread: fails vs tau-bench task failure",
        TAU,
        ("--metric", "user_friction", "--label", "thread_labels.task_success", "--positive", "==0"),
    ),
    Check(
        "repetition",
        "per thread: mostly/fully vs DSTC9 not all raters `diverse` = 3 (false alarm = share of all-diverse flagged)",
        DSTC,
        (
            "--metric",
            "repetition",
            "--label",
            "thread_labels.diverse.raw",
            "--positive",
            "<3",
            "--aggregate",
            "any",
            "--flag",
            "mostly,fully",
        ),
    ),  # fmt: skip
    Check(
        "repetition",
        "per thread: fails (score < 0.7) vs DSTC9 mean `diverse` <= 2; rho of repeated replies with mean `diverse`",
        DSTC,
        (
            "--metric",
            "repetition",
            "--label",
            "thread_labels.diverse.mean",
            "--positive",
            "<=2",
            "--value",
            "evidence.repeated_messages",
        ),
    ),  # fmt: skip
    Check(
        "repetition",
        "per thread: fails vs tau-bench task failure",
        TAU,
        ("--metric", "repetition", "--label", "thread_labels.task_success", "--positive", "==0"),
    ),
    Check(
        "refusal_loop",
        "per thread: fails (= routed to review) vs tau-bench task failure",
        TAU,
        ("--metric", "refusal_loop", "--label", "thread_labels.task_success", "--positive", "==0"),
    ),
    Check(
        "reask",
        "per thread: fails vs tau-bench task failure",
        TAU,
        ("--metric", "reask", "--label", "thread_labels.task_success", "--positive", "==0"),
    ),
    Check(
        "tool_errors",
        "per thread: fails vs tau-bench task failure",
        TAU,
        ("--metric", "tool_errors", "--label", "thread_labels.task_success", "--positive", "==0"),
    ),
    Check(
        "tool_errors",
        "per thread: any failed call vs tau-bench task failure",
        TAU,
        (
            "--metric",
            "tool_errors",
            "--label",
            "thread_labels.task_success",
            "--positive",
            "==0",
            "--flag",
            "low,medium,high",
        ),
    ),  # fmt: skip
    Check(
        "tool_errors",
        "per thread: a masked error (reply claims success) vs tau-bench task failure",
        TAU,
        (
            "--metric",
            "tool_errors",
            "--label",
            "thread_labels.task_success",
            "--positive",
            "==0",
            "--flag-evidence",
            "masked_error",
        ),
    ),  # fmt: skip
    Check(
        "response_hygiene",
        "per thread: fails vs tau-bench task failure",
        TAU,
        ("--metric", "response_hygiene", "--label", "thread_labels.task_success", "--positive", "==0"),
    ),
    Check(
        "response_hygiene",
        "per thread: fails vs DSTC9 mean `human (overall)` <= 2",
        DSTC,
        ("--metric", "response_hygiene", "--label", "thread_labels.human (overall).mean", "--positive", "<=2"),
    ),
    Check(
        "thread_stats",
        "per thread: `abandoned` vs tau-bench task failure",
        TAU,
        (
            "--metric",
            "thread_stats",
            "--label",
            "thread_labels.task_success",
            "--positive",
            "==0",
            "--flag-evidence",
            "abandoned",
            "--value",
            "evidence.abandoned",
        ),
    ),  # fmt: skip
    Check(
        "thread_stats",
        "per thread: `abandoned` vs USS overall satisfaction, majority <= 2",
        USS,
        (
            "--metric",
            "thread_stats",
            "--label",
            "thread_labels.overall_satisfaction",
            "--positive",
            "<=2",
            "--aggregate",
            "majority",
            "--flag-evidence",
            "abandoned",
            "--value",
            "evidence.abandoned",
        ),
    ),  # fmt: skip
]


def run(check: Check, samples: int) -> dict[str, Any]:
    started = time.process_time()
    res = CliRunner().invoke(main, [*check.command(samples), "--format", "json"], catch_exceptions=False)
    if res.exit_code != 0:
        raise SystemExit(f"{shlex.join(check.command(samples))} failed:\n{res.output}")
    (result,) = json.loads(res.stdout)["results"]
    return {"check": check, "result": result, "cpu_s": time.process_time() - started}


def fmt(x: float | None, ci: list[float] | None = None) -> str:
    if x is None:
        return "-"
    return f"{x:.2f} [{ci[0]:.2f}, {ci[1]:.2f}]" if ci else f"{x:.2f}"


def markdown(rows: list[dict[str, Any]]) -> str:
    head = "| unit and label | n | human + | flagged | kappa | precision | recall | F1 | false alarm | Spearman | ROC AUC |"
    lines = [head, "|" + "---|" * 11]
    for r in rows:
        res, s, ci = r["result"], r["result"]["stats"], r["result"]["intervals"]
        lines.append(
            f"| {r['check'].what} | {res['units']:,} | {res['human_positive']:,} | {res['flagged']:,} | "
            + " | ".join(
                fmt(s[k], ci.get(k))
                for k in ("kappa", "precision", "recall", "f1", "false_alarm_rate", "spearman", "roc_auc")
            )
            + " |"
        )
    return "\n".join(lines)


def main_() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bootstrap", type=int, default=1000, help="bootstrap resamples per check (0: no intervals)")
    ap.add_argument("--only", default=None, help="only the checks of signals whose name contains this")
    ap.add_argument("--json", type=Path, default=None, help="also write every result here")
    args = ap.parse_args()
    missing = [d for d in (XS, USS, DSTC, TAU) if not (DATASETS / d).is_file()]
    if missing:
        raise SystemExit(f"run from the repository root, checked out beside shared/: {', '.join(missing)} not found")
    done: list[dict[str, Any]] = []
    for check in CHECKS:
        if args.only and args.only not in check.signal:
            continue
        r = run(check, args.bootstrap)
        done.append(r)
        res = r["result"]
        print(f"$ tracing-eval {shlex.join(check.command(args.bootstrap))}")
        print(
            f"  {check.what}: n {res['units']}, human + {res['human_positive']}, flagged {res['flagged']}, "
            f"confusion {res['confusion']}, kappa {fmt(res['stats']['kappa'])}, "
            f"precision {fmt(res['stats']['precision'])}, recall {fmt(res['stats']['recall'])}, "
            f"false alarm {fmt(res['stats']['false_alarm_rate'])}, rho {fmt(res['stats']['spearman'])}, "
            f"AUC {fmt(res['stats']['roc_auc'])} ({r['cpu_s']:.1f} s CPU)",
            flush=True,
        )
    for signal in dict.fromkeys(r["check"].signal for r in done):
        print(f"\n### {signal}\n")
        print(markdown([r for r in done if r["check"].signal == signal]))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        doc = [{"signal": r["check"].signal, "what": r["check"].what, "command": ["tracing-eval", *r["check"].command()],
                **r["result"]} for r in done]  # fmt: skip
        args.json.write_text(json.dumps(doc, indent=2), encoding="utf-8")


if __name__ == "__main__":
    main_()
