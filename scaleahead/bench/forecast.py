"""``scaleahead bench forecast``: EVALUATION.md section 3, every model on the same origins.

Composition root: loads a trace, splits it (section 2), fits every model on the history only,
forecasts 15 minutes ahead from an origin every 5 minutes of the test period, and scores the
quantiles against what happened. Short gaps (<= 3 steps) in the actuals are interpolated for
scoring; longer gaps are skipped. The forecasters themselves only ever see data before an origin.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from forecaster.base import Forecaster, fill_short_gaps, horizon_steps_for
from forecaster.registry import BASELINES, make_model
from scaleahead.errors import DataError
from scaleahead.traces import split_of
from scaleahead.types import FloatArray, Series

ORIGIN_EVERY_S = 300.0
REFERENCE = "seasonal_naive"


def iso(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass
class BenchResult:
    """Scores per model, plus everything needed to draw the report."""

    trace: str
    resolution_s: float
    split: dict[str, Any]
    origins: np.ndarray  # [n] indices into the series
    actual: FloatArray  # [n, H], NaN where not scored
    forecasts: dict[str, dict[float, FloatArray]]
    models: dict[str, dict[str, Any]]
    params: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "trace": self.trace,
            "resolution_s": self.resolution_s,
            "split": self.split,
            "horizon_steps": int(self.actual.shape[1]),
            "origins": len(self.origins),
            "models": self.models,
            "params": self.params,
        }

    def save_forecasts(self, path: Path, series: Series) -> None:
        """All forecasts and actuals as a compressed ``.npz`` (the report's input)."""
        arrays: dict[str, np.ndarray] = {
            "origins": self.origins,
            "origin_times": series.start + self.origins * series.step_s,
            "actual": self.actual.astype(np.float32),
        }
        for name, qs in self.forecasts.items():
            for q, a in qs.items():
                arrays[f"{name}|{q:g}"] = a.astype(np.float32)
        np.savez_compressed(path, **arrays)  # type: ignore[arg-type]


def score(actual: FloatArray, qs: dict[float, FloatArray], reference_mae: float | None) -> dict[str, Any]:
    """The section-3 metrics of one model's quantiles against ``actual`` (NaN = not scored)."""
    ok = ~np.isnan(actual)
    y = np.where(ok, actual, 0.0)
    med = qs[0.5]
    abs_err = np.where(ok, np.abs(y - med), 0.0)
    n = ok.sum()
    mae = float(abs_err.sum() / max(n, 1))
    denom = float(np.abs(y).sum())
    pin = {}
    for q, pred in qs.items():
        e = y - pred
        pin[q] = float(np.where(ok, np.maximum(q * e, (q - 1) * e), 0.0).sum())
    wql = sum(2 * p for p in pin.values()) / (len(pin) * denom) if denom > 0 else float("nan")
    per_step_n = ok.sum(axis=0)
    by_step = np.where(per_step_n > 0, abs_err.sum(axis=0) / np.maximum(per_step_n, 1), np.nan)
    coverage = {f"{q:g}": float(((y <= pred) & ok).sum() / max(n, 1)) for q, pred in qs.items()}
    return {
        "mae": mae,
        "rel_mae": mae / reference_mae if reference_mae else float("nan"),
        "wql": float(wql),
        "coverage_q90": coverage.get("0.9", float("nan")),
        "coverage": coverage,
        "mae_by_step": [round(float(v), 6) for v in by_step],
        "scored_points": int(n),
    }


def run(
    series: Series,
    trace: str,
    models: Sequence[str] | None = None,
    make: Callable[[str], Forecaster] = make_model,
    params: dict[str, Any] | None = None,
    log: Callable[[str], None] = lambda _msg: None,
) -> BenchResult:
    """Fit each model on the history, forecast every test origin, score all on the same origins."""
    split = split_of(series, trace)
    step = series.step_s
    h = horizon_steps_for(step)
    history = series.between(split.start, split.test_start)
    i0 = series.index_of(split.test_start)
    every = max(1, int(round(ORIGIN_EVERY_S / step)))
    origins = np.arange(i0, len(series) - h + 1, every, dtype=np.int64)
    if len(origins) == 0 or not np.isfinite(history.values).any():
        raise DataError(
            f"Trace {trace!r} is too short for the forecast benchmark: {len(series)} steps of {step:g} s.",
            "It needs a history with observed values and at least 15 minutes of test period.",
        )
    scored = fill_short_gaps(series.values)
    actual = np.stack([scored[o : o + h] for o in origins])  # [n, H]
    names = list(models) if models else [*BASELINES, "lstm"]
    if REFERENCE not in names:
        names.insert(0, REFERENCE)
    forecasts: dict[str, dict[float, FloatArray]] = {}
    timings: dict[str, dict[str, float]] = {}
    extra: dict[str, dict[str, Any]] = {}
    errors: dict[str, str] = {}
    for name in names:
        model = make(name)
        log(f"{trace}: fitting {name} on {len(history)} history steps")
        t0 = time.perf_counter()
        try:
            model.fit([history])
            t1 = time.perf_counter()
            forecasts[name] = model.predict_origins(series, origins, h)
        except DataError as exc:
            if name == REFERENCE:
                raise
            log(f"{trace}: {name} cannot be scored: {exc.message}")
            errors[name] = exc.message  # reported, not silently dropped
            continue
        t2 = time.perf_counter()
        timings[name] = {"fit_s": round(t1 - t0, 3), "predict_s": round(t2 - t1, 3)}
        report = getattr(model, "report", None)
        if report is not None:
            from dataclasses import asdict

            extra[name] = {"training": asdict(report)}
    ref = score(actual, forecasts[REFERENCE], None)
    scores: dict[str, dict[str, Any]] = {name: {"error": msg} for name, msg in errors.items()}
    for name in forecasts:
        s = score(actual, forecasts[name], ref["mae"])
        s.update(timings[name])
        s.update(extra.get(name, {}))
        scores[name] = s
    best = best_baseline(scores)
    return BenchResult(
        trace=trace,
        resolution_s=step,
        split={
            "history_start": iso(split.start),
            "test_start": iso(split.test_start),
            "end": iso(split.end),
            "history_steps": len(history),
            "best_baseline": best,
        },
        origins=origins,
        actual=actual,
        forecasts=forecasts,
        models=scores,
        params=params or {},
    )


def best_baseline(scores: dict[str, dict[str, Any]]) -> str:
    """The baseline with the lowest wql (the one named as fallback)."""
    cands = [n for n in scores if n in BASELINES and "wql" in scores[n]]
    return min(cands, key=lambda n: scores[n]["wql"]) if cands else ""
