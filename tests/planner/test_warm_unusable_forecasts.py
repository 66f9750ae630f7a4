"""An invocation forecast the warm-pool rule cannot read falls back, by name, as a service's does.

A forecast without a valid time (origin NaN or infinite, step not a positive finite number), or
one whose probabilities from the current step on hold a NaN, an infinity or a value outside
[0, 1], is no forecast: the policy's fallback decides and the reason says what was wrong
(review 2026-12-07: origin NaN raised out of ``plan``, all-NaN read as "0 chance", NaN later
steps counted as above the threshold, 170 % was a probability, a step of inf read "inf min").
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest
from planner_helpers import function_policy, invocation_forecast

from planner import plan
from planner.warm import decide_warm_pool
from scaleahead.types import ClusterState, InvocationForecast, WorkloadState

NOW = 1_000_000.0
NAN, INF = math.nan, math.inf


def _state(ref, warm: int = 1) -> WorkloadState:  # type: ignore[no-untyped-def]
    # called 2 minutes ago, observed in the newest step: the reactive fallback keeps one warm
    return WorkloadState(ref, 0, 0, observed_demand=0.0, observed_at=NOW, warm_instances=warm, last_active_at=NOW - 120)


@pytest.mark.parametrize(
    ("origin", "step", "probs", "cause"),
    [
        (NAN, 60.0, [0.5] * 5, "invocation forecast without a valid time (origin nan, step 60 s)"),
        (INF, 60.0, [0.5] * 5, "invocation forecast without a valid time (origin inf, step 60 s)"),
        (NOW, INF, [0.5] * 5, "invocation forecast without a valid time (origin 1e+06, step inf s)"),
        (NOW, NAN, [0.5] * 5, "invocation forecast without a valid time (origin 1e+06, step nan s)"),
        (NOW, 0.0, [0.5] * 5, "invocation forecast without a valid time (origin 1e+06, step 0 s)"),
        (NOW, -60.0, [0.5] * 5, "invocation forecast without a valid time (origin 1e+06, step -60 s)"),
        (NOW, 60.0, [NAN] * 5, "invocation forecast not finite (NaN or infinite probabilities"),
        (NOW, 60.0, [0.5, NAN, NAN, NAN, 0.0], "invocation forecast not finite (NaN or infinite probabilities"),
        (NOW, 60.0, [0.01, 0.01, INF], "invocation forecast not finite (NaN or infinite probabilities"),
        (NOW, 60.0, [-0.5, 1.7, 0.2], "invocation forecast probabilities outside [0, 1] (-0.5 to 1.7 in the"),
        (NOW, 60.0, [0.01, 0.01, 1.7], "invocation forecast probabilities outside [0, 1] (0.01 to 1.7 in the"),
        (NOW, 60.0, [0.5, -0.01, 0.5], "invocation forecast probabilities outside [0, 1] (-0.01 to 0.5 in the"),
    ],
)
def test_an_unusable_invocation_forecast_takes_the_policy_fallback_and_says_why(origin, step, probs, cause) -> None:  # type: ignore[no-untyped-def]
    pol = function_policy(minProbability=0.1, keepAliveSeconds=600)
    ref = pol.workload
    fc = InvocationForecast(ref, origin, step, np.asarray(probs, dtype=np.float64), 120.0, "t")
    d = decide_warm_pool(ref, pol.spec, _state(ref), fc, NOW)
    a = d.action
    assert d.fallback == "reactive" and a.reason.code == "fallback_reactive", a.reason.message
    assert a.to_instances == 1 and math.isnan(d.probability)
    assert a.reason.message.startswith(f"hold fns/fn at 1 warm: {cause}"), a.reason.message
    assert "last invoked 2 min ago, within the 10 min keep-alive" in a.reason.message
    assert a.reason.details["cause"].startswith(cause)
    # A static fallback is named the same way.
    static = function_policy(minProbability=0.1, fallback={"mode": "static", "staticReplicas": 1})
    d = decide_warm_pool(ref, static.spec, _state(ref, warm=0), fc, NOW)
    assert d.fallback == "static" and d.action.to_instances == 1
    assert d.action.reason.message.startswith(f"pre-warm fns/fn 0 -> 1: {cause}")
    assert d.action.reason.message.endswith(": fallback static 1 warm instances")


def test_a_bad_value_in_a_step_already_past_is_not_read() -> None:
    # Made a step ago (not stale at 60-s steps): the decision reads from the second step on.
    pol = function_policy(minProbability=0.1)
    ref = pol.workload
    fc = invocation_forecast(ref, NOW - 60, [NAN, 0.5, 0.5, 0.0, 0.0])
    a = decide_warm_pool(ref, pol.spec, _state(ref), fc, NOW).action
    assert a.reason.code == "warm_forecast" and a.to_instances == 1 and a.keep_warm_s == 120.0
    fc = invocation_forecast(ref, NOW - 60, [1.7, 0.0, 0.0, 0.0, 0.0])
    a = decide_warm_pool(ref, pol.spec, _state(ref), fc, NOW).action
    assert a.reason.code == "cold_ok"


def test_one_function_with_an_unusable_forecast_does_not_fail_the_plan_of_the_others() -> None:
    good, bad, late = function_policy("good"), function_policy("bad"), function_policy("late")
    states = {p.workload: _state(p.workload) for p in (good, bad, late)}
    inv = {
        good.workload: invocation_forecast(good.workload, NOW, [0.9] * 5),
        bad.workload: replace(invocation_forecast(bad.workload, NOW, [0.9] * 5), origin=NAN),
        late.workload: invocation_forecast(late.workload, NOW, [0.9, NAN, NAN, 0.0, 0.0]),
    }
    result = plan({}, ClusterState(workloads=states), [good, bad, late], NOW, invocations=inv)
    codes = [(a.workload.name, a.reason.code) for a in result.actions]
    assert codes == [("good", "warm_forecast"), ("bad", "fallback_reactive"), ("late", "fallback_reactive")]
    assert dict(result.fallbacks) == {bad.workload: "reactive", late.workload: "reactive"}
