"""The ramp floor: while observed demand rises along a significant line, provision for where it leads.

The line is fitted by scaleahead/observed.py (``demand_trend``, ``rolling_trends``); the planner
(``planner.replicas.ramp_floor``, the batch path alike) never goes below what it reaches when a
replica asked for now would be ready (docs/planner.md, "Ramp floor").
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from planner_helpers import flat_forecast, service_policy
from pydantic import ValidationError

from planner import plan
from planner.replicas import decide_replicas
from scaleahead.loop import observed_state
from scaleahead.observed import RollingTrends, demand_trend, demand_trends, rolling_trends
from scaleahead.policy import Policy
from scaleahead.types import ClusterState, ScaleTo, Series, Trend, WorkloadRef, WorkloadState

NOW = 1_000_000.0
NAN = float("nan")


# -- the fitted line ---------------------------------------------------------------------------------


def test_a_perfect_rising_line_is_fitted_exactly_and_is_infinitely_significant() -> None:
    values = 100.0 + 6.0 * np.arange(40)  # +6 per 10 s step
    tr = demand_trend(Series("s", 0.0, 10.0, values, ""), 300.0)
    assert tr is not None
    assert tr.slope == pytest.approx(0.6)  # per second
    assert tr.level == pytest.approx(100.0 + 6.0 * 40)  # the line at the end of the last step
    assert tr.at == 400.0
    assert tr.t_stat == math.inf
    assert tr.window_s == 300.0
    assert tr.samples == 30


def test_many_series_are_fitted_at_once_as_one_by_one() -> None:
    rng = np.random.default_rng(8)
    items = []
    for i in range(12):
        values = rng.normal(100.0, 10.0, 50) + rng.uniform(-3, 3) * np.arange(50)
        values[rng.integers(0, 50, 5)] = NAN
        items.append((Series(f"s{i}", 100.0 * i, (10.0, 60.0)[i % 2], values, ""), (0.0, 120.0, 300.0)[i % 3]))
    items.append((Series("empty", 0.0, 10.0, np.full(5, NAN), ""), 300.0))
    got = demand_trends(items)
    assert got == [demand_trend(s, w) for s, w in items]
    assert sum(g is not None for g in got) >= 6


def test_values_too_large_to_sum_give_no_line() -> None:
    values = np.array([1.0, 2.0, 3.0, 1e200, 5.0])
    assert demand_trend(Series("s", 0.0, 10.0, values, ""), 60.0) is None


def test_noise_without_a_rise_is_not_significant_and_a_noisy_rise_is() -> None:
    rng = np.random.default_rng(3)
    flat = 500.0 + rng.normal(0.0, 20.0, 30)
    rising = 500.0 + 4.0 * np.arange(30) + rng.normal(0.0, 20.0, 30)
    t_flat = demand_trend(Series("f", 0.0, 10.0, flat, ""), 300.0)
    t_rise = demand_trend(Series("r", 0.0, 10.0, rising, ""), 300.0)
    assert t_flat is not None and t_rise is not None
    assert abs(t_flat.t_stat) < 3.0
    assert t_rise.t_stat > 5.0
    # The same as numpy's least squares on the 30 samples of the window.
    b, a = np.polyfit(np.arange(30), rising, 1)
    assert t_rise.slope == pytest.approx(b / 10.0)
    assert t_rise.level == pytest.approx(a + b * 30)
    # The t statistic: the slope over its standard error, sqrt(SSE / (n - 2) / Sxx).
    x = np.arange(30.0)
    sse = float(((rising - (a + b * x)) ** 2).sum())
    assert t_rise.t_stat == pytest.approx(b / math.sqrt(sse / 28 / ((x - x.mean()) ** 2).sum()))


def test_the_window_ends_at_the_last_finite_sample_and_skips_gaps() -> None:
    values = np.array([NAN, 10.0, 20.0, NAN, 40.0, 50.0, NAN, NAN])
    tr = demand_trend(Series("s", 0.0, 60.0, values, ""), 300.0)  # 5 steps: indices 1..5
    assert tr is not None
    assert tr.slope == pytest.approx(10.0 / 60.0)
    assert tr.level == pytest.approx(60.0)
    assert tr.at == 360.0
    assert demand_trend(Series("s", 0.0, 60.0, values, ""), 0.0) is None  # the floor is off
    assert demand_trend(Series("s", 0.0, 60.0, np.array([NAN, 1.0, 2.0]), ""), 300.0) is None  # two samples
    assert demand_trend(Series("s", 0.0, 60.0, np.full(4, NAN), ""), 300.0) is None


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.one_of(st.floats(0, 1e4), st.just(NAN)), min_size=1, max_size=60),
    st.sampled_from([10.0, 60.0]),
    st.sampled_from([30.0, 120.0, 300.0]),
)
def test_rolling_trends_are_the_trend_of_the_series_cut_after_each_sample(
    raw: list[float], step: float, window: float
) -> None:
    values = np.array(raw)
    series = Series("s", 500.0, step, values, "")
    level, slope, t = rolling_trends(values, step, window)
    table = RollingTrends(series, window)
    for i in range(values.size):
        cut = demand_trend(Series("s", 500.0, step, values[: i + 1], ""), window)
        if not math.isfinite(values[i]):
            assert math.isnan(slope[i]) and table.at(i) is None
            continue
        got = table.at(i)
        if cut is None:
            assert got is None and math.isnan(slope[i])
            continue
        assert got is not None
        assert got.at == cut.at
        np.testing.assert_allclose(
            [got.level, got.slope, got.t_stat, level[i], slope[i], t[i]],
            [cut.level, cut.slope, cut.t_stat] * 2,
            rtol=1e-12,
        )


def test_the_loop_attaches_each_workloads_trend_over_its_ramp_window() -> None:
    a, b = WorkloadRef("Deployment", "ns", "a"), WorkloadRef("Deployment", "ns", "b")
    state = ClusterState({r: WorkloadState(r, 3, 3) for r in (a, b)})
    values = 100.0 + 10.0 * np.arange(40)
    history = {r: Series(r.key, 0.0, 10.0, values, "") for r in (a, b)}
    out = observed_state(state, history, {a: 60.0, b: 60.0}, {a: 300.0, b: 0.0})
    tr = out.workloads[a].observed_trend
    assert tr is not None and tr.slope == pytest.approx(1.0) and tr.window_s == 300.0
    assert out.workloads[b].observed_trend is None


# -- the planner ---------------------------------------------------------------------------------------


def _policy(**spec: object) -> Policy:
    # capacity 10 at utilization 1.0, start-up 60 s, p90 forecast: the forecast of 100 needs 10.
    return service_policy("web", startupSeconds=60.0, **spec)


def _state(trend: Trend | None, replicas: int = 10, observed: float = 100.0) -> WorkloadState:
    ref = _policy().workload
    return WorkloadState(ref, replicas, replicas, observed, NOW, observed_trend=trend)


def _decide(policy: Policy, ws: WorkloadState, forecast_level: float = 100.0) -> ScaleTo:
    fc = flat_forecast(policy.workload, NOW, forecast_level)
    action = decide_replicas(policy.workload, policy.spec, ws, fc, NOW, 10.0).action
    batch = plan({policy.workload: fc}, ClusterState({policy.workload: ws}), [policy], NOW, 10.0).actions[0]
    assert batch == action  # the batch path decides and words it the same
    return action


def test_a_steady_rise_scales_out_to_where_it_leads_when_new_replicas_are_ready() -> None:
    policy = _policy()
    # 100 now, +1 per second, t = 12: at now + 60 s start-up + 10 s interval it reaches 170 -> 17.
    action = _decide(policy, _state(Trend(100.0, 1.0, 12.0, NOW, 300.0, 30)))
    assert action.to_replicas == 17
    assert action.reason.code == "ramp_floor"
    text = action.reason.message
    assert "observed demand rose 60 req/s a minute (60.0%) over the last 300 s (30 samples, t = 12 >= 3)" in text
    assert "170 req/s by" in text and "needs 17" in text
    assert "the p90 forecast needs 10, observed 100 req/s (60 s mean) needs 10" in text
    assert action.reason.details["ramp_replicas"] == 17
    assert action.reason.details["ramp_demand"] == pytest.approx(170.0)


@pytest.mark.parametrize(
    ("trend", "spec"),
    [
        (Trend(100.0, 1.0, 2.9, NOW, 300.0, 30), {}),  # not significant
        (Trend(100.0, -1.0, -12.0, NOW, 300.0, 30), {}),  # falling
        (Trend(100.0, 0.0, NAN, NOW, 300.0, 30), {}),  # flat
        (Trend(100.0, 1.0, 12.0, NAN, 300.0, 30), {}),  # no time
        (Trend(NAN, 1.0, 12.0, NOW, 300.0, 30), {}),  # no level
        (Trend(100.0, 1.0, 12.0, NOW + 0.5, 300.0, 30), {}),  # ends after now: read the future (no peeking)
        (None, {}),  # not measured
        (Trend(100.0, 1.0, 12.0, NOW, 300.0, 30), {"rampFloor": {"windowSeconds": 0}}),  # turned off
        (Trend(100.0, 1.0, 12.0, NOW, 300.0, 30), {"rampFloor": {"minTStat": 20}}),  # stricter
    ],
)
def test_no_floor_without_a_significant_rise_or_when_turned_off(trend: Trend | None, spec: dict[str, object]) -> None:
    action = _decide(_policy(**spec), _state(trend))
    assert action.to_replicas == 10
    assert action.reason.code == "forecast"


def test_the_ramp_floor_holds_a_scale_down_the_forecast_asks_for() -> None:
    action = _decide(_policy(), _state(Trend(100.0, 1.0, 12.0, NOW, 300.0, 30), replicas=25), forecast_level=50.0)
    assert action.to_replicas == 17
    assert action.reason.code == "ramp_floor"


def test_an_older_trend_is_extrapolated_from_its_own_time() -> None:
    # Fitted 30 s ago at 100: at now + 70 s the line is at 200.
    action = _decide(_policy(), _state(Trend(100.0, 1.0, 12.0, NOW - 30.0, 300.0, 30)))
    assert action.to_replicas == 20


def test_the_fallback_is_not_changed_by_a_trend() -> None:
    policy = _policy()
    ws = _state(Trend(100.0, 1.0, 12.0, NOW, 300.0, 30))
    d = decide_replicas(policy.workload, policy.spec, ws, None, NOW, 10.0)
    assert d.fallback == "reactive"
    assert d.action.to_replicas == 10


@settings(max_examples=80, deadline=None)
@given(
    st.floats(0, 500),
    st.floats(-5, 5),
    st.floats(-5, 5),
    st.floats(0, 30),
    st.integers(0, 60),
    st.floats(0, 400),
)
def test_replicas_never_fall_as_the_rise_gets_steeper(
    level: float, s1: float, s2: float, t: float, replicas: int, forecast: float
) -> None:
    policy = _policy(maxReplicas=1000)
    lo, hi = sorted((s1, s2))
    a = _decide(policy, _state(Trend(level, lo, t, NOW, 300.0), replicas=replicas), forecast)
    b = _decide(policy, _state(Trend(level, hi, t, NOW, 300.0), replicas=replicas), forecast)
    assert b.to_replicas >= a.to_replicas


def test_policy_rejects_a_negative_window_or_a_non_positive_t() -> None:
    with pytest.raises(ValidationError, match="windowSeconds"):
        _policy(rampFloor={"windowSeconds": -1})
    with pytest.raises(ValidationError, match="minTStat"):
        _policy(rampFloor={"minTStat": 0})


def test_policy_rejects_a_window_of_fewer_than_three_samples() -> None:
    with pytest.raises(ValidationError, match=r"rampFloor.windowSeconds \(120\) holds fewer than 3 samples"):
        _policy(rampFloor={"windowSeconds": 120}, demand={"query": "q", "stepSeconds": 60})
    _policy(rampFloor={"windowSeconds": 180}, demand={"query": "q", "stepSeconds": 60})
    _policy(rampFloor={"windowSeconds": 0}, demand={"query": "q", "stepSeconds": 60})
    # The default 300 s at 5-minute steps is accepted and fits no line (documented).
    _policy(demand={"query": "q", "stepSeconds": 300})


def test_a_perfect_line_is_named_so_in_the_reason() -> None:
    action = _decide(_policy(), _state(Trend(100.0, 1.0, math.inf, NOW, 300.0, 30)))
    assert "(30 samples, a perfect straight line)" in action.reason.message
