"""The control loop forecasts invocations for functions with a warm pool and plans SetWarmPool."""

from __future__ import annotations

import warnings
from unittest import mock

import numpy as np

from actuator.rollouts import RolloutView
from actuator.simulated_serverless import SimulatedServerless
from forecaster.baselines import Naive
from forecaster.invocations import InvocationForecaster
from scaleahead.bench.speed import policies_for
from scaleahead.loop import (
    INVOCATION_WINDOW_S,
    CalibrationBook,
    Deps,
    _calibration_note,
    invocation_forecasts,
    run_once,
)
from scaleahead.observed import aligned_counts
from scaleahead.policy import Policy, parse_policies
from scaleahead.settings import Settings
from scaleahead.traces import load_functions
from scaleahead.tracesource import InMemoryTarget
from scaleahead.types import Series, SetWarmPool, WorkloadRef
from tests.serverless.conftest import FUNCTION_POLICY, FixedHistory


def _setup(n: int = 6, spread: bool = False) -> tuple[list[Policy], dict[WorkloadRef, Series]]:
    """``n`` real functions of azure-functions-1m: the most often active ones, or (``spread``) ``n`` evenly
    spaced over the rows, with enough calls among them for a recurrence calibration."""
    fns = load_functions("azure-functions-1m")
    busiest = np.argsort(-(fns.counts > 0).sum(axis=1))[:n]
    rows = np.arange(n) * (len(fns.names) // n) if spread else busiest
    policies = [
        parse_policies(FUNCTION_POLICY.format(name=f"f{i}", warm="memoryMbPerInstance: 128"))[0] for i in range(n)
    ]
    series = {
        p.workload: Series(p.workload.name, 0.0, 60.0, fns.counts[row].astype(np.float64))
        for p, row in zip(policies, rows, strict=True)
    }
    return policies, series


def test_loop_plans_warm_pools_from_invocation_forecasts_without_fallback() -> None:
    policies, series = _setup()
    target = SimulatedServerless([p.workload for p in policies], [128.0] * len(policies), 0.0, 60.0)
    deps = Deps(FixedHistory(series), Naive(), target, None, policies)
    report = run_once(deps, Settings(), now=600 * 60.0)
    warm = [a for a in report.plan.actions if isinstance(a, SetWarmPool)]
    assert len(warm) == len(policies)
    assert not report.plan.fallbacks
    assert any(a.to_instances == 1 for a in warm)
    assert all(a.reason.message for a in warm)


def test_a_function_without_history_falls_back_by_its_policy() -> None:
    policies, series = _setup(2)
    del series[policies[1].workload]
    target = SimulatedServerless([p.workload for p in policies], [128.0] * 2, 0.0, 60.0)
    report = run_once(Deps(FixedHistory(series), Naive(), target, None, policies), Settings(), now=600 * 60.0)
    assert policies[1].workload in report.plan.fallbacks
    assert policies[0].workload not in report.plan.fallbacks


def test_invocation_forecasts_use_only_history_before_now() -> None:
    policies, series = _setup(3)
    now = 700 * 60.0
    before = invocation_forecasts(policies, series, now, 900.0)
    changed = {
        ref: Series(s.name, s.start, s.step_s, np.where(s.times() >= now, 999.0, s.values)) for ref, s in series.items()
    }
    after = invocation_forecasts(policies, changed, now, 900.0)
    for ref in before:
        np.testing.assert_array_equal(before[ref].probability, after[ref].probability)


def test_the_recurrence_calibration_is_fitted_once_an_hour_and_reused_in_between() -> None:
    policies, series = _setup(120, spread=True)
    book = CalibrationBook()
    hour = 3600.0
    now = 10 * hour + 5 * 60.0
    first = invocation_forecasts(policies, series, now, 900.0, book)
    (period, coef, _, _), *_ = book._cache.values()
    assert coef is not None
    # later in the same hour: the hazard is refitted on the newer history, the coefficients are kept ...
    later = invocation_forecasts(policies, series, now + 20 * 60.0, 900.0, book)
    (period2, coef2, _, _), *_ = book._cache.values()
    assert period2 == period
    np.testing.assert_array_equal(coef2, coef)
    # ... and the forecasts are what a forecaster given those coefficients makes from that history
    counts = aligned_counts(
        [series[p.workload].before(now + 20 * 60.0) for p in policies], now + 20 * 60.0, 60.0, INVOCATION_WINDOW_S
    )
    direct = InvocationForecaster(len(policies), horizon=15, calibration=coef).fit(counts).predict()
    for i, p in enumerate(policies):
        np.testing.assert_array_equal(later[p.workload].probability, direct[i])
    assert any(not np.array_equal(first[r].probability, later[r].probability) for r in first)
    # the next hour refits on the day before it
    invocation_forecasts(policies, series, 11 * hour, 900.0, book)
    (period3, coef3, _, first3), *_ = book._cache.values()
    assert period3 == period + 1 and not np.array_equal(coef3, coef)
    # fitted in the hour's first step (on the day before its start): the budget's replay may reuse it;
    # the first fit, 5 minutes into hour 10, not
    assert first3 and set(book.current(11 * hour)) and not book.current(10 * hour + 5 * 60.0)
    # without a book every call fits its own: the same as a fresh book
    fresh = invocation_forecasts(policies, series, now + 20 * 60.0, 900.0)
    refit = invocation_forecasts(policies, series, now + 20 * 60.0, 900.0, CalibrationBook())
    for r in fresh:
        np.testing.assert_array_equal(fresh[r].probability, refit[r].probability)


def test_the_loop_keeps_the_calibration_in_its_deps() -> None:
    policies, series = _setup(60, spread=True)
    target = SimulatedServerless([p.workload for p in policies], [128.0] * len(policies), 0.0, 60.0)
    deps = Deps(FixedHistory(series), Naive(), target, None, policies)
    report = run_once(deps, Settings(), now=600 * 60.0)
    assert len(deps.invocation_calibrations._cache) == 1
    # the plan says the calibration is in use and how it did on the newest hour, held out
    (note,) = [n for n in report.plan.notes if n.startswith("invocation forecasts")]
    assert "60 functions" in note and "recurrence calibration refitted" in note and "log-loss" in note


def test_the_plan_says_when_the_hazard_is_used_alone() -> None:
    policies, series = _setup()  # six of the busiest functions: too few minutes without a call to calibrate
    target = SimulatedServerless([p.workload for p in policies], [128.0] * len(policies), 0.0, 60.0)
    deps = Deps(FixedHistory(series), Naive(), target, None, policies)
    report = run_once(deps, Settings(), now=600 * 60.0)
    (note,) = [n for n in report.plan.notes if n.startswith("invocation forecasts")]
    assert "hazard alone" in note and "too few calls" in note


def test_calibrated_invocation_forecasts_use_only_history_before_now() -> None:
    policies, series = _setup(120, spread=True)
    now = 700 * 60.0
    book = CalibrationBook()
    before = invocation_forecasts(policies, series, now, 900.0, book)
    assert next(iter(book._cache.values()))[1] is not None  # the calibration is in play
    changed = {
        ref: Series(s.name, s.start, s.step_s, np.where(s.times() >= now, 999.0, s.values)) for ref, s in series.items()
    }
    after = invocation_forecasts(policies, changed, now, 900.0, CalibrationBook())
    for ref in before:
        np.testing.assert_array_equal(before[ref].probability, after[ref].probability)


def test_the_note_says_when_the_calibration_lost_to_the_hazard_on_the_newest_hour() -> None:
    model = InvocationForecaster(3)
    model.calibration_check = (0.1234, 0.1301)  # what _fit_calibration records when it rejects a fit
    note = _calibration_note(3, 60.0, model)
    assert note.startswith("invocation forecasts of 3 functions (step 60 s): the idle-time hazard alone")
    assert "forecast the newest hour worse (log-loss 0.1301 against the hazard's 0.1234)" in note


def test_a_failed_history_read_keeps_every_warm_pool() -> None:
    """Prometheus down for one cycle: no forecast, no observation; the warm pools stay as they are."""
    policies, _ = _setup(3)

    class Down:
        def read(self, policies: object, now: float) -> dict[WorkloadRef, Series]:
            raise ConnectionError("Prometheus unreachable")

    target = SimulatedServerless([p.workload for p in policies], [128.0] * 3, 0.0, 60.0)
    target.warm[:] = 1
    report = run_once(Deps(Down(), Naive(), target, None, policies), Settings(), now=600 * 60.0)
    assert "history" in report.errors
    warm = [a for a in report.plan.actions if isinstance(a, SetWarmPool)]
    assert len(warm) == 3 and all(a.is_noop and a.to_instances == 1 for a in warm)
    assert all("rather than cool on missing data" in a.reason.message for a in warm)
    assert target.warm.tolist() == [1, 1, 1]


def test_the_reactive_fallback_reads_the_last_call_within_the_keep_alive_from_the_history() -> None:
    """The invocation forecast fails; called 3 minutes ago and idle since: kept warm (keepAliveSeconds 600)."""
    pol = parse_policies(FUNCTION_POLICY.format(name="f0", warm="memoryMbPerInstance: 128"))[0]
    vals = np.zeros(600)
    vals[597] = 4.0
    target = SimulatedServerless([pol.workload], [128.0], 0.0, 60.0)
    target.warm[:] = 1
    deps = Deps(FixedHistory({pol.workload: Series("f0", 0.0, 60.0, vals)}), Naive(), target, None, [pol])
    with mock.patch("scaleahead.loop.invocation_forecasts", side_effect=RuntimeError("invocation model failed")):
        report = run_once(deps, Settings(), now=600 * 60.0, dry_run=True)
    assert "invocations" in report.errors
    (a,) = [x for x in report.plan.actions if isinstance(x, SetWarmPool)]
    assert report.plan.fallbacks == {pol.workload: "reactive"}
    assert a.is_noop and a.to_instances == 1, a.reason.message
    assert "last invoked 2 min ago" in a.reason.message


def test_a_function_whose_history_stopped_falls_back_as_stale_and_stays_warm() -> None:
    """Busy every minute for 10 h, then no more samples: the steps missing before now are not calls
    that did not happen. The forecast is stale (staleAfterSeconds 60) and the reactive fallback keeps
    the warm instance for the keep-alive (10 min) past the newest sample, then cools it (a broken
    query must not pin memory for good); a fresh history is planned from its forecast."""
    pol = parse_policies(FUNCTION_POLICY.format(name="f0", warm="memoryMbPerInstance: 128"))[0]
    series = Series("f0", 0.0, 60.0, np.full(600, 5.0))
    for lag_min, why in (
        (0, None),
        (2, "newest sample 2 min old"),
        (9, "newest sample 9 min old"),
        (30, "newest sample 30 min old"),
    ):
        target = SimulatedServerless([pol.workload], [128.0], 0.0, 60.0)
        target.warm[:] = 1
        deps = Deps(FixedHistory({pol.workload: series}), Naive(), target, None, [pol])
        now = (600 + lag_min) * 60.0
        report = run_once(deps, Settings(), now=now, dry_run=True)
        (a,) = [x for x in report.plan.actions if isinstance(x, SetWarmPool)]
        assert a.to_instances == (0 if lag_min > 10 else 1), (lag_min, a.reason.message)
        if lag_min > 10:
            assert "longer than the 10 min keep-alive: cool" in a.reason.message
        if why is None:
            assert not report.plan.fallbacks and a.reason.code == "warm_forecast"
        else:
            assert report.plan.fallbacks == {pol.workload: "reactive"}
            assert f"stale invocation history ({why})" in a.reason.message
    made = invocation_forecasts([pol], {pol.workload: series}, 630 * 60.0, 900.0)
    assert made[pol.workload].origin == 630 * 60.0 and made[pol.workload].data_until == 600 * 60.0


def test_fractional_invocation_values_count_as_calls() -> None:
    """increase() extrapolates (0.9999 for one call) and rate() gives calls per second: a value above
    0 is at least one call, rounded to the nearest whole one, never truncated to "never invoked"."""
    s = Series("f0", 0.0, 60.0, np.array([0.0, 0.9999, 0.1667, 2.6, np.nan, -0.0, 3.0]))
    counts = aligned_counts([s], 7 * 60.0, 60.0, 7 * 60.0)
    assert counts.tolist() == [[0, 1, 1, 3, 0, 0, 3]]
    pol = parse_policies(FUNCTION_POLICY.format(name="f0", warm="memoryMbPerInstance: 128"))[0]
    busy = Series("f0", 0.0, 60.0, np.full(1440, 0.1667))  # rate() of 10 calls a minute
    target = SimulatedServerless([pol.workload], [128.0], 0.0, 60.0)
    report = run_once(
        Deps(FixedHistory({pol.workload: busy}), Naive(), target, None, [pol]), Settings(), 1440 * 60.0, True
    )
    (a,) = [x for x in report.plan.actions if isinstance(x, SetWarmPool)]
    assert a.reason.code == "warm_forecast" and a.to_instances == 1, a.reason.message
    assert "never invoked" not in a.reason.message


def test_the_loop_keeps_warm_memory_within_the_settings_budget() -> None:
    """``loop.warm_memory_budget_mb``: the cycle's warm pools together stay within it; the functions
    left cold say the budget cut them, and the plan notes it."""
    policies, series = _setup()
    target = SimulatedServerless([p.workload for p in policies], [128.0] * len(policies), 0.0, 60.0)
    free = run_once(Deps(FixedHistory(series), Naive(), target, None, policies), Settings(), now=600 * 60.0)
    wanted = [a for a in free.plan.actions if isinstance(a, SetWarmPool) and a.to_instances > 0]
    assert len(wanted) >= 3  # the busiest functions: each wants its instance
    settings = Settings()
    settings.loop.warm_memory_budget_mb = 2 * 128.0
    capped = run_once(Deps(FixedHistory(series), Naive(), target, None, policies), settings, now=600 * 60.0)
    warm = [a for a in capped.plan.actions if isinstance(a, SetWarmPool)]
    assert sum(a.to_instances for a in warm) * 128.0 <= 2 * 128.0
    cut = [a for a in warm if a.reason.code == "warm_budget_cut"]
    assert len(cut) == len(wanted) - 2
    assert all("warm-memory budget of 256 MB" in a.reason.message for a in cut)
    assert any("warm-memory budget 256 MB is short" in n for n in capped.plan.notes)


def test_aligned_counts_read_nothing_of_a_series_that_starts_after_now() -> None:
    """A series first seen after ``now`` has no sample before it: its row is zeros, whatever it
    holds after ``now`` (found in review: the slice ran from the wrong end and the write raised)."""
    for n in (5, 10, 30, 200):
        s = Series("f", 1200.0, 60.0, np.full(n, 7.0))
        assert aligned_counts([s], 0.0, 60.0, 3600.0).tolist() == [[0] * 60]
    # one that starts within the window: its samples in their columns, the steps before it 0
    s = Series("f", -300.0, 60.0, np.arange(1.0, 11.0))
    assert aligned_counts([s], 0.0, 60.0, 600.0).tolist() == [[0, 0, 0, 0, 0, 1, 2, 3, 4, 5]]
    # and one that ended before the window: all 0
    assert aligned_counts([Series("f", -7200.0, 60.0, np.ones(10))], 0.0, 60.0, 600.0).tolist() == [[0] * 10]


def test_non_finite_invocation_values_are_missing_and_huge_ones_capped() -> None:
    """+Inf (a query dividing by zero) is no count: missing, so 0, like NaN; cast as it was it read as
    -9.2e18 calls (found in review). A finite value past int64's range is capped, without a warning."""
    s = Series("f0", 0.0, 60.0, np.array([np.inf, 2.0, -np.inf, np.nan, 1e300, 1.0]))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        counts = aligned_counts([s], 6 * 60.0, 60.0, 6 * 60.0)
    assert counts.tolist() == [[0, 2, 0, 0, 2**53, 1]]


def test_groups_of_different_step_sizes_keep_their_calibrations_through_the_period() -> None:
    """Period numbers depend on the step (an hour at 60 s, 10 minutes at 10 s): a miss of one group
    must not evict the other step's groups (found in review: both refitted every cycle, and only the
    last one's note was in the plan)."""
    policies, series = _setup(120, spread=True)
    slow = {p.workload: series[p.workload] for p in policies[:60]}
    # the other 60 functions at 10 s steps (their minutes read as 10-s steps), called by other names
    fast_refs = [WorkloadRef("KnativeService", "fn10", f"g{i}") for i in range(60)]
    fast = {
        ref: Series(ref.name, 0.0, 10.0, series[p.workload].values)
        for ref, p in zip(fast_refs, policies[60:], strict=True)
    }
    book = CalibrationBook()
    fits = 0
    real = InvocationForecaster

    class Counting(real):  # type: ignore[misc, valid-type]
        def __init__(self, *args: object, **kw: object) -> None:
            nonlocal fits
            fits += "calibration" not in kw  # the miss path: a calibration is fitted
            super().__init__(*args, **kw)

    now0 = 100 * 3600.0 + 60.0  # in one hour and one 10-minute period
    with mock.patch("scaleahead.loop.InvocationForecaster", Counting):
        for k in range(4):
            now = now0 + 10.0 * k
            for group, step in ((slow, 60.0), (fast, 10.0)):
                refs = list(group)
                counts = aligned_counts([group[r].before(now) for r in refs], now, step, INVOCATION_WINDOW_S)
                book.model(refs, counts, now, step, 15)
            assert sorted(key[0] for key in book._cache) == [10.0, 60.0]
            assert len(book.notes(now)) == 2
    assert fits == 2  # one per group, in the first cycle


def test_a_shadow_plan_plans_warm_pools_from_the_cycles_invocation_forecasts() -> None:
    """A shadow rollout's plan differs from the live one only by the challenger's forecasts: its warm
    pools come from the same invocation forecasts (found in review: it was made without them, and
    every warm-pool function was in fallback there)."""
    policies, history = _setup(3)
    svc = policies_for(1, 60.0)[0]
    history[svc.workload] = Series("svc", 0.0, 60.0, 50 + 10 * np.sin(np.arange(1440) / 30.0))
    now = 600 * 60.0
    challenger = Naive().fit([history[svc.workload].before(now)])
    deps = Deps(
        FixedHistory(history),
        Naive(),
        InMemoryTarget(default_replicas=2),
        None,
        [svc, *policies],
        rollout=RolloutView(mode="shadow", share=0.5, salt="x"),
        challenger=challenger,
    )
    report = run_once(deps, Settings(), now=now, dry_run=True)
    assert report.shadow_plan is not None and not report.errors
    assert not report.plan.fallbacks and not report.shadow_plan.fallbacks
    live = [a for a in report.plan.actions if isinstance(a, SetWarmPool)]
    shadow = [a for a in report.shadow_plan.actions if isinstance(a, SetWarmPool)]
    assert len(shadow) == 3 and shadow == live


def test_an_invocation_forecast_is_not_dated_by_samples_after_now() -> None:
    """``invocation_forecasts`` reads history strictly before ``now``, also when given more (it is
    public); the test above compares probabilities only, and a mutation that dropped the cut survived
    (mutation audit, 2026-12-06)."""
    policies, series = _setup(2)
    now = 700 * 60.0
    cut = {ref: s.before(now) for ref, s in series.items()}
    full = invocation_forecasts(policies, series, now, 900.0)
    past = invocation_forecasts(policies, cut, now, 900.0)
    for ref in full:
        assert full[ref].data_until <= now
        assert full[ref].data_until == past[ref].data_until
