"""`tracing-eval calibrate`: line a metric's results up with human labels, unit by unit.

Input is plain data: the rows of a labelled JSONL (`thread_labels`, `turn_labels` by message
index, as in the shared dataset schema), the threads read from it, and the `eval` records of a
metric on them. Out come `Pair`s for `tracing_eval.agreement`, and counts of what was left out.

Units, by level:
- `thread`: the metric's thread result against a `thread_labels` value;
- `turn`: the metric's result on the turn that holds the labelled message;
- `reply`: whether the labelled message's position is in the list of positions the metric's thread
  evidence names (`refusal_messages`, `repeated_messages`, `reasked_messages`).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from tracing_eval.agreement import Agreement, Pair, agreement
from tracing_eval.model import Thread

SECTIONS = ("thread_labels", "turn_labels")
LEVELS = ("thread", "turn", "reply")
AGGREGATES = ("mean", "majority", "all", "any")

#: the thread-evidence field that lists the replies a metric flags, by metric
REPLY_EVIDENCE: dict[str, str] = {
    "refusal_loop": "refusal_messages",
    "repetition": "repeated_messages",
    "reask": "reasked_messages",
}


class CalibrationError(ValueError):
    """A label path, condition or input that cannot be calibrated; the message says what and where."""


# -- human labels ------------------------------------------------------------------------------


@dataclass(frozen=True)
class LabelPath:
    """`thread_labels.KEY[.KEY...]` or `turn_labels.KEY[...]`; keys may hold spaces."""

    section: str
    keys: tuple[str, ...]

    @classmethod
    def parse(cls, text: str) -> LabelPath:
        section, _, rest = text.partition(".")
        if section not in SECTIONS or not rest:
            raise CalibrationError(
                f"--label {text!r}: write thread_labels.KEY or turn_labels.KEY (e.g. thread_labels.response, "
                "turn_labels.satisfaction)"
            )
        return cls(section, tuple(rest.split(".")))

    def __str__(self) -> str:
        return ".".join((self.section, *self.keys))

    def get(self, labels: Mapping[str, Any]) -> tuple[bool, Any]:
        """(found, value) inside one thread's or one message's labels."""
        node: Any = labels
        for key in self.keys:
            if not isinstance(node, Mapping) or key not in node:
                return False, None
            node = node[key]
        if isinstance(node, Mapping):
            raise CalibrationError(
                f"--label {self}: is an object with keys {', '.join(map(str, node))}; address one of them"
            )
        return True, node


def _number(x: Any) -> float | None:
    if isinstance(x, bool):
        return float(x)
    if isinstance(x, int | float) and math.isfinite(x):
        return float(x)
    if isinstance(x, str):
        try:
            v = float(x)
        except ValueError:
            return None
        return v if math.isfinite(v) else None
    return None


_COMPARISON = re.compile(r"^\s*(<=|>=|==|!=|<|>)\s*(\S+)\s*$")


@dataclass(frozen=True)
class Condition:
    """When one label value counts as positive: a comparison (`<=2`, `==0`) or a set of values."""

    op: str | None = None
    bound: float = 0.0
    values: frozenset[str] = frozenset()

    @classmethod
    def parse(cls, text: str) -> Condition:
        m = _COMPARISON.match(text)
        if m:
            bound = _number(m.group(2))
            if bound is None:
                raise CalibrationError(f"--positive {text!r}: {m.group(2)!r} is not a number")
            return cls(op=m.group(1), bound=bound)
        values = frozenset(v.strip() for v in text.split(",") if v.strip())
        if not values:
            raise CalibrationError("--positive: give label values (a,b) or a comparison (<=2, ==0)")
        return cls(values=values)

    def holds(self, x: Any) -> bool | None:
        """Whether `x` is positive; None when `x` cannot be compared (a comparison on a non-number)."""
        if self.op is None:
            if isinstance(x, bool):
                return str(x).lower() in {v.lower() for v in self.values}
            n = _number(x)
            return str(x) in self.values or (n is not None and any(_number(v) == n for v in self.values))
        n = _number(x)
        if n is None:
            return None
        return {
            "<": n < self.bound,
            "<=": n <= self.bound,
            ">": n > self.bound,
            ">=": n >= self.bound,
            "==": n == self.bound,
            "!=": n != self.bound,
        }[self.op]

    def __str__(self) -> str:
        return f"{self.op}{self.bound:g}" if self.op else ",".join(sorted(self.values))


@dataclass(frozen=True)
class LabelRule:
    """How a label value (or a list of annotators' values) becomes a positive flag and a rating.

    A list is aggregated: `mean` compares the mean with the condition, `majority` needs the condition
    to hold for more than half of the values, `all` / `any` for all / any of them (a list of
    categories under `mean` takes the majority). Values that are not numbers (`N/A`) are left out of
    numeric lists. The rating (for Spearman) is the mean of the numbers."""

    positive: Condition | None = None
    aggregate: str = "mean"

    def read(self, raw: Any) -> tuple[bool | None, float | None] | None:
        """(positive, rating), or None when the value carries no label."""
        items = list(raw) if isinstance(raw, list | tuple) else [raw]
        numbers = [n for n in (_number(x) for x in items) if n is not None]
        if isinstance(raw, list | tuple) and numbers:
            items = [x for x in items if _number(x) is not None]
        items = [x for x in items if x is not None and x != ""]
        if not items:
            return None
        rating = sum(numbers) / len(numbers) if numbers else None
        if self.positive is None:
            if isinstance(raw, bool):
                return raw, rating
            return (None, rating) if rating is not None else None
        if self.aggregate == "mean" and rating is not None and len(items) > 1:
            verdicts: list[bool | None] = [self.positive.holds(rating)]
        else:
            verdicts = [self.positive.holds(x) for x in items]
        known = [v for v in verdicts if v is not None]
        if not known:
            return None
        if self.aggregate == "all":
            positive = all(known)
        elif self.aggregate == "any":
            positive = any(known)
        elif self.aggregate == "majority":
            positive = sum(known) * 2 > len(known)
        else:
            positive = known[0] if len(known) == 1 else sum(known) * 2 > len(known)
        return positive, rating


# -- the metric's side -------------------------------------------------------------------------


@dataclass(frozen=True)
class Prediction:
    """When a result counts as flagged, and the value that orders units from least to most trouble.

    Flagged: its label is in `labels`; else its score is below `threshold`; else its evidence field
    `evidence` is set (true, non-zero, non-empty); else it did not pass.
    Value: `score` gives 1 - score (more trouble = higher); `evidence.FIELD` gives the field's number,
    a list's length or a boolean as 0/1. A `not_applicable` (or missing) result counts as not flagged
    with no trouble when `not_applicable` is `negative`, and is left out when it is `skip`."""

    labels: frozenset[str] | None = None
    threshold: float | None = None
    evidence: str | None = None
    value: str = "score"
    not_applicable: str = "negative"

    def __post_init__(self) -> None:
        if self.value != "score" and not self.value.startswith("evidence."):
            raise CalibrationError(f"--value {self.value!r}: write score or evidence.FIELD")

    def describe(self) -> str:
        if self.labels:
            return "label in " + ",".join(sorted(self.labels))
        if self.threshold is not None:
            return f"score < {self.threshold:g}"
        if self.evidence:
            return f"evidence {self.evidence} is set"
        return "did not pass (score below the metric's threshold)"

    def trouble(self, result: Mapping[str, Any]) -> float | None:
        if self.value == "score":
            score = result.get("score")
            return None if score is None else 1.0 - float(score)
        field_name = self.value.removeprefix("evidence.")
        got = (result.get("evidence") or {}).get(field_name)
        if isinstance(got, list | tuple | dict):
            return float(len(got))
        return _number(got)

    def flagged(self, result: Mapping[str, Any]) -> bool:
        if self.labels:
            return result.get("label") in self.labels
        if self.threshold is not None:
            score = result.get("score")
            return score is not None and score < self.threshold
        if self.evidence:
            return bool((result.get("evidence") or {}).get(self.evidence))
        return result.get("passed") is False

    def read(self, result: Mapping[str, Any] | None) -> tuple[bool, float | None] | str:
        """(flagged, trouble), or the reason the unit is left out (`not_applicable`, `error`)."""
        status = (result or {}).get("status", "not_applicable")
        if status == "error":
            return "error"
        if result is None or status != "ok":
            if self.not_applicable == "skip":
                return "not_applicable"
            return False, 0.0
        return self.flagged(result), self.trouble(result)


@dataclass
class Comparison:
    """One metric against one label: the agreement, the unit level, and what was left out."""

    metric: str
    agreement: Agreement
    left_out: dict[str, int] = field(default_factory=dict)
    not_applicable: int = 0
    level: str = "thread"


# -- joining -----------------------------------------------------------------------------------


@dataclass
class Units:
    """The pairs of one comparison, and what was left out and why (counts by reason)."""

    pairs: list[Pair] = field(default_factory=list)
    left_out: dict[str, int] = field(default_factory=dict)
    not_applicable: int = 0  # units whose result was not_applicable or missing (counted or left out)

    def leave_out(self, reason: str) -> None:
        self.left_out[reason] = self.left_out.get(reason, 0) + 1


def _turn_of_position(thread: Thread) -> dict[int, int]:
    return {m.position: t.index for t in thread.turns for m in t.messages if m.position is not None}


def _roles(thread: Thread) -> dict[int, str]:
    return {m.position: m.role for m in thread.messages if m.position is not None}


def _labelled_messages(row: Mapping[str, Any], path: LabelPath, line: int) -> Iterable[tuple[int, Any]]:
    raw = row.get("turn_labels") or []
    if not isinstance(raw, list):
        raise CalibrationError(f"line {line}: turn_labels must be a list of {{turn_index, labels}}")
    for entry in raw:
        if not isinstance(entry, Mapping) or not isinstance(entry.get("turn_index"), int):
            raise CalibrationError(f"line {line}: each turn_labels entry needs an integer turn_index")
        found, value = path.get(entry.get("labels") or {})
        if found:
            yield entry["turn_index"], value


def join(
    rows: Sequence[Mapping[str, Any]],
    threads: Sequence[Thread],
    records: Sequence[Mapping[str, Any]],
    *,
    metric: str,
    path: LabelPath,
    level: str,
    rule: LabelRule,
    prediction: Prediction,
    evidence_field: str | None = None,
) -> Units:
    """Pairs of (metric result, human label) for every labelled unit of `rows` (one per line, with the
    thread and the `eval` record of the same line)."""
    if level not in LEVELS:
        raise CalibrationError(f"--level {level!r}: one of {', '.join(LEVELS)}")
    if level == "thread" and path.section != "thread_labels":
        raise CalibrationError(f"--label {path}: thread level compares thread_labels; use --level turn or reply")
    if level != "thread" and path.section != "turn_labels":
        raise CalibrationError(f"--label {path}: {level} level compares turn_labels; use --level thread")
    if level == "reply" and evidence_field is None:
        raise CalibrationError(
            f"metric {metric} lists no replies in its evidence; give --evidence FIELD or use --level turn or thread "
            f"(per-reply evidence: {', '.join(f'{m}.{f}' for m, f in REPLY_EVIDENCE.items())})"
        )
    units = Units()
    found_any = False

    def add(result: Mapping[str, Any] | None, raw_label: Any, reply_flag: bool | None = None) -> None:
        label = rule.read(raw_label)
        if label is None:
            units.leave_out("no usable label value")
            return
        if result is None or result.get("status", "ok") == "not_applicable":
            units.not_applicable += 1
        read = prediction.read(result)
        if isinstance(read, str):
            units.leave_out(read)
            return
        flagged, trouble = read
        if reply_flag is not None and result is not None and result.get("status") == "ok":
            flagged, trouble = reply_flag, float(reply_flag)  # the reply's own verdict, not the thread's
        units.pairs.append(Pair(flagged, label[0], trouble, label[1]))

    for line, (row, thread, record) in enumerate(zip(rows, threads, records, strict=True), 1):
        if level == "thread":
            found, value = path.get(row.get("thread_labels") or {})
            if not found:
                continue
            found_any = True
            add(record["metrics"].get(metric), value)
            continue
        turn_of, roles = _turn_of_position(thread), _roles(thread)
        thread_result = record["metrics"].get(metric)
        for position, value in _labelled_messages(row, path, line):
            found_any = True
            if position not in turn_of:
                raise CalibrationError(
                    f"line {line}: turn_labels turn_index {position} is not a message of the thread "
                    f"({len(roles)} messages, 0-based)"
                )
            if level == "turn":
                turns = record["turns"]
                k = turn_of[position]
                add(turns[k]["metrics"].get(metric) if k < len(turns) else None, value)
            elif roles[position] != "assistant":
                units.leave_out(f"labelled message is a {roles[position]} message, not a reply")
            else:
                listed = ((thread_result or {}).get("evidence") or {}).get(evidence_field)
                if thread_result is not None and thread_result.get("status") == "ok" and not isinstance(listed, list):
                    raise CalibrationError(f"metric {metric}: its evidence has no list {evidence_field!r}")
                add(thread_result, value, position in (listed or []))
    if not found_any:
        raise CalibrationError(f"--label {path}: no line of the file has this label")
    return units


def join_scored(
    subjects: Iterable[tuple[list[Any], Mapping[str, Any] | None]], *, rule: LabelRule, prediction: Prediction
) -> Units:
    """Pairs from (reviewers' values, our result) per trace or session; several reviewers' values on
    one subject are aggregated like annotators'. Subjects without our result are left out."""
    units = Units()
    for human, ours in subjects:
        label = rule.read(human if len(human) != 1 else human[0])
        if label is None:
            units.leave_out("no usable label value")
            continue
        if ours is None:
            units.leave_out("not scored by this project")
            continue
        if ours.get("status", "ok") == "not_applicable":
            units.not_applicable += 1
        read = prediction.read(ours)
        if isinstance(read, str):
            units.leave_out(read)
            continue
        units.pairs.append(Pair(read[0], label[0], read[1], label[1]))
    return units


def default_level(path: LabelPath, evidence_field: str | None) -> str:
    """thread for thread_labels; for turn_labels reply when the metric lists replies, else turn."""
    if path.section == "thread_labels":
        return "thread"
    return "reply" if evidence_field else "turn"


def measure(
    rows: Sequence[Mapping[str, Any]],
    threads: Sequence[Thread],
    records: Sequence[Mapping[str, Any]],
    *,
    metrics: Sequence[str],
    path: LabelPath,
    rule: LabelRule,
    prediction: Prediction,
    level: str | None = None,
    evidence_field: str | None = None,
    samples: int = 1000,
    seed: int = 0,
) -> list[Comparison]:
    """Every metric against the label: its units joined, then kappa & co. with bootstrap intervals."""
    out: list[Comparison] = []
    for name in metrics:
        evidence = evidence_field or REPLY_EVIDENCE.get(name)
        unit_level = level or default_level(path, evidence)
        units = join(
            rows,
            threads,
            records,
            metric=name,
            path=path,
            level=unit_level,
            rule=rule,
            prediction=prediction,
            evidence_field=evidence,
        )
        found = agreement(units.pairs, samples=samples, seed=seed)
        out.append(Comparison(name, found, units.left_out, units.not_applicable, unit_level))
    return out
