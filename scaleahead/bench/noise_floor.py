"""``scaleahead bench noise-floor``: how much of a trace's forecast error no forecaster can remove.

A DIAGNOSTIC, not a forecaster: the "oracle-smoothed" forecasts below read the test period's
actual values around each forecast step (they peek by design), so they are never selectable as a
model and never appear in ``bench forecast``. They answer one question: on the same origins and
with the same scoring as ``bench forecast`` (EVALUATION.md section 3), how low can ``wql`` and
``MAE`` go if a forecaster knew the future *smooth* demand exactly and only the step-to-step noise
remained? If even that is not below a target ratio to the best baseline, the target is out of reach
for every model.

For each smoothing window ``w`` the oracle's median at step ``t`` is the leave-one-out centred
moving mean of the actuals, ``mean(y[t-k..t+k] without y[t])`` (``w = 2k + 1`` steps; ``y[t]``
itself is excluded, otherwise a window of one step would be a perfect "forecast"). Its quantiles:

- ``poisson`` (count traces only: every observed value a non-negative integer): the quantiles of
  Poisson(rate = the smoothed value), i.e. pure counting noise around a known rate;
- ``empirical``: the smoothed value plus the quantiles of the residuals ``y - smooth`` over the
  scored test points (standardised by ``sqrt(rate)`` for count traces), i.e. the noise
  distribution itself is known too.

For count traces the bench also reports ``poisson_expected``: the wql and MAE a forecaster would
get *in expectation* if the demand were exactly Poisson around the smoothed rate (computed from
the Poisson distribution, not from the actuals). Real request counts are over-dispersed (bursty
sessions), so this is a conservative, i.e. low, floor.

A second kind of oracle, ``in_sample_<model>`` (``--in-sample``), answers a different question:
how well can a model of a given family fit the test period if it is *trained on it* (the whole
trace, test period included, then scored on the same test origins)? It measures what the model
family can express at all, not what it can forecast; if even the in-sample fit is not below a
target ratio, no amount of tuning of that family on the history will get there.

The reported floor is the best (lowest ``wql``) over windows and quantile modes, chosen on the
test period: that favours the oracle, which is what a floor should do.

Two model-light cross-checks come with it. The leave-one-out smoother is itself noisy (it
averages ``w - 1`` noisy neighbours), which inflates the oracle's error by about
``sqrt(1 + 1/(w - 1))`` under white noise: ``white_noise_corrected`` divides that out (an
optimistic floor; positively correlated noise makes the correction too generous). And the
variogram ``gamma(k) = mean((y[t+k] - y[t])^2) / 2`` of the test period: its value extrapolated to
lag 0 (the "nugget", from lags 2..6) is the variance no forecaster at any horizon can explain if
the noise is white; ``nugget / ridge MSE`` bounds how far the squared error can fall.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from forecaster.base import Forecaster, fill_short_gaps
from forecaster.registry import BASELINES, make_model
from scaleahead.bench import forecast as fb
from scaleahead.types import FloatArray, Series

#: Smoothing windows of the oracle, in seconds (centred, the step itself left out).
WINDOWS_S: tuple[float, ...] = (30.0, 60.0, 120.0, 300.0, 600.0, 1800.0)
QUANTILES: tuple[float, ...] = (0.1, 0.5, 0.9, 0.99)


@dataclass
class NoiseFloorResult:
    bench: fb.BenchResult  # the baselines on the same origins
    oracles: dict[str, dict[str, Any]]  # name -> section-3 metrics
    floor: str  # the oracle row with the lowest wql
    counts: bool
    variogram: dict[str, Any]

    def ratios(self) -> dict[str, float]:
        best = self.bench.split["best_baseline"]
        b, o = self.bench.models[best], self.oracles[self.floor]
        out = {"wql": o["wql"] / b["wql"], "mae": o["mae"] / b["mae"]}
        corrected = [v["white_noise_corrected"] for v in self.oracles.values() if "white_noise_corrected" in v]
        if corrected:  # the most generous (lowest) over windows and modes
            out["white_noise_corrected_wql"] = min(c["wql"] for c in corrected) / b["wql"]
            out["white_noise_corrected_mae"] = min(c["mae"] for c in corrected) / b["mae"]
        best_mse = self.variogram["mse"].get(best)
        if best_mse:
            out["rmse_nugget"] = float(np.sqrt(self.variogram["nugget"] / best_mse))
        if "poisson_expected" in self.oracles:
            pe = self.oracles["poisson_expected"]
            out["poisson_expected_wql"] = pe["wql"] / b["wql"]
            out["poisson_expected_mae"] = pe["mae"] / b["mae"]
        return out

    def to_json(self) -> dict[str, Any]:
        data = self.bench.to_json()
        data["diagnostic"] = "noise-floor"
        data["oracles"] = {k: {m: v for m, v in s.items() if m != "mae_by_step"} for k, s in self.oracles.items()}
        data["floor"] = self.floor
        data["floor_over_best_baseline"] = self.ratios()
        data["counts"] = self.counts
        data["variogram"] = self.variogram
        return data


def loo_centred_mean(values: FloatArray, half: int) -> FloatArray:
    """Mean of the observed values in ``[t - half, t + half]`` except ``t`` itself (NaN if none)."""
    seen = ~np.isnan(values)
    c_sum = np.concatenate(([0.0], np.cumsum(np.where(seen, values, 0.0))))
    c_cnt = np.concatenate(([0], np.cumsum(seen)))
    n = len(values)
    idx = np.arange(n)
    lo = np.clip(idx - half, 0, n)
    hi = np.clip(idx + half + 1, 0, n)
    total = c_sum[hi] - c_sum[lo] - np.where(seen, values, 0.0)
    cnt = c_cnt[hi] - c_cnt[lo] - seen
    return np.where(cnt > 0, total / np.maximum(cnt, 1), np.nan)


def _poisson_cdf_table(lam: FloatArray, k_max: int) -> FloatArray:
    """``P(Y <= k)`` for ``k = 0..k_max`` per rate, ``[n, k_max + 1]`` (log-space pmf, numpy only)."""
    lam = np.maximum(lam, 1e-9)[:, None]
    k = np.arange(k_max + 1)[None, :]
    log_fact = np.concatenate(([0.0], np.cumsum(np.log(np.arange(1, k_max + 1)))))[None, :]
    pmf = np.exp(k * np.log(lam) - lam - log_fact)
    return np.asarray(np.cumsum(pmf, axis=1))


def poisson_quantiles(lam: FloatArray, qs: Sequence[float]) -> dict[float, FloatArray]:
    """Quantiles of Poisson(``lam``) (the smallest k with ``P(Y <= k) >= q``), same shape as ``lam``."""
    flat = np.nan_to_num(lam.ravel())
    out = {q: np.zeros_like(flat) for q in qs}
    for i in range(0, len(flat), 20000):
        chunk = flat[i : i + 20000]
        k_max = int(np.ceil(chunk.max() + 12 * np.sqrt(chunk.max() + 1) + 20)) if len(chunk) else 1
        cdf = _poisson_cdf_table(chunk, k_max)
        for q in qs:
            out[q][i : i + 20000] = (cdf < q).sum(axis=1)
    return {q: v.reshape(lam.shape) for q, v in out.items()}


def poisson_expected_losses(lam: FloatArray, qs: Sequence[float]) -> tuple[dict[float, FloatArray], FloatArray]:
    """Expected pinball loss of the optimal quantile, and ``E|Y - median|``, if ``Y ~ Poisson(lam)``."""
    flat = np.nan_to_num(lam.ravel())
    pin = {q: np.zeros_like(flat) for q in qs}
    abs_med = np.zeros_like(flat)
    for i in range(0, len(flat), 20000):
        chunk = flat[i : i + 20000]
        k_max = int(np.ceil(chunk.max() + 12 * np.sqrt(chunk.max() + 1) + 20)) if len(chunk) else 1
        cdf = _poisson_cdf_table(chunk, k_max)
        pmf = np.diff(np.concatenate([np.zeros((len(chunk), 1)), cdf], axis=1), axis=1)
        k = np.arange(k_max + 1)[None, :]
        for q in qs:
            qk = (cdf < q).sum(axis=1)[:, None]
            e = k - qk
            pin[q][i : i + 20000] = (pmf * np.maximum(q * e, (q - 1) * e)).sum(axis=1)
            if q == 0.5:
                abs_med[i : i + 20000] = (pmf * np.abs(e)).sum(axis=1)
    return {q: v.reshape(lam.shape) for q, v in pin.items()}, abs_med.reshape(lam.shape)


def _is_counts(values: FloatArray) -> bool:
    v = values[np.isfinite(values)]
    return bool(len(v) and (v >= 0).all() and np.array_equal(v, np.round(v)))


def run(
    series: Series,
    trace: str,
    windows_s: Sequence[float] = WINDOWS_S,
    log: Callable[[str], None] = lambda _msg: None,
    in_sample: Sequence[str] = (),
    make: Callable[[str], Forecaster] = make_model,
) -> NoiseFloorResult:
    """Baselines as in ``bench forecast`` plus the oracle diagnostics on the same origins.

    ``in_sample`` names models to fit on the whole trace (test period included) and score on the
    test origins (rows ``in_sample_<name>``); they are not part of the floor.
    """
    bench = fb.run(series, trace, list(BASELINES), log=log)
    h = bench.actual.shape[1]
    actual = bench.actual  # [n, H], NaN = not scored
    ok = ~np.isnan(actual)
    filled = fill_short_gaps(series.values)
    idx = bench.origins[:, None] + np.arange(h)[None, :]  # [n, H]
    counts = _is_counts(series.values)
    ref_mae = bench.models[fb.REFERENCE]["mae"]
    oracles: dict[str, dict[str, Any]] = {}
    best_lam: FloatArray | None = None
    best_wql = np.inf
    for w_s in windows_s:
        half = max(1, int(round(w_s / series.step_s / 2)))
        smooth = loo_centred_mean(filled, half)
        lam = smooth[idx]  # [n, H]
        lam = np.where(np.isnan(lam), np.nan_to_num(np.nanmean(lam)), lam)
        label = f"{(2 * half + 1) * series.step_s:g}s"
        modes: dict[str, dict[float, FloatArray]] = {}
        if counts:
            modes["poisson"] = poisson_quantiles(lam, QUANTILES)
        norm = np.sqrt(np.maximum(lam, 1.0)) if counts else np.ones_like(lam)
        resid = ((actual - lam) / norm)[ok]
        modes["empirical"] = {q: np.maximum(lam + np.quantile(resid, q) * norm, 0.0) for q in QUANTILES}
        for mode, qs in modes.items():
            s = fb.score(actual, qs, ref_mae)
            inflation = float(np.sqrt(1 + 1 / (2 * half)))
            s["white_noise_corrected"] = {"wql": s["wql"] / inflation, "mae": s["mae"] / inflation}
            oracles[f"oracle_smooth_{label}_{mode}"] = s
            if s["wql"] < best_wql:
                best_wql, best_lam = s["wql"], lam
            log(f"{trace}: oracle window {label} {mode}: wql {s['wql']:.4f} mae {s['mae']:.4g}")
    floor = min(oracles, key=lambda k: oracles[k]["wql"])
    h_steps = bench.actual.shape[1]
    for name in in_sample:
        log(f"{trace}: fitting {name} IN SAMPLE (on the whole trace, test period included)")
        model = make(name).fit([series])
        oracles[f"in_sample_{name}"] = fb.score(actual, model.predict_origins(series, bench.origins, h_steps), ref_mae)
    if counts and best_lam is not None:
        pin, abs_med = poisson_expected_losses(best_lam, QUANTILES)
        y_sum = float(np.abs(np.where(ok, actual, 0.0)).sum())
        wql = sum(2 * float(np.where(ok, p, 0.0).sum()) for p in pin.values()) / (len(QUANTILES) * y_sum)
        mae = float(np.where(ok, abs_med, 0.0).sum() / ok.sum())
        oracles["poisson_expected"] = {"wql": wql, "mae": mae, "rel_mae": mae / ref_mae, "window": floor}
    test = series.values[int(bench.origins[0]) :]
    return NoiseFloorResult(bench, oracles, floor, counts, variogram(test, actual, bench.forecasts))


def variogram(test: FloatArray, actual: FloatArray, forecasts: dict[str, dict[float, FloatArray]]) -> dict[str, Any]:
    """Semi-variogram of the test period, its lag-0 nugget and the best baseline's MSE beside it."""
    lags = (1, 2, 3, 4, 6, 12, 30, 90)
    gamma = {k: float(0.5 * np.nanmean((test[k:] - test[:-k]) ** 2)) for k in lags if len(test) > k}
    xs = [k for k in (2, 3, 4, 6) if k in gamma]
    nugget = float(np.polyfit(xs, [gamma[k] for k in xs], 1)[1]) if len(xs) >= 2 else float("nan")
    ok = ~np.isnan(actual)
    mse = {name: float(np.mean((actual[ok] - qs[0.5][ok]) ** 2)) for name, qs in forecasts.items() if 0.5 in qs}
    return {
        "gamma": {str(k): round(v, 4) for k, v in gamma.items()},
        "nugget": nugget,
        "variance": float(np.nanvar(test)),
        "mse": mse,
    }
