"""The objective chooses the level services are provisioned at (planner.replicas.provision_levels).

One more replica is worth adding while the forecast probability that it is needed, times the weight
of a second short (``objective.sloRisk``), is at least the cost of a replica-second. These tests
check that rule by hand in the exponential tail, its consequences (narrow forecasts get a higher
quantile than wide ones, more weight on SLO risk never means fewer replicas), and the reasons.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from planner_helpers import service_policy

from planner import plan
from planner.replicas import MAX_LEVEL, provision_levels
from scaleahead.errors import ConfigError
from scaleahead.policy import parse_policies
from scaleahead.types import ClusterState, Forecast, ScaleTo, WorkloadState

NOW = 1_000_000.0


def tail_forecast(ref, q90: float, b: float, steps: int = 90) -> Forecast:  # type: ignore[no-untyped-def]
    """A forecast whose upper tail above its p90 is exponential with scale ``b``."""
    one = np.ones(steps)
    return Forecast(ref, NOW, 10.0, {0.5: one * (q90 - 2 * b), 0.9: one * q90, 0.99: one * (q90 + b * math.log(10.0))})


def survival(x: float, q90: float, b: float) -> float:
    return 0.1 * math.exp(-(x - q90) / b)


def objective_policy(slo_risk: float, **spec):  # type: ignore[no-untyped-def]
    return service_policy(forecastQuantile=None, objective={"cost": 1.0, "sloRisk": slo_risk}, **spec)


def decide(pol, fc: Forecast) -> ScaleTo:  # type: ignore[no-untyped-def]
    ws = WorkloadState(pol.workload, 1, 1, observed_demand=1.0, observed_at=NOW - 5)
    action = plan({pol.workload: fc}, ClusterState({pol.workload: ws}), [pol], NOW).actions[0]
    assert isinstance(action, ScaleTo)
    return action


@pytest.mark.parametrize("slo_risk", [300.0, 1000.0, 5000.0, 12000.0])
def test_each_replica_is_added_exactly_while_its_chance_of_being_needed_pays_for_it(slo_risk: float) -> None:
    pol = objective_policy(slo_risk)  # 10 demand units per replica at target utilization 1
    q90, b, per = 100.0, 10.0, 10.0
    replicas = decide(pol, tail_forecast(pol.workload, q90, b)).to_replicas
    ratio = 1.0 / slo_risk

    def gain(k: int) -> float:  # how much the k-th replica cuts the chance of running short
        return survival(per * (k - 1), q90, b) - survival(per * k, q90, b)

    assert replicas > q90 / per  # in the tail
    assert gain(replicas) >= ratio > gain(replicas + 1)


def test_the_level_never_goes_past_the_cap_however_heavy_the_weight() -> None:
    q = np.array([[[90.0], [100.0], [110.0]]])
    _, level = provision_levels((0.5, 0.9, 0.99), q, np.array([10.0]), np.array([1e-12]))
    assert float(level[0, 0]) == pytest.approx(MAX_LEVEL)


def test_a_narrow_forecast_is_provisioned_at_a_higher_quantile_than_a_wide_one() -> None:
    q = np.array([[[90.0], [100.0], [110.0]], [[0.0], [100.0], [400.0]]])  # p0.5, p0.9, p0.99
    _, level = provision_levels((0.5, 0.9, 0.99), q, np.array([10.0, 10.0]), np.array([1e-3, 1e-3]))
    narrow, wide = float(level[0, 0]), float(level[1, 0])
    assert narrow > 0.99 > wide > 0.9


def test_more_weight_on_slo_risk_never_means_fewer_replicas() -> None:
    fc_args = (100.0, 10.0)
    counts = []
    for w in (0.0, 1.0, 3.0, 10.0, 100.0, 1e3, 1e4, 1e6):
        pol = objective_policy(w)
        counts.append(decide(pol, tail_forecast(pol.workload, *fc_args)).to_replicas)
    assert counts == sorted(counts)
    assert counts[0] < counts[-1]


def test_with_no_weight_on_slo_risk_the_median_is_provisioned() -> None:
    pol = objective_policy(0.0)
    action = decide(pol, tail_forecast(pol.workload, 100.0, 10.0))
    assert action.to_replicas == 8  # p50 = 80 at 10 per replica
    assert "p50 forecast 80" in action.reason.message
    assert "weighs only cost" in action.reason.message


def test_the_reason_names_the_chosen_quantile_and_the_weight_behind_it() -> None:
    pol = objective_policy(1000.0)
    action = decide(pol, tail_forecast(pol.workload, 100.0, 10.0))
    msg = action.reason.message
    level = action.reason.details["quantile"]
    assert isinstance(level, float) and 0.99 < level < 1.0
    assert f"p{level * 100:.3g} forecast" in msg
    assert "a second short weighing 1,000 replica-seconds" in msg


def test_a_fixed_forecast_quantile_overrides_the_objective() -> None:
    pol = service_policy(forecastQuantile=0.9, objective={"sloRisk": 1e6})
    action = decide(pol, tail_forecast(pol.workload, 100.0, 10.0))
    assert action.to_replicas == 10
    assert "p90 forecast 100" in action.reason.message
    assert "replica-seconds" not in action.reason.message


def test_a_policy_that_weighs_neither_cost_nor_slo_risk_is_refused() -> None:
    text = """
apiVersion: scaleahead.io/v1alpha1
kind: PredictiveScalingPolicy
metadata: {name: web}
spec:
  target: {name: web}
  demand: {query: q}
  capacityPerReplica: 10
  objective: {cost: 0, sloRisk: 0}
"""
    with pytest.raises(ConfigError, match="both 0"):
        parse_policies(text, "policy.yaml")


def _flat(ref, level: float) -> Forecast:  # type: ignore[no-untyped-def]
    one = np.ones(90)
    return Forecast(ref, NOW, 10.0, {0.5: one * level, 0.9: one * level, 0.99: one * level})


def _down(churn: float, current: int, level: float, stabilization: float = 60.0) -> ScaleTo:
    pol = service_policy(
        objective={"cost": 1.0, "sloRisk": 80.0, "churn": churn}, scaleDownStabilizationSeconds=stabilization
    )
    ws = WorkloadState(pol.workload, current, current, observed_demand=level, observed_at=NOW - 5)
    action = plan({pol.workload: _flat(pol.workload, level)}, ClusterState({pol.workload: ws}), [pol], NOW).actions[0]
    assert isinstance(action, ScaleTo)
    return action


def test_a_scale_down_that_saves_less_than_two_scale_events_is_not_made() -> None:
    # 60 s window: removing 1 of 6 replicas saves 60 replica-seconds, less than 2 x 100.
    kept = _down(churn=100.0, current=6, level=50.0)
    assert kept.to_replicas == 6
    assert "not removing 1: that saves 60 replica-seconds over the next 60 s" in kept.reason.message
    assert "objective.churn 100 each" in kept.reason.message
    # Removing 3 of 8 saves 180, still less than 200; removing 4 of 9 saves 240: made.
    assert _down(churn=100.0, current=8, level=50.0).to_replicas == 8
    assert _down(churn=100.0, current=9, level=50.0).to_replicas == 5


def test_the_default_churn_weight_never_stops_a_scale_down() -> None:
    for stabilization in (0.0, 60.0, 300.0):
        action = _down(churn=0.1, current=6, level=50.0, stabilization=stabilization)
        assert action.to_replicas == 5
        assert "not removing" not in action.reason.message


def test_churn_never_delays_a_scale_up() -> None:
    assert _down(churn=1e6, current=2, level=50.0).to_replicas == 5


def test_max_replicas_is_enforced_whatever_the_churn_weight() -> None:
    pol = service_policy(objective={"cost": 1.0, "sloRisk": 80.0, "churn": 1e6}, maxReplicas=4)
    ws = WorkloadState(pol.workload, 6, 6, observed_demand=10.0, observed_at=NOW - 5)
    action = plan({pol.workload: _flat(pol.workload, 10.0)}, ClusterState({pol.workload: ws}), [pol], NOW).actions[0]
    assert isinstance(action, ScaleTo) and action.to_replicas == 4


def test_a_level_near_one_is_printed_with_the_digits_that_tell_it_from_p100() -> None:
    from planner.replicas import pct

    assert [pct(x) for x in (0.9, 0.99731, 0.999, 0.9995, 0.9999, 0.99999, 1.0)] == [
        "p90", "p99.7", "p99.9", "p99.95", "p99.99", "p99.999", "p100",
    ]  # fmt: skip
