"""The reactive floor reads demand averaged over ``observedWindowSeconds`` (scaleahead/observed.py)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytest

from forecaster.base import Forecaster
from scaleahead.bench import replay as rp
from scaleahead.loop import observed_state
from scaleahead.observed import observed_demand, window_steps, windowed_means
from scaleahead.types import ClusterState, FloatArray, Series, WorkloadRef, WorkloadState

NAN = float("nan")


def test_windowed_means_average_the_finite_samples_of_the_window_and_keep_gaps_missing() -> None:
    values = np.array([1.0, 2.0, NAN, 4.0, 5.0, 6.0])
    got = windowed_means(values, 10.0, 30.0)
    np.testing.assert_allclose(got, [1.0, 1.5, NAN, 3.0, 4.5, 5.0])


@pytest.mark.parametrize(("step", "window", "k"), [(10.0, 0.0, 1), (10.0, 60.0, 6), (10.0, 65.0, 7), (60.0, 60.0, 1)])
def test_a_window_covers_whole_steps_and_at_least_the_last_sample(step: float, window: float, k: int) -> None:
    assert window_steps(step, window) == k


def test_window_zero_is_the_last_sample_alone() -> None:
    values = np.array([3.0, NAN, 9.0])
    np.testing.assert_array_equal(windowed_means(values, 10.0, 0.0), values)


def test_observed_demand_ends_at_the_last_finite_sample() -> None:
    series = Series("s", 1000.0, 10.0, np.array([2.0, 4.0, 6.0, NAN, NAN]), "")
    assert observed_demand(series, 20.0) == (5.0, 1030.0)
    assert observed_demand(series, 0.0) == (6.0, 1030.0)
    assert observed_demand(Series("e", 0.0, 10.0, np.array([NAN]), ""), 60.0) is None


def test_the_loop_attaches_each_workloads_windowed_demand() -> None:
    a, b = WorkloadRef("Deployment", "ns", "a"), WorkloadRef("Deployment", "ns", "b")
    state = ClusterState({r: WorkloadState(r, 3, 3) for r in (a, b)})
    values = np.array([10.0] * 5 + [70.0])
    history = {r: Series(r.key, 0.0, 10.0, values, "") for r in (a, b)}
    out = observed_state(state, history, {a: 60.0, b: 0.0})
    assert out.workloads[a].observed_demand == pytest.approx(20.0)
    assert out.workloads[b].observed_demand == 70.0
    assert out.workloads[a].observed_at == 60.0


class _Flat(Forecaster):
    """The baseline level at every quantile: a forecast that does not see the spike coming."""

    name = "flat"

    def __init__(self, level: float) -> None:
        self.level = level

    def fit(self, history: Sequence[Series]) -> Forecaster:
        return self

    def predict_origins(self, series: Series, origins: np.ndarray, horizon_steps: int) -> dict[float, FloatArray]:
        shape = (len(origins), horizon_steps)
        return {q: np.full(shape, self.level * (1.0 + 0.05 * i)) for i, q in enumerate((0.1, 0.5, 0.9, 0.99))}


@pytest.mark.parametrize(("window", "reacts"), [(60.0, False), (0.0, True)])
def test_one_noisy_sample_does_not_buy_replicas_unless_the_window_is_one_sample(window: float, reacts: bool) -> None:
    values = np.full(2000, 100.0)
    spike = 1500 + 100
    values[spike] = 200.0  # one 10 s sample twice the load, in the test period
    series = Series("spiky", 0.0, 10.0, values, "")
    setup = rp.prepare(series, capacity=10.0, startup_s=60.0)
    policy = rp.replay_policy_object(setup, "x", observedWindowSeconds=window)
    run = rp.run_predictive(setup, _Flat(100.0), policy, "x")
    k = spike - setup.i0
    before = int(run.desired[k])
    after = int(run.desired[k + 1])  # decided with the spike as the latest sample
    assert before == int(run.desired[k - 1])
    if reacts:
        assert after >= 200.0 / (10.0 * 0.9)  # the reactive floor: the spike's need at once
    else:
        assert after == before


@pytest.mark.parametrize(
    ("window", "says"), [(60.0, "observed 200 demand (60 s mean) needs 23"), (0.0, "observed 200 demand needs 23")]
)
def test_the_reason_says_over_which_window_demand_was_observed(window: float, says: str) -> None:
    from planner.replicas import decide_replicas
    from scaleahead.types import Forecast

    series = Series("s", 0.0, 10.0, np.full(2000, 100.0), "")
    setup = rp.prepare(series, capacity=10.0, startup_s=60.0)
    policy = rp.replay_policy_object(setup, "x", observedWindowSeconds=window)
    now = 10_000.0
    flat = {q: np.full(90, 100.0 * (1.0 + 0.05 * i)) for i, q in enumerate((0.1, 0.5, 0.9, 0.99))}
    state = WorkloadState(policy.workload, 13, 13, 200.0, now)
    action = decide_replicas(
        policy.workload, policy.spec, state, Forecast(policy.workload, now, 10.0, flat), now
    ).action
    assert action.reason.code == "reactive_floor"
    assert says in action.reason.message


def test_a_ramp_the_forecast_misses_runs_short_less_with_the_floor() -> None:
    rng = np.random.default_rng(5)
    values = 100.0 + rng.normal(0.0, 3.0, 3000)
    start = 2400  # in the test period: +8 % a minute for 40 minutes, then level
    values[start:] *= 1.08 ** np.minimum(np.arange(3000 - start), 40)
    series = Series("ramp", 0.0, 60.0, values, "req/s")
    setup = rp.prepare(series, capacity=10.0, startup_s=60.0)
    short = {}
    for window in (0.0, 300.0):
        policy = rp.replay_policy_object(setup, "x", rampFloor={"windowSeconds": window})
        run = rp.run_predictive(setup, _Flat(100.0), policy, "x")
        m = rp.compute_metrics(setup.demand, run.desired, run.allocated, run.ready, setup.capacity, setup.step_s)
        short[window] = m["violation_fraction"]
    # The reactive floor alone lags a start-up behind the rise (28 of the 600 test steps short);
    # the ramp floor provisions for where the rise leads (4).
    assert short[0.0] > 0.03
    assert short[300.0] < short[0.0] / 4
