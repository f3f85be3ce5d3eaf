"""Agreement statistics between a metric and human labels, over plain data.

A unit (a thread, a turn or a reply) is a `Pair`: what the metric said (`flagged`, and a `value`
that orders units from least to most trouble) and what people said (`positive`, and an ordinal
`rating`). Pairs are counted into `Cells` (distinct pairs with weights), so every statistic, and
every bootstrap resample, works on a small table instead of on every unit.

Formulas: Cohen's kappa for two binary raters; Spearman's rho as the Pearson correlation of
mid-ranks (ties share the mean rank); ROC AUC as the Mann-Whitney probability that a positive unit
has a higher value than a negative one, ties counting half; percentile bootstrap intervals.
"""

from __future__ import annotations

import math
import random
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

#: statistics reported, in order
STATS = ("kappa", "precision", "recall", "f1", "accuracy", "false_alarm_rate", "flag_rate", "spearman", "roc_auc")


@dataclass(frozen=True)
class Pair:
    """One unit: the metric's verdict and the people's label (None where a side has no such value)."""

    flagged: bool
    positive: bool | None
    value: float | None = None
    rating: float | None = None


Cells = list[tuple[Pair, int]]


def cells_of(pairs: Iterable[Pair]) -> Cells:
    """Distinct pairs with their counts (order of first appearance)."""
    return list(Counter(pairs).items())


@dataclass(frozen=True)
class Confusion:
    """Counts of the 2x2 table: metric flagged (or not) against human positive (or not)."""

    tp: int = 0
    fp: int = 0
    fn: int = 0
    tn: int = 0

    @property
    def n(self) -> int:
        return self.tp + self.fp + self.fn + self.tn


def confusion(cells: Cells) -> Confusion:
    tp = fp = fn = tn = 0
    for p, w in cells:
        if p.positive is None:
            continue
        if p.flagged:
            tp, fp = (tp + w, fp) if p.positive else (tp, fp + w)
        else:
            fn, tn = (fn + w, tn) if p.positive else (fn, tn + w)
    return Confusion(tp, fp, fn, tn)


def _ratio(a: float, b: float) -> float | None:
    return a / b if b else None


def kappa(c: Confusion) -> float | None:
    """Cohen's kappa: (observed - chance agreement) / (1 - chance); None on an empty table.

    When both raters put every unit in the same class, chance agreement is 1 and kappa is
    undefined; it is reported as 1.0 if they agree on every unit (they do, by construction)."""
    n = c.n
    if not n:
        return None
    observed = (c.tp + c.tn) / n
    chance = ((c.tp + c.fp) * (c.tp + c.fn) + (c.fn + c.tn) * (c.fp + c.tn)) / (n * n)
    if chance == 1.0:
        return 1.0
    return (observed - chance) / (1.0 - chance)


def precision(c: Confusion) -> float | None:
    return _ratio(c.tp, c.tp + c.fp)


def recall(c: Confusion) -> float | None:
    return _ratio(c.tp, c.tp + c.fn)


def f1(c: Confusion) -> float | None:
    return _ratio(2 * c.tp, 2 * c.tp + c.fp + c.fn)


def binary(c: Confusion) -> dict[str, float]:
    """Kappa, precision, recall and F1 of a table, 0.0 where a ratio is undefined (for reports)."""
    return {
        name: stat(c) or 0.0
        for name, stat in (("kappa", kappa), ("precision", precision), ("recall", recall), ("f1", f1))
    }


def _midranks(weighted: Sequence[tuple[float, int]]) -> dict[float, float]:
    """Mid-rank of each distinct value, given (value, count) pairs: tied units share the mean rank."""
    totals: Counter[float] = Counter()
    for v, w in weighted:
        totals[v] += w
    ranks: dict[float, float] = {}
    below = 0
    for v in sorted(totals):
        ranks[v] = below + (totals[v] + 1) / 2
        below += totals[v]
    return ranks


def spearman(cells: Cells) -> float | None:
    """Spearman's rho of `value` against `rating` with ties (Pearson of mid-ranks); None when
    fewer than three units have both or either side is constant."""
    both = [(p.value, p.rating, w) for p, w in cells if p.value is not None and p.rating is not None]
    n = sum(w for *_, w in both)
    if n < 3:
        return None
    rx = _midranks([(x, w) for x, _, w in both])
    ry = _midranks([(y, w) for _, y, w in both])
    mean = (n + 1) / 2  # the mean of mid-ranks is always (n + 1) / 2
    sxy = sxx = syy = 0.0
    for x, y, w in both:
        dx, dy = rx[x] - mean, ry[y] - mean
        sxy += w * dx * dy
        sxx += w * dx * dx
        syy += w * dy * dy
    if sxx == 0 or syy == 0:
        return None
    return sxy / math.sqrt(sxx * syy)


def roc_auc(cells: Cells) -> float | None:
    """P(value of a positive unit > value of a negative unit) + half the ties (Mann-Whitney U / (P N))."""
    pos: Counter[float] = Counter()
    neg: Counter[float] = Counter()
    for p, w in cells:
        if p.value is None or p.positive is None:
            continue
        (pos if p.positive else neg)[p.value] += w
    n_pos, n_neg = sum(pos.values()), sum(neg.values())
    if not n_pos or not n_neg:
        return None
    wins = 0.0
    neg_below = 0
    for v in sorted(set(pos) | set(neg)):
        wins += pos[v] * (neg_below + neg[v] / 2)
        neg_below += neg[v]
    return wins / (n_pos * n_neg)


def statistics(cells: Cells) -> dict[str, float | None]:
    """Every statistic of `STATS` for one table."""
    c = confusion(cells)
    flagged = sum(w for p, w in cells if p.flagged)
    total = sum(w for _, w in cells)
    return {
        "kappa": kappa(c),
        "precision": precision(c),
        "recall": recall(c),
        "f1": f1(c),
        "accuracy": _ratio(c.tp + c.tn, c.n),
        "false_alarm_rate": _ratio(c.fp, c.fp + c.tn),
        "flag_rate": _ratio(flagged, total),
        "spearman": spearman(cells),
        "roc_auc": roc_auc(cells),
    }


def percentile(sorted_values: Sequence[float], q: float) -> float:
    """Linear interpolation between closest ranks (numpy's default)."""
    k = (len(sorted_values) - 1) * q
    lo, hi = math.floor(k), math.ceil(k)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (k - lo)


def resample(cells: Cells, rng: random.Random) -> Cells:
    """One bootstrap sample: as many units as the table holds, drawn with replacement."""
    total = sum(w for _, w in cells)
    cum: list[int] = []
    running = 0
    for _, w in cells:
        running += w
        cum.append(running)
    drawn = Counter(rng.choices(range(len(cells)), cum_weights=cum, k=total))
    return [(cells[i][0], k) for i, k in drawn.items()]


def bootstrap(
    cells: Cells,
    stat: Callable[[Cells], dict[str, float | None]] = statistics,
    *,
    samples: int = 1000,
    seed: int = 0,
    level: float = 0.95,
) -> dict[str, tuple[float, float] | None]:
    """Percentile interval of each statistic over `samples` resamples (seeded: the same input gives the
    same interval). A statistic undefined in more than half of the resamples gets None."""
    if samples <= 0 or not cells:
        return {}
    rng = random.Random(seed)
    draws: dict[str, list[float]] = {}
    for _ in range(samples):
        for name, v in stat(resample(cells, rng)).items():
            if v is not None:
                draws.setdefault(name, []).append(v)
    tail = (1 - level) / 2
    out: dict[str, tuple[float, float] | None] = {}
    for name in STATS:
        got = sorted(draws.get(name, []))
        out[name] = (percentile(got, tail), percentile(got, 1 - tail)) if len(got) * 2 > samples else None
    return out


@dataclass
class Agreement:
    """The statistics of one comparison with their bootstrap intervals and the table they come from."""

    n: int
    confusion: Confusion
    stats: dict[str, float | None]
    intervals: dict[str, tuple[float, float] | None] = field(default_factory=dict)
    positives: int = 0
    flagged: int = 0


def agreement(pairs: Iterable[Pair], *, samples: int = 1000, seed: int = 0) -> Agreement:
    cells = cells_of(pairs)
    c = confusion(cells)
    return Agreement(
        n=sum(w for _, w in cells),
        confusion=c,
        stats=statistics(cells),
        intervals=bootstrap(cells, samples=samples, seed=seed),
        positives=c.tp + c.fn,
        flagged=sum(w for p, w in cells if p.flagged),
    )
