"""tracing-eval's judged pack over the benchmark threads (run with the project venv).

    .venv/bin/python bench/judge_ours.py DATASET.jsonl --limit 50 --base-url URL --concurrency 8 --out r.json

Parses the first `--limit` lines of the dataset with the product's own reader, then runs
`tracing_eval.evaluate.evaluate_all` (deterministic tier, then the judged tier) on every thread with one
`JudgeClient` whose `max_concurrency` is C and whose cache is off (each thread gets the client's
`for_thread` view, as the worker's pipeline passes it). `--threads-in-flight` says how many
threads are evaluated at once: C by default (what `tracing-eval eval FILE` does: its thread gate is the
judge's concurrency), 1 for the worker's way (a tick evaluates its claimed threads one after another).

Writes one JSON object: wall time of the evaluation (parsing excluded), the client's own usage totals,
and results per metric by status.

With `--bare-calls M` it evaluates nothing: it sends M identical requests (the first thread's transcript,
one metric's instructions and schema) through a bare `openai.AsyncOpenAI` client, at most C at once.
That is the ceiling for any client on the same HTTP stack (`openai` + httpx) against the same judge.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import time
from collections import Counter, defaultdict
from pathlib import Path

#: The article's five metrics (seed 004), as the DeepEval side of the benchmark runs them.
ARTICLE_PACK = ["completeness", "knowledge_retention", "role_adherence", "turn_relevancy", "conversational_flow"]


async def run(args: argparse.Namespace) -> dict:
    from tracing_eval.config import DETERMINISTIC_PACK, JUDGED_PACK, JudgeSettings, Settings
    from tracing_eval.evaluate import evaluate_all
    from tracing_eval.judge import JudgeClient
    from tracing_eval.metrics.catalogue import build_metrics
    from tracing_eval.transcripts import thread_from_json_line

    lines = args.dataset.read_bytes().splitlines()[: args.limit]
    threads = [thread_from_json_line(line, i) for i, line in enumerate(lines, 1)]
    judge_settings = JudgeSettings(
        model=args.model,
        base_url=args.base_url,
        api_key="bench",
        max_concurrency=args.concurrency,
        cache=False,
        batch_thread_metrics=args.batch == "on",
    )
    settings = Settings(judge=judge_settings)
    pack = ARTICLE_PACK if args.pack == "article" else JUDGED_PACK
    metrics = build_metrics(settings, [*DETERMINISTIC_PACK, *pack])
    client = JudgeClient(settings.judge)
    gate = asyncio.Semaphore(args.threads_in_flight or args.concurrency)

    async def one(thread):  # noqa: ANN001, ANN202
        async with gate:
            return await evaluate_all(thread, metrics, client.for_thread(thread.key))

    started, cpu_started = time.perf_counter(), time.process_time()
    try:
        results = await asyncio.gather(*(one(t) for t in threads))
    finally:
        await client.close()
    wall = time.perf_counter() - started
    cpu = time.process_time() - cpu_started

    statuses: dict[str, Counter[str]] = defaultdict(Counter)
    examples: dict[str, str] = {}
    for rs in results:
        for r in rs:
            statuses[r.metric][str(r.status)] += 1
            if r.error:
                examples.setdefault(r.metric, r.error[:300])
    judged = {m.spec.name for m in metrics.judged}
    return {
        "client": "tracing-eval",
        "threads": len(threads),
        "threads_in_flight": args.threads_in_flight or args.concurrency,
        "judged_metrics": [m.spec.name for m in metrics.judged],
        "judged_pack_missing": [n for n in pack if n not in judged],
        "batch_thread_metrics": settings.judge.batch_thread_metrics,
        "wall_seconds": wall,
        "cpu_seconds": cpu,
        "usage": {
            "calls": client.usage.calls,
            "input_tokens": client.usage.input_tokens,
            "output_tokens": client.usage.output_tokens,
            "reasks": client.reasks,
            "retries": client.retries,
            "rate_limited": client.rate_limited,
        },
        "usage_by_metric": {
            name: {"calls": u.calls, "input_tokens": u.input_tokens, "output_tokens": u.output_tokens}
            for name, u in sorted(client.usage_by_metric.items())
        },
        "statuses": {m: dict(c) for m, c in sorted(statuses.items()) if m in judged},
        "error_examples": examples,
    }


async def bare(args: argparse.Namespace) -> dict:
    import openai

    from tracing_eval.judge import build_messages, response_format
    from tracing_eval.metrics.judged.base import JudgeRequest
    from tracing_eval.metrics.judged.completeness import INSTRUCTIONS, CompletenessAnswer
    from tracing_eval.metrics.judged.transcript import render_thread
    from tracing_eval.transcripts import thread_from_json_line

    thread = thread_from_json_line(args.dataset.read_bytes().splitlines()[0], 1)
    numbers = {m.position for m in thread.messages}
    request = JudgeRequest(
        "completeness", render_thread(thread).text, INSTRUCTIONS, CompletenessAnswer.response_schema(numbers=numbers)
    )
    messages, fmt = build_messages(request, "json_schema"), response_format(request, "json_schema")
    client = openai.AsyncOpenAI(base_url=args.base_url, api_key="bench", max_retries=0)
    gate = asyncio.Semaphore(args.concurrency)

    async def one() -> None:
        async with gate:
            await client.chat.completions.create(model=args.model, messages=messages, response_format=fmt)

    started, cpu_started = time.perf_counter(), time.process_time()
    try:
        await asyncio.gather(*(one() for _ in range(args.bare_calls)))
    finally:
        await client.close()
    return {
        "client": "bare openai client",
        "wall_seconds": time.perf_counter() - started,
        "cpu_seconds": time.process_time() - cpu_started,
        "usage": {"calls": args.bare_calls},
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("dataset", type=Path)
    ap.add_argument("--limit", type=int, default=50)
    ap.add_argument("--base-url", required=True)
    ap.add_argument("--model", default="gpt-4o-mini")
    ap.add_argument("--concurrency", type=int, default=8)
    ap.add_argument("--threads-in-flight", type=int, default=0, help="threads evaluated at once (0: = concurrency)")
    ap.add_argument("--pack", choices=("default", "article"), default="default", help="judged metrics to run")
    ap.add_argument("--batch", choices=("on", "off"), default="on", help="judge.batch_thread_metrics")
    ap.add_argument("--bare-calls", type=int, default=0, help="only send this many plain calls (the ceiling)")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--core", type=int)
    args = ap.parse_args()
    if args.core is not None:
        os.sched_setaffinity(0, {args.core})
    args.out.write_text(json.dumps(asyncio.run(bare(args) if args.bare_calls else run(args))))


if __name__ == "__main__":
    main()
