"""`score_agg`: eval_lib's worked examples (reference §2.6), and the clamp that keeps scores <= 1."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tracing_eval.metrics.judged.aggregate import power_exponent, score_agg

TEMPERATURES = (0.1, 0.3, 0.5, 0.8, 1.0)
WORKED = [
    ((1.0, 0.7), (0.758, 0.794, 0.85, 0.9217, 0.946)),
    ((1.0, 0.0), (0.0, 0.0, 0.4204, 0.81, 0.8666)),
    ((0.9, 0.7, 0.3), (0.3441, 0.4024, 0.6333, 0.7946, 0.8258)),
    ((1.0, 1.0, 0.0, 0.7, 0.9), (0.0, 0.0, 0.576, 0.7824, 0.8391)),
]


@pytest.mark.parametrize(("weights", "expected"), WORKED)
@pytest.mark.parametrize("k", range(len(TEMPERATURES)))
def test_worked_values(weights: tuple[float, ...], expected: tuple[float, ...], k: int) -> None:
    assert score_agg(weights, TEMPERATURES[k]) == expected[k]


def test_worked_value_with_one_none_of_three() -> None:
    assert score_agg([1.0, 0.7, 0.0], 0.5) == 0.4627


def test_default_temperature_is_mean_times_none_penalty() -> None:
    assert score_agg([1.0, 0.0]) == 0.4204  # mean 0.5 x 0.5 ** 0.25: two criteria, one unmet, fails 0.7


@pytest.mark.parametrize(("t", "p"), [(0.1, -8.0), (0.3, -3.5), (0.5, 1.0), (0.8, 7.75), (1.0, 12.25)])
def test_power_exponent(t: float, p: float) -> None:
    assert power_exponent(t) == pytest.approx(p)


@pytest.mark.parametrize("t", TEMPERATURES)
@pytest.mark.parametrize("weight", [0.0, 0.3, 0.7, 0.9, 1.0])
def test_single_verdict_is_its_weight(t: float, weight: float) -> None:
    assert score_agg([weight], t) == weight


@pytest.mark.parametrize("t", [1.6, 2.0, 5.0])
def test_high_temperature_is_clamped_and_never_above_one(t: float) -> None:
    # eval_lib gives 1.0979 at T=2.0: its penalty exponent turns negative above T=1.5
    assert score_agg([1.0, 1.0, 1.0, 1.0, 0.0], t) == score_agg([1.0, 1.0, 1.0, 1.0, 0.0], 1.0) == 0.8783


def test_low_temperature_is_clamped() -> None:
    assert score_agg([1.0, 0.7], 0.0) == score_agg([1.0, 0.7], 0.1)


def test_rejects_empty_and_out_of_range() -> None:
    with pytest.raises(ValueError):
        score_agg([])
    with pytest.raises(ValueError):
        score_agg([1.2])


@given(
    st.lists(st.sampled_from([0.0, 0.3, 0.7, 0.9, 1.0]), min_size=1, max_size=8),
    st.floats(min_value=0.0, max_value=10.0),
)
def test_always_in_unit_interval(weights: list[float], t: float) -> None:
    assert 0.0 <= score_agg(weights, t) <= 1.0
