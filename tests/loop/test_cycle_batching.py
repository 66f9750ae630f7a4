"""One cycle forecasts all its workloads in one batched call, even when some histories are bad.

Regression guard for the in-memory 1,000-workload cycle that took 2.2 s in its forecast phase
against 0.15 s for the batch alone: one series whose input windows were all missing made the
LSTM's ``forecast_many`` raise, and ``run_once`` then forecast all 1,000 workloads one by one.
The assertions count calls (batched forward passes, single forecasts), never wall time.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from functools import lru_cache

import numpy as np
import pytest

from forecaster.base import Forecaster
from forecaster.baselines import Naive
from forecaster.lstm import LSTMConfig, LSTMForecaster
from scaleahead.bench.speed import policies_for
from scaleahead.errors import DataError
from scaleahead.loop import Deps, run_once
from scaleahead.policy import Policy
from scaleahead.settings import Settings
from scaleahead.traces import load_series
from scaleahead.tracesource import InMemoryTarget
from scaleahead.types import Forecast, Series, WorkloadRef

os.environ.setdefault("OMP_NUM_THREADS", "1")

STEP = 10.0
DAY = 86400.0
N = 24


@lru_cache(maxsize=1)
def _nasa() -> Series:
    return load_series("nasa-10s")


class FixedHistory:
    def __init__(self, series: Mapping[WorkloadRef, Series]) -> None:
        self.series = series

    def read(self, policies: Sequence[Policy], now: float) -> Mapping[WorkloadRef, Series]:
        return {p.workload: self.series[p.workload].before(now) for p in policies}


def _workloads(n: int = N) -> tuple[list[Policy], dict[WorkloadRef, Series], float]:
    """``n`` workloads, each 1.1 days of real NASA demand (a different hour each), ending at ``now``.

    Workload 0's last 25 hours are missing (an outage): it has observed values before ``now``, but
    none in any of the LSTM's input windows (last 6 h, around one day and one week back).
    """
    trace = _nasa()
    length = int(1.1 * DAY / STEP)
    first = int(3 * DAY / STEP)  # clear of the trace's start
    now = trace.start + 10 * DAY
    policies = policies_for(n, STEP)
    series = {}
    for k, p in enumerate(policies):
        off = first + k * 360
        values = trace.values[off : off + length].copy()
        values = np.where(np.isfinite(values), values, 0.0)  # the other workloads have no gaps
        if k == 0:
            values[-int(25 * 3600 / STEP) :] = np.nan
        series[p.workload] = Series(f"nasa@{off}", now - length * STEP, STEP, values, "requests/10s")
    return policies, series, now


@lru_cache(maxsize=1)
def _lstm() -> LSTMForecaster:
    import torch

    torch.set_num_threads(1)
    # Untrained weights: the batching, windowing and fallback code is the trained model's code.
    return LSTMForecaster.untrained(STEP, LSTMConfig(hidden=4, mlp=8, threads=1))


class Counting:
    """Counts what the loop asks of a forecaster; ``poison`` makes any batch holding it fail."""

    def __init__(self, inner: Forecaster, poison: WorkloadRef | None = None) -> None:
        self.inner, self.poison = inner, poison
        self.batches: list[int] = []
        self.singles = 0

    def forecast_many(
        self, items: Sequence[tuple[WorkloadRef, Series]], origin: float, horizon_steps: int
    ) -> list[Forecast]:
        self.batches.append(len(items))
        if any(ref == self.poison for ref, _ in items):
            raise DataError(f"{self.poison} is poisoned (injected)")
        return self.inner.forecast_many(items, origin, horizon_steps)

    def forecast(self, workload: WorkloadRef, history: Series, origin: float, horizon_steps: int) -> Forecast:
        self.singles += 1
        return self.inner.forecast(workload, history, origin, horizon_steps)


def test_the_lstm_batch_forecasts_a_series_with_empty_input_windows_in_the_same_forward_pass() -> None:
    model = _lstm()
    policies, series, now = _workloads()
    items = [(p.workload, series[p.workload].before(now)) for p in policies]
    passes = []
    raw = model._raw_predict

    def counted(seq: np.ndarray, static: np.ndarray) -> np.ndarray:
        passes.append(len(seq))
        return raw(seq, static)

    model._raw_predict = counted  # type: ignore[method-assign]
    try:
        many = model.forecast_many(items, now, 90)
    finally:
        del model._raw_predict
    assert passes == [N - 1]  # one forward pass for every workload whose windows have data
    assert model.last_fallback_origins == 1
    assert [fc.workload for fc in many] == [ref for ref, _ in items]
    # The bad one gets the named per-origin fallback: its last observed value, seen before now.
    last = series[policies[0].workload].values
    last_seen = float(last[np.flatnonzero(np.isfinite(last))[-1]])
    for q in many[0].quantiles.values():
        np.testing.assert_allclose(q, last_seen)
    # And every forecast is what forecasting that workload alone gives.
    for (ref, s), fc in zip(items, many, strict=True):
        one = model.forecast(ref, s, now, 90)
        for q, values in fc.quantiles.items():
            np.testing.assert_allclose(values, one.quantiles[q], rtol=1e-5, atol=1e-6)


def test_a_cycle_with_a_partly_missing_history_makes_one_batched_call_and_no_single_forecasts() -> None:
    policies, series, now = _workloads()
    counting = Counting(_lstm())
    deps = Deps(FixedHistory(series), counting, InMemoryTarget(default_replicas=3), None, policies)  # type: ignore[arg-type]
    report = run_once(deps, Settings(), now)
    assert counting.batches == [N]
    assert counting.singles == 0
    assert "forecast" not in report.errors
    assert set(report.forecasts) == {p.workload for p in policies}


def test_one_failing_series_leaves_the_others_batched_and_only_that_one_without_a_forecast() -> None:
    policies, series, now = _workloads(64)
    bad = policies[37].workload
    counting = Counting(Naive().fit(list(series.values())), poison=bad)
    deps = Deps(FixedHistory(series), counting, InMemoryTarget(default_replicas=3), None, policies)  # type: ignore[arg-type]
    report = run_once(deps, Settings(), now)
    assert counting.singles == 0
    # the whole batch, then halves around the bad one: at most 1 + 2 log2(n) calls, not n
    assert len(counting.batches) <= 1 + 2 * math.ceil(math.log2(64))
    assert counting.batches[0] == 64
    assert set(report.forecasts) == {p.workload for p in policies} - {bad}
    assert "poisoned" in report.errors[bad.key]
    assert bad in report.plan.fallbacks  # its policy's fallback plans it


@pytest.mark.parametrize("bad_index", [0, 5])
def test_an_all_missing_history_is_skipped_before_the_batch(bad_index: int) -> None:
    policies, series, now = _workloads(8)
    ref = policies[bad_index].workload
    s = series[ref]
    series[ref] = Series(s.name, s.start, s.step_s, np.full(len(s), np.nan), s.unit)
    counting = Counting(_lstm())
    deps = Deps(FixedHistory(series), counting, InMemoryTarget(default_replicas=3), None, policies)  # type: ignore[arg-type]
    report = run_once(deps, Settings(), now)
    assert counting.batches == [7] and counting.singles == 0
    assert ref not in report.forecasts and "no usable history" in report.errors[ref.key]


def test_a_baseline_started_without_history_is_fitted_on_the_first_cycles_history() -> None:
    policies, series, now = _workloads(4)
    model = Naive()  # what `scaleahead run` starts with when Prometheus was down at start-up
    assert model.needs_fit
    deps = Deps(FixedHistory(series), model, InMemoryTarget(default_replicas=3), None, policies)
    report = run_once(deps, Settings(), now)
    assert not model.needs_fit
    assert set(report.forecasts) == {p.workload for p in policies}
    fc = report.forecasts[policies[1].workload]
    assert (fc.quantiles[max(fc.quantiles)] - fc.quantiles[min(fc.quantiles)]).max() > 0  # a real spread


def test_a_baseline_given_too_short_a_history_falls_back_and_says_why() -> None:
    policies, series, now = _workloads(2)
    short = {ref: s.between(now - 600.0, now) for ref, s in series.items()}  # 10 minutes < the 15-min horizon
    deps = Deps(FixedHistory(short), Naive(), InMemoryTarget(default_replicas=3), None, policies)
    report = run_once(deps, Settings(), now)
    assert not report.forecasts
    assert set(report.plan.fallbacks) == {p.workload for p in policies}
    assert "no forecast uncertainty" in report.errors[policies[1].workload.key]
