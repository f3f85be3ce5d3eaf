"""The agreement statistics against hand-computed cases."""

from __future__ import annotations

import math

import pytest

from tracing_eval.agreement import (
    Confusion,
    Pair,
    agreement,
    binary,
    bootstrap,
    cells_of,
    confusion,
    f1,
    kappa,
    precision,
    recall,
    roc_auc,
    spearman,
    statistics,
)


def table(tp: int, fp: int, fn: int, tn: int) -> list[Pair]:
    return [Pair(True, True)] * tp + [Pair(True, False)] * fp + [Pair(False, True)] * fn + [Pair(False, False)] * tn


def test_kappa_precision_recall_f1_on_a_textbook_table() -> None:
    # observed agreement 35/50 = 0.7; chance (25*30 + 25*20) / 50^2 = 0.5; kappa (0.7-0.5)/(1-0.5) = 0.4
    c = confusion(cells_of(table(20, 5, 10, 15)))
    assert c == Confusion(20, 5, 10, 15)
    assert kappa(c) == pytest.approx(0.4)
    assert precision(c) == pytest.approx(0.8)
    assert recall(c) == pytest.approx(2 / 3)
    assert f1(c) == pytest.approx(40 / 55)


def test_kappa_is_zero_for_chance_and_negative_for_disagreement() -> None:
    # independent raters: each flags half, agreement exactly at chance
    assert kappa(confusion(cells_of(table(10, 10, 10, 10)))) == pytest.approx(0.0)
    assert kappa(confusion(cells_of(table(0, 10, 10, 0)))) == pytest.approx(-1.0)
    assert kappa(confusion(cells_of(table(7, 0, 0, 3)))) == pytest.approx(1.0)


def test_undefined_ratios_are_none_not_zero() -> None:
    c = confusion(cells_of(table(0, 0, 4, 6)))  # nothing flagged
    assert precision(c) is None
    assert recall(c) == 0.0
    assert kappa(Confusion()) is None


def test_binary_report_gives_zero_for_undefined_ratios() -> None:
    assert binary(Confusion(20, 5, 10, 15)) == pytest.approx(
        {"kappa": 0.4, "precision": 0.8, "recall": 2 / 3, "f1": 40 / 55}
    )
    assert binary(Confusion(0, 0, 4, 6))["precision"] == 0.0


def test_unlabelled_units_are_left_out_of_the_table() -> None:
    c = confusion(cells_of([Pair(True, None), Pair(True, True), Pair(False, False)]))
    assert c == Confusion(1, 0, 0, 1)


def test_spearman_with_ties_uses_mid_ranks() -> None:
    # x ranks 1, 2.5, 2.5, 4; y ranks 1, 3, 2, 4; sum dxdy 4.5, sum dx^2 4.5, sum dy^2 5
    pairs = [Pair(False, None, x, y) for x, y in [(1, 1), (2, 3), (2, 2), (3, 4)]]
    assert spearman(cells_of(pairs)) == pytest.approx(4.5 / math.sqrt(4.5 * 5))


def test_spearman_is_one_for_any_monotone_map_and_none_when_constant() -> None:
    up = [Pair(False, None, x, x**3) for x in range(1, 8)]
    down = [Pair(False, None, x, -x) for x in range(1, 8)]
    assert spearman(cells_of(up)) == pytest.approx(1.0)
    assert spearman(cells_of(down)) == pytest.approx(-1.0)
    assert spearman(cells_of([Pair(False, None, 1.0, y) for y in range(5)])) is None
    assert spearman(cells_of(up[:2])) is None


def test_roc_auc_counts_ties_as_half() -> None:
    # positives 3, 2; negatives 1, 2: 3>1, 3>2, 2>1 and a tie 2=2 -> 3.5 / 4
    pairs = [Pair(False, True, 3.0), Pair(False, True, 2.0), Pair(False, False, 1.0), Pair(False, False, 2.0)]
    assert roc_auc(cells_of(pairs)) == pytest.approx(0.875)
    assert roc_auc(cells_of([Pair(False, True, 1.0), Pair(False, False, 2.0)])) == 0.0
    assert roc_auc(cells_of([Pair(False, True, 1.0)])) is None  # no negatives


def test_weighted_cells_equal_the_expanded_units() -> None:
    pairs = [Pair(True, True, 0.0, 1.0)] * 3 + [Pair(False, False, 1.0, 3.0)] * 5 + [Pair(False, True, 0.7, 2.0)] * 2
    pairs += [Pair(True, False, 0.3, 3.0)]
    by_cells = statistics(cells_of(pairs))
    one_by_one = statistics([(p, 1) for p in pairs])
    assert by_cells == pytest.approx(one_by_one)


def test_bootstrap_is_seeded_and_brackets_the_estimate() -> None:
    pairs = table(30, 6, 12, 52)
    cells = cells_of(pairs)
    first = bootstrap(cells, samples=300, seed=7)
    assert first == bootstrap(cells, samples=300, seed=7)
    assert first != bootstrap(cells, samples=300, seed=8)
    point = statistics(cells)
    for name in ("kappa", "precision", "recall", "f1"):
        lo, hi = first[name]
        assert lo < point[name] < hi
        assert hi - lo < 0.5


def test_bootstrap_of_perfect_agreement_is_a_point() -> None:
    result = agreement(table(10, 0, 0, 10), samples=200)
    assert result.intervals["kappa"] == (1.0, 1.0)
    assert result.positives == 10 and result.flagged == 10 and result.n == 20
