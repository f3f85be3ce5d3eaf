"""Bytes stored per conversation of 10, 50 and 200 turns: spans with their histories inline (as schema
1 stored them) against histories stored once per thread (`tracing_eval/store/history.py`).

    .venv/bin/python bench/storage.py
    .venv/bin/python bench/storage.py --turns 10,50 --conversations 4

The conversations are `bench/workload.py`'s (half OpenInference, half OTel GenAI, chat spans carrying
the whole history, a tool call every other turn). Each set is ingested through `SqlStore.ingest`, one
request body at a time as the receiver stores it, into a new SQLite file twice: as the store does it,
and with the history split turned off (every span stored whole, as schema 1 did). Reported per
conversation: the bytes of span rows and history nodes (`length(data)` summed), the SQLite file after a
checkpoint (tables and indexes, pages as allocated), and the bytes of the spans as protobuf on the wire.
"""

from __future__ import annotations

import argparse
import asyncio
import sqlite3
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import machine, table, write_json  # noqa: E402


async def ingest(bodies: list[bytes], db: Path, split: bool) -> None:
    from tracing_eval.connectors.otlp.decode import PROTOBUF, decode_traces, decompress
    from tracing_eval.ingest import make_batch
    from tracing_eval.store import history
    from tracing_eval.store.sql import SqlStore

    original = history.split
    if not split:
        history.split = lambda attrs, nodes, chains, thread_key: attrs  # every span whole, as schema 1
    try:
        store = SqlStore(f"sqlite+aiosqlite:///{db}")
        await store.open()
        for body in bodies:
            spans = decode_traces(decompress(body, "gzip", 1 << 30), PROTOBUF).spans
            await store.ingest(make_batch(spans, []), time.time())
        await store.close()
    finally:
        history.split = original


def measure(db: Path) -> dict[str, int]:
    with sqlite3.connect(db) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        spans = conn.execute("SELECT coalesce(sum(length(data)), 0), count(*) FROM spans").fetchone()
        nodes = conn.execute("SELECT coalesce(sum(length(data)), 0), count(*) FROM messages").fetchone()
        pages = conn.execute("PRAGMA page_count").fetchone()[0] * conn.execute("PRAGMA page_size").fetchone()[0]
    return {"span_bytes": spans[0], "spans": spans[1], "node_bytes": nodes[0], "nodes": nodes[1], "file_bytes": pages}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--turns", default="10,50,200")
    ap.add_argument(
        "--conversations", type=int, default=0, help="per length (even: both conventions); 0: 200 / turns, at least 2"
    )
    ap.add_argument("--json", default="storage.json")
    args = ap.parse_args()
    import workload

    rows, out = [], []
    for turns in (int(x) for x in args.turns.split(",")):
        n = args.conversations or max(2, 200 // turns)
        wl = workload.build(n, turns)
        messages = 1 + sum(4 if t % 2 else 2 for t in range(turns))  # system, user and answer, tool call and result
        result: dict[str, Any] = {"turns": turns, "conversations": n, "messages": messages, "wire_bytes": wl.span_bytes}
        with tempfile.TemporaryDirectory(prefix="tracing-eval-storage-") as tmp:
            for name, split in (("inline", False), ("once", True)):
                db = Path(tmp) / f"{name}.db"
                asyncio.run(ingest(wl.bodies, db, split))
                result[name] = measure(db)
        inline, once = result["inline"], result["once"]
        rows.append(
            [
                turns,
                f"{wl.span_bytes / n / 1e3:,.0f}",
                f"{inline['span_bytes'] / n / 1e3:,.0f}",
                f"{inline['file_bytes'] / n / 1e3:,.0f}",
                f"{(once['span_bytes'] + once['node_bytes']) / n / 1e3:,.0f}",
                f"{once['file_bytes'] / n / 1e3:,.0f}",
                f"{inline['file_bytes'] / once['file_bytes']:.1f}",
                f"{(once['span_bytes'] + once['node_bytes']) / n / messages:,.0f}",
                f"{(inline['span_bytes']) / n / messages:,.0f}",
            ]
        )
        out.append(result)
        print(f"{turns} turns done", file=sys.stderr)
    print(
        table(
            [
                "turns",
                "protobuf kB/conv",
                "inline: data kB/conv",
                "inline: file kB/conv",
                "once: data kB/conv",
                "once: file kB/conv",
                "inline ÷ once (file)",
                "once: data B per message",
                "inline: data B per message",
            ],
            rows,
        )
    )
    if args.json:
        write_json(args.json, {"machine": machine(), "args": vars(args), "results": out})


if __name__ == "__main__":
    main()
