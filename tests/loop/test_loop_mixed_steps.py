"""One cycle over workloads of different step sizes: functions and services, 60 s and 10 s.

Each series is forecast the horizon ahead in its own steps; warm-pool functions are planned from
their invocation forecasts only (never through the demand forecaster); a forecaster that cannot be
fitted on the cycle's history is an error of that cycle, and the policies' fallbacks apply.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

from forecaster.baselines import Naive
from scaleahead.loop import Deps, run_once
from scaleahead.settings import Settings
from scaleahead.tracesource import InMemoryTarget
from scaleahead.types import ScaleTo, Series, SetWarmPool
from tests.serverless.conftest import FixedHistory

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "planner"))
from planner_helpers import function_policy, service_policy  # noqa: E402

NOW = 1_000_000.0


def _series(step: float, n: int, seed: int) -> Series:
    values = np.random.default_rng(seed).poisson(40, n).astype(np.float64)
    return Series("s", NOW - n * step, step, values)


def test_each_series_is_forecast_the_horizon_ahead_in_its_own_steps_whatever_the_policy_order() -> None:
    fn, web = function_policy("fn"), service_policy("web", startupSeconds=200)
    history = {web.workload: _series(10.0, 2000, 1), fn.workload: _series(60.0, 2000, 2)}
    model = Naive().fit([history[web.workload]])
    for order in ([fn, web], [web, fn]):
        report = run_once(
            Deps(FixedHistory(history), model, InMemoryTarget(default_replicas=5), None, order), Settings(), NOW, True
        )
        fc = report.forecasts[web.workload]
        assert fc.horizon_s == 900.0 and fc.horizon_steps == 90
        (action,) = [a for a in report.plan.actions if isinstance(a, ScaleTo)]
        assert not action.reason.code.startswith("fallback"), action.reason.message
        assert fn.workload not in report.forecasts  # planned from its invocation forecast
        assert not report.errors and not report.plan.fallbacks
        assert [a.workload for a in report.plan.actions if isinstance(a, SetWarmPool)] == [fn.workload]


def test_a_forecaster_that_cannot_be_fitted_on_the_cycles_history_is_a_cycle_error_not_a_crash() -> None:
    # two services at different steps: the unfitted baseline cannot fit them together
    web, batch = service_policy("web"), service_policy("batch", demand={"query": "q", "stepSeconds": 60})
    history = {web.workload: _series(10.0, 2000, 1), batch.workload: _series(60.0, 2000, 2)}
    deps = Deps(FixedHistory(history), Naive(), InMemoryTarget(default_replicas=5), None, [web, batch])
    report = run_once(deps, Settings(), NOW, True)
    assert report.errors["forecast_fit"].startswith("fitting naive on this cycle's history failed: ")
    assert set(report.plan.fallbacks) == {web.workload, batch.workload}
    # an unfitted baseline with a function beside a service fits on the service alone
    fn = function_policy("fn")
    history[fn.workload] = _series(60.0, 2000, 3)
    report = run_once(
        Deps(FixedHistory(history), Naive(), InMemoryTarget(default_replicas=5), None, [fn, web]), Settings(), NOW, True
    )
    assert not report.errors and not report.plan.fallbacks


def test_run_forever_skips_the_ticks_a_slow_cycle_missed() -> None:
    from scaleahead.clock import VirtualClock
    from scaleahead.loop import run_forever

    web = service_policy("web")
    history = {web.workload: _series(10.0, 2000, 1)}
    deps = Deps(
        FixedHistory(history), Naive().fit(list(history.values())), InMemoryTarget(default_replicas=5), None, [web]
    )
    clock = VirtualClock(NOW)
    starts: list[float] = []

    def slow(report: object, lateness: float) -> None:
        starts.append(clock.now())
        if len(starts) == 2:
            clock.sleep(35.0)  # the second cycle takes 35 s: the ticks at +20 and +30 are missed

    run_forever(deps, Settings(), clock, stop=lambda: len(starts) >= 4, on_cycle=slow)
    assert [t - NOW for t in starts] == [0.0, 10.0, 50.0, 60.0]
