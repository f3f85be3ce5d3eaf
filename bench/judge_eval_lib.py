"""eval_lib's conversational agent metrics over the benchmark threads (run with eval_lib's own venv).

    python bench/judge_eval_lib.py THREADS.json --base-url URL --out result.json

The threads file is written by `bench/judge.py`. eval_lib's conversational test case is a list of
user -> assistant exchanges (`EvalTestCase(input, actual_output)`) plus `chatbot_role`; each of our
turns becomes one exchange (its user text and its assistant replies' text; tool calls and results are
left out, as eval_lib's dialogue rendering shows neither). The metrics are the equivalents of
tracing-eval's judged pack: TaskSuccessRate, RepetitivePatternDetection, FailureRate,
ConversationalFlowRate, KnowledgeRetention and RoleAdherence (the system prompt as `chatbot_role`),
run by `evaluate_conversations`. The model is `openai:gpt-4o-mini` through LiteLLM, pointed at the
benchmark judge by OPENAI_BASE_URL / OPENAI_API_BASE (eval_lib's metrics pass no base URL of their own).
eval_lib has no concurrency setting: it evaluates one conversation and one metric at a time.

Writes one JSON object to --out: wall time of `evaluate_conversations` (imports excluded) and metric results.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import time
from collections import Counter
from pathlib import Path


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("threads", type=Path)
    ap.add_argument("--base-url", required=True)
    ap.add_argument("--model", default="openai:gpt-4o-mini")
    ap.add_argument("--out", type=Path, required=True, help="where to write the JSON result")
    ap.add_argument("--core", type=int)
    args = ap.parse_args()
    if args.core is not None:
        os.sched_setaffinity(0, {args.core})
    os.environ["OPENAI_BASE_URL"] = os.environ["OPENAI_API_BASE"] = args.base_url
    os.environ.setdefault("OPENAI_API_KEY", "bench")

    import eval_lib
    from eval_lib import (
        ConversationalEvalTestCase,
        ConversationalFlowRateMetric,
        EvalTestCase,
        FailureRateMetric,
        KnowledgeRetentionMetric,
        RepetitivePatternDetectionMetric,
        RoleAdherenceMetric,
        TaskSuccessRateMetric,
        evaluate_conversations,
    )

    threads = json.loads(args.threads.read_text())
    cases = [
        ConversationalEvalTestCase(
            name=t["key"],
            chatbot_role=t["system_prompt"] or None,
            turns=[EvalTestCase(input=x["user"], actual_output=x["assistant"]) for x in t["exchanges"]],
        )
        for t in threads
    ]
    metrics = [
        TaskSuccessRateMetric(model=args.model),
        RepetitivePatternDetectionMetric(model=args.model),
        FailureRateMetric(model=args.model),
        ConversationalFlowRateMetric(model=args.model),
        KnowledgeRetentionMetric(model=args.model),
        RoleAdherenceMetric(model=args.model),
    ]
    started, cpu_started = time.perf_counter(), time.process_time()
    error = None
    try:
        results = asyncio.run(evaluate_conversations(cases, metrics, verbose=False))
    except Exception as exc:  # eval_lib stops the whole run on the first failing metric
        results, error = [], f"{type(exc).__name__}: {str(exc)[:500]}"
    wall = time.perf_counter() - started
    cpu = time.process_time() - cpu_started

    scored: Counter[str] = Counter()
    for _, conv in results:
        for c in conv:
            for m in c.metrics_data:
                scored[m.name] += 1
    args.out.write_text(
        json.dumps(
            {
                "peer": "eval_lib",
                "version": eval_lib.__version__,
                "threads": len(cases),
                "metrics": [m.name for m in metrics],
                "wall_seconds": wall,
                "cpu_seconds": cpu,
                "scored": dict(scored),
                "errors": {"run": 1} if error else {},
                "error_examples": {"run": error} if error else {},
            }
        )
    )


if __name__ == "__main__":
    main()
