"""Record every deterministic verdict, then check that a later version gives exactly the same.

A guard for speed work on the deterministic tier: an optimisation must not change any result.
Every deterministic metric runs over the four shared datasets and synthetic 10-turn threads
(the ones `bench/deterministic.py` times); each result's status, score, label, passed, reason and
evidence is written, one JSON line per result, to `bench/out/verdicts.jsonl` (not committed).

    .venv/bin/python bench/verdicts.py --record      # before the change
    .venv/bin/python bench/verdicts.py               # after: exit 1 and the first differences if any
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from collections.abc import Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import OUT  # noqa: E402
from deterministic import DATASETS, synthetic_lines  # noqa: E402

DATASET_FILES = ("tau_airline_gpt4o.jsonl", "dstc9_interactive.jsonl", "uss_sgd_mwoz.jsonl", "xstest_completions.jsonl")


def verdict_lines(synthetic: int) -> Iterator[str]:
    """One canonical JSON line per result, in a fixed order."""
    from tracing_eval.config import DETERMINISTIC_PACK, Settings
    from tracing_eval.evaluate import evaluate_thread
    from tracing_eval.metrics.catalogue import build_metrics
    from tracing_eval.transcripts import thread_from_json_line

    metrics = build_metrics(Settings(), DETERMINISTIC_PACK).deterministic
    inputs = {name: (DATASETS / name).read_bytes().splitlines() for name in DATASET_FILES}
    if synthetic:
        inputs["synthetic"] = synthetic_lines(synthetic, 10)
    for source, lines in inputs.items():
        for i, line in enumerate(lines, 1):
            thread = thread_from_json_line(line, i)
            for r in evaluate_thread(thread, metrics):
                row = r.model_dump(mode="json", exclude={"duration_ms"})
                yield json.dumps({"source": source, "thread": thread.key, **row}, sort_keys=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--record", action="store_true", help="write the reference file instead of checking it")
    ap.add_argument("--synthetic", type=int, default=1000, help="number of synthetic threads")
    ap.add_argument("--file", default=str(OUT / "verdicts.jsonl"), help="the reference file")
    args = ap.parse_args()

    ref = Path(args.file)
    got = list(verdict_lines(args.synthetic))
    digest = hashlib.sha256("\n".join(got).encode()).hexdigest()[:16]
    if args.record:
        ref.parent.mkdir(parents=True, exist_ok=True)
        ref.write_text("\n".join(got) + "\n")
        print(f"recorded {len(got)} results to {ref} (sha256 {digest})")
        return
    if not ref.exists():
        sys.exit(f"{ref}: no reference; run with --record first (on the version to compare against)")
    want = ref.read_text().splitlines()
    diffs = [(k, a, b) for k, (a, b) in enumerate(zip(want, got, strict=False)) if a != b]
    if len(want) != len(got):
        print(f"result count differs: reference {len(want)}, now {len(got)}")
    for k, a, b in diffs[:5]:
        print(f"line {k + 1}:\n  reference {a[:600]}\n  now       {b[:600]}")
    if diffs or len(want) != len(got):
        sys.exit(f"{len(diffs)} of {len(want)} results differ")
    print(f"all {len(got)} results identical (sha256 {digest})")


if __name__ == "__main__":
    main()
