"""The idle-time hazard forecaster of invocation probabilities."""

from __future__ import annotations

import numpy as np

from forecaster.invocations import InvocationForecaster
from scaleahead.types import WorkloadRef


def test_a_periodic_function_is_forecast_likely_at_its_period_and_unlikely_between() -> None:
    counts = np.zeros((1, 200), dtype=np.int64)
    counts[0, ::7] = 1  # every 7 minutes; the last call is at minute 196
    model = InvocationForecaster(1, horizon=10).fit(counts)
    p = model.predict()[0]  # minutes 200.. : idle 4, 5, ..., 13
    assert p[3] > 0.8  # idle 7: the period
    assert p[0] < 0.2 and p[1] < 0.2 and p[2] < 0.2


def test_a_function_never_seen_gets_probability_zero_and_infinite_idle_time() -> None:
    model = InvocationForecaster(2).fit(np.array([[0, 0, 0], [1, 0, 0]]))
    fc = model.forecasts([WorkloadRef("F", "n", "a"), WorkloadRef("F", "n", "b")], origin=180.0)
    a = fc[WorkloadRef("F", "n", "a")]
    assert (a.probability == 0).all() and a.idle_s == float("inf")
    assert fc[WorkloadRef("F", "n", "b")].idle_s == 180.0


def test_probabilities_are_between_zero_and_one_for_random_traffic() -> None:
    rng = np.random.default_rng(3)
    counts = rng.poisson(rng.uniform(0, 2, size=(20, 1)), size=(20, 300))
    p = InvocationForecaster(20).fit(counts).predict()
    assert p.shape == (20, 15)
    assert (p >= 0).all() and (p <= 1).all()


def test_a_busy_function_is_forecast_almost_surely_called_next_minute() -> None:
    counts = np.ones((1, 120), dtype=np.int64)
    assert InvocationForecaster(1).fit(counts).predict()[0, 0] > 0.9
