"""`repetition` on DSTC9 interactive: false alarms on dialogues every rater found diverse, the
correlation of the per-thread repeat count with the `diverse` rating, and how often the judged
`repetitive_pattern` call would be skipped by its gate.

    .venv/bin/python bench/repetition_dstc9.py [--show 5]

CPU time is reported with `time.process_time` (the machine may be shared).
"""

from __future__ import annotations

import argparse
import collections
import json
import time
from pathlib import Path

from tracing_eval.agreement import Pair, cells_of, spearman
from tracing_eval.metrics.deterministic.refusal_loop import RefusalLoop
from tracing_eval.metrics.deterministic.repetition import Repetition
from tracing_eval.metrics.judged.repetitive_pattern import repeated_tool_calls, skip_reason
from tracing_eval.model import Status
from tracing_eval.transcripts import thread_from_json_line

DATASET = Path(__file__).resolve().parents[1].parent / "shared" / "datasets" / "dstc9_interactive.jsonl"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--file", default=str(DATASET))
    ap.add_argument("--show", type=int, default=0, help="print this many flagged all-diverse dialogues")
    args = ap.parse_args()
    repetition, refusals = Repetition(), RefusalLoop()
    rows = []
    cpu = 0.0
    for k, line in enumerate(Path(args.file).read_bytes().splitlines(), 1):
        thread = thread_from_json_line(line, k)
        start = time.process_time()
        [rep] = repetition.evaluate(thread)
        cpu += time.process_time() - start
        [loop] = refusals.evaluate(thread)
        rows.append((thread, rep, loop, json.loads(line)["thread_labels"]))

    labels = collections.Counter(r.label if r.status == Status.OK else r.status.value for _, r, _, _ in rows)
    print(f"threads {len(rows)}; repetition CPU {cpu * 1000 / len(rows):.3f} ms/thread")
    print("labels", dict(labels.most_common()))
    ok = [r for _, r, _, _ in rows if r.status == Status.OK]
    flagged = sum(len(r.evidence["repeated_messages"]) for r in ok)
    compared = sum(r.evidence["replies_compared"] for r in ok)
    print(f"replies flagged as repeats: {flagged} of {compared} compared ({100 * flagged / compared:.2f}%)")

    diverse = [(t, r, lab) for t, r, _, lab in rows if lab["diverse"]["raw"] and set(lab["diverse"]["raw"]) == {3}]
    bad = [(t, r) for t, r, _ in diverse if r.label in ("mostly", "fully")]
    print(
        f"mostly/fully on dialogues every rater found diverse: {len(bad)} of {len(diverse)} = {100 * len(bad) / len(diverse):.2f}%"
    )

    scored = [(r, lab["diverse"]["mean"]) for _, r, _, lab in rows if isinstance(lab["diverse"]["mean"], int | float)]
    counts = [float(len(r.evidence["repeated_messages"])) if r.status == Status.OK else 0.0 for r, _ in scored]
    means = [float(m) for _, m in scored]
    rho = spearman(cells_of(Pair(False, None, c, m) for c, m in zip(counts, means, strict=True))) or 0.0
    print(f"Spearman(repeat count per thread, diverse mean) = {rho:+.3f} over {len(scored)} threads")

    skipped = 0
    for thread, rep, loop, _ in rows:
        lexical = {
            "repetition": rep.label if rep.status == Status.OK else rep.status.value,
            "refusal_loop": loop.label if loop.status == Status.OK else loop.status.value,
            "repeated_tool_calls": repeated_tool_calls(thread),
        }
        if rep.status == Status.OK:
            for key in ("max_similarity", "max_sentence_similarity", "user_repeats", "language_covered"):
                lexical[key] = rep.evidence[key]
        skipped += skip_reason(lexical) is not None
    print(f"judged repetitive_pattern skipped by the gate: {skipped} of {len(rows)} threads")

    for thread, r in bad[: args.show]:
        texts = {m.position: m.content for turn in thread.turns for m in turn.messages}
        print(f"--- {thread.key} {r.label} repeats {r.evidence['repeated_messages']}")
        for p in r.evidence["pairs"][-2:]:
            print(f"    {texts[p['first_position']][:90]!r} -> {texts[p['repeat_position']][:90]!r} ({p['kind']})")


if __name__ == "__main__":
    main()
