"""Memory while a large outbox drains: the sidecar's RSS as it delivers N waiting results.

The state a sink outage leaves behind: N result rows waiting in the outbox (about 1 kB of payload each,
as the deterministic pack writes them). `tracing-eval run` starts on that store with the OTLP sink
(500 events per request to an endpoint in this process), nothing to evaluate, and delivers them;
VmRSS is sampled every 0.5 s until the outbox is empty, VmHWM read at the end.

    .venv/bin/python bench/outbox_memory.py                           # 600,000 rows, SQLite and PostgreSQL
    .venv/bin/python bench/outbox_memory.py --rows 200000 --backends postgresql

Before the sinks' clients let go of each response once read (`connectors/http_bodies.py`), httpx
kept each sent body alive until the garbage collector reached its request's reference cycle, and
the sidecar grew by about 200 MiB during such a round (docs/reliability.md).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import soak  # noqa: E402
from backlog import RssSampler, env_for, scratch_store  # noqa: E402
from common import machine, table, write_json  # noqa: E402

SIDECAR_CORE = 0


async def fill(url: str, rows: int) -> None:
    """`rows` result deliveries waiting for the `otlp` sink, 32 per thread."""
    from tracing_eval.delivery import Anchor, result_payload
    from tracing_eval.model import MetricResult, Scope
    from tracing_eval.store import schema
    from tracing_eval.store.sql import SqlStore

    store = SqlStore(url)
    await store.open()
    result = MetricResult(
        metric="repetition",
        scope=Scope.TURN,
        turn_index=3,
        score=1.0,
        passed=True,
        threshold=0.7,
        reason="no reply repeats an earlier one",
        evidence={"repeated_messages": [], "compared": list(range(10)), "segments": [{"text": "x" * 300}]},
    )
    anchor = Anchor(trace_id="ab" * 16, span_id="cd" * 8, response_id="resp-1", start_ns=1, conversation_id="c")
    anchor_json, result_json = anchor.model_dump_json().encode(), result.model_dump_json().encode()
    try:
        async with store.engine.begin() as conn:
            for first in range(0, rows, 5000):
                await conn.execute(
                    schema.outbox.insert(),
                    [
                        {
                            "sink": "otlp",
                            "kind": "result",
                            "ref": f"r{i}",
                            "digest": "d",
                            "payload": result_payload(
                                f"r{i}", f"otlp:c{i // 32}", 1, "thread", anchor_json, result_json
                            ),
                            "created_at": 1.0,
                            "attempts": 0,
                            "next_attempt_at": 0.0,
                            "failed": False,
                        }
                        for i in range(first, min(rows, first + 5000))
                    ],
                )
    finally:
        await store.close()


def deliver(url: str, rows: int, workdir: Path) -> dict[str, Any]:
    collector = soak.Collector()
    extra = {
        "TRACING_EVAL_SCHEDULE__TICK_SECONDS": "1",
        "TRACING_EVAL_SINKS__OTLP__ENDPOINT": collector.endpoint,
        "TRACING_EVAL_RETENTION__ENABLED": "false",
    }
    car = soak.Sidecar(
        env_for(url, extra), workdir, ["otlp"], prefix=["taskset", "-c", str(SIDECAR_CORE)], name="outbox"
    )
    sampler = RssSampler(car)
    sampler.start()
    started = time.perf_counter()
    while car.metrics()["outbox_backlog"] > 0:
        if not car.alive():
            raise RuntimeError(f"the sidecar stopped:\n{car.log_tail()}")
        time.sleep(1)
    wall = time.perf_counter() - started
    out = sampler.stop()
    code = car.stop()
    collector.close()
    rss = [mb for _, mb in sampler.samples]
    return {
        **out,
        "rows": rows,
        "wall_s": wall,
        "rows_per_s": rows / wall,
        "first_rss_mb": rss[0] if rss else None,
        "exit_code": code,
        "rss_samples": sampler.samples[:: max(1, len(sampler.samples) // 200)],
    }


def run_backend(backend: str, rows: int) -> dict[str, Any]:
    with scratch_store(backend, "outbox") as (url, workdir, _):
        soak.log(f"{backend}: {rows:,} rows waiting")
        asyncio.run(fill(url, rows))
        soak.log(f"{backend}: delivering")
        return {"backend": backend, **deliver(url, rows, workdir)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=600_000, help="result rows waiting in the outbox")
    ap.add_argument("--backends", default="sqlite,postgresql")
    args = ap.parse_args()
    results = [run_backend(b.strip(), args.rows) for b in args.backends.split(",") if b.strip()]
    write_json("outbox-memory.json", {"machine": machine(), "args": vars(args), "runs": results})
    print(
        table(
            ["store", "rows delivered", "rows/s", "RSS at start MiB", "peak RSS MiB", "exit code"],
            [
                [
                    r["backend"],
                    f"{r['rows']:,}",
                    f"{r['rows_per_s']:,.0f}",
                    f"{r['first_rss_mb']:.0f}",
                    f"{r['peak_rss_mb']:.0f}",
                    r["exit_code"],
                ]
                for r in results
            ],
        )
    )


if __name__ == "__main__":
    main()
