"""Repetition and generic-reply signals against DSTC9's `diverse` rating: Spearman's rho per signal.

Each signal is computed per dialogue from the bot's replies alone and correlated with the mean of
the raters' `diverse` (1-3, low = repetitive). A signal faithful to "the bot repeats itself or gives
generic replies" that people's rating follows would reach rho <= -0.2 (more repetition, less
diverse). The current `repetition` metric's count of repeated replies is the first row.

    .venv/bin/python bench/diverse_signals.py            # about a minute of CPU time

No judge, no network. Dialogues without a numeric mean rating or without a bot reply are left out.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections import Counter
from collections.abc import Callable
from pathlib import Path

from tracing_eval.agreement import Pair, cells_of, spearman
from tracing_eval.metrics.deterministic.lexicons import STOP_WORDS
from tracing_eval.metrics.deterministic.repetition import Repetition
from tracing_eval.metrics.deterministic.similarity import stem, words
from tracing_eval.model import Scope
from tracing_eval.transcripts import thread_from_json_line

DATASET = Path(__file__).resolve().parents[1].parent / "shared" / "datasets" / "dstc9_interactive.jsonl"

#: a reply that opens with a generic reaction: "I see", "that's cool", "yes", "lol"
GENERIC_OPENING = re.compile(
    r"^\W*(?:i (?:see|know|agree|understand|don'?t know)"
    r"|(?:that'?s|that is|it'?s|how) (?:interesting|cool|great|nice|good|awesome|true|funny)"
    r"|(?:yes|yeah|no|ok(?:ay)?|sure|lol|haha|wow|cool|nice|great|me too|really|right|oh)\b)",
    re.IGNORECASE,
)
#: stock small-talk phrases of open-domain chatbots
STOCK = re.compile(
    r"\b(?:i don'?t know|i'?m not sure|what do you (?:mean|think|like)|tell me more"
    r"|that'?s (?:interesting|cool|great)|i (?:love|like) (?:it|that)|do you have any (?:pets|hobbies)"
    r"|what do you do for (?:a living|fun|work))\b",
    re.IGNORECASE,
)
_SENTENCE = re.compile(r"(?<=[.!?])\s+")


def content(reply: str) -> list[str]:
    return [stem(w) for w in words(reply) if w not in STOP_WORDS]


def ngram_repeats(n: int) -> Callable[[list[str]], float]:
    """Share of replies holding a content-word n-gram an earlier reply of the bot held."""

    def signal(replies: list[str]) -> float:
        seen: set[tuple[str, ...]] = set()
        hits = 0
        for r in replies:
            t = content(r)
            grams = {tuple(t[i : i + n]) for i in range(len(t) - n + 1)}
            hits += bool(grams & seen)
            seen |= grams
        return hits / len(replies)

    return signal


def max_jaccard(replies: list[str], at_least: float | None = None) -> float:
    """Mean over replies of the highest content-word Jaccard with an earlier reply (or the share >= a bound)."""
    sets = [frozenset(content(r)) for r in replies]
    best = [max((len(a & b) / len(a | b) if a | b else 0.0) for b in sets[:i]) for i, a in enumerate(sets) if i]
    if not best:
        return 0.0
    if at_least is not None:
        return sum(b >= at_least for b in best) / len(replies)
    return sum(best) / len(best)


def duplicates(items: list[str]) -> int:
    return sum(c - 1 for c in Counter(items).values())


SIGNALS: dict[str, Callable[[list[str]], float]] = {
    "replies with a content trigram of an earlier reply (share)": ngram_repeats(3),
    "replies with a content bigram of an earlier reply (share)": ngram_repeats(2),
    "highest content-word Jaccard with an earlier reply (mean)": max_jaccard,
    "replies with Jaccard >= 0.5 to an earlier reply (share)": lambda rs: max_jaccard(rs, 0.5),
    "identical replies (count)": lambda rs: duplicates([r.strip().lower() for r in rs]),
    "identical sentences of 3+ words (count)": lambda rs: duplicates(
        [s.strip().lower() for r in rs for s in _SENTENCE.split(r) if len(s.split()) >= 3]
    ),
    "the same question asked again (count)": lambda rs: duplicates(
        [q.strip().lower() for r in rs for q in re.findall(r"[^.!?]*\?", r)]
    ),
    "replies opening with the first three words of an earlier one (share)": lambda rs: (
        duplicates([" ".join(words(r)[:3]) for r in rs]) / len(rs)
    ),
    "generic openings: I see, that's cool, yes, lol (share)": lambda rs: (
        sum(bool(GENERIC_OPENING.match(r)) for r in rs) / len(rs)
    ),
    "stock small-talk phrases (share)": lambda rs: sum(bool(STOCK.search(r)) for r in rs) / len(rs),
    "replies with at most two content words (share)": lambda rs: sum(len(content(r)) <= 2 for r in rs) / len(rs),
    "distinct content words / content words, negated": lambda rs: (
        -len({w for r in rs for w in content(r)}) / max(1, sum(len(content(r)) for r in rs))
    ),
    "bot replies (count; length, not repetition)": len,
}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--file", type=Path, default=DATASET)
    ap.add_argument("--json", type=Path, help="also write the figures to this file")
    args = ap.parse_args(argv)
    metric = Repetition()
    values: dict[str, list[float]] = {"`repetition` repeated replies (count)": [], **{k: [] for k in SIGNALS}}
    ratings: list[float] = []
    for i, line in enumerate(args.file.read_bytes().splitlines(), 1):
        row = json.loads(line)
        mean = row["thread_labels"]["diverse"]["mean"]
        replies = [t["content"] for t in row["turns"] if t["role"] == "assistant" and t.get("content")]
        if not isinstance(mean, (int, float)) or not replies:
            continue
        ratings.append(float(mean))
        [whole] = [r for r in metric.evaluate(thread_from_json_line(line, i)) if r.scope is Scope.THREAD]
        values["`repetition` repeated replies (count)"].append(len((whole.evidence or {}).get("repeated_messages", [])))
        for name, signal in SIGNALS.items():
            values[name].append(float(signal(replies)))
    report = {
        name: spearman(cells_of(Pair(False, None, v, m) for v, m in zip(vs, ratings, strict=True)))
        for name, vs in values.items()
    }
    print(f"DSTC9 dialogues: {len(ratings)}; Spearman's rho with the mean `diverse` rating (target <= -0.2):")
    for name, rho in report.items():
        print(f"  {'-' if rho is None else f'{rho:+.3f}'}  {name}")
    if args.json:
        args.json.write_text(json.dumps({"dialogues": len(ratings), "rho": report}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
