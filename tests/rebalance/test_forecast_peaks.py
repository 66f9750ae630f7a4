"""Pods' CPU peaks from their workload's forecast, for rebalancing in the control loop."""

from __future__ import annotations

import math

import numpy as np
import pytest

from planner.rebalance import PEAK_RATIO_BOUNDS, with_forecast_peaks
from scaleahead.loop import with_forecast_peaks_of
from scaleahead.types import ClusterState, Forecast, Pod, WorkloadRef, WorkloadState


def pod(name: str, owner: str, request: int = 500, usage: float = 0.0, ns: str = "shop") -> Pod:
    return Pod(ns, name, "n1", request, 256, owner=owner, usage_cpu_m=usage)


def test_a_pod_takes_its_workloads_ratio_through_its_replicaset_or_statefulset() -> None:
    pods = (
        pod("web-1", "web-5d8f9c", request=500, usage=800),  # a Deployment's ReplicaSet
        pod("db-0", "db", request=1000),  # a StatefulSet
        pod("other-1", "other-77aa", request=300),  # no forecast: unchanged
        pod("web-x", "web-5d8f9c", ns="staging"),  # another namespace: unchanged
    )
    out = {p.name: p for p in with_forecast_peaks(pods, {("shop", "web"): 1.5, ("shop", "db"): 2.0})}
    assert out["web-1"].peak_cpu_m == pytest.approx(800 * 1.5)  # usage above the request
    assert out["db-0"].peak_cpu_m == pytest.approx(2000)
    assert out["other-1"].peak_cpu_m == 0.0 and out["web-x"].peak_cpu_m == 0.0


@pytest.mark.parametrize(
    ("ratio", "factor"), [(0.2, PEAK_RATIO_BOUNDS[0]), (100.0, PEAK_RATIO_BOUNDS[1]), (math.nan, None)]
)
def test_the_ratio_is_clipped_and_a_nan_ratio_changes_nothing(ratio: float, factor: float | None) -> None:
    (out,) = with_forecast_peaks((pod("db-0", "db", request=1000),), {("shop", "db"): ratio})
    assert out.peak_cpu_m == (0.0 if factor is None else 1000 * factor)


def test_the_loop_takes_the_ratio_from_the_p90_peak_over_the_observed_demand() -> None:
    ref = WorkloadRef("Deployment", "shop", "web")
    steps = np.linspace(10.0, 30.0, 90)
    fc = Forecast(ref, 0.0, 10.0, {0.5: steps * 0.8, 0.9: steps, 0.99: steps * 1.2}, "test")
    state = ClusterState(
        {ref: WorkloadState(ref, 2, 2, observed_demand=15.0, observed_at=0.0)},
        pods=(pod("web-1", "web-5d8f9c", request=400),),
    )
    (out,) = with_forecast_peaks_of(state, {ref: fc}).pods
    assert out.peak_cpu_m == pytest.approx(400 * 30.0 / 15.0)
