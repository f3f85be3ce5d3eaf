"""Agreement of `user_friction`, `thread_stats` abandonment and `tool_errors` with human labels.

- USS (Sun et al. 2021, SGD + MultiWOZ): per user turn, the label is "a majority of the annotators rate
  the system reply before this message <= 2 of 5"; the prediction is the turn's `user_friction` result
  failing (`passed` is false). Cohen's kappa, precision, recall, F1, the confusion table, a 95%
  bootstrap interval for kappa (threads resampled, 1,000 draws) and the precision of each flag.
  Cue classes: the flags split by what triggered them (a `correction` that disputes the reply, or a
  "no" to a reply that checked a detail, or to one that stated it; a `retry` with new details or
  without), the precision of each, and what precision, recall and kappa the metric would have with
  only some classes: every class but one, and the most precise classes added one at a time.
  Context tests: how often a "no" + replacement correction is rated dissatisfied when its detail was
  given before or is new, with or without change-of-mind words, and any message opening with "no".
  User acts as an oracle: the dialogue act annotated on each user turn (`user_action`: NEGATE,
  REQUEST_ALTS, ...), which no metric sees, as a predictor: the share of each act rated dissatisfied,
  and precision, recall and kappa when the most dissatisfied acts are flagged, one act at a time.
- tau-bench airline (gpt-4o): task success of threads that `user_friction` fails (and of threads with
  any flagged turn) against the rest; the same for `thread_stats.abandoned` and for `tool_errors` failing.

CPU-light (a few seconds); no judge. Run from the repository root:

    .venv/bin/python bench/friction_agreement.py
    .venv/bin/python bench/friction_agreement.py --datasets path/to/datasets --json friction.json
"""

from __future__ import annotations

import argparse
import json
import random
import re
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from tracing_eval.agreement import Confusion, binary
from tracing_eval.metrics.deterministic import friction_cues as cues
from tracing_eval.metrics.deterministic.lexicons import STOP_WORDS
from tracing_eval.metrics.deterministic.similarity import stem, words
from tracing_eval.metrics.deterministic.thread_stats import ThreadStats
from tracing_eval.metrics.deterministic.tool_errors import ToolErrors
from tracing_eval.metrics.deterministic.user_friction import UserFriction
from tracing_eval.model import MetricResult, Scope
from tracing_eval.transcripts import thread_from_messages

DATASETS = Path(__file__).resolve().parents[1].parent / "shared" / "datasets"
USS = "uss_sgd_mwoz.jsonl"
TAU = "tau_airline_gpt4o.jsonl"


def rows(path: Path) -> Iterator[dict[str, Any]]:
    with path.open("rb") as f:
        for line in f:
            if line.strip():
                yield json.loads(line)


def dissatisfied(ratings: list[int]) -> bool:
    """The USS label: a strict majority of the annotators rate the reply 1 or 2."""
    return sum(r <= 2 for r in ratings) * 2 > len(ratings)


def confusion(pairs: list[tuple[bool, bool]]) -> dict[str, int]:
    """(label, prediction) pairs -> tp, fp, fn, tn."""
    c = Counter((lab, pred) for lab, pred in pairs)
    return {"tp": c[True, True], "fp": c[False, True], "fn": c[True, False], "tn": c[False, False]}


def agreement(t: dict[str, int]) -> dict[str, float]:
    """Kappa, precision, recall and F1 of a confusion table (`tracing_eval.agreement`)."""
    return binary(Confusion(**t))


def bootstrap_kappa(by_thread: list[list[tuple[bool, bool]]], draws: int, seed: int) -> tuple[float, float]:
    """95% interval of kappa with threads resampled (turns of one dialogue are not independent)."""
    rng = random.Random(seed)
    counts = [confusion(pairs) for pairs in by_thread]
    values = []
    for _ in range(draws):
        total = dict.fromkeys(("tp", "fp", "fn", "tn"), 0)
        for c in rng.choices(counts, k=len(counts)):
            for k in total:
                total[k] += c[k]
        values.append(agreement(total)["kappa"])
    values.sort()
    return values[int(0.025 * draws)], values[int(0.975 * draws) - 1]


#: a retry that brings new details ("try again for 4 people") is a new request, not the same one again
_NEW_DETAILS = re.compile(r"\d|\b(?:for|at|on|with|instead|but|this time)\s+\w", re.IGNORECASE)


def cue_classes(text: str, reply: str, flags: list[str]) -> set[str]:
    """What triggered the flags of one user message (finer than the flags)."""
    text, reply = text.replace("\u2019", "'"), reply.replace("\u2019", "'")
    out = {f for f in flags if f not in ("correction", "retry")}
    if "correction" in flags:
        if cues.DISPUTE.search(text):
            out.add("correction: disputes the reply")
        if cues.says_no_to_a_detail(text, reply):
            checked = bool(cues.CONFIRMATION.search(reply))
            out.add("correction: no to a detail the reply " + ("checked" if checked else "stated"))
        if cues.replaces_a_stated_value(text, reply):
            out.add("correction: a value in place of one the reply stated")
    if "retry" in flags:
        out.add("retry: " + ("with new details" if _NEW_DETAILS.search(text) else "the same request"))
    return out


#: words of a user revising their own request ("No, actually make it 4"), not of a reply at fault
_CHANGE_OF_MIND = re.compile(
    r"\b(?:make (?:it|that)|change|instead|actually|rather|sorry|wait|scratch|on second thought|changed my mind"
    r"|change of plans?|prefer|switch|update)\b",
    re.IGNORECASE,
)
_NUMBER_WORDS = {w: str(i) for i, w in enumerate("zero one two three four five six seven eight nine ten".split())}
_GENERIC = frozenset(
    "no nope nah not want need like make change please actually instead would it be book reservation reserve"
    " ticket tickets people person should sorry wait".split()
)


def _details(text: str) -> set[str]:
    return {_NUMBER_WORDS.get(w, stem(w)) for w in words(text)} - STOP_WORDS - _GENERIC


def context_splits(row: dict[str, Any], i: int, label: bool, splits: Counter[tuple[str, bool]]) -> None:
    """Context tests on a "no" + replacement correction at message `i`: was its new detail given by the
    user before (the reply got it wrong) or new (the user changed their mind)? Does it use change-of-mind
    words? And how often is any message opening with "no" rated dissatisfied?"""
    turns = row["turns"]
    text = turns[i]["content"].replace("\u2019", "'")
    if cues.NEGATION_OPENING.search(text):
        splits["any message opening with no", label] += 1
    reply = next((m["content"] for m in reversed(turns[:i]) if m["role"] == "assistant"), "") or ""
    if not cues.says_no_to_a_detail(text, reply.replace("\u2019", "'")):
        return
    before = set().union(*(_details(m["content"]) for m in turns[: i - 1] if m["role"] == "user"))
    given = bool((_details(text) - _details(reply)) & before)
    splits["no + a detail the user gave before" if given else "no + a detail not given before", label] += 1
    mind = bool(_CHANGE_OF_MIND.search(text))
    splits["no + change-of-mind words" if mind else "no + no change-of-mind words", label] += 1


def cue_subsets(units: list[tuple[bool, set[str]]], positives: int, total: int) -> dict[str, Any]:
    """Precision per cue class, and the agreement of the metric restricted to some classes."""

    def score(keep: set[str]) -> dict[str, float]:
        flagged = [label for label, classes in units if classes & keep]
        tp = sum(flagged)
        table = {"tp": tp, "fp": len(flagged) - tp, "fn": positives - tp, "tn": total - positives - len(flagged) + tp}
        return {"flagged": len(flagged), **agreement(table)}

    classes = sorted({c for _, cs in units for c in cs})
    single = {c: score({c}) for c in classes}
    ladder, kept = {}, set()
    for c in sorted(classes, key=lambda c: -single[c]["precision"]):
        kept.add(c)
        ladder[" + ".join(sorted(kept)) if len(kept) == 1 else f"+ {c}"] = score(set(kept))
    return {
        "classes": {c: {"flagged": v["flagged"], "precision": v["precision"]} for c, v in single.items()},
        "without": {c: score(set(classes) - {c}) for c in classes},
        "most_precise_first": ladder,
    }


def act_oracle(acts: list[tuple[bool, str]], min_turns: int = 30) -> dict[str, Any]:
    """Each annotated user act (of `min_turns` or more) as a flag: its share of dissatisfied turns, and
    the agreement of flagging the acts with the highest shares, added one at a time (the first five)."""
    counts: Counter[tuple[str, bool]] = Counter((act or "(none)", label) for label, act in acts)
    names = {act for act, _ in counts}
    size = {a: counts[a, True] + counts[a, False] for a in names}
    share = {a: counts[a, True] / size[a] for a in names if size[a] >= min_turns}
    ranked = sorted(share, key=lambda a: -share[a])
    positives = sum(label for label, _ in acts)
    ladder, kept = {}, set()
    for act in ranked[:5]:
        kept.add(act)
        tp = sum(counts[a, True] for a in kept)
        flagged = sum(size[a] for a in kept)
        table = {"tp": tp, "fp": flagged - tp, "fn": positives - tp, "tn": len(acts) - positives - flagged + tp}
        ladder[act if len(kept) == 1 else f"+ {act}"] = {"flagged": flagged, **agreement(table)}
    return {
        "acts": {a: {"turns": size[a], "precision": share[a]} for a in ranked},
        "most_dissatisfied_first": ladder,
    }


def uss(path: Path, draws: int) -> dict[str, Any]:
    metric = UserFriction()
    by_thread: list[list[tuple[bool, bool]]] = []
    by_source: dict[str, list[tuple[bool, bool]]] = {}
    flags: Counter[str] = Counter()
    flag_hits: Counter[str] = Counter()
    not_applicable = 0
    units: list[tuple[bool, set[str]]] = []
    splits: Counter[tuple[str, bool]] = Counter()
    acts: list[tuple[bool, str]] = []
    for row in rows(path):
        thread = thread_from_messages(row["thread_id"], row["turns"])
        turn_of = {t.messages[0].position: t.index for t in thread.turns}
        results = {r.turn_index: r for r in metric.evaluate(thread) if r.scope is Scope.TURN}
        pairs = []
        for item in row["turn_labels"]:
            label = dissatisfied(item["labels"]["satisfaction"])
            result = results.get(turn_of.get(item["turn_index"]))
            if result is None or result.passed is None:
                not_applicable += 1
            predicted = result is not None and result.passed is False
            pairs.append((label, predicted))
            acts.append((label, item["labels"].get("user_action", "")))
            found = (result.evidence or {}).get("flags", []) if result is not None else []
            context_splits(row, item["turn_index"], label, splits)
            for f in found:
                flags[f] += 1
                flag_hits[f] += label
            if found:
                i = item["turn_index"]
                reply = next((m["content"] for m in reversed(row["turns"][:i]) if m["role"] == "assistant"), "")
                units.append((label, cue_classes(row["turns"][i]["content"], reply or "", found)))
        by_thread.append(pairs)
        by_source.setdefault(row["system"], []).extend(pairs)
    everything = [p for pairs in by_thread for p in pairs]
    table = confusion(everything)
    low, high = bootstrap_kappa(by_thread, draws, seed=11)
    return {
        "turns": len(everything),
        "positives": sum(lab for lab, _ in everything),
        "not_applicable_turns": not_applicable,
        "confusion": table,
        **agreement(table),
        "kappa_95": [low, high],
        "by_source": {s: agreement(confusion(p)) for s, p in sorted(by_source.items())},
        "flags": {f: {"flagged": n, "precision": flag_hits[f] / n} for f, n in flags.most_common()},
        "cue_classes": cue_subsets(units, sum(lab for lab, _ in everything), len(everything)),
        "context_splits": {
            name: {"turns": splits[name, True] + splits[name, False], "precision": splits[name, True] / n}
            for name in dict.fromkeys(k for k, _ in splits)
            if (n := splits[name, True] + splits[name, False])
        },
        "user_act_oracle": act_oracle(acts),
    }


def _thread_result(results: list[MetricResult]) -> MetricResult | None:
    return next((r for r in results if r.scope is Scope.THREAD), None)


def success_split(groups: dict[str, list[tuple[bool, float]]]) -> dict[str, Any]:
    out = {}
    for name, pairs in groups.items():
        yes = [s for flagged, s in pairs if flagged]
        no = [s for flagged, s in pairs if not flagged]
        out[name] = {
            "flagged": len(yes),
            "success_flagged": sum(yes) / len(yes) if yes else None,
            "rest": len(no),
            "success_rest": sum(no) / len(no) if no else None,
        }
    return out


def tau(path: Path) -> dict[str, Any]:
    friction, stats, tools = UserFriction(), ThreadStats(), ToolErrors()
    groups: dict[str, list[tuple[bool, float]]] = {
        "user_friction fails": [],
        "user_friction any flagged turn": [],
        "thread_stats abandoned": [],
        "tool_errors fails": [],
        "tool_errors masked_error": [],
    }
    for row in rows(path):
        thread = thread_from_messages(row["thread_id"], row["turns"])
        success = float(row["thread_labels"]["task_success"])
        fr = friction.evaluate(thread)
        whole = _thread_result(fr)
        groups["user_friction fails"].append((whole is not None and whole.passed is False, success))
        groups["user_friction any flagged turn"].append(
            (any(r.scope is Scope.TURN and r.passed is False for r in fr), success)
        )
        [st] = stats.evaluate(thread)
        groups["thread_stats abandoned"].append((bool(st.evidence["abandoned"]), success))
        te = _thread_result(tools.evaluate(thread))
        groups["tool_errors fails"].append((te is not None and te.passed is False, success))
        masked = te is not None and bool((te.evidence or {}).get("masked_error"))
        groups["tool_errors masked_error"].append((masked, success))
    return success_split(groups)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--datasets", type=Path, default=DATASETS, help="folder holding the shared JSONL datasets")
    ap.add_argument("--draws", type=int, default=1000, help="bootstrap draws for the kappa interval")
    ap.add_argument("--json", type=Path, help="also write the figures to this file")
    args = ap.parse_args(argv)
    report = {"uss": uss(args.datasets / USS, args.draws), "tau": tau(args.datasets / TAU)}
    u = report["uss"]
    c = u["confusion"]
    print(f"USS user turns: {u['turns']}, dissatisfied (majority <= 2): {u['positives']}")
    print(
        f"user_friction per turn: kappa {u['kappa']:.3f} (95% {u['kappa_95'][0]:.3f}-{u['kappa_95'][1]:.3f}), "
        f"precision {u['precision']:.3f}, recall {u['recall']:.3f}, F1 {u['f1']:.3f}; "
        f"tp {c['tp']} fp {c['fp']} fn {c['fn']} tn {c['tn']}"
    )
    for source, a in u["by_source"].items():
        print(f"  {source}: kappa {a['kappa']:.3f}, precision {a['precision']:.3f}, recall {a['recall']:.3f}")
    for flag, f in u["flags"].items():
        print(f"  flag {flag}: {f['flagged']} turns, precision {f['precision']:.2f}")
    cc = u["cue_classes"]
    print("  cue classes (flagged turns, precision):")
    for name, v in sorted(cc["classes"].items(), key=lambda kv: -kv[1]["precision"]):
        print(f"    {name}: {v['flagged']}, {v['precision']:.2f}")
    line = "    {}: flagged {}, precision {:.3f}, recall {:.3f}, kappa {:.3f}"
    print("  every cue class but one:")
    for name, v in cc["without"].items():
        print(line.format("without " + name, v["flagged"], v["precision"], v["recall"], v["kappa"]))
    print("  the most precise cue classes first:")
    for name, v in cc["most_precise_first"].items():
        print(line.format(name, v["flagged"], v["precision"], v["recall"], v["kappa"]))
    print("  context tests (turns, share rated dissatisfied):")
    for name, v in u["context_splits"].items():
        print(f"    {name}: {v['turns']}, {v['precision']:.2f}")
    oracle = u["user_act_oracle"]
    print("  user acts as an oracle (turns, share rated dissatisfied; acts of 30+ turns, the top ten):")
    for name, v in list(oracle["acts"].items())[:10]:
        print(f"    {name}: {v['turns']}, {v['precision']:.2f}")
    print("  the most dissatisfied acts flagged, one at a time:")
    for name, v in oracle["most_dissatisfied_first"].items():
        print(line.format(name, v["flagged"], v["precision"], v["recall"], v["kappa"]))
    print("tau-bench airline task success:")
    for name, g in report["tau"].items():
        fmt = lambda v: "-" if v is None else f"{v:.2f}"  # noqa: E731
        print(
            f"  {name}: {g['flagged']} threads succeed {fmt(g['success_flagged'])}; "
            f"the other {g['rest']} succeed {fmt(g['success_rest'])}"
        )
    if args.json:
        args.json.write_text(json.dumps(report, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
