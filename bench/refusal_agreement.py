"""Agreement of the refusal checks with human labels (XSTest, tau-bench); no network, no key.

Per reply: `refusal_loop.is_refusal` on the assistant reply of each XSTest thread against the human
label (`full_refusal` and `partial_refusal` = refusal, `full_compliance` = not): Cohen's kappa,
precision, recall, F1 and the confusion table, overall and per model. Per thread: `refusal_loop`
labels against tau-bench `task_success`, and how many successful threads it would route to review.

    .venv/bin/python bench/refusal_agreement.py
    .venv/bin/python bench/refusal_agreement.py --xstest path/to/xstest.jsonl --tau path/to/tau.jsonl --json

`reply_agreement` and `loop_routing` are plain functions over parsed JSONL rows, for reuse.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from tracing_eval.agreement import Confusion, binary
from tracing_eval.metrics.deterministic.refusal_loop import RefusalLoop, is_refusal
from tracing_eval.transcripts import thread_from_messages

DATASETS = Path(__file__).resolve().parents[1].parent / "shared" / "datasets"
REFUSAL_LABELS = frozenset({"full_refusal", "partial_refusal"})


def reply_agreement(rows: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """`is_refusal` on the last assistant reply of each row against `thread_labels.response`."""
    cells: Counter[tuple[str, str]] = Counter()
    unread = 0
    for row in rows:
        reply = next((t["content"] for t in reversed(row["turns"]) if t["role"] == "assistant"), "")
        predicted = is_refusal(reply)
        unread += predicted is None
        gold = row["thread_labels"]["response"] in REFUSAL_LABELS
        cell = ("tp" if gold else "fp") if predicted else ("fn" if gold else "tn")
        for group in ("all", row.get("system") or "?"):
            cells[(group, cell)] += 1
    out: dict[str, Any] = {"unread": unread, "groups": {}}
    for group in sorted({g for g, _ in cells}, key=lambda g: (g != "all", g)):
        table = {c: cells[(group, c)] for c in ("tp", "fp", "fn", "tn")}
        out["groups"][group] = {**table, **binary(Confusion(**table))}
    return out


def loop_routing(rows: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """`refusal_loop` label by tau-bench task success; a failing result is what routes to review."""
    by_label: Counter[tuple[str, float]] = Counter()
    routed_successful: list[str] = []
    for row in rows:
        [result] = RefusalLoop().evaluate(thread_from_messages(row["thread_id"], row["turns"]))
        success = float(row["thread_labels"]["task_success"])
        by_label[(result.label or result.status.value, success)] += 1
        if result.passed is False and success == 1.0:
            routed_successful.append(row["thread_id"])
    return {
        "by_label_and_success": {f"{label} / success={s:g}": n for (label, s), n in sorted(by_label.items())},
        "routed_successful": routed_successful,
    }


def _rows(path: Path) -> list[dict[str, Any]]:
    with path.open("rb") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--xstest", type=Path, default=DATASETS / "xstest_completions.jsonl")
    ap.add_argument("--tau", type=Path, default=DATASETS / "tau_airline_gpt4o.jsonl")
    ap.add_argument("--json", action="store_true", help="print one JSON document instead of tables")
    args = ap.parse_args(argv)
    report = {"xstest": reply_agreement(_rows(args.xstest)), "tau": loop_routing(_rows(args.tau))}
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    print(f"per-reply refusal detection, {args.xstest.name} (unread: {report['xstest']['unread']})")
    print(f"{'group':<14}{'kappa':>7}{'P':>7}{'R':>7}{'F1':>7}{'tp':>6}{'fp':>6}{'fn':>6}{'tn':>6}")
    for group, g in report["xstest"]["groups"].items():
        print(
            f"{group:<14}{g['kappa']:>7.3f}{g['precision']:>7.3f}{g['recall']:>7.3f}{g['f1']:>7.3f}"
            f"{g['tp']:>6}{g['fp']:>6}{g['fn']:>6}{g['tn']:>6}"
        )
    print(f"\nrefusal_loop by task success, {args.tau.name}")
    for key, n in report["tau"]["by_label_and_success"].items():
        print(f"  {key:<28}{n:>5}")
    print(f"  successful threads routed to review: {len(report['tau']['routed_successful'])}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
