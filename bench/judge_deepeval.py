"""DeepEval's conversational metrics over the benchmark threads (run with DeepEval's own venv).

    python bench/judge_deepeval.py THREADS.json --base-url URL --concurrency 8 --out result.json

The threads file is written by `bench/judge.py`: for each thread its key, system prompt and the
user/assistant messages with text (tool calls and tool results are left out: the conversational
metrics render only each turn's role and content). The metrics are the equivalents of tracing-eval's
judged pack, with DeepEval's defaults: ConversationCompleteness, KnowledgeRetention, RoleAdherence
(the system prompt as `chatbot_role`), TurnRelevancy (window 10) and a ConversationalGEval with
flow-like criteria. They run through `deepeval.evaluate` with `AsyncConfig(max_concurrent=C)`; the judge
is DeepEval's OpenAI model (`gpt-4o-mini`: structured outputs) pointed at the benchmark judge.

Writes one JSON object to --out: wall time of `evaluate` (imports and test-case construction excluded),
metric results and errors.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from collections import Counter
from pathlib import Path

FLOW_CRITERIA = (
    "Conversational flow: each assistant reply follows logically from what the user said before, moves the "
    "user's request forward, and avoids needless repetition, detours and questions already answered."
)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("threads", type=Path)
    ap.add_argument("--base-url", required=True)
    ap.add_argument("--model", default="gpt-4o-mini")
    ap.add_argument("--concurrency", type=int, default=8)
    ap.add_argument("--out", type=Path, required=True, help="where to write the JSON result")
    ap.add_argument("--core", type=int)
    args = ap.parse_args()
    if args.core is not None:
        os.sched_setaffinity(0, {args.core})

    import deepeval
    from deepeval import evaluate
    from deepeval.evaluate import AsyncConfig, CacheConfig, DisplayConfig, ErrorConfig
    from deepeval.metrics import (
        ConversationalGEval,
        ConversationCompletenessMetric,
        KnowledgeRetentionMetric,
        RoleAdherenceMetric,
        TurnRelevancyMetric,
    )
    from deepeval.models import OpenAIModel
    from deepeval.test_case import ConversationalTestCase, MultiTurnParams, Turn

    threads = json.loads(args.threads.read_text())
    model = OpenAIModel(model=args.model, base_url=args.base_url, api_key="bench")
    cases = [
        ConversationalTestCase(
            name=t["key"],
            chatbot_role=t["system_prompt"] or "A helpful assistant.",
            turns=[Turn(role=m["role"], content=m["content"]) for m in t["messages"]],
        )
        for t in threads
    ]
    metrics = [
        ConversationCompletenessMetric(model=model),
        KnowledgeRetentionMetric(model=model),
        RoleAdherenceMetric(model=model),
        TurnRelevancyMetric(model=model),
        ConversationalGEval(
            name="Flow",
            criteria=FLOW_CRITERIA,
            evaluation_params=[MultiTurnParams.ROLE, MultiTurnParams.CONTENT],
            model=model,
        ),
    ]
    started, cpu_started = time.perf_counter(), time.process_time()
    result = evaluate(
        test_cases=cases,
        metrics=metrics,
        async_config=AsyncConfig(run_async=True, max_concurrent=args.concurrency),
        display_config=DisplayConfig(show_indicator=False, print_results=False, inspect_after_run=False),
        cache_config=CacheConfig(write_cache=False, use_cache=False),
        error_config=ErrorConfig(ignore_errors=True),
    )
    wall = time.perf_counter() - started
    cpu = time.process_time() - cpu_started

    scored: Counter[str] = Counter()
    errors: Counter[str] = Counter()
    examples: dict[str, str] = {}
    for test in result.test_results:
        for m in test.metrics_data or []:
            if m.error:
                errors[m.name] += 1
                examples.setdefault(m.name, str(m.error)[:300])
            else:
                scored[m.name] += 1
    args.out.write_text(
        json.dumps(
            {
                "peer": "deepeval",
                "version": deepeval.__version__,
                "threads": len(cases),
                "metrics": [getattr(m, "__name__", type(m).__name__) for m in metrics],
                "wall_seconds": wall,
                "cpu_seconds": cpu,
                "scored": dict(scored),
                "errors": dict(errors),
                "error_examples": examples,
            }
        )
    )


if __name__ == "__main__":
    main()
