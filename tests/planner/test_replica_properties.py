"""Properties of replica decisions through ``planner.plan`` (planner/replicas.py as it is).

Bounds hold, replicas are monotone in forecast demand (a forecast scaled up, or every quantile
shifted up; not every stochastically larger forecast: the objective may provision a much wider
tail at a lower quantile, docs/planner.md), never below what demand observed now needs, step limits
hold, and a missing or stale forecast triggers the policy's named fallback.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from planner_helpers import flat_forecast, service_policy

from planner import plan
from scaleahead.policy import Policy
from scaleahead.types import ClusterState, Forecast, ScaleTo, WorkloadState

NOW = 1_000_000.0


@st.composite
def policies(draw: st.DrawFn) -> Policy:
    lo = draw(st.integers(0, 10))
    hi = draw(st.integers(max(lo, 1), 60))
    spec: dict[str, Any] = {
        "minReplicas": lo,
        "maxReplicas": hi,
        "maxStepUp": draw(st.integers(1, 20)),
        "maxStepDown": draw(st.integers(1, 20)),
        "scaleDownStabilizationSeconds": draw(st.sampled_from([0, 300])),
        # None: the objective chooses the level (planner.replicas.provision_levels).
        "forecastQuantile": draw(st.sampled_from([None, 0.5, 0.9, 0.99])),
        "objective": {"sloRisk": draw(st.sampled_from([3.0, 300.0, 1e5]))},
        "targetUtilization": draw(st.sampled_from([0.5, 0.8, 1.0])),
    }
    return service_policy(**spec)


@st.composite
def states(draw: st.DrawFn, policy: Policy) -> WorkloadState:
    ref = policy.workload
    history = draw(st.lists(st.tuples(st.integers(0, 600), st.integers(0, 80)), max_size=5))
    replicas = draw(st.integers(0, 80))
    return WorkloadState(
        ref,
        replicas=replicas,
        # some ready, some starting: the reactive floor's reason reads whether the ready ones run short
        ready_replicas=draw(st.integers(0, replicas)),
        observed_demand=draw(st.floats(0, 800)),
        observed_at=NOW - draw(st.integers(1, 30)),
        recent_desired=tuple((NOW - age, n) for age, n in history),
    )


def decide(policy: Policy, ws: WorkloadState, forecast: Forecast | None) -> tuple[ScaleTo, dict[Any, str]]:
    fcs = {policy.workload: forecast} if forecast is not None else {}
    result = plan(fcs, ClusterState({policy.workload: ws}), [policy], NOW)
    action = result.actions[0]
    assert isinstance(action, ScaleTo)
    return action, dict(result.fallbacks)


@settings(max_examples=150, deadline=None)
@given(data=st.data(), level=st.floats(0, 1000))
def test_replicas_stay_within_min_and_max(data: st.DataObject, level: float) -> None:
    pol = data.draw(policies())
    ws = data.draw(states(pol))
    action, _ = decide(pol, ws, flat_forecast(pol.workload, NOW, level))
    assert pol.spec.min_replicas <= action.to_replicas <= pol.spec.max_replicas


@settings(max_examples=150, deadline=None)
@given(data=st.data(), level=st.floats(0, 1000))
def test_step_limits_hold_when_the_current_count_is_within_bounds(data: st.DataObject, level: float) -> None:
    pol = data.draw(policies())
    ws = data.draw(states(pol))
    assume(pol.spec.min_replicas <= ws.replicas <= pol.spec.max_replicas)
    action, _ = decide(pol, ws, flat_forecast(pol.workload, NOW, level))
    assert action.to_replicas - action.from_replicas <= pol.spec.max_step_up
    assert action.from_replicas - action.to_replicas <= pol.spec.max_step_down


@settings(max_examples=150, deadline=None)
@given(data=st.data(), low=st.floats(0, 1000), extra=st.floats(0, 1000))
def test_replicas_are_monotone_in_forecast_demand(data: st.DataObject, low: float, extra: float) -> None:
    pol = data.draw(policies())
    ws = data.draw(states(pol))
    a, _ = decide(pol, ws, flat_forecast(pol.workload, NOW, low))
    b, _ = decide(pol, ws, flat_forecast(pol.workload, NOW, low + extra))
    assert a.to_replicas <= b.to_replicas


@settings(max_examples=200, deadline=None)
@given(data=st.data(), low=st.floats(0, 1000), shift=st.floats(0, 1000))
def test_replicas_are_monotone_when_every_quantile_rises_by_the_same_amount(
    data: st.DataObject, low: float, shift: float
) -> None:
    # A shift keeps the band's width, so the objective keeps its level; with observed demand above
    # the lower forecast's top quantile and not above the higher one's, the reactive floor held
    # only for the lower one until 2026-12-07 (a review of the planner against its issue).
    pol = data.draw(policies())
    ws = data.draw(states(pol))
    base = flat_forecast(pol.workload, NOW, low)
    up = Forecast(base.workload, base.origin, base.step_s, {q: v + shift for q, v in base.quantiles.items()})
    a, _ = decide(pol, ws, base)
    b, _ = decide(pol, ws, up)
    assert a.to_replicas <= b.to_replicas


@settings(max_examples=300, deadline=None)
@given(data=st.data(), ratio=st.floats(0, 2), all_ready=st.booleans())
def test_never_below_what_demand_observed_now_needs(data: st.DataObject, ratio: float, all_ready: bool) -> None:
    # The forecast near the observed demand (ratio x it) and often every replica ready: the cases
    # in which a forecast used to hold the count below the reactive need.
    pol = data.draw(policies())
    ws = data.draw(states(pol))
    if all_ready:
        ws = replace(ws, ready_replicas=ws.replicas)
    assume(pol.spec.min_replicas <= ws.replicas <= pol.spec.max_replicas)
    action, _ = decide(pol, ws, flat_forecast(pol.workload, NOW, ws.observed_demand * ratio))
    per = pol.spec.capacity_per_replica * pol.spec.target_utilization
    need = int(np.ceil(ws.observed_demand / per - 1e-9))
    assert action.to_replicas >= min(need, pol.spec.max_replicas, ws.replicas + pol.spec.max_step_up), (
        action.reason.message
    )


def test_the_reactive_floor_holds_when_the_forecast_says_demand_falls() -> None:
    """48 req/s observed needs 6 replicas at 10 per replica and 0.9; a p90 forecast of 45 needs 5.
    Until 2026-12-07 the floor held only when the forecast missed (observed above its p99, 54
    here) or the ready replicas ran short, so this held 5 while a forecast of 30 gave 6."""
    pol = service_policy(targetUtilization=0.9, maxStepUp=100, maxStepDown=100)
    ws = WorkloadState(pol.workload, 5, 5, observed_demand=48.0, observed_at=NOW - 5)
    low, _ = decide(pol, ws, flat_forecast(pol.workload, NOW, 30.0))
    high, _ = decide(pol, ws, flat_forecast(pol.workload, NOW, 45.0))
    assert (low.to_replicas, high.to_replicas) == (6, 6)
    assert low.reason.code == high.reason.code == "reactive_floor"
    assert "(the forecast missed)" in low.reason.message
    assert high.reason.message == (
        "scale shop/web 5 -> 6: observed 48 req/s (60 s mean) needs 6 replicas now at 10 req/s per replica and "
        "0.9 target, more than the 5 the p90 forecast needs (never below what demand observed now needs)"
    )


@settings(max_examples=60, deadline=None)
@given(data=st.data(), mode=st.sampled_from(["reactive", "current", "static"]))
def test_a_missing_forecast_triggers_the_named_fallback(data: st.DataObject, mode: str) -> None:
    fb: dict[str, Any] = {"mode": mode}
    if mode == "static":
        fb["staticReplicas"] = data.draw(st.integers(0, 20))
    pol = service_policy(fallback=fb, maxReplicas=60)
    ws = data.draw(states(pol))
    action, fallbacks = decide(pol, ws, None)
    assert fallbacks == {pol.workload: mode}
    assert action.reason.code == f"fallback_{mode}"
    assert "no forecast" in action.reason.message


@settings(max_examples=60, deadline=None)
@given(data=st.data(), mode=st.sampled_from(["reactive", "current", "static"]), age=st.integers(61, 10_000))
def test_stale_history_triggers_the_named_fallback_even_with_a_forecast(
    data: st.DataObject, mode: str, age: int
) -> None:
    fb: dict[str, Any] = {"mode": mode, "staleAfterSeconds": 60}
    if mode == "static":
        fb["staticReplicas"] = 3
    pol = service_policy(fallback=fb)
    ws = data.draw(states(pol))
    ws = WorkloadState(ws.workload, ws.replicas, 0, ws.observed_demand, NOW - age)
    action, fallbacks = decide(pol, ws, flat_forecast(pol.workload, NOW, 100.0))
    assert fallbacks == {pol.workload: mode}
    assert "stale history" in action.reason.message


def test_the_reactive_fallback_serves_the_observed_demand() -> None:
    pol = service_policy(fallback={"mode": "reactive"}, targetUtilization=0.5)
    ws = WorkloadState(pol.workload, 2, 2, observed_demand=42.0, observed_at=NOW - 5)
    action, _ = decide(pol, ws, None)
    assert action.to_replicas == 9  # 42 / (10 * 0.5) rounded up


@settings(max_examples=100, deadline=None)
@given(
    current=st.integers(0, 60),
    demand=st.floats(0, 800),
    age=st.integers(61, 100_000),
    forecast=st.booleans(),
)
def test_the_reactive_fallback_scales_out_but_never_in_on_a_stale_observation(
    current: int, demand: float, age: int, forecast: bool
) -> None:
    pol = service_policy(
        fallback={"mode": "reactive", "staleAfterSeconds": 60},
        maxReplicas=80,
        maxStepUp=100,
        maxStepDown=100,
        scaleDownStabilizationSeconds=0,
        objective={"churn": 0.0},
    )
    stale = WorkloadState(pol.workload, current, current, observed_demand=demand, observed_at=NOW - age)
    fresh = WorkloadState(pol.workload, current, current, observed_demand=demand, observed_at=NOW - 5)
    fc = flat_forecast(pol.workload, NOW, 100.0) if forecast else None
    got, fallbacks = decide(pol, stale, fc)
    want, _ = decide(pol, fresh, None)  # what the same observation asks for while fresh
    assert fallbacks == {pol.workload: "reactive"}
    assert got.to_replicas == max(current, want.to_replicas)
    assert f"{age} s old" in got.reason.message and "may scale out but not in" in got.reason.message
    assert "s old" not in want.reason.message


def test_a_forecast_made_long_ago_triggers_the_named_fallback() -> None:
    pol = service_policy(fallback={"mode": "current"})
    ws = WorkloadState(pol.workload, 4, 4, observed_demand=30.0, observed_at=NOW - 5)
    old = Forecast(pol.workload, NOW - 7200, 10.0, {0.9: np.full(8640, 500.0)})
    _, fallbacks = decide(pol, ws, old)
    assert fallbacks == {pol.workload: "current"}


@settings(max_examples=40, deadline=None)
@given(step=st.sampled_from([120, 300]), into=st.floats(0.0, 1.0), mode=st.sampled_from(["reactive", "current"]))
def test_a_step_longer_than_stale_after_is_not_stale_between_two_points(step: int, into: float, mode: str) -> None:
    """A point ends its step, so with Prometheus up to date the newest one ages by a whole step
    before the next: with stepSeconds 120 or 300 and the default staleAfterSeconds 60, a decision
    anywhere within that step plans from the forecast (found in review: 4 of 5 cycles fell back at
    300 s); a step and a second later it is stale history."""
    pol = service_policy(demand={"query": "q", "stepSeconds": step}, fallback={"mode": mode}, maxStepUp=100)
    assert pol.spec.fallback.stale_after_seconds == 60.0
    age = into * step
    ws = WorkloadState(pol.workload, 4, 4, observed_demand=30.0, observed_at=NOW - age)
    fc = flat_forecast(pol.workload, NOW - age, 100.0, steps=40, step_s=float(step))
    action, fallbacks = decide(pol, ws, fc)
    assert fallbacks == {}, action.reason.message
    assert action.to_replicas == 10  # the p90 forecast: 100 / 10
    late = WorkloadState(pol.workload, 4, 4, observed_demand=30.0, observed_at=NOW - step - 1)
    action, fallbacks = decide(pol, late, fc)
    assert fallbacks == {pol.workload: mode} and "stale history" in action.reason.message
    if mode == "reactive":
        assert f"staleAfterSeconds 60, or one step: {step} s" in action.reason.message


def test_replicas_cover_the_forecast_where_a_replica_started_now_is_ready() -> None:
    """The window a replica asked for now serves is [now + start-up, + one interval]: a peak there is
    provisioned for, and a peak before it (no new replica could serve it) is not scaled up for.
    A mutation audit of 2026-12-06 found only a randomized batch-equality test noticing a planner
    that ignored the start-up delay."""
    pol = service_policy(startupSeconds=60, maxReplicas=200, maxStepUp=200, maxStepDown=200)
    ws = WorkloadState(pol.workload, 10, 10, observed_demand=100.0, observed_at=NOW - 5)

    def spike_at(offset_s: float) -> Forecast:
        base = np.full(90, 100.0)
        base[int(offset_s // 10)] = 1000.0  # one 10-s step at now + offset
        return Forecast(pol.workload, NOW, 10.0, {0.5: base * 0.8, 0.9: base, 0.99: base * 1.2})

    ready, _ = decide(pol, ws, spike_at(60.0))
    assert ready.to_replicas == 100  # 1,000 / 10 per replica
    assert ready.reason.details["peak_at"] == NOW + 60.0
    early, _ = decide(pol, ws, spike_at(20.0))
    assert early.to_replicas == 10  # the flat 100 once a new replica is ready


@settings(max_examples=200, deadline=None)
@given(data=st.data(), level=st.floats(0, 1000))
def test_the_safety_layer_writes_what_the_planner_planned(data: st.DataObject, level: float) -> None:
    """What ``scaleahead plan`` shows is what the actuator writes: its safety layer's bounds and
    step limits, checked against the live value the plan was made from, change nothing, also for
    a current count outside the bounds (an audit found a plan's "raised to minReplicas 10" from 0
    with maxStepUp 2 written as 2: the safety layer let the step limit win, the planner the bounds)."""
    from actuator.base import LiveObject
    from actuator.safety import SafetyConfig, check

    pol = data.draw(policies())
    ws = data.draw(states(pol))
    action, _ = decide(pol, ws, flat_forecast(pol.workload, NOW, level))
    live = LiveObject(pol.workload.key, "spec.replicas", ws.replicas, "1", None)
    verdict = check(action, live, pol, NOW, NOW, SafetyConfig(max_plan_age_s=30))
    if action.to_replicas == ws.replicas:
        assert verdict.decision == "noop"
    else:
        assert (verdict.decision, verdict.value) == ("apply", action.to_replicas), verdict.notes
        # nothing clamped or step-limited; only a current count outside the bounds is noted
        assert all("is outside the bounds" in n for n in verdict.notes), verdict.notes


@pytest.mark.parametrize(
    ("spec", "current", "says"),
    [
        (
            {"minReplicas": 10, "maxStepUp": 2},
            0,
            "raised to minReplicas 10 at once, beyond the +2 step limit (the current 0 is below it)",
        ),
        (
            {"maxReplicas": 10, "maxStepDown": 2},
            50,
            "capped at maxReplicas 10 at once, beyond the -2 step limit (the current 50 is above it)",
        ),
    ],
)
def test_a_count_outside_the_bounds_goes_into_them_at_once_and_the_sentence_says_so(
    spec: dict[str, Any], current: int, says: str
) -> None:
    pol = service_policy(**spec)
    ws = WorkloadState(pol.workload, replicas=current, ready_replicas=current, observed_demand=0.0, observed_at=NOW - 5)
    action, _ = decide(pol, ws, flat_forecast(pol.workload, NOW, 0.0))
    assert action.to_replicas == 10
    assert says in action.reason.message, action.reason.message
    assert "limited to" not in action.reason.message


def test_the_stabilization_cap_names_the_time_its_forecast_peak_is_read_until() -> None:
    """A hold capped by the top quantile says until when that quantile's peak was read: the
    stabilization window's end, or the end of the first interval a new replica would serve when
    that is later ("in that window" named the stabilization window alone: policy docs audit)."""
    from datetime import UTC, datetime

    pol = service_policy(scaleDownStabilizationSeconds=300, targetUtilization=1.0)
    ws = WorkloadState(
        pol.workload,
        replicas=20,
        ready_replicas=20,
        observed_demand=40.0,
        observed_at=NOW - 5,
        recent_desired=((NOW - 30, 18),),
    )
    action, _ = decide(pol, ws, flat_forecast(pol.workload, NOW, 50.0))  # p99 60 req/s: 6 replicas
    until = datetime.fromtimestamp(NOW + 300, UTC).strftime("%H:%M:%S")
    assert action.to_replicas == 6
    assert action.reason.message.endswith(
        f"held at 6 by 300 s scale-down stabilization (not above the 6 that the p99 forecast peak 60 req/s needs "
        f"until {until})"
    ), action.reason.message
