"""Deterministic metric tier throughput on one core: threads/s and turns/s.

Datasets: tau-bench airline (gpt-4o) and DSTC9 interactive from `../shared/datasets`, plus synthetic
10-turn support threads (DESIGN §11). For each, two timings over the same lines:

- parse excluded: `evaluate_thread` over threads parsed beforehand;
- parse included: `thread_from_json_line` + `evaluate_thread` per JSON line (what `eval FILE` does).

The process is pinned to core 0. The metrics' memo caches (`functools.lru_cache`) are cleared before
every timed pass, so repeats do not profit from texts seen in the previous pass; the median pass is
reported. Rates are per second of this process's CPU time (`time.process_time`), which other load on
a shared machine does not inflate; wall time is kept in the JSON.

    .venv/bin/python bench/deterministic.py
    .venv/bin/python bench/deterministic.py --synthetic 5000 --repeat 5 --metrics repetition,reask

`--once` evaluates one warm-up thread and then `--synthetic` threads once, untimed, for an instruction
count that load on a shared machine does not move: the difference between two sizes under
`valgrind --tool=callgrind` is the cost of the threads in between (see docs/benchmarks.md).
"""

from __future__ import annotations

import argparse
import functools
import json
import random
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import machine, peak_rss_mb, pin, table, write_json  # noqa: E402

DATASETS = Path(__file__).resolve().parents[1].parent / "shared" / "datasets"
FILES = {"tau_airline_gpt4o": "tau_airline_gpt4o.jsonl", "dstc9_interactive": "dstc9_interactive.jsonl"}


def synthetic_lines(n: int, turns: int, seed: int = 11) -> list[bytes]:
    """`n` support threads of `turns` turns in the `eval` input schema: every other turn calls a tool,
    one in five tool results is an error, and one assistant answer in eight repeats an earlier one."""
    from workload import prose

    rng = random.Random(seed)
    lines = []
    for i in range(n):
        messages: list[dict[str, Any]] = [{"role": "system", "content": prose(rng, 630)}]
        answers: list[str] = []
        for t in range(turns):
            messages.append({"role": "user", "content": prose(rng, 155)})
            if t % 2 == 1:
                call_id = f"call_{i}_{t}"
                args = json.dumps({"order_id": f"W{rng.randint(1000000, 9999999)}"})
                messages.append(
                    {
                        "role": "assistant",
                        "content": None,
                        "tool_calls": [
                            {"id": call_id, "type": "function", "function": {"name": "lookup_order", "arguments": args}}
                        ],
                    }
                )
                result = (
                    "Error: order not found"
                    if rng.random() < 0.2
                    else json.dumps({"status": "shipped", "note": prose(rng, 180)})
                )
                messages.append({"role": "tool", "tool_call_id": call_id, "content": result})
            answer = rng.choice(answers) if answers and rng.random() < 0.125 else prose(rng, 295)
            answers.append(answer)
            messages.append({"role": "assistant", "content": answer})
        lines.append(json.dumps({"thread_id": f"synthetic-{i:06d}", "turns": messages}).encode())
    return lines


def clear_metric_caches() -> int:
    """Clear every lru_cache found in the loaded metric modules; returns how many were cleared."""
    cleared = 0
    for name, module in list(sys.modules.items()):
        if not name.startswith("tracing_eval.") or module is None:
            continue
        for value in vars(module).values():
            if isinstance(value, functools._lru_cache_wrapper):  # noqa: SLF001 - the public type has no other name
                value.cache_clear()
                cleared += 1
    return cleared


def timed(fn: Callable[[], int]) -> tuple[float, float, int]:
    """(wall seconds, CPU seconds, fn's count)."""
    clear_metric_caches()
    wall, cpu = time.perf_counter(), time.process_time()
    count = fn()
    return time.perf_counter() - wall, time.process_time() - cpu, count


def evaluate_all(threads: Sequence[Any], metrics: Sequence[Any]) -> int:
    """Run the metrics over every thread; returns the number of results."""
    from tracing_eval.evaluate import evaluate_thread

    return sum(len(evaluate_thread(t, metrics)) for t in threads)


def measure(lines: Sequence[bytes], metrics: Sequence[Any], repeat: int) -> dict[str, Any]:
    from tracing_eval.evaluate import evaluate_thread
    from tracing_eval.transcripts import thread_from_json_line

    def parse_only() -> int:  # threads are dropped as they go, as in the parse-included pass
        for i, line in enumerate(lines, 1):
            thread_from_json_line(line, i)
        return len(lines)

    def with_parse() -> int:
        results = 0
        for i, line in enumerate(lines, 1):
            results += len(evaluate_thread(thread_from_json_line(line, i), metrics))
        return results

    threads = [thread_from_json_line(line, i) for i, line in enumerate(lines, 1)]
    turns = sum(len(t.turns) for t in threads)
    evaluate_thread(threads[0], metrics)  # warm-up: imports, regex compilation

    excluded, included, parse = [], [], []
    for _ in range(repeat):
        fresh = [thread_from_json_line(line, i) for i, line in enumerate(lines, 1)]  # no state left by a previous pass
        excluded.append(timed(functools.partial(evaluate_all, fresh, metrics)))
        included.append(timed(with_parse))
        parse.append(timed(parse_only))
    med = lambda runs: sorted(runs, key=lambda r: r[1])[len(runs) // 2]  # noqa: E731 - median run by CPU time
    ex, inc, pa = med(excluded), med(included), med(parse)
    return {
        "threads": len(threads),
        "turns": turns,
        "messages": sum(len(t.messages) for th in threads for t in th.turns),
        "results_per_pass": ex[2],
        "excluded": {
            "wall_s": ex[0],
            "cpu_s": ex[1],
            "runs_threads_per_s": [round(len(threads) / r[1]) for r in excluded],
        },
        "included": {
            "wall_s": inc[0],
            "cpu_s": inc[1],
            "runs_threads_per_s": [round(len(threads) / r[1]) for r in included],
        },
        "parse_only": {"wall_s": pa[0], "cpu_s": pa[1]},
    }


def per_metric(lines: Sequence[bytes], metrics: Sequence[Any]) -> dict[str, float]:
    """CPU milliseconds per thread for each metric alone (parse excluded, one pass, cold caches)."""
    from tracing_eval.transcripts import thread_from_json_line

    out = {}
    for metric in metrics:
        threads = [thread_from_json_line(line, i) for i, line in enumerate(lines, 1)]
        _, cpu, _ = timed(functools.partial(evaluate_all, threads, [metric]))
        out[metric.spec.name] = cpu * 1000 / len(threads)
    return out


def evaluate_once(metric_names: str, n: int, turns: int) -> None:
    """One warm-up thread (imports, pattern compilation), cleared caches, then `n` threads once."""
    from tracing_eval.config import DETERMINISTIC_PACK, Settings
    from tracing_eval.metrics.catalogue import build_metrics
    from tracing_eval.transcripts import thread_from_json_line

    names = [m.strip() for m in metric_names.split(",") if m.strip()] or DETERMINISTIC_PACK
    metrics = build_metrics(Settings(), names).deterministic
    threads = [thread_from_json_line(line, i) for i, line in enumerate(synthetic_lines(n + 1, turns), 1)]
    evaluate_all(threads[:1], metrics)
    clear_metric_caches()
    evaluate_all(threads[1:], metrics)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--metrics", default="", help="comma-separated metric names (default: every deterministic metric)")
    ap.add_argument("--synthetic", type=int, default=1000, help="number of synthetic threads (0 to skip)")
    ap.add_argument("--turns", type=int, default=10, help="turns per synthetic thread")
    ap.add_argument("--datasets", default=",".join(FILES), help="comma-separated dataset names ('' to skip)")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--json", default="deterministic.json", help="file name under bench/out/ ('' for none)")
    ap.add_argument("--once", action="store_true", help="evaluate the synthetic threads once, untimed (for callgrind)")
    args = ap.parse_args()

    if args.once:
        evaluate_once(args.metrics, args.synthetic, args.turns)
        return
    core = pin(0)
    from tracing_eval.config import DETERMINISTIC_PACK, Settings
    from tracing_eval.metrics.catalogue import build_metrics

    names = [n.strip() for n in args.metrics.split(",") if n.strip()] or DETERMINISTIC_PACK
    metrics = build_metrics(Settings(), names).deterministic
    inputs: dict[str, list[bytes]] = {}
    for name in (n.strip() for n in args.datasets.split(",") if n.strip()):
        inputs[name] = (DATASETS / FILES[name]).read_bytes().splitlines()
    if args.synthetic:
        inputs[f"synthetic_{args.turns}_turns"] = synthetic_lines(args.synthetic, args.turns)

    print(f"core {core}; metrics: {', '.join(m.spec.name for m in metrics)}", file=sys.stderr)
    results: dict[str, Any] = {}
    for name, lines in inputs.items():
        results[name] = measure(lines, metrics, args.repeat)
        results[name]["per_metric_ms_per_thread"] = per_metric(lines, metrics)
        r = results[name]
        print(
            f"{name}: parse excluded {r['excluded']['runs_threads_per_s']} threads/s, "
            f"included {r['included']['runs_threads_per_s']} threads/s",
            file=sys.stderr,
        )

    rows = []
    for name, r in results.items():
        n, turns = r["threads"], r["turns"]
        ex, inc = r["excluded"], r["included"]
        rows.append(
            [
                name,
                n,
                f"{turns / n:.1f}",
                f"{n / ex['cpu_s']:,.0f}",
                f"{turns / ex['cpu_s']:,.0f}",
                f"{ex['cpu_s'] * 1000 / n:.2f}",
                f"{n / inc['cpu_s']:,.0f}",
                f"{turns / inc['cpu_s']:,.0f}",
                f"{r['parse_only']['cpu_s'] * 1000 / n:.2f}",
            ]
        )
    print(
        table(
            [
                "threads (1 core, CPU time)",
                "n",
                "turns/thread",
                "threads/s",
                "turns/s",
                "ms/thread",
                "threads/s incl. parse",
                "turns/s incl. parse",
                "parse ms/thread",
            ],
            rows,
        )
    )
    print()
    metric_names = [m.spec.name for m in metrics]
    print(
        table(
            ["CPU ms/thread by metric", *results],
            [[m, *(f"{r['per_metric_ms_per_thread'][m]:.3f}" for r in results.values())] for m in metric_names],
        )
    )
    print(f"\npeak RSS {peak_rss_mb():.0f} MB", file=sys.stderr)
    if args.json:
        write_json(args.json, {"machine": machine(), "args": vars(args), "metrics": metric_names, "results": results})


if __name__ == "__main__":
    main()
