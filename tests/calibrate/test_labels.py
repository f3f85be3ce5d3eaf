"""How human label values become positive flags and ratings, and how results become flags."""

from __future__ import annotations

import pytest

from tracing_eval.calibrate import CalibrationError, Condition, LabelPath, LabelRule, Prediction


def test_label_paths_address_nested_keys_with_spaces() -> None:
    path = LabelPath.parse("thread_labels.human (overall).mean")
    assert path.keys == ("human (overall)", "mean")
    assert path.get({"human (overall)": {"mean": 4.3}}) == (True, 4.3)
    assert path.get({"other": 1}) == (False, None)
    with pytest.raises(CalibrationError, match="address one of them"):
        LabelPath.parse("thread_labels.human (overall)").get({"human (overall)": {"raw": [4], "mean": 4}})


def test_conditions_compare_numbers_or_match_values() -> None:
    assert Condition.parse("<=2").holds(2) is True
    assert Condition.parse("<=2").holds("3") is False
    assert Condition.parse("<=2").holds("N/A") is None
    assert Condition.parse("==0").holds(0.0) is True
    assert Condition.parse("0").holds(0.0) is True, "a value list matches numbers by value"
    assert Condition.parse("full_refusal, partial_refusal").holds("partial_refusal") is True
    assert Condition.parse("true").holds(True) is True and Condition.parse("true").holds(False) is False


def test_annotator_lists() -> None:
    low = Condition.parse("<=2")
    assert LabelRule(low, "majority").read([1, 2, 3]) == (True, 2.0)
    assert LabelRule(low, "majority").read([1, 3, 3, 2]) == (False, 2.25), "half is not a majority"
    assert LabelRule(low, "mean").read([1, 3, 3, 2]) == (False, 2.25)
    assert LabelRule(low, "all").read([1, 2, "N/A"]) == (True, 1.5), "N/A is left out"
    assert LabelRule(low, "any").read([3, 3, 2]) == (True, 8 / 3)
    assert LabelRule(low).read(["N/A"]) is None
    assert LabelRule(None).read([4, 5]) == (None, 4.5), "no condition: a rating only"
    assert LabelRule(None).read("full_refusal") is None
    refusal = Condition.parse("full_refusal")
    assert LabelRule(refusal).read(["full_refusal", "full_refusal", "full_compliance"]) == (True, None)


def test_predictions() -> None:
    ok = {
        "status": "ok",
        "score": 0.3,
        "label": "mostly",
        "passed": False,
        "evidence": {"abandoned": True, "x": [1, 2]},
    }
    assert Prediction().read(ok) == (True, pytest.approx(0.7))
    assert Prediction(labels=frozenset({"fully"})).read(ok)[0] is False
    assert Prediction(threshold=0.2).read(ok)[0] is False
    assert Prediction(evidence="abandoned", value="evidence.x").read(ok) == (True, 2.0)
    assert Prediction().read({"status": "not_applicable"}) == (False, 0.0)
    assert Prediction(not_applicable="skip").read(None) == "not_applicable"
    assert Prediction().read({"status": "error"}) == "error"
    with pytest.raises(CalibrationError, match="write score or evidence.FIELD"):
        Prediction(value="label")
