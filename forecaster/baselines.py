"""Baseline forecasters of EVALUATION.md section 3: naive, seasonal-naive, window mean.

Point forecasts plus quantiles from the model's own empirical residuals on the history, per
horizon step. They are fast (vectorised over origins) and serve as the named fallback when a
learned model cannot be used.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np

from forecaster.base import Forecaster, fill_short_gaps_causal, glitches_as_missing, padded_history
from scaleahead.errors import DataError
from scaleahead.types import FloatArray, Forecast, Series, WorkloadRef, batch_forecasts

DAY_S = 86400.0


class ResidualQuantileForecaster(Forecaster):
    """A point forecaster whose quantiles are point + empirical residual quantiles per step."""

    max_fit_origins = 2000

    def __init__(self) -> None:
        self._resid: dict[float, FloatArray] | None = None
        self._fit_horizon = 0
        self._start = 0.0

    def point(self, values: FloatArray, origins: np.ndarray, horizon_steps: int, step_s: float) -> FloatArray:
        """Point forecasts ``[len(origins), horizon_steps]`` using ``values[:origin]`` only."""
        raise NotImplementedError

    def fit(self, history: Sequence[Series], horizon_steps: int | None = None) -> Forecaster:
        resid_rows = []
        for s in history:
            h = horizon_steps or max(1, int(round(900.0 / s.step_s)))
            self._fit_horizon = h
            self._start = s.start  # the series' time origin, for time-of-day features
            values = fill_short_gaps_causal(glitches_as_missing(s.values))  # a 1e42 glitch is missing
            n = len(values)
            lo = self.min_context(s.step_s)
            if n - h <= lo:
                # Shorter than the model's context (seasonal-naive: a day): its point forecast falls
                # back to the last value there, so learn the residuals of that rule instead of none.
                lo = 1
            if n - h <= lo:
                continue
            origins = np.linspace(lo, n - h, num=min(self.max_fit_origins, n - h - lo), dtype=np.int64)
            # Only origins with an observed value before them: before the first one (a workload
            # added later, a metric that starts inside the window) a point forecast is a made-up 0,
            # and its error (the whole demand level) would widen every quantile.
            origins = origins[np.isfinite(_last_valid(values, origins))]
            if origins.size == 0:
                continue
            pred = self.point(values, origins, h, s.step_s)
            actual = np.stack([values[o : o + h] for o in origins])
            resid_rows.append(actual - pred)
        if resid_rows:
            resid = np.concatenate(resid_rows, axis=0)
            with warnings.catch_warnings():  # steps never observed in the history: no residual, 0
                warnings.simplefilter("ignore", RuntimeWarning)
                self._resid = {q: np.nan_to_num(np.nanquantile(resid, q, axis=0)) for q in self.quantiles}
        return self

    def min_context(self, step_s: float) -> int:
        return 1

    @property
    def needs_fit(self) -> bool:
        return self._resid is None

    @property
    def resid(self) -> dict[float, FloatArray] | None:
        """Empirical residual quantiles per horizon step, ``{q: [H]}`` (``None`` before ``fit``)."""
        return self._resid

    def predict_origins(self, series: Series, origins: np.ndarray, horizon_steps: int) -> dict[float, FloatArray]:
        q = self._quantiles(self._points(series, origins, horizon_steps))
        return {k: q[:, j, :] for j, k in enumerate(sorted(self.quantiles))}

    def forecast_many(
        self, items: Sequence[tuple[WorkloadRef, Series]], origin: float, horizon_steps: int
    ) -> list[Forecast]:
        """Every workload's point forecast, then all their quantiles as one batch (``QuantileRows``).

        The same forecasts as ``forecast`` one by one; a workload without usable history raises
        DataError as there.
        """
        if not items:
            return []
        origins: list[float] = []
        steps: list[float] = []
        points: list[FloatArray] = []
        for ref, s in items:
            padded, i = padded_history(ref, s, origin)
            points.append(self._points(padded, np.array([i]), horizon_steps)[0])
            origins.append(padded.start + i * padded.step_s)
            steps.append(padded.step_s)
        q = self._quantiles(np.array(points))
        return batch_forecasts([ref for ref, _ in items], origins, steps, q, sorted(self.quantiles), self.name)

    def _points(self, series: Series, origins: np.ndarray, horizon_steps: int) -> FloatArray:
        """Point forecasts ``[origins, horizon]`` after the checks every forecast passes."""
        # A sample beyond float32 (a glitch such as 1e42) is missing, as in fit: copied a day on
        # (seasonal-naive) or averaged in, it was forecast as demand.
        values = fill_short_gaps_causal(glitches_as_missing(series.values))
        self._start = series.start
        origins = np.asarray(origins, dtype=np.int64)
        if len(origins) and np.isnan(_last_valid(values, origins)).any():
            first = int(origins[np.isnan(_last_valid(values, origins))][0])
            raise DataError(
                f"Series {series.name!r} has no observed value before origin index {first}: nothing to forecast from.",
                "Check the demand query; missing data is never taken as zero demand.",
            )
        if self._resid is None:
            # Without residuals every quantile would equal the point forecast: a certainty the
            # model never earned, which a planner would act on as if it were real.
            raise DataError(
                f"Model {self.name!r} has no forecast uncertainty: no history it was fitted on was longer than "
                "its forecast horizon, so it never saw its own errors.",
                "Give more history before the decision time (at least the horizon plus two steps): a later "
                "--at, or a longer history to fit on.",
            )
        return self.point(values, origins, horizon_steps, series.step_s)

    def _quantiles(self, pred: FloatArray) -> FloatArray:
        """``[rows, K, horizon]``: point + residual quantile (ascending levels), >= 0, never crossing."""
        assert self._resid is not None  # _points checked
        h = pred.shape[1]
        rs = [self._resid[q] for q in sorted(self.quantiles)]
        resid = np.stack([np.pad(r, (0, max(0, h - len(r))), mode="edge")[:h] for r in rs])  # [K, horizon]
        out = np.maximum(pred[:, None, :] + resid[None, :, :], 0.0)
        out.sort(axis=1)  # monotone: quantiles never cross (as monotone_quantiles, all rows at once)
        return out


def _last_valid(values: FloatArray, origins: np.ndarray) -> FloatArray:
    """The last non-NaN value strictly before each origin (NaN if none)."""
    valid = ~np.isnan(values)
    idx = np.where(valid, np.arange(len(values)), -1)
    last = np.maximum.accumulate(idx)
    pos = origins - 1
    out = np.full(len(origins), np.nan)
    ok = pos >= 0
    li = last[np.clip(pos, 0, len(values) - 1)]
    ok &= li >= 0
    out[ok] = values[li[ok]]
    return out


def _window_sums(x: FloatArray, lo: np.ndarray, hi: np.ndarray, w: int) -> FloatArray:
    """``x[lo:hi].sum()`` for each window, ``0 <= lo <= hi <= len(x)`` and ``hi - lo <= w``.

    Each sum reads only the values near its window: ``x`` is cut into blocks of ``w`` steps with
    prefix sums (left to right) and suffix sums (right to left) inside each block (van Herk /
    Gil-Werman), and a window spans at most two adjacent blocks, so its sum is the suffix of the
    first block plus the prefix of the second. A difference of one cumulative sum over the whole
    series (``csum[hi] - csum[lo]``) instead loses every later window to one huge but finite value
    (1e37, not a float32 glitch) earlier on, and loses digits on long series. Only a window shorter
    than ``w`` that starts inside a block (cut off by the end of the series) is a difference of two
    prefix sums of one block.
    """
    out = np.zeros(len(lo))
    ok = hi > lo
    if not ok.any():
        return out
    n_blocks = -(-len(x) // w)
    padded = np.zeros(n_blocks * w)
    padded[: len(x)] = x
    blocks = padded.reshape(n_blocks, w)
    pre = np.cumsum(blocks, axis=1).ravel()  # pre[i]: from the start of i's block to i
    suf = np.cumsum(blocks[:, ::-1], axis=1)[:, ::-1].ravel()  # suf[i]: from i to the end of its block
    a, b = lo[ok], hi[ok] - 1  # first and last index in the window
    s = pre[b]  # a at the start of b's block: the whole window
    two = a // w != b // w
    s[two] += suf[a[two]]
    inner = ~two & (a % w != 0)
    s[inner] -= pre[a[inner] - 1]
    out[ok] = s
    return out


class Naive(ResidualQuantileForecaster):
    """The last observed value, repeated."""

    name = "naive"

    def point(self, values: FloatArray, origins: np.ndarray, horizon_steps: int, step_s: float) -> FloatArray:
        last = _last_valid(values, origins)
        return np.repeat(np.nan_to_num(last)[:, None], horizon_steps, axis=1)


class SeasonalNaive(ResidualQuantileForecaster):
    """The value one day back (falls back to the last value where that is missing)."""

    name = "seasonal_naive"

    def min_context(self, step_s: float) -> int:
        return int(round(DAY_S / step_s))

    def point(self, values: FloatArray, origins: np.ndarray, horizon_steps: int, step_s: float) -> FloatArray:
        lag = int(round(DAY_S / step_s))
        idx = origins[:, None] + np.arange(horizon_steps)[None, :] - lag
        # Steps less than a day ahead only: for horizons past a day, wrap by whole days.
        while (idx >= origins[:, None]).any():
            idx = np.where(idx >= origins[:, None], idx - lag, idx)
        out = np.where(idx >= 0, values[np.clip(idx, 0, len(values) - 1)], np.nan)
        last = np.nan_to_num(_last_valid(values, origins))
        return np.where(np.isnan(out), last[:, None], out)


class WindowMean(ResidualQuantileForecaster):
    """The mean of the last hour, repeated."""

    name = "window_mean"
    window_s = 3600.0

    def point(self, values: FloatArray, origins: np.ndarray, horizon_steps: int, step_s: float) -> FloatArray:
        w = max(1, int(round(self.window_s / step_s)))
        cnt = np.concatenate(([0], np.cumsum(~np.isnan(values))))  # integer: exact differences
        lo = np.clip(origins - w, 0, len(values))
        hi = np.clip(origins, 0, len(values))
        n = cnt[hi] - cnt[lo]
        mean = np.where(n > 0, _window_sums(np.nan_to_num(values), lo, hi, w) / np.maximum(n, 1), np.nan)
        mean = np.where(np.isnan(mean), np.nan_to_num(_last_valid(values, origins)), mean)
        return np.repeat(mean[:, None], horizon_steps, axis=1)


class Ridge(ResidualQuantileForecaster):
    """Ridge regression on recent lags and time-of-day features, one output per horizon step.

    Features at an origin: the last ``n_lags`` values, the means of the last 15 minutes and the
    last hour, and sin/cos of the time of day (three harmonics). Missing lags take the last hour's
    mean (the model never sees a zero for a gap). numpy only; fitted in closed form.
    """

    name = "ridge"
    n_lags = 12
    alpha = 1.0
    max_fit_rows = 20000

    def __init__(self) -> None:
        super().__init__()
        self._coef: FloatArray | None = None  # [n_features + 1, horizon]
        self._mu: FloatArray | None = None
        self._sd: FloatArray | None = None

    def window_steps(self, step_s: float) -> int:
        """How many steps before an origin the features read (the last hour, at least ``n_lags``)."""
        return max(self.n_lags, int(round(3600.0 / step_s)), 1)

    def _features(self, values: FloatArray, origins: np.ndarray, step_s: float, start: float) -> FloatArray:
        from forecaster.features import Segment, gather

        m = self.window_steps(step_s)
        window = gather(values, origins, Segment(-m, 1, m))  # [n, m]
        last = _last_valid(values, origins)
        return self.features_from_window(window, last, start + origins.astype(np.float64) * step_s, step_s)

    def features_from_window(
        self, window: FloatArray, last: FloatArray, times: FloatArray, step_s: float
    ) -> FloatArray:
        """Features from the ``window_steps`` values before each origin, ``[n, m]`` (NaN = missing).

        ``last`` is the last observed value before each origin (used where the hour is empty),
        ``times`` the origins' epoch seconds.
        """
        hour_n = max(1, int(round(3600.0 / step_s)))
        quarter_n = max(1, int(round(900.0 / step_s)))
        lags = window[:, -self.n_lags :]  # [n, n_lags]
        hour = window[:, -hour_n:]
        seen = ~np.isnan(hour)
        hour_mean = np.where(seen, hour, 0.0).sum(1) / np.maximum(seen.sum(1), 1)
        hour_mean = np.where(seen.any(1), hour_mean, np.nan_to_num(last))
        q = hour[:, -quarter_n:]
        qs = ~np.isnan(q)
        quarter = np.where(qs.any(1), np.where(qs, q, 0.0).sum(1) / np.maximum(qs.sum(1), 1), hour_mean)
        lags = np.where(np.isnan(lags), hour_mean[:, None], lags)
        ang = 2 * np.pi * (times % DAY_S) / DAY_S
        tod = [f(k * ang) for k in (1, 2, 3) for f in (np.sin, np.cos)]
        return np.column_stack([lags, quarter, hour_mean, *tod])

    def point_from_features(self, x: FloatArray, last: FloatArray, horizon_steps: int) -> FloatArray:
        """Point forecasts ``[n, horizon_steps]`` from ``features_from_window`` rows."""
        if self._coef is None or self._mu is None or self._sd is None:
            return np.repeat(np.nan_to_num(last)[:, None], horizon_steps, axis=1)
        z = (x - self._mu) / self._sd
        pred = np.column_stack([z, np.ones(len(z))]) @ self._coef  # [n, H_fit]
        if horizon_steps > pred.shape[1]:
            pred = np.pad(pred, ((0, 0), (0, horizon_steps - pred.shape[1])), mode="edge")
        return np.asarray(pred[:, :horizon_steps])

    def state(self) -> dict[str, Any]:
        """The fitted coefficients and residual quantiles as plain data (for a checkpoint embedding it)."""
        resid = {f"{q:g}": r.tolist() for q, r in self._resid.items()} if self._resid is not None else None
        if self._coef is None or self._mu is None or self._sd is None:
            return {"mu": None, "sd": None, "coef": None, "resid": resid}
        return {"mu": self._mu.tolist(), "sd": self._sd.tolist(), "coef": self._coef.tolist(), "resid": resid}

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> Ridge:
        model = cls()
        if state.get("coef") is not None:
            model._mu = np.asarray(state["mu"], dtype=np.float64)
            model._sd = np.asarray(state["sd"], dtype=np.float64)
            model._coef = np.asarray(state["coef"], dtype=np.float64)
        if state.get("resid") is not None:
            model._resid = {float(q): np.asarray(r, dtype=np.float64) for q, r in state["resid"].items()}
        return model

    def point(self, values: FloatArray, origins: np.ndarray, horizon_steps: int, step_s: float) -> FloatArray:
        x = self._features(values, origins, step_s, self._start)
        return self.point_from_features(x, _last_valid(values, origins), horizon_steps)

    def fit(self, history: Sequence[Series], horizon_steps: int | None = None) -> Forecaster:
        rng = np.random.default_rng(0)
        xs, ys = [], []
        h = 1
        for s in history:
            h = horizon_steps or max(1, int(round(900.0 / s.step_s)))
            values = fill_short_gaps_causal(glitches_as_missing(s.values))
            n = len(values)
            if n - h <= self.n_lags:
                continue
            origins = np.arange(self.n_lags, n - h + 1)
            if len(origins) > self.max_fit_rows:
                origins = np.sort(rng.choice(origins, self.max_fit_rows, replace=False))
            y = np.stack([values[o : o + h] for o in origins])
            ok = ~np.isnan(y).any(1) & ~np.isnan(_last_valid(values, origins))
            if ok.any():
                xs.append(self._features(values, origins[ok], s.step_s, s.start))
                ys.append(y[ok])
        self._coef = None
        if xs:
            x, y = np.concatenate(xs), np.concatenate(ys)
            self._mu, self._sd = x.mean(0), x.std(0) + 1e-9
            z = np.column_stack([(x - self._mu) / self._sd, np.ones(len(x))])
            reg = self.alpha * np.eye(z.shape[1])
            reg[-1, -1] = 0.0
            self._coef = np.linalg.solve(z.T @ z + reg, z.T @ y)
        return super().fit(history, horizon_steps)
