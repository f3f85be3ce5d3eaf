"""Crash and fault proofs at full size: 1,000 conversations, 4 replicas on one PostgreSQL.

    .venv/bin/python bench/chaos.py                                  # reference, crash, faults, both
    .venv/bin/python bench/chaos.py --threads 200 --runs crash       # a quicker look

Each run is `tests/support/chaos.py` (the same harness as `tests/test_chaos.py`, at a larger size): real
`tracing-eval run` replicas receive the conversations over OTLP from a loader that resends whatever
was not answered 200, evaluate them (deterministic pack plus two judged metrics on a fake judge), and
write scores and review items to the fake Langfuse, which checks every request against its OpenAPI
spec. The runs:

- `reference`: one replica on SQLite, no kills, no faults; what every other run must match;
- `crash`: SIGKILL a random replica (one that has run at least 3 s) every 0.5-2 s, start it again at
  once, until every thread is evaluated at its last version and the outbox is empty;
- `faults`: no kills; the fake Langfuse answers 30% of requests with 429 or 503 or hangs past the
  client's timeout, and the judge answers 20% of calls with malformed JSON or too late;
- `both`: the kills and the faults at once.

Each run is checked with `chaos.compare` against the reference: the same results with the same
values (with faults, a result may be `error` instead), every ok result as one score in Langfuse with
the reference's target and value, no score target with two ids, each routed thread once in the
annotation queue and once in the store, no outbox row pending, every failed delivery with its error.
Output: a markdown table on stdout, progress on stderr, JSON with the machine and every run in
`bench/out/chaos.json`. PostgreSQL is `PG_BENCH_URL` (see bench/replicas.py); each run gets its own
database, dropped afterwards.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import machine, table, write_json  # noqa: E402
from replicas import admin, new_database  # noqa: E402

from tests.support import chaos  # noqa: E402

RUNS = ("crash", "faults", "both")


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def plan_for(name: str, args: argparse.Namespace, store_url: str) -> chaos.Plan:
    kills = args.kill_interval if name in ("crash", "both") else None
    faults = name in ("faults", "both")
    return chaos.Plan(
        threads=args.threads,
        replicas=args.replicas,
        store_url=store_url,
        kill_interval=kills,
        langfuse_fault_rate=0.3 if faults else 0.0,
        judge_fault_rate=0.2 if faults else 0.0,
        load_seconds=args.load_seconds,
        liveness_seconds=args.liveness_seconds,
    )


def row(name: str, out: chaos.Outcome, problems: list[str]) -> list[Any]:
    s = out.summary()
    return [
        name,
        s["threads"],
        s["kills"],
        s["leases_held_at_kills"],
        s["results"],
        s["results_error"],
        s["scores"],
        s["score_writes"],
        s["queue_items"],
        s["outbox"].get("delivered", 0),
        s["outbox"].get("failed", 0),
        s["judge_calls"],
        s["request_retries"],
        s["seconds"],
        "pass" if not problems else f"FAIL ({len(problems)})",
    ]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--threads", type=int, default=1000)
    ap.add_argument("--replicas", type=int, default=4)
    ap.add_argument("--runs", default=",".join(RUNS), help=f"comma-separated, of {', '.join(RUNS)}")
    ap.add_argument("--kill-interval", type=lambda v: tuple(float(x) for x in v.split(",")), default=(0.5, 2.0))
    ap.add_argument("--load-seconds", type=float, default=20.0, help="spread the conversations over this long")
    ap.add_argument("--liveness-seconds", type=float, default=1800.0)
    args = ap.parse_args()
    runs = [r for r in args.runs.split(",") if r]
    if unknown := set(runs) - set(RUNS):
        ap.error(f"unknown runs {sorted(unknown)}")
    work = Path(tempfile.mkdtemp(prefix="chaos-"))
    log(f"reference: {args.threads} conversations, 1 replica on SQLite (work in {work})")
    reference = chaos.run(
        chaos.Plan(
            threads=args.threads, replicas=1, load_seconds=args.load_seconds, liveness_seconds=args.liveness_seconds
        ),
        work / "reference",
    )
    rows = [row("reference", reference, [])]
    report: dict[str, Any] = {"machine": machine(), "args": {**vars(args)}, "runs": {"reference": reference.summary()}}
    failed = False
    for name in runs:
        db, url = new_database("bench_chaos")
        try:
            plan = plan_for(name, args, url)
            log(f"{name}: {plan}")
            out = chaos.run(plan, work / name)
        finally:
            admin(f'DROP DATABASE IF EXISTS "{db}" WITH (FORCE)')
        problems = chaos.compare(reference, out, faults=plan.langfuse_fault_rate > 0)
        failed |= bool(problems)
        report["runs"][name] = {**out.summary(), "problems": problems}
        rows.append(row(name, out, problems))
        log(f"{name}: {json.dumps(out.summary())}; problems: {problems or 'none'}")
    headers = [
        "run", "threads", "kills", "leases held at kills", "results", "results error", "scores",
        "score writes", "queue items", "delivered", "failed deliveries", "judge calls", "resent requests",
        "seconds", "verdict",
    ]  # fmt: skip
    print(table(headers, rows))
    log(f"wrote {write_json('chaos.json', report)}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
