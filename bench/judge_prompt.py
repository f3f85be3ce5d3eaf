"""Print the judge request tracing-eval sends for one thread: exactly the messages, as the client builds them.

    .venv/bin/python bench/judge_prompt.py 8                               # failure_rate on tau-bench thread 8
    .venv/bin/python bench/judge_prompt.py 8 --grep HAT227 --grep unknown  # only the lines that matter
    .venv/bin/python bench/judge_prompt.py 8 --tool-chars 1500             # with long tool output clipped
    .venv/bin/python bench/judge_prompt.py 8 --batch                       # the batched thread-metrics request

The thread is line N of the dataset (tau-bench airline by default). No judge is called: the request is
built by the product's own code (the metric's question, the transcript renderer, `build_messages`).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
DATASET = REPO.parent / "shared" / "datasets" / "tau_airline_gpt4o.jsonl"


def request_messages(args: argparse.Namespace) -> list[dict[str, Any]]:
    from tracing_eval.config import DETERMINISTIC_PACK, JUDGED_PACK, Settings
    from tracing_eval.evaluate import evaluate_thread, metric_options
    from tracing_eval.judge import build_messages
    from tracing_eval.metrics.catalogue import build_metrics
    from tracing_eval.metrics.judged import batch
    from tracing_eval.metrics.judged.base import JudgeContext, JudgeRequest
    from tracing_eval.metrics.judged.question import Question
    from tracing_eval.metrics.judged.transcript import Limits, Transcripts
    from tracing_eval.transcripts import thread_from_json_line

    lines = args.dataset.read_bytes().splitlines()
    thread = thread_from_json_line(lines[args.thread - 1], args.thread)
    metrics = build_metrics(Settings(), [*DETERMINISTIC_PACK, *(JUDGED_PACK if args.batch else [args.metric])])
    deterministic = evaluate_thread(thread, metrics.deterministic)
    transcripts = Transcripts(thread, Limits(tool_chars=args.tool_chars))
    questions = []
    for metric in metrics.judged:
        ctx = JudgeContext(None, transcripts, deterministic, metric_options(metric.spec.name, metrics.options, thread))  # type: ignore[arg-type]
        found = metric.question(thread, ctx) if hasattr(metric, "question") else None
        if isinstance(found, Question):
            questions.append(found)
    if not questions:
        raise SystemExit(f"{args.metric} asks no single question about thread {args.thread}")
    if args.batch:
        request = JudgeRequest(
            batch.METRIC, transcripts.whole().text, batch.instructions(questions), batch.schema(questions)
        )
    else:
        [q] = questions
        request = JudgeRequest(q.spec.name, transcripts.whole().text, q.instructions, q.schema)
    return build_messages(request, "json_schema")


def excerpt(line: str, patterns: list[re.Pattern[str]], width: int) -> str:
    """A long line cut to `width`: its head, and the text around each match of a pattern."""
    parts = [line[: width // 2]]
    for m in sorted({m.start() for p in patterns for m in p.finditer(line) if m.start() > width // 2})[:3]:
        parts.append(line[max(0, m - width // 4) : m + width // 4])
    return " [...] ".join(parts) + f" [...] ({len(line):,} characters)"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("thread", type=int, help="line number of the thread in the dataset (1-based)")
    ap.add_argument("--dataset", type=Path, default=DATASET)
    ap.add_argument("--metric", default="failure_rate", help="a thread metric that asks one question")
    ap.add_argument("--batch", action="store_true", help="the batched request of the default pack's thread metrics")
    ap.add_argument("--tool-chars", type=int, default=8000, help="characters of one tool output before clipping")
    ap.add_argument("--grep", action="append", default=[], help="print only lines matching (repeatable)")
    ap.add_argument("--width", type=int, default=400, help="cut printed lines at this many characters")
    args = ap.parse_args()
    patterns = [re.compile(p) for p in args.grep]
    for message in request_messages(args):
        print(f"===== {message['role']} =====")
        for line in str(message["content"]).splitlines():
            if patterns and not any(p.search(line) for p in patterns):
                continue
            print(line if len(line) <= args.width else excerpt(line, patterns, args.width))
    if not patterns:
        print(json.dumps({"note": "the response_format schema is sent with the request"}))


if __name__ == "__main__":
    main()
