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


def test_a_pod_is_placed_at_its_usage_at_the_peak_never_below_its_request() -> None:
    low, high = pod("web-1", "web-5d8f9c", request=1000, usage=300), pod("web-2", "web-5d8f9c", request=100, usage=300)
    out = {p.name: p.peak_cpu_m for p in with_forecast_peaks((low, high), {("shop", "web"): 2.0})}
    # Before: the larger of request and usage times the ratio, 2000 m for a pod that uses 300 m.
    assert out == {"web-1": 1000.0, "web-2": 600.0}


def test_the_loop_also_looks_a_day_back_in_the_workloads_demand() -> None:
    from scaleahead.types import Series

    ref = WorkloadRef("Deployment", "shop", "web")
    fc = Forecast(ref, 0.0, 10.0, {0.5: np.full(90, 10.0), 0.9: np.full(90, 12.0), 0.99: np.full(90, 14.0)}, "t")
    state = ClusterState(
        {ref: WorkloadState(ref, 2, 2, observed_demand=10.0, observed_at=0.0)},
        pods=(pod("web-1", "web-5d8f9c", request=100, usage=200),),
    )
    day = np.full(8640, 10.0)
    day[3000] = 30.0  # this morning's peak: three times now
    old = np.full(8640, 10.0)
    old[100] = 80.0  # yesterday's is out of the lookback
    history = {ref: Series("web", -2 * 86400.0, 10.0, np.concatenate([old, day]))}
    (only_forecast,) = with_forecast_peaks_of(state, {ref: fc}).pods
    (with_day,) = with_forecast_peaks_of(state, {ref: fc}, history).pods
    assert only_forecast.peak_cpu_m == pytest.approx(200 * 1.2)
    assert with_day.peak_cpu_m == pytest.approx(200 * 3.0)
