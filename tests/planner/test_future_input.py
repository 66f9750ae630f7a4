"""Nothing stamped after ``now`` is read, in both paths (planner/replicas.py, planner/batch.py).

A forecast made after now, an observation stamped after now and an earlier decision stamped
after now are data the decision could not have had (a clock skew, or a replay reading ahead):
the forecast falls back by name, the observation counts as none, the decision is not in the
scale-down stabilization window.
"""

from __future__ import annotations

import numpy as np
from planner_helpers import flat_forecast, service_policy

from planner.batch import decide_replicas_many
from planner.replicas import ReplicaDecision, decide_replicas
from scaleahead.policy import Policy
from scaleahead.types import Forecast, ScaleTo, WorkloadState

NOW = 1_000_000.0


def _both(policy: Policy, ws: WorkloadState, fc: Forecast | None) -> tuple[ReplicaDecision, ScaleTo, str | None]:
    d = decide_replicas(policy.workload, policy.spec, ws, fc, NOW)
    clean = flat_forecast(policy.workload, NOW - 5, 30.0)
    actions, fallbacks = decide_replicas_many(
        [(policy.workload, policy.spec, ws, fc), (policy.workload, policy.spec, ws, clean)], NOW
    )
    assert d.action == actions[0]
    return d, actions[0], fallbacks[0]


def test_a_forecast_made_after_now_falls_back_instead_of_reading_its_last_step() -> None:
    # Its first step is 1000 s after now: the start-up window (now + 60 s) lies before it. It was
    # read as its last step (900 req/s, 90 replicas).
    policy = service_policy("web", capacityPerReplica=10.0)
    ws = WorkloadState(policy.workload, 5, 5, 40.0, NOW - 5)
    values = np.linspace(50, 900, 90)
    fc = Forecast(policy.workload, NOW + 1000, 10.0, {0.5: values * 0.8, 0.9: values, 0.99: values * 1.2})
    d, action, fallback = _both(policy, ws, fc)
    assert d.fallback == fallback == "reactive"
    assert action.to_replicas == 4 and action.reason.code == "fallback_reactive"
    assert action.reason.message.startswith("scale shop/web 5 -> 4: forecast made after now (origin 1000 s ahead)")
    # A moment after now is after now too.
    _, action, fallback = _both(policy, ws, flat_forecast(policy.workload, NOW + 0.5, 50.0))
    assert fallback == "reactive" and "forecast made after now (origin 0.5 s ahead)" in action.reason.message
    # Made at now: used.
    _, action, fallback = _both(policy, ws, flat_forecast(policy.workload, NOW, 50.0))
    assert fallback is None and action.reason.code == "forecast" and action.to_replicas == 5


def test_an_observation_stamped_after_now_is_no_observation() -> None:
    # 400 req/s stamped an hour after now drove the reactive floor (5 -> 40) and the fallback.
    policy = service_policy("web", capacityPerReplica=10.0)
    ws = WorkloadState(policy.workload, 5, 5, 400.0, NOW + 3600)
    d, action, fallback = _both(policy, ws, flat_forecast(policy.workload, NOW - 5, 50.0))
    # The policy's fallback is reactive, but with nothing observed the current count is kept, and
    # the plan names the rule that decided (loop reasons audit: status and metrics said "reactive").
    assert d.fallback == fallback == "current"
    assert action.to_replicas == 5 and action.reason.code == "fallback_current"
    assert action.reason.message == (
        "hold shop/web at 5: observed demand stamped after now (3600 s ahead): fallback reactive has no observed "
        "demand to react to, so it keeps the current 5 replicas"
    )
    assert action.reason.details["raw_desired"] == 5
    assert (action.reason.details["fallback"], action.reason.details["policy_fallback"]) == ("current", "reactive")
    d, action, fallback = _both(policy, ws, None)
    assert fallback == "current" and action.to_replicas == 5 and action.reason.code == "fallback_current"
    assert action.reason.message.startswith("hold shop/web at 5: no forecast: fallback reactive has no observed demand")


def test_an_earlier_decision_stamped_after_now_is_not_in_the_stabilization_window() -> None:
    policy = service_policy("web", scaleDownStabilizationSeconds=60)
    fc = flat_forecast(policy.workload, NOW - 5, 20.0)  # p90 20 -> 2 replicas; p99 24 -> 3
    future = WorkloadState(policy.workload, 10, 10, 15.0, NOW - 5, recent_desired=((NOW + 3000, 9),))
    _, action, _ = _both(policy, future, fc)
    assert action.to_replicas == 2 and "held" not in action.reason.message
    # One stamped now is in the window.
    now = WorkloadState(policy.workload, 10, 10, 15.0, NOW - 5, recent_desired=((NOW, 9),))
    _, action, _ = _both(policy, now, fc)
    assert action.to_replicas == 3 and "held at 3 by 60 s scale-down stabilization" in action.reason.message
