"""The default model's choice by a validation replay on the history alone."""

from __future__ import annotations

import numpy as np

from scaleahead.bench.replay import BASELINES, prepare, validate_models, validation_score
from scaleahead.types import Series


def test_the_validation_score_is_the_worse_of_the_two_hpa_targets() -> None:
    hpa = {"violation_fraction": 0.02, "replica_seconds": 100.0}
    assert validation_score({"violation_fraction": 0.005, "replica_seconds": 90.0}, hpa) == 0.9
    assert validation_score({"violation_fraction": 0.02, "replica_seconds": 90.0}, hpa) == 2.0
    no_hpa_violations = {"violation_fraction": 0.0, "replica_seconds": 100.0}
    assert validation_score({"violation_fraction": 0.0, "replica_seconds": 80.0}, no_hpa_violations) == 0.8
    assert validation_score({"violation_fraction": 0.001, "replica_seconds": 80.0}, no_hpa_violations) == 2.0


def test_the_default_model_is_chosen_on_the_history_and_ignores_the_test_period(alibaba_two_days: Series) -> None:
    setup = prepare(alibaba_two_days, name="alibaba-2d")
    history = alibaba_two_days.between(setup.split.start, setup.split.test_start)
    best, scores = validate_models(history, candidates=("naive", "window_mean", "calibrated_naive"))
    assert set(scores) == {"naive", "window_mean", "calibrated_naive"}
    assert best == min(scores, key=lambda k: scores[k])
    assert all(np.isfinite(v) and v > 0 for v in scores.values())
    assert set(BASELINES) >= set(scores)
    # wrecking the test period changes nothing: only the history goes in
    wrecked = alibaba_two_days.values.copy()
    wrecked[setup.i0 :] = 0.0
    other = Series("x", alibaba_two_days.start, alibaba_two_days.step_s, wrecked, alibaba_two_days.unit)
    again = validate_models(
        other.between(setup.split.start, setup.split.test_start),
        candidates=("naive", "window_mean", "calibrated_naive"),
    )
    assert again == (best, scores)
