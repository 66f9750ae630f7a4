"""The idle-time hazard forecaster of invocation probabilities."""

from __future__ import annotations

import numpy as np
import pytest

from forecaster.invocations import InvocationForecaster
from scaleahead.types import WorkloadRef


def test_a_periodic_function_is_forecast_likely_at_its_period_and_unlikely_between() -> None:
    counts = np.zeros((1, 200), dtype=np.int64)
    counts[0, ::7] = 1  # every 7 minutes; the last call is at minute 196
    model = InvocationForecaster(1, horizon=10).fit(counts)
    p = model.predict()[0]  # minutes 200.. : idle 4, 5, ..., 13
    assert p[3] > 0.8  # idle 7: the period
    assert p[0] < 0.2 and p[1] < 0.2 and p[2] < 0.2


def test_a_function_never_seen_gets_probability_zero_and_infinite_idle_time() -> None:
    model = InvocationForecaster(2).fit(np.array([[0, 0, 0], [1, 0, 0]]))
    fc = model.forecasts([WorkloadRef("F", "n", "a"), WorkloadRef("F", "n", "b")], origin=180.0)
    a = fc[WorkloadRef("F", "n", "a")]
    assert (a.probability == 0).all() and a.idle_s == float("inf")
    assert fc[WorkloadRef("F", "n", "b")].idle_s == 180.0


def test_probabilities_are_between_zero_and_one_for_random_traffic() -> None:
    rng = np.random.default_rng(3)
    counts = rng.poisson(rng.uniform(0, 2, size=(20, 1)), size=(20, 300))
    p = InvocationForecaster(20).fit(counts).predict()
    assert p.shape == (20, 15)
    assert (p >= 0).all() and (p <= 1).all()


def test_a_busy_function_is_forecast_almost_surely_called_next_minute() -> None:
    counts = np.ones((1, 120), dtype=np.int64)
    assert InvocationForecaster(1).fit(counts).predict()[0, 0] > 0.9


def test_a_function_seen_once_is_pooled_with_sparse_functions_not_with_busy_ones() -> None:
    counts = np.zeros((3, 200), dtype=np.int64)
    counts[0, :] = 1  # busy
    counts[1, ::100] = 1  # sparse: every 100 minutes
    counts[2, 199] = 1  # first seen in the last minute
    model = InvocationForecaster(3).fit(counts)
    groups = model._groups()
    assert groups[2] == groups[1] != groups[0]
    naive = InvocationForecaster(3, min_rate_span=1).fit(counts)  # one call in one minute: "rate 1"
    assert naive._groups()[2] == naive._groups()[0]
    assert naive.hazard()[2, 0] > 0.9 > 0.5 > model.hazard()[2, 0]


def test_a_gap_seen_at_40_minutes_makes_a_call_near_40_likelier_than_far_from_it() -> None:
    counts = np.zeros((1, 400), dtype=np.int64)
    counts[0, [0, 40, 80, 120, 160, 200, 240, 280, 320, 360]] = 1
    smooth = InvocationForecaster(1, horizon=40, smoothing_divisor=8).fit(counts[:, :361]).predict()[0]
    sharp = InvocationForecaster(1, horizon=40, smoothing_divisor=0).fit(counts[:, :361]).predict()[0]
    # idle 1 .. 40 after minute 360; idle 37 is near the 40-minute gaps, idle 11 far from them
    assert smooth[36] > 0.05 and sharp[36] < 0.01
    assert smooth[10] < 0.01
    assert sharp[39] > smooth[39] > 0.05  # at exactly 40 the sharp estimate is the surer one


def test_functions_still_idle_lower_the_pooled_chance_of_a_call_after_a_long_idle_time() -> None:
    # Eight sparse functions: gaps of 30 minutes were seen, then all fell silent for 150 minutes.
    counts = np.zeros((9, 300), dtype=np.int64)
    counts[:8, [0, 30, 60, 90, 120, 150]] = 1
    counts[8, [100, 130]] = 1  # one more sparse function, idle since minute 130
    quiet = InvocationForecaster(9, prior_strength=50.0).fit(counts[:, :160]).predict()[8, 0]  # idle 30
    long_quiet = InvocationForecaster(9, prior_strength=50.0).fit(counts[:, :300])
    # At minute 160 the pool says "a call at idle 30 is very likely"; by minute 300 the eight functions have
    # been idle far longer than 30 without a call, so the same idle time is much less telling.
    assert quiet > 0.5
    pool = long_quiet.predict(horizon=1)[8, 0]  # function 8 is now idle 170 minutes
    assert pool < 0.05


def test_a_lone_function_called_every_minute_stays_likely_after_a_few_quiet_minutes() -> None:
    # A dry run of one function, or a loop managing one: no other function ever reached idle time 2, so
    # the raw pooled hazard there was 0 ("never called") and one quiet minute cooled the warm pool. Now an
    # idle time nobody reached gets the group's memoryless rate: 119 calls in 120 minutes, then quiet.
    before = 1.0
    for quiet in (0, 1, 2, 3):
        counts = np.ones((1, 120 + quiet), dtype=np.int64)
        counts[0, 120:] = 0
        model = InvocationForecaster(1).fit(counts)
        p = model.predict(5)[0]  # idle 1 + quiet .. 5 + quiet (too few quiet minutes to calibrate)
        assert (p > 0.95).all(), (quiet, p)
        assert p[0] <= before  # each quiet minute lowers it a little, never straight to 0
        before = p[0]


def test_one_function_at_risk_without_a_call_does_not_zero_the_pooled_hazard() -> None:
    # Three functions called every minute; two fell quiet 3 and 5 minutes ago. Idle times 2 to 4 were
    # each reached by one or two functions without a call: the raw ratio 0 / 1 said "never called" there
    # and at every longer idle time. Shrunk toward the group's rate, one quiet sample lowers it, no more.
    counts = np.ones((3, 120), dtype=np.int64)
    counts[0, 118:] = 0
    counts[1, 116:] = 0
    p = InvocationForecaster(3).fit(counts).hazard(4)
    assert p.min() > 0.6
    assert p[2, 1] < p[2, 0]  # idle 2 after idle 1: two quiet samples at risk there lower it


def test_a_gap_ending_in_the_open_last_bin_gives_a_hazard_per_step_there() -> None:
    # One rate group, idle bins up to 10 minutes; idle times of 11 and more share the open last bin.
    # Function 0's gaps of 15 and 44 and function 3's of 20 ended there; functions 1 and 2 have been idle
    # 55 minutes and function 3 40. The raw ratio counted only the ended gaps at risk there: a hazard of 1.
    counts = np.zeros((4, 60), dtype=np.int64)
    counts[0, [0, 15, 59]] = 1
    counts[1, 5] = counts[2, 5] = 1
    counts[3, [0, 20]] = 1
    model = InvocationForecaster(4, max_idle=10, rate_edges=(), calibrate=False).fit(counts)
    p = model.hazard(3)
    assert (p[1:3] < 0.03).all()  # idle 55 and more, no own gaps: the group's per-step hazard
    # function 3's own gap in the open bin spent 10 steps there: about 1 / 14 per step, not 1
    assert (p[3] < 0.1).all()
    assert model.pooled_hazard()[0, -1] < 0.03
    # 3 gaps ended there over the steps spent there: 5 + 34 + 10 by the ended gaps, 44 + 44 + 29 by the idle
    raw = InvocationForecaster(4, max_idle=10, rate_edges=(), calibrate=False, pool_strength=0).fit(counts)
    assert raw.pooled_hazard()[0, -1] == pytest.approx(3 / 166)


def test_a_function_long_idle_past_its_one_open_bin_gap_cools() -> None:
    # max_idle 10; its one gap of 11 ended in the open bin, and it has been idle 389 minutes since: the
    # steps of the current gap count at risk there too (they did not: 1 / (1 + alpha) = 0.2 per step)
    counts = np.zeros((1, 400), dtype=np.int64)
    counts[0, [0, 11]] = 1
    p = InvocationForecaster(1, max_idle=10, rate_edges=(), calibrate=False).fit(counts).hazard(3)
    assert (p < 0.02).all()


def test_with_many_functions_the_well_observed_pooled_hazard_keeps_its_raw_ratio() -> None:
    # 1,000 real functions over the history's 6 hours: where a group had 100 or more steps at risk at an
    # idle time, the shrinkage moves the raw ratio by at most pool_strength / (at risk + pool_strength)
    # (measured: at most 0.017 at 100+, 0.0006 at 1,000+; a function whose 15 forecast steps all lie
    # there moves by at most 0.0064, 0.00075 on average).
    from scaleahead.traces import load_functions

    counts = load_functions("azure-functions-1m").counts[:, :360]
    new = InvocationForecaster(1000, calibrate=False).fit(counts)
    raw = InvocationForecaster(1000, calibrate=False, pool_strength=0).fit(counts)
    _, at_risk = new._pool_counts()
    diff = np.abs(new.pooled_hazard() - raw.pooled_hazard())
    well = at_risk >= 100
    assert well.sum() > 500
    assert (diff[well] <= new.beta / (at_risk[well] + new.beta) + 1e-12).all()
    assert diff[at_risk >= 1000].max() < 0.001
    groups, idle = new._groups(), 360 - new._last
    cols = np.clip(idle[:, None] + np.arange(15)[None, :], 1, new.max_idle + 1)
    steady = (new._last >= 0) & (at_risk[groups[:, None], cols] >= 100).all(axis=1)
    assert steady.sum() > 150
    assert np.abs(new.hazard() - raw.hazard())[steady].max() < 0.01


def _reference_predict(
    counts: np.ndarray,
    h: int,
    max_idle: int,
    alpha: float,
    span_min: int,
    div: int,
    beta: float = 4.0,
    rate_edges: tuple[float, ...] | None = None,
) -> np.ndarray:
    """The forecaster's definition, function by function from explicit lists of gaps (slow, obvious)."""
    from forecaster.invocations import RATE_EDGES

    edges = RATE_EDGES if rate_edges is None else rate_edges
    n, steps = counts.shape
    cap = max_idle + 1  # the open last bin: idle times max_idle + 1 and more
    own: list[list[int]] = [[] for _ in range(n)]  # true gap lengths
    pooled: list[tuple[int, int]] = []  # (rate group when the gap ended, true gap)
    first, last, active = [-1] * n, [-1] * n, [0] * n

    def group(f: int, t: int) -> int:
        if first[f] < 0:
            return 0
        return int(np.digitize(active[f] / max(t - first[f], span_min), edges))

    for t in range(steps):
        groups_now = [group(f, t) for f in range(n)]
        for f in range(n):
            if counts[f, t] > 0:
                if last[f] >= 0:
                    own[f].append(t - last[f])
                    pooled.append((groups_now[f], t - last[f]))
                active[f] += 1
                first[f] = t if first[f] < 0 else first[f]
                last[f] = t
    groups = [group(f, steps) for f in range(n)]
    idle_now = [(groups[o], steps - last[o]) for o in range(n) if last[o] >= 0]  # ongoing gaps

    def counts_at(g: int, s: int) -> tuple[float, float]:
        """Events and steps at risk of group g at idle time s (s == cap: per step in the open bin)."""
        if s < cap:
            ended = sum(1 for gg, x in pooled if gg == g and x == s)
            at_risk = sum(1 for gg, x in pooled if gg == g and x >= s)
            # functions of the group idle longer than s now: at risk at s, their gap not ended
            at_risk += sum(1 for gg, d in idle_now if gg == g and d > s)
            return ended, at_risk
        ended = sum(1 for gg, x in pooled if gg == g and x >= cap)
        steps_there = sum(x - cap + 1 for gg, x in pooled if gg == g and x >= cap)  # idle cap .. x
        steps_there += sum(d - cap for gg, d in idle_now if gg == g and d > cap)  # idle cap .. d - 1
        return ended, steps_there

    # memoryless rates: gaps ended over steps spent idle (an ended gap x: x steps at risk; ongoing d: d - 1)
    def memoryless(g: int | None) -> tuple[int, int]:
        ev = sum(1 for gg, _ in pooled if g is None or gg == g)
        st = sum(x for gg, x in pooled if g is None or gg == g)
        st += sum(d - 1 for gg, d in idle_now if g is None or gg == g)
        return ev, st

    ev_all, st_all = memoryless(None)
    h0 = ev_all / st_all if st_all else 0.0
    out = np.zeros((n, h))
    for f in range(n):
        if last[f] < 0:
            continue
        g = groups[f]
        ev_g, st_g = memoryless(g)
        h0_g = (ev_g + beta * h0) / (st_g + beta) if beta else 0.0
        for k in range(h):
            s = min(max(steps - last[f] + k, 1), cap)
            ended, at_risk = counts_at(g, s)
            raw = ended / at_risk if at_risk else 0.0  # pool_strength 0: the raw ratio
            prior = (ended + beta * h0_g) / (at_risk + beta) if beta else raw
            if s < cap:
                w = s // div if div else 0
                lo, hi = max(s - w, 1), min(s + w, max_idle)  # the window stays below the open bin
                mine = sum(1 for x in own[f] if lo <= x <= hi) / (hi - lo + 1)
                tail = sum(1 for x in own[f] if x >= s)
            else:  # per step in the open bin: own gaps that ended there over the steps spent there
                mine = sum(1 for x in own[f] if x >= cap)
                tail = sum(x - cap + 1 for x in own[f] if x >= cap)
                tail += max(steps - last[f] + k - cap, 0)  # and the current gap's steps there so far
            out[f, k] = min(max((mine + alpha * prior) / (tail + alpha), 0.0), 1.0)
    return out


def test_predict_matches_the_definition_computed_from_explicit_gaps_on_real_functions() -> None:
    # The forecaster keeps its gap counts cumulative for speed; this recomputes every probability
    # from lists of gaps, on 40 real functions of azure-functions-1m over 5 hours.
    from scaleahead.traces import load_functions

    fns = load_functions("azure-functions-1m")
    counts = fns.counts[:: len(fns.names) // 40][:40, :300]
    assert 15 < (counts > 0).any(axis=1).sum() < 40  # called and never-called functions both
    for max_idle, div in ((1440, 8), (60, 8), (1440, 0)):
        model = InvocationForecaster(40, horizon=5, max_idle=max_idle, smoothing_divisor=div)
        for t0, t1 in ((0, 120), (120, 300)):  # online: observe more, forecast again
            model.fit(counts[:, t0:t1])
            want = _reference_predict(counts[:, :t1], 5, max_idle, model.alpha, model.min_rate_span, div)
            np.testing.assert_allclose(model.hazard(), want, rtol=1e-12, atol=1e-12)


def test_the_hazard_matches_the_definition_on_random_small_cases() -> None:
    # Few functions, short idle bins (the open bin is reached by ended and ongoing gaps), several
    # pool strengths (0: the raw ratios), rate groups and smoothing windows.
    rng = np.random.default_rng(12)
    for case in range(60):
        n = int(rng.integers(1, 7))
        steps = int(rng.integers(2, 70))
        counts = (rng.random((n, steps)) < rng.uniform(0.02, 0.9, size=(n, 1))).astype(np.int64)
        max_idle = int(rng.integers(1, 12))
        div = int(rng.choice([0, 2, 8]))
        beta = float(rng.choice([0.0, 0.5, 4.0]))
        edges = ((), (0.1,), (0.05, 0.3))[case % 3]
        model = InvocationForecaster(
            n,
            horizon=6,
            max_idle=max_idle,
            smoothing_divisor=div,
            pool_strength=beta,
            rate_edges=edges,
            min_rate_span=5,
            calibrate=False,
        )
        cut = steps // 2
        model.fit(counts[:, :cut])
        model.fit(counts[:, cut:])
        want = _reference_predict(counts, 6, max_idle, model.alpha, 5, div, beta, edges)
        np.testing.assert_allclose(model.hazard(), want, rtol=1e-12, atol=1e-12, err_msg=f"case {case}")


def _log_loss(p: np.ndarray, y: np.ndarray) -> float:
    q = np.clip(p, 1e-6, 1 - 1e-6)
    return float(-(y * np.log(q) + (1 - y) * np.log(1 - q)).mean())


def _online(model: InvocationForecaster, counts: np.ndarray, hazard: bool) -> np.ndarray:
    """Each step's next-step probability, made before the step is observed."""
    out = np.zeros(counts.shape)
    for t in range(counts.shape[1]):
        out[:, t] = (model.hazard(1) if hazard else model.predict(1))[:, 0]
        model.observe(counts[:, t])
    return out


def test_a_function_that_recurs_at_the_same_minute_of_the_hour_is_forecast_likelier_then() -> None:
    # 60 functions, each called at its own minute of the hour in 60 % of the hours and at random 1 % of the
    # minutes besides: the idle time alone (reset by the random calls) does not see the hourly minute.
    rng = np.random.default_rng(5)
    n, hours = 60, 14
    counts = (rng.random((n, hours * 60)) < 0.01).astype(np.int64)
    phase = rng.integers(0, 60, size=n)
    for f in range(n):
        on = rng.random(hours) < 0.6
        counts[f, np.arange(hours)[on] * 60 + phase[f]] = 1
    history, later = counts[:, : 8 * 60], counts[:, 8 * 60 :]
    model = InvocationForecaster(n).fit(history)
    assert model.calibration is not None
    plain = InvocationForecaster(n, calibrate=False).fit(history)
    assert plain.calibration is None
    p = _online(model, later, hazard=False)
    h = _online(plain, later, hazard=True)
    at_phase = np.zeros(later.shape, dtype=bool)
    at_phase[np.arange(n)[:, None], (np.arange(6)[None, :] * 60 + phase[:, None])] = True
    # at each function's minute of the hour the calibrated forecast is higher, elsewhere lower, than the hazard
    assert p[at_phase].mean() > 2 * h[at_phase].mean()
    assert p[~at_phase].mean() < h[~at_phase].mean()
    # and it predicts the hours it never saw better (log loss of the calls in hours 9-14)
    y = (later > 0).astype(float)
    assert _log_loss(p, y) < 0.9 * _log_loss(h, y)


def test_the_calibration_lowers_the_log_loss_of_real_functions_in_the_hours_after_the_history() -> None:
    from scaleahead.traces import load_functions

    counts = load_functions("azure-functions-1m").counts
    model = InvocationForecaster(counts.shape[0], calibrate=True, recalibrate_steps=10**6).fit(counts[:, :360])
    plain = InvocationForecaster(counts.shape[0], calibrate=False).fit(counts[:, :360])
    assert model.calibration is not None
    later = counts[:, 360:600]
    seen = (counts[:, :360] > 0).any(axis=1)
    p = _online(model, later, hazard=False)[seen]
    h = _online(plain, later, hazard=True)[seen]
    y = (later[seen] > 0).astype(float)
    assert _log_loss(p, y) < 0.97 * _log_loss(h, y)


def test_too_few_calls_leave_the_hazard_uncalibrated() -> None:
    counts = np.zeros((3, 300), dtype=np.int64)
    counts[0, ::37] = 1
    counts[1, ::90] = 1
    model = InvocationForecaster(3).fit(counts)
    assert model.calibration is None  # 8 calls after the warm-up: fewer than MIN_CALIBRATION_EVENTS
    np.testing.assert_array_equal(model.predict(), model.hazard())


def test_fixed_coefficients_are_used_as_given_and_checked() -> None:
    rng = np.random.default_rng(2)
    counts = (rng.random((30, 400)) < 0.05).astype(np.int64)
    fitted = InvocationForecaster(30).fit(counts)
    coef = fitted.calibration
    assert coef is not None and coef.shape == (6 + 2 * 3 + 1,)
    reused = InvocationForecaster(30, calibration=coef).fit(counts)
    np.testing.assert_allclose(reused.predict(), fitted.predict())

    with pytest.raises(ValueError, match="13 finite coefficients"):
        InvocationForecaster(30, calibration=np.zeros(5))
    with pytest.raises(ValueError, match="13 finite coefficients"):
        InvocationForecaster(30, calibration=np.full(13, np.nan))


def test_calibration_rows_are_bounded_per_step_and_the_weighted_sample_fits_like_all_rows(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import forecaster.invocations as inv

    rng = np.random.default_rng(8)
    n = 1500
    counts = (rng.random((n, 300)) < rng.uniform(0.002, 0.6, size=(n, 1))).astype(np.int64)
    sampled = InvocationForecaster(n).fit(counts)
    assert max(len(r) for r in sampled._rows) <= 2 * inv.ROWS_PER_STEP < n
    monkeypatch.setattr(inv, "ROWS_PER_STEP", 10**9)
    full = InvocationForecaster(n).fit(counts)
    assert max(len(r) for r in full._rows) > 2 * 512  # every function seen so far
    a, b = sampled.predict(), full.predict()
    assert np.abs(a - b).mean() < 0.01 * b.mean()


def test_online_refits_use_only_steps_already_observed() -> None:
    # No peeking through the hourly refit: two forecasters fed the same real minutes up to minute 450 and
    # different ones after it forecast the same up to and including minute 450, with refits at 419 and 479.
    from scaleahead.traces import load_functions

    counts = load_functions("azure-functions-1m").counts[::5][:, :540]  # 200 functions
    changed = counts.copy()
    changed[:, 450:] = np.random.default_rng(4).poisson(1.0, size=changed[:, 450:].shape)
    a = InvocationForecaster(200, horizon=3).fit(counts[:, :360])
    b = InvocationForecaster(200, horizon=3).fit(counts[:, :360])
    first = a.calibration
    assert first is not None
    pa, pb = [], []
    for t in range(360, 540):
        pa.append(a.predict())
        pb.append(b.predict())
        a.observe(counts[:, t])
        b.observe(changed[:, t])
        if t == 440:
            refit = a.calibration
            assert refit is not None and not np.array_equal(refit, first)  # refitted on the newer minutes
    for t in range(360, 451):
        np.testing.assert_array_equal(pa[t - 360], pb[t - 360])
    assert not np.array_equal(pa[-1], pb[-1])
    assert not np.array_equal(a.calibration, b.calibration)


def test_a_calibration_that_forecasts_the_newest_hour_worse_than_the_hazard_is_not_adopted() -> None:
    # Rows as the forecaster records them (10 inputs, the first the hazard's logit). In the older steps
    # input 3 says "called" exactly when a call came; in the newest hour it says the opposite, while the
    # hazard stays right about the rate. Fitted without the newest hour, the calibration trusts input 3 and
    # forecasts that hour worse than the hazard: it is not adopted, and the check says why.
    rng = np.random.default_rng(0)
    model = InvocationForecaster(1, recalibrate_steps=60)

    def step(flipped: bool) -> None:
        y = rng.random(200) < 0.2
        x = np.zeros((200, 10), dtype=np.float32)
        x[:, 0] = np.log(0.2 / 0.8)
        x[:, 3] = (~y if flipped else y).astype(np.float32)
        model._rows.append(x)
        model._labels.append(y)
        model._weights.append(np.ones(200, dtype=np.float32))

    for _ in range(300):
        step(False)
    model._fit_calibration()
    assert model.calibration is not None  # the newest hour still agrees with the older ones
    hazard_loss, calibrated_loss = model.calibration_check or (0.0, 0.0)
    assert calibrated_loss < hazard_loss
    for _ in range(60):
        step(True)
    model._fit_calibration()
    assert model.calibration is None
    hazard_loss, calibrated_loss = model.calibration_check or (0.0, 0.0)
    assert calibrated_loss > hazard_loss


def test_the_calibration_adopted_on_real_functions_passed_its_held_out_check() -> None:
    from scaleahead.traces import load_functions

    model = InvocationForecaster(1000).fit(load_functions("azure-functions-1m").counts[:, :360])
    assert model.calibration is not None and model.calibration_check is not None
    hazard_loss, calibrated_loss = model.calibration_check
    assert calibrated_loss < 0.95 * hazard_loss


def test_newest_steps_without_rows_skip_the_check_without_a_warning() -> None:
    import warnings

    rng = np.random.default_rng(1)
    model = InvocationForecaster(1, recalibrate_steps=60)
    for t in range(300):
        n = 200 if t < 240 else 0  # no function seen in the newest hour's steps: nothing to hold out
        y = rng.random(n) < 0.2
        x = np.zeros((n, 10), dtype=np.float32)
        x[:, 0] = np.log(0.2 / 0.8)
        x[:, 3] = y
        model._rows.append(x)
        model._labels.append(y)
        model._weights.append(np.ones(n, dtype=np.float32))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        model._fit_calibration()
    assert model.calibration is not None and model.calibration_check is None
