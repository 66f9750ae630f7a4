"""Per-function invocation probability for the next minutes, for warm pools (numpy only).

Serverless functions are mostly idle: the question a warm pool needs answered is not "how many
requests" but "if the function stays idle until minute k, will it be called in minute k?". This
module answers it with an empirical *hazard* of each function's idle times (the gaps between
minutes with invocations), which captures at once

- strict periodicity (a timer every N minutes puts all its mass on idle time N),
- recent rate (a busy function's hazard at idle time 1 is close to 1),
- and the long idle gaps that make cold starts.

At long idle times a function's own gaps are few and scattered (a gap of 37 minutes says little
about exactly 37 and much about "about 35 to 40"), so the count of its own gaps of length ``s`` is
averaged over the window ``s +- s // smoothing_divisor`` (no smoothing below ``smoothing_divisor``
minutes, where a timer's exact period matters).

The pooled hazard counts right-censored gaps (Kaplan-Meier): a function idle for ``d`` steps now
has survived every idle time below ``d``, so it is at risk there even though its gap has not
ended. Without this the pool only sees the gaps that ended, and over a short history it
overstates the chance that a long-idle function is called (on the history part of
azure-functions-1m: 3.5 % forecast against 1.9 % observed at 41 to 80 idle minutes).

Functions with few observed gaps borrow strength from a pooled hazard of functions with a
similar invocation rate (empirical Bayes shrinkage with ``prior_strength`` pseudo-observations),
so that a function seen twice does not get a probability of 0 or 1 from two gaps.

The pooled hazard is itself shrunk (``pool_strength`` pseudo-steps at risk, since 2026-12-05): a
group's events over its steps at risk at idle time ``s`` toward the group's *memoryless* rate (all
its events over all its steps at risk), and that toward all groups' memoryless rate. Where many
functions were at risk the ratio is unchanged (by at most ``pool_strength / (at risk +
pool_strength)``); where few or none were, it is no longer 0 ("never called"): a lone function
called every minute is not forecast ``[1, 0, 0, ...]``, and one function idle at ``s`` without a
call does not zero ``s`` and every longer idle time. The open last bin (idle times above
``max_idle``) is a hazard per step: the gaps that ended there over the steps spent there by those
gaps and by the functions idle that long now (and a function's own gaps there over their own steps
there), not the share of the gaps that ended there, which was 1 for any group with such a gap. A function's
rate is counted over at least ``min_rate_span`` steps since its first call, so a function just
seen once is grouped with the sparse functions it most likely is, not with the busiest ones
(one call over one step would be a rate of 1).

**Recurrence calibration.** The hazard only sees the time since the last call. Many functions also
recur at the same minute of the hour or half hour without doing so every hour (cron-like timers that
skip hours, timers with ad-hoc calls in between, which reset the idle time). So ``predict`` passes
the hazard through a logistic model whose inputs are the hazard's logit, the idle time, how often
the function was active so far, and for each recurrence period (15, 30 and 60 minutes by default) how
many and what share of the earlier steps at the same phase (``now - k * period``) had a call, plus
the squares and the product of the hazard's logit and the log idle time. Its thirteen coefficients
are fitted by Newton's method on the steps observed in the last day (after a
``calibration_warmup``), each row from what was known before that step (the hazard predicted then,
the counts until then) and whether the function was called in it (at most ``ROWS_PER_STEP`` calls
and as many non-calls per step, a seeded sample weighted by what it stands for, so memory does not
grow with the number of functions); ``fit`` fits at its end, ``observe`` refits every hour. A fit
is only adopted if, fitted without the newest hour's rows, it forecasts those rows better (log-loss)
than the hazard alone. Too few calls or non-calls, a fit that does not converge or one that fails
that check leave the hazard as it is (``calibration`` is then ``None``). ``hazard()`` gives the
uncalibrated probabilities.

Everything is online and causal: ``observe(counts)`` adds one step of counts; ``predict()`` uses
only what was observed before (the calibration, too, is fitted on rows of steps already observed).
It was chosen over simpler rules by ``scaleahead bench serverless`` on azure-functions-1m
(docs/serverless.md).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from scaleahead.types import FloatArray, InvocationForecast, WorkloadRef

#: Invocation-rate edges (share of minutes with invocations) of the pooled-hazard groups.
RATE_EDGES: tuple[float, ...] = (0.005, 0.02, 0.08, 0.3)
#: Pseudo-steps at risk with which a group's pooled hazard is shrunk toward the group's memoryless
#: rate (and that toward all groups'): ``pool_strength`` of ``InvocationForecaster``. 4, as
#: ``prior_strength``: the history's validation minutes agree (docs/benchmarks.md, 2026-12-05).
POOL_STRENGTH = 4.0
#: Recurrence periods (s) of the calibration: a call at the same minute of the quarter hour, half hour and hour.
RECURRENCE_PERIODS_S: tuple[float, ...] = (900.0, 1800.0, 3600.0)
#: Fewest calls (and non-calls) among the calibration rows for a calibration to be fitted.
MIN_CALIBRATION_EVENTS = 50
_LOGIT_EPS = 1e-4
#: Calibration inputs besides the recurrence counts: the hazard's logit, the idle time, the activity
#: so far, and the squares and product of the first two.
N_BASE_FEATURES = 6


def _sigmoid(z: FloatArray) -> FloatArray:
    out: FloatArray = 1.0 / (1.0 + np.exp(-np.clip(z, -50.0, 50.0)))
    return out


def _apply(coef: FloatArray, x: FloatArray) -> FloatArray:
    """The calibrated probabilities of feature rows ``x``."""
    return _sigmoid(x @ coef[:-1] + coef[-1])


def _log_loss(p: FloatArray, y: FloatArray, weight: FloatArray) -> float:
    q = np.clip(p, 1e-9, 1.0 - 1e-9)
    return float(-(weight * (y * np.log(q) + (1.0 - y) * np.log(1.0 - q))).sum() / weight.sum())


#: Most calibration rows kept per step, for calls and for non-calls each (a seeded sample, weighted by
#: what it stands for), so a day's rows stay bounded whatever the number of functions.
ROWS_PER_STEP = 512


def _sample(idx: npt.NDArray[np.int64], cap: int, rng: np.random.Generator) -> tuple[npt.NDArray[np.int64], float]:
    """At most ``cap`` of ``idx`` (sorted) and the weight each kept one carries."""
    if len(idx) <= cap:
        return idx, 1.0
    return np.sort(rng.choice(idx, size=cap, replace=False)), len(idx) / cap


def _logistic_fit(
    x: FloatArray, y: FloatArray, weight: FloatArray, iters: int = 50, ridge: float = 1e-3
) -> FloatArray | None:
    """Weighted logistic-regression coefficients (last one the intercept) by Newton's method; None if it fails."""
    z = np.concatenate([x, np.ones((len(x), 1))], axis=1)
    w = np.zeros(z.shape[1])
    eye = ridge * np.eye(len(w))
    for _ in range(iters):
        p = _sigmoid(z @ w)
        grad = z.T @ (weight * (p - y)) + ridge * w
        hess = (z * (weight * p * (1.0 - p))[:, None]).T @ z + eye
        try:
            step = np.linalg.solve(hess, grad)
        except np.linalg.LinAlgError:
            return None
        w = w - step
        if not np.isfinite(w).all():
            return None
        if np.abs(step).max() < 1e-7:
            return w
    return None


class InvocationForecaster:
    """Online idle-time hazard model for many functions at once.

    Args:
        n_functions: how many functions (rows) are tracked.
        step_s: the step (60 s for the Azure trace).
        horizon: how many steps ``predict`` returns.
        max_idle: longest idle time (steps) with its own hazard bin; longer gaps share the last bin,
            whose hazard is per step (module docstring).
        prior_strength: pseudo-observations of the pooled hazard added to each function's own.
        pool_strength: pseudo-observations (steps at risk) with which each group's pooled hazard is
            shrunk toward the group's memoryless rate, and that toward all groups' (module
            docstring); 0: the raw ratios, 0 at an idle time no function reached (the definition
            before 2026-12-05 except in the open last bin).
        rate_edges: rate groups for the pooled hazard.
        min_rate_span: fewest steps a function's rate is counted over (60: one hour at 1-minute
            steps; chosen on the history part of azure-functions-1m, docs/serverless.md).
        smoothing_divisor: own gaps at idle time ``s`` are averaged over ``s +- s // this`` steps
            (8, chosen on the same history; 0 turns smoothing off).
        calibrate: fit the recurrence calibration in ``fit`` (module docstring); False: the hazard alone.
        recurrence_periods_s: the calibration's recurrence periods (s); periods shorter than two
            steps are skipped.
        calibration_warmup: steps observed before calibration rows are recorded (the hazard of
            the first steps has too little history to be calibrated against).
        calibration_window: the calibration is fitted on the rows of the last this many steps (a day
            at 1-minute steps, the control loop's window).
        recalibrate_steps: ``observe`` refits the calibration every this many steps (an hour at
            1-minute steps).
        calibration: fixed coefficients (``calibration`` of a forecaster with the same periods) to
            use instead of fitting (a replay of the past with the calibration of the whole past).
    """

    name = "idle_hazard"

    def __init__(
        self,
        n_functions: int,
        step_s: float = 60.0,
        horizon: int = 15,
        max_idle: int = 1440,
        prior_strength: float = 4.0,
        pool_strength: float = POOL_STRENGTH,
        rate_edges: Sequence[float] = RATE_EDGES,
        min_rate_span: int = 60,
        smoothing_divisor: int = 8,
        calibrate: bool = True,
        recurrence_periods_s: Sequence[float] = RECURRENCE_PERIODS_S,
        calibration_warmup: int = 60,
        calibration_window: int = 1440,
        recalibrate_steps: int = 60,
        calibration: FloatArray | None = None,
    ) -> None:
        if (
            n_functions < 0
            or horizon < 1
            or max_idle < 1
            or min_rate_span < 1
            or smoothing_divisor < 0
            or not pool_strength >= 0
        ):
            raise ValueError(
                "n_functions >= 0, horizon >= 1, max_idle >= 1, min_rate_span >= 1, smoothing_divisor >= 0 "
                "and pool_strength >= 0 are required"
            )
        self.min_rate_span = min_rate_span
        self.smoothing_divisor = smoothing_divisor
        self.n = n_functions
        self.step_s = step_s
        self.horizon = horizon
        self.max_idle = max_idle
        self.alpha = prior_strength
        self.beta = float(pool_strength)
        self.edges = np.asarray(rate_edges, dtype=np.float64)
        groups = len(self.edges) + 1
        # cum[f, j]: how often function f was next invoked fewer than j steps after an invocation
        # (idle bins 0 .. max_idle + 1, the last shared by all longer gaps). Kept cumulative so that
        # ``predict`` reads counts at, within and above an idle time without summing every row.
        self._cum = np.zeros((n_functions, max_idle + 3))  # [functions, idle bins + 1]
        self._bins = np.arange(max_idle + 3)
        self._pool = np.zeros((groups, max_idle + 2))  # [rate groups, idle bins]
        # steps at risk in the open last bin (idle times max_idle + 1 and more) of the gaps that ended
        # there: per group (at the gap's end) and per function, from the gaps' true lengths
        self._open_steps = np.zeros(groups)
        self._own_open_steps = np.zeros(n_functions)
        self._last = np.full(n_functions, -1, dtype=np.int64)  # step of the last invocation
        self._first = np.full(n_functions, -1, dtype=np.int64)
        self._active = np.zeros(n_functions)
        self._t = 0  # steps observed so far
        self.periods = tuple(p for p in (int(round(x / step_s)) for x in recurrence_periods_s) if p >= 2)
        # hits[i][f, j]: steps at phase j (step index mod periods[i]) at which function f was called;
        # phase_steps[i][j]: steps observed at phase j
        self._hits = [np.zeros((n_functions, p)) for p in self.periods]
        self._phase_steps = [np.zeros(p) for p in self.periods]
        self.calibrate = calibrate
        self.calibration_warmup = calibration_warmup
        n_coef = N_BASE_FEATURES + 2 * len(self.periods) + 1
        if calibration is not None:
            calibration = np.asarray(calibration, dtype=np.float64)
            if calibration.shape != (n_coef,) or not np.isfinite(calibration).all():
                raise ValueError(f"calibration needs {n_coef} finite coefficients for periods {self.periods}")
        self._coef: FloatArray | None = calibration
        #: Held-out log-loss of the hazard and of the calibration at the last fit (None: not checked).
        self.calibration_check: tuple[float, float] | None = None
        self._fixed = calibration is not None
        if calibration_window < 1 or recalibrate_steps < 1:
            raise ValueError("calibration_window >= 1 and recalibrate_steps >= 1 are required")
        self.recalibrate_steps = recalibrate_steps
        self._rows: deque[npt.NDArray[np.float32]] = deque(maxlen=calibration_window)
        self._labels: deque[npt.NDArray[np.bool_]] = deque(maxlen=calibration_window)
        self._weights: deque[npt.NDArray[np.float32]] = deque(maxlen=calibration_window)

    @property
    def calibration(self) -> FloatArray | None:
        """The recurrence calibration's coefficients (None: the hazard is used as it is)."""
        return None if self._coef is None else self._coef.copy()

    @property
    def steps_observed(self) -> int:
        return self._t

    def fit(self, counts: npt.NDArray[np.int64]) -> InvocationForecaster:
        """Observe a history ``counts[f, t]`` (invocations per function per step), oldest first.

        With ``calibrate`` (and no fixed ``calibration``) the calibration is fitted at the end on
        the rows recorded so far (``observe``).
        """
        for t in range(counts.shape[1]):
            self._observe(counts[:, t], refit=False)
        if self.calibrate and not self._fixed:
            self._fit_calibration()
        return self

    def _fit_calibration(self) -> None:
        """Fit the calibration on the recorded rows, if it forecasts the newest of them better than the hazard.

        The check: fitted on all but the last ``recalibrate_steps`` steps' rows (at most a quarter
        of them), the calibration must have a lower (weighted) log-loss than the hazard alone on
        those held-out newest rows; then it is refitted on all rows. Otherwise the hazard is used.
        ``calibration_check`` keeps the two held-out log-losses (hazard, calibrated).
        """
        self._coef = None
        self.calibration_check = None
        if not self._rows:
            return
        y = np.concatenate(self._labels).astype(np.float64)
        calls = int(y.sum())
        if min(calls, len(y) - calls) < MIN_CALIBRATION_EVENTS:
            return
        x = np.concatenate(self._rows).astype(np.float64)
        weight = np.concatenate(self._weights).astype(np.float64)
        held = min(self.recalibrate_steps, len(self._rows) // 4)
        cut = len(y) - sum(len(r) for r in list(self._rows)[-held:]) if held >= 1 else len(y)
        if cut < len(y):  # something to hold out
            older = _logistic_fit(x[:cut], y[:cut], weight[:cut])
            if older is None:
                return
            hazard = _log_loss(_sigmoid(x[cut:, 0]), y[cut:], weight[cut:])  # column 0: the hazard's logit
            calibrated = _log_loss(_apply(older, x[cut:]), y[cut:], weight[cut:])
            self.calibration_check = (hazard, calibrated)
            if not calibrated < hazard:
                return
        self._coef = _logistic_fit(x, y, weight)

    def _features(self, hazard: FloatArray) -> FloatArray:
        """Calibration inputs ``[functions, horizon, features]`` for the hazard's coming steps."""
        n, h = hazard.shape
        k = np.arange(h)
        p = np.clip(hazard, _LOGIT_EPS, 1.0 - _LOGIT_EPS)
        idle = np.maximum(self._t - self._last, 0)[:, None] + k[None, :]
        logit, log_idle = np.log(p / (1.0 - p)), np.log1p(idle)
        cols = [logit, log_idle, np.broadcast_to(np.log1p(self._active)[:, None], (n, h))]
        for period, hits, steps in zip(self.periods, self._hits, self._phase_steps, strict=True):
            phase = (self._t + k) % period
            at = hits[:, phase]  # [functions, horizon]
            cols.append(np.log1p(at))
            cols.append(at / np.maximum(steps[phase], 1.0)[None, :])
        # second-order terms of the hazard and the idle time: how much the hazard is trusted differs
        # with the idle time (few own gaps at long idle times) and at its extremes
        cols += [logit * logit, log_idle * log_idle, logit * log_idle]
        return np.stack(cols, axis=-1)

    def observe(self, counts: npt.NDArray[np.int64] | FloatArray) -> None:
        """Add the counts of the next step (one value per function; NaN = unknown, treated as 0).

        With ``calibrate`` (and no fixed ``calibration``) each step after the warm-up also records
        what was known before it (the hazard then, the recurrence counts) and whether each function
        seen so far was called; the last ``calibration_window`` steps' rows are kept, and the
        calibration is refitted on them every ``recalibrate_steps`` steps.
        """
        self._observe(counts, refit=True)

    def _observe(self, counts: npt.NDArray[np.int64] | FloatArray, refit: bool) -> None:
        active = np.nan_to_num(np.asarray(counts, dtype=np.float64)) > 0
        if self.calibrate and not self._fixed and self._t >= self.calibration_warmup:
            known = np.nonzero(self._last >= 0)[0]
            rng = np.random.default_rng(self._t)  # seeded by the step: the same history, the same rows
            calls, w_calls = _sample(known[active[known]], ROWS_PER_STEP, rng)
            quiet, w_quiet = _sample(known[~active[known]], ROWS_PER_STEP, rng)
            keep = np.concatenate([calls, quiet])
            x = self._features(self.hazard(1))[keep, 0, :]
            self._rows.append(x.astype(np.float32))
            self._labels.append(active[keep])
            self._weights.append(np.repeat(np.array([w_calls, w_quiet], dtype=np.float32), [len(calls), len(quiet)]))
            if refit and (self._t - self.calibration_warmup + 1) % self.recalibrate_steps == 0:
                self._fit_calibration()
        seen = self._last >= 0
        upd = active & seen
        if upd.any():
            gap = self._t - self._last[upd]
            idle = np.minimum(gap, self.max_idle + 1)
            groups = self._groups()[upd]
            rows = np.nonzero(upd)[0]
            self._cum[rows] += self._bins[None, :] > idle[:, None]  # rows are distinct
            np.add.at(self._pool, (groups, idle), 1.0)
            # at risk at idle times max_idle + 1 .. gap: the open bin's steps of this gap
            open_steps = np.maximum(gap - self.max_idle, 0).astype(np.float64)
            np.add.at(self._open_steps, groups, open_steps)
            self._own_open_steps[rows] += open_steps
        self._active += active
        for period, hits, steps in zip(self.periods, self._hits, self._phase_steps, strict=True):
            hits[:, self._t % period] += active
            steps[self._t % period] += 1
        self._first = np.where(active & (self._first < 0), self._t, self._first)
        self._last = np.where(active, self._t, self._last)
        self._t += 1

    def _groups(self) -> npt.NDArray[np.int64]:
        span = np.maximum(self._t - self._first, self.min_rate_span)
        rate = np.where(self._first >= 0, self._active / span, 0.0)
        return np.digitize(rate, self.edges).astype(np.int64)

    def predict(self, horizon: int | None = None) -> FloatArray:
        """Probabilities ``[functions, horizon]`` for the next steps (see ``InvocationForecast``).

        Row f, column k: the probability of an invocation in step ``now + k`` given none from the
        last invocation until then: the hazard through the recurrence calibration when one was
        fitted (or given). A function never seen gets 0.
        """
        p = self.hazard(horizon)
        if self._coef is None:
            return p
        seen = self._last >= 0
        out = np.zeros_like(p)
        out[seen] = _apply(self._coef, self._features(p)[seen])
        return out

    def _pool_counts(self) -> tuple[FloatArray, FloatArray]:
        """Events and steps at risk ``[rate groups, idle bins]`` of the pooled hazard (bin 0 unused).

        Bin ``s`` below the open last bin: gaps that ended at idle time ``s``, and the gaps that ended
        at ``s`` or later plus the functions idle longer than ``s`` now (right-censored). The open bin
        (``max_idle + 1`` and more): the gaps that ended there, and the steps spent there by those
        gaps and by the functions idle that long now, so its ratio is a hazard per step.
        """
        last_bin = self.max_idle + 1
        seen = self._last >= 0
        idle = (self._t - self._last)[seen]  # true idle steps of the functions seen, at the next step
        groups = self._groups()[seen]
        ongoing = np.zeros_like(self._pool)  # [rate groups, idle bins]: functions idle that long now
        np.add.at(ongoing, (groups, np.minimum(idle, last_bin)), 1.0)
        survived = np.zeros_like(self._pool)  # ongoing gaps longer than s: at risk at s, not ended
        survived[:, :-1] = np.cumsum(ongoing[:, ::-1], axis=1)[:, ::-1][:, 1:]
        at_risk = np.cumsum(self._pool[:, ::-1], axis=1)[:, ::-1] + survived
        at_risk[:, 0] = 0.0  # no idle time 0
        open_steps = self._open_steps.copy()
        np.add.at(open_steps, groups, np.maximum(idle - last_bin, 0).astype(np.float64))
        at_risk[:, last_bin] = open_steps
        return self._pool, at_risk

    def pooled_hazard(self) -> FloatArray:
        """The pooled hazard ``[rate groups, idle bins]`` (bin ``s``: idle ``s`` steps; bin 0 unused).

        Each group's events over its steps at risk (``_pool_counts``), shrunk with ``pool_strength``
        (β) pseudo-steps toward the group's memoryless rate (all its events over all its steps at
        risk), itself shrunk the same way toward all groups' memoryless rate: large counts keep
        their ratio, an idle time no function of the group reached gets the group's rate.
        ``pool_strength`` 0: the raw ratios (0 where nothing was at risk).
        """
        events, at_risk = self._pool_counts()
        if self.beta == 0:
            out0: FloatArray = np.divide(events, at_risk, out=np.zeros_like(events), where=at_risk > 0)
            return out0
        b = self.beta
        total_risk = float(at_risk.sum())
        h0 = float(events.sum()) / total_risk if total_risk > 0 else 0.0  # memoryless, all groups
        h0_g = (events.sum(axis=1) + b * h0) / (at_risk.sum(axis=1) + b)  # memoryless, each group
        out: FloatArray = (events + b * h0_g[:, None]) / (at_risk + b)
        return out

    def hazard(self, horizon: int | None = None) -> FloatArray:
        """The idle-time hazard ``[functions, horizon]`` alone (``predict`` without the calibration)."""
        h = horizon or self.horizon
        seen = self._last >= 0
        idle = self._t - self._last  # idle steps at the first predicted step
        cols = np.clip(idle[:, None] + np.arange(h)[None, :], 1, self.max_idle + 1)  # [functions, horizon]
        last_bin = self.max_idle + 1
        cum = self._cum  # cum[:, j] = gaps of length < j (exact: counts are integers)
        groups = self._groups()
        pool_hazard = self.pooled_hazard()
        rows = np.arange(self.n)[:, None]
        prior = pool_hazard[groups[:, None], cols]
        own = cum[rows, cols + 1] - cum[rows, cols]
        if self.smoothing_divisor > 0:
            # the window stays below the open bin, which is not one idle time
            width = cols // self.smoothing_divisor
            hi = np.minimum(cols + width, self.max_idle)
            lo = np.minimum(np.maximum(cols - width, 1), hi)  # (lo <= hi in the open bin too, unused there)
            smooth = (cum[rows, hi + 1] - cum[rows, lo]) / (hi - lo + 1)
            own = np.where(cols < last_bin, smooth, own)
        tail = cum[:, -1:] - cum[rows, cols]  # gaps of at least s
        # in the open bin, per step: own gaps that ended there over the steps spent there, theirs and
        # (right-censored, as in the pool) the current gap's, given no call until the step forecast
        ongoing = np.maximum(idle[:, None] + np.arange(h)[None, :] - last_bin, 0)
        tail = np.where(cols < last_bin, tail, self._own_open_steps[:, None] + ongoing)
        p = (own + self.alpha * prior) / (tail + self.alpha)
        p = np.where(seen[:, None], p, 0.0)
        out: FloatArray = np.clip(p, 0.0, 1.0)
        return out

    def idle_s(self) -> FloatArray:
        """How long each function has been idle at the next step (inf if never seen)."""
        idle = np.where(self._last >= 0, (self._t - self._last) * self.step_s, np.inf)
        out: FloatArray = idle.astype(np.float64)
        return out

    def forecasts(self, workloads: Sequence[WorkloadRef], origin: float) -> dict[WorkloadRef, InvocationForecast]:
        """One ``InvocationForecast`` per workload (row order = ``workloads``) made at ``origin``."""
        if len(workloads) != self.n:
            raise ValueError(f"{len(workloads)} workloads for {self.n} tracked functions")
        probs = self.predict()
        idle = self.idle_s()
        return {
            ref: InvocationForecast(ref, origin, self.step_s, probs[i], float(idle[i]), self.name)
            for i, ref in enumerate(workloads)
        }
