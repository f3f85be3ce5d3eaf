"""eval_lib's temperature-controlled aggregation of verdict weights (`score_agg`, reference §2.6).

The score is a power mean of the weights, times a penalty for the share of zero verdicts:

    p     = -8 + (T' - 0.1) / 0.9 * 20.25          T' = T clamped to [0.1, 1.0]
    M_p   = ((1/n) * sum(s_i ** p)) ** (1/p)        (geometric mean when p is ~0)
    score = M_p * (1 - zero_share) ** ((1.5 - T') * min(1, (n - 1) / 4))

A low temperature is strict (the mean leans to the worst weight), a high one lenient. Unlike
eval_lib, the penalty exponent also uses the clamped temperature, so the score never exceeds 1
(eval_lib gives 1.0979 for [1, 1, 1, 1, 0] at T=2.0).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

DEFAULT_TEMPERATURE = 0.5
MIN_TEMPERATURE = 0.1
MAX_TEMPERATURE = 1.0
_FLOOR = 1e-9  # stands in for 0 under a negative exponent


def clamp_temperature(temperature: float) -> float:
    return min(MAX_TEMPERATURE, max(MIN_TEMPERATURE, temperature))


def power_exponent(temperature: float) -> float:
    """-8 at T=0.1, +1 at T=0.5 (the arithmetic mean), +12.25 at T=1.0."""
    t = clamp_temperature(temperature)
    return -8.0 + (t - MIN_TEMPERATURE) / 0.9 * 20.25


def power_mean(scores: Sequence[float], p: float) -> float:
    if abs(p) < 1e-12:
        if any(s <= 0.0 for s in scores):
            return 0.0
        return math.exp(sum(math.log(s) for s in scores) / len(scores))
    bases = [max(s, _FLOOR) for s in scores] if p < 0 else list(scores)
    return (sum(b**p for b in bases) / len(bases)) ** (1.0 / p)


def score_agg(scores: Sequence[float], temperature: float = DEFAULT_TEMPERATURE) -> float:
    """Aggregate verdict weights in [0, 1] into one score in [0, 1], rounded to 4 places."""
    if not scores:
        raise ValueError("score_agg needs at least one score")
    if any(not 0.0 <= s <= 1.0 for s in scores):
        raise ValueError(f"scores must lie in [0, 1]; got {list(scores)}")
    t = clamp_temperature(temperature)
    n = len(scores)
    mean = power_mean(scores, power_exponent(t))
    zero_share = sum(1 for s in scores if s == 0.0) / n
    alpha = (1.5 - t) * min(1.0, (n - 1) / 4)
    return round(min(1.0, mean * (1.0 - zero_share) ** alpha), 4)
