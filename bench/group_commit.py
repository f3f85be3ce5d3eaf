"""Concurrent writers of request batches on PostgreSQL, through `tracing_eval.ingest.GroupWriter`: one
batch per transaction with 4 at once (what the receiver does on PostgreSQL, and did everywhere before
group commit), against the batches that wait taken together by 1 writer (what it does on SQLite) or
by 4.

    .venv/bin/python bench/group_commit.py
    .venv/bin/python bench/group_commit.py --clients 8 --rounds 3 --url postgresql+asyncpg://postgres@127.0.0.1:5432/test

The batches are `bench/workload.py`'s request bodies, decoded and normalised up front (`make_batch`),
so only storing is timed. `--clients` tasks each write every `clients`-th batch, one after the other, as
that many exporters would; every run starts from a new, empty database (created and dropped through the
server named by `--url`). Reported per run: spans stored per second of wall time, and the CPU of this
process (the client side: Python, SQLAlchemy, the driver) per span. The database server shares the
machine, so the modes are run in turn and compared by their medians.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import machine, table, write_json  # noqa: E402

MODES = ("one-each-4", "together-4", "together-1")
SCRATCH = "tracing_eval_group_commit_bench"


def batches(conversations: int, turns: int) -> list[Any]:
    import workload

    from tracing_eval.connectors.otlp.decode import PROTOBUF, decode_traces, decompress
    from tracing_eval.ingest import make_batch

    wl = workload.build(conversations, turns)
    return [make_batch(decode_traces(decompress(b, "gzip", 1 << 30), PROTOBUF).spans, []) for b in wl.bodies]


async def fresh_store(url: str) -> Any:
    """A store on a new, empty database beside the one `url` names."""
    import asyncpg
    from sqlalchemy.engine import make_url

    from tracing_eval.store.sql import SqlStore

    admin = make_url(url).set(drivername="postgresql")
    conn = await asyncpg.connect(admin.render_as_string(hide_password=False))
    try:
        await conn.execute(f"DROP DATABASE IF EXISTS {SCRATCH}")
        await conn.execute(f"CREATE DATABASE {SCRATCH}")
    finally:
        await conn.close()
    store = SqlStore(make_url(url).set(database=SCRATCH).render_as_string(hide_password=False))
    await store.open()
    return store


async def run(mode: str, work: list[Any], clients: int, url: str) -> tuple[float, float]:
    """(spans/s by wall time, client CPU µs per span) of writing `work` in `mode`."""
    from tracing_eval.ingest import GroupWriter

    store = await fresh_store(url)
    writer = GroupWriter(store, int(mode[-1]), time.time, together=mode.startswith("together"))

    async def lane(k: int) -> None:
        for batch in work[k::clients]:
            await writer.write(batch, 600)

    spans = sum(len(b.spans) for b in work)
    wall, cpu = time.perf_counter(), time.process_time()
    await asyncio.gather(*(lane(k) for k in range(clients)))
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    await store.close()
    return spans / wall, cpu * 1e6 / spans


async def main_async(args: argparse.Namespace) -> dict[str, Any]:
    work = batches(args.conversations, args.turns)
    runs: dict[str, list[tuple[float, float]]] = {m: [] for m in MODES}
    for _ in range(args.rounds):
        for mode in MODES:
            runs[mode].append(await run(mode, work, args.clients, args.url))
            rate, cpu = runs[mode][-1]
            print(f"{mode}: {rate:,.0f} spans/s, {cpu:.0f} µs of client CPU per span", file=sys.stderr, flush=True)
    return {
        mode: {
            "spans_per_s": [round(r) for r, _ in rs],
            "client_cpu_us_per_span": [round(c, 1) for _, c in rs],
            "median_spans_per_s": round(statistics.median(r for r, _ in rs)),
        }
        for mode, rs in runs.items()
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--url", default="postgresql+asyncpg://postgres@127.0.0.1:5432/test")
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument("--conversations", type=int, default=300)
    ap.add_argument("--turns", type=int, default=10)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--json", default="group_commit.json", help="file name under bench/out/ ('' for none)")
    args = ap.parse_args()
    results = asyncio.run(main_async(args))
    print(
        table(
            ["mode", "spans/s per run", "median", "client CPU µs/span per run"],
            [
                [
                    m,
                    ", ".join(f"{x:,}" for x in r["spans_per_s"]),
                    f"{r['median_spans_per_s']:,}",
                    ", ".join(str(c) for c in r["client_cpu_us_per_span"]),
                ]
                for m, r in results.items()
            ],
        )
    )
    if args.json:
        write_json(args.json, {"machine": machine(), "args": vars(args), "results": results})


if __name__ == "__main__":
    main()
