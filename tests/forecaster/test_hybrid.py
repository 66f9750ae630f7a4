"""The LSTM's ridge options: the hybrid prior input and the quantile blend chosen on validation."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from forecaster import QUANTILES
from forecaster.baselines import Ridge
from forecaster.lstm import LSTMForecaster
from scaleahead.types import Series
from tests.forecaster.conftest import daily_series


@pytest.fixture(scope="module")
def blended(tiny_lstm_config) -> LSTMForecaster:  # type: ignore[no-untyped-def]
    return LSTMForecaster(replace(tiny_lstm_config, blend=True)).fit([daily_series(days=2.5)])


def test_a_barely_trained_lstm_defers_to_the_ridge_in_the_blend_chosen_on_validation(blended: LSTMForecaster) -> None:
    assert blended.ridge is not None
    assert blended.blend_weight < 1.0  # two epochs of a 4-unit LSTM lose to the ridge on validation
    assert blended.report.blend_weight == blended.blend_weight
    assert set(blended.report.blend_calibration) == {"0.1", "0.5", "0.9", "0.99"}


def test_the_blend_is_the_weighted_mean_of_the_lstm_and_the_ridge_quantiles(blended: LSTMForecaster) -> None:
    s = daily_series(days=3.0, seed=2)
    origins = np.array([3000, 3600, 4100])
    chosen, cal = blended.blend_weight, blended.blend_calibration
    blended.blend_calibration = np.ones(len(QUANTILES))  # the plain mix; the spread factor is checked below
    try:
        blended.blend_weight = 1.0
        alone = blended.predict_origins(s, origins, 15)
        blended.blend_weight = 0.0
        ridge_only = blended.predict_origins(s, origins, 15)
        blended.blend_weight = 0.25
        blend = blended.predict_origins(s, origins, 15)
        blended.blend_calibration = np.array([0.5, 1.0, 2.0, 2.0])
        widened = blended.predict_origins(s, origins, 15)
    finally:
        blended.blend_weight, blended.blend_calibration = chosen, cal
    for q in QUANTILES:
        np.testing.assert_allclose(blend[q], 0.25 * alone[q] + 0.75 * ridge_only[q], rtol=1e-9)
    # the blend's own spread calibration scales each quantile's distance from the median
    med = blend[0.5]
    np.testing.assert_allclose(widened[0.5], med)
    np.testing.assert_allclose(widened[0.9], med + 2.0 * (blend[0.9] - med), rtol=1e-9)
    np.testing.assert_allclose(widened[0.1], np.maximum(med + 0.5 * (blend[0.1] - med), 0.0), rtol=1e-9)


def test_the_ridge_inside_the_lstm_is_fitted_on_the_training_span_only(blended: LSTMForecaster) -> None:
    h = daily_series(days=2.5)
    cut = int(len(h) * (1 - blended.config.val_fraction))  # the validation span is left out
    reference = Ridge()
    reference.fit([Series(h.name, h.start, h.step_s, h.values[:cut], h.unit)], horizon_steps=15)
    assert blended.ridge is not None
    np.testing.assert_allclose(blended.ridge.state()["coef"], reference.state()["coef"])
