"""The forecast accuracy report: one self-contained HTML file with embedded PNG charts.

Why: numbers in a JSON file do not show *how* a forecast goes wrong. The report draws forecast
fans against what happened, MAE by horizon step per model, quantile calibration and a
per-workload table. It is built from either source of forecasts through one data shape
(``Scored``): a benchmark run (its ``--json`` and ``--save-forecasts`` files) or the forecasts
the control loop stored in the database, compared with actuals from a trace.
matplotlib runs headless (Agg); images are base64 PNGs, so the file opens offline.
"""

from __future__ import annotations

import base64
import html
import io
import json
import zipfile
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from scaleahead.bench.forecast import score
from scaleahead.errors import DataError
from scaleahead.types import FloatArray, Forecast, Series, WorkloadRef

COLORS = {
    "lstm": "#1f77b4",
    "ridge": "#2ca02c",
    "seasonal_naive": "#d62728",
    "window_mean": "#9467bd",
    "naive": "#8c564b",
}


@dataclass
class Scored:
    """Forecasts of one workload at many origins, with the actuals they are judged against."""

    workload: str
    step_s: float
    origin_times: FloatArray  # [n] epoch s of the first forecast step
    actual: FloatArray  # [n, H], NaN = not observed
    forecasts: dict[str, dict[float, FloatArray]]  # model -> q -> [n, H]
    source: str


def from_bench(json_path: Path, npz_path: Path | None) -> tuple[dict[str, Any], Scored | None]:
    """A benchmark's JSON and (optionally) its saved forecasts."""
    try:
        summary = json.loads(json_path.read_text())
    except (OSError, ValueError) as exc:
        raise DataError(
            f"Cannot read benchmark JSON {json_path}: {exc}.", "Pass a --json file of bench forecast."
        ) from exc
    if not isinstance(summary, dict) or "models" not in summary or "trace" not in summary:
        raise DataError(f"{json_path} is not a `bench forecast` JSON (no 'models'/'trace').", "Check the file.")
    _check_summary(summary, json_path)
    if npz_path is None:
        return summary, None
    wrote = "Pass the file `bench forecast --save-forecasts FILE.npz` wrote (not its --json file)."
    if not npz_path.is_file():
        what = "is a folder" if npz_path.is_dir() else "does not exist"
        raise DataError(f"Saved forecasts --forecasts {npz_path} {what}.", wrote)
    try:
        z = np.load(npz_path)  # allow_pickle stays False: a file that needs it is not ours
    except OSError as exc:
        raise DataError(f"Cannot read saved forecasts {npz_path} ({exc.strerror or exc}).", wrote) from exc
    except (ValueError, EOFError, zipfile.BadZipFile) as exc:
        raise DataError(
            f"Cannot read saved forecasts {npz_path}: it is not an .npz of arrays, or it is truncated or damaged "
            f"(numpy says: {str(exc).split('. ')[0].rstrip('.')}).",
            wrote,
        ) from exc
    redo = "Pass the --save-forecasts file written by the same `bench forecast` run as --bench."
    if not hasattr(z, "files") or "origin_times" not in z.files or "actual" not in z.files:
        raise DataError(f"{npz_path} is not a --save-forecasts file (no 'origin_times'/'actual' arrays).", redo)
    try:
        times = z["origin_times"].astype(np.float64)
        actual = z["actual"].astype(np.float64)
        forecasts: dict[str, dict[float, FloatArray]] = {}
        for key in z.files:
            if "|" in key:
                model, q = key.split("|")
                forecasts.setdefault(model, {})[float(q)] = z[key].astype(np.float64)
    except (ValueError, TypeError, EOFError, OSError, zipfile.BadZipFile, zlib.error) as exc:
        raise DataError(f"{npz_path} has an unreadable array or key, or is damaged ({exc}).", redo) from exc
    if times.ndim != 1 or actual.ndim != 2 or actual.shape[0] != times.size:
        raise DataError(
            f"{npz_path}: 'actual' must be one row per origin ({times.size} origins), got shape {actual.shape}.", redo
        )
    # The .npz names no trace: check it against the run the JSON describes (another run's file was
    # drawn under this trace's name and step).
    want = (summary.get("origins"), summary.get("horizon_steps"))
    got = (int(times.size), int(actual.shape[1]))
    if all(isinstance(w, int) for w in want) and want != got:
        raise DataError(
            f"{npz_path} holds {got[0]} origins x {got[1]} steps, but {json_path.name} describes a run of "
            f"{want[0]} x {want[1]}: they are not from the same `bench forecast` run.",
            redo,
        )
    for model, qs in forecasts.items():
        bad = [f"{q:g}" for q, a in qs.items() if a.shape != actual.shape]
        if bad or 0.5 not in qs:
            what = f"at quantile(s) {', '.join(bad)} are not shaped like 'actual'" if bad else "have no median (0.5)"
            raise DataError(f"{npz_path}: the forecasts of {model!r} {what}.", redo)
    # A report of nothing is garbage: fans, errors and calibration need numbers on both sides.
    empty = [name for name, a in [("origin_times", times), ("actual", actual)] if not np.isfinite(a).any()]
    empty += [f"{m!r} (median)" for m, qs in forecasts.items() if not np.isfinite(qs[0.5]).any()]
    if empty:
        raise DataError(
            f"{npz_path}: {', '.join(empty)} hold{'s' if len(empty) == 1 else ''} no finite value (all NaN or "
            "infinite), so the report would draw and score nothing.",
            redo + " Re-run `bench forecast` if this file came from it; no report was written.",
        )
    return summary, Scored(
        str(summary["trace"]), float(summary["resolution_s"]), times, actual, forecasts, f"benchmark {json_path.name}"
    )


def _check_summary(summary: dict[str, Any], path: Path) -> None:
    """A ``DataError`` naming the first field of a `bench forecast` JSON the report cannot use."""

    def bad(field: str, want: str) -> DataError:
        return DataError(
            f"{path}: field {field} is not {want}, so it is not a `bench forecast` JSON the report can read.",
            "Pass the --json file a `scaleahead bench forecast` run wrote, unchanged.",
        )

    def number(v: Any) -> bool:
        return isinstance(v, int | float) and not isinstance(v, bool)

    if not isinstance(summary["trace"], str):
        raise bad("'trace'", "a trace name")
    step = summary.get("resolution_s")
    if not (isinstance(step, int | float) and not isinstance(step, bool) and np.isfinite(step) and step > 0):
        raise bad("'resolution_s'", "a positive number of seconds")
    split = summary.get("split", {})
    if not isinstance(split, dict):
        raise bad("'split'", "an object")
    models = summary["models"]
    if not isinstance(models, dict):
        raise bad("'models'", "an object of model name to metrics")
    for m, v in models.items():
        where = f"'models.{m}'"
        if not isinstance(v, dict):
            raise bad(where, "an object of metrics")
        if "error" in v:
            continue
        for key in ("mae", "wql", "coverage_q90"):
            if key in v and not number(v[key]):
                raise bad(f"'models.{m}.{key}'", "a number")
        if "wql" in v and not all(number(v.get(k)) for k in ("mae", "coverage_q90")):
            raise bad(where, "an object with numbers 'mae', 'wql' and 'coverage_q90'")
        curve = v.get("mae_by_step", [])
        if not isinstance(curve, list) or not all(number(x) or x is None for x in curve):
            raise bad(f"'models.{m}.mae_by_step'", "a list of numbers")
        cov = v.get("coverage", {})
        if not isinstance(cov, dict) or not all(number(x) for x in cov.values()) or not all(_is_float(q) for q in cov):
            raise bad(f"'models.{m}.coverage'", "an object of quantile level to a number")


def _is_float(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def workload_ref(key: str) -> WorkloadRef:
    """``Kind/namespace/name`` as a ``WorkloadRef``, or a ``DataError`` naming the --workload."""
    parts = key.split("/", 2)
    if len(parts) != 3 or not all(p.strip() for p in parts):
        raise DataError(
            f"--workload {key!r} is not a workload key Kind/namespace/name.",
            "Give e.g. --workload Deployment/default/web (it may be left out when the database holds the "
            "forecasts of one workload only).",
        )
    return WorkloadRef(*parts)


def from_stored(workload: str, stored: Sequence[Forecast], actual: Series) -> Scored:
    """Forecasts recorded during operation, against the actual demand series."""
    if not stored:
        raise DataError(f"No stored forecasts for {workload}.", "Run the control loop first, or check --workload.")
    # A forecast with an infinite value (stored as float16 before values above 65,504 were kept as
    # float32) would score inf and count as covered: left out, and said so.
    finite = [fc for fc in stored if all(np.isfinite(np.asarray(v)).all() for v in fc.quantiles.values())]
    if not finite:
        raise DataError(
            f"Every stored forecast of {workload} has an infinite value ({len(stored)}): they were stored "
            "before values above 65,504 were kept.",
            "Report on forecasts stored since.",
        )
    left_out = len(stored) - len(finite)
    stored = finite
    step = stored[0].step_s
    if abs(step - actual.step_s) > 1e-6:
        raise DataError(
            f"Stored forecasts of {workload} are at {step:g} s but the actuals are at {actual.step_s:g} s.",
            "Give the trace the workload was forecast on.",
        )
    h = min(fc.horizon_steps for fc in stored)
    times = np.array([fc.origin for fc in stored])
    idx = np.array([actual.index_of(t) for t in times])
    cols = idx[:, None] + np.arange(h)[None, :]
    inside = (cols >= 0) & (cols < len(actual))
    act = np.where(inside, actual.values[np.clip(cols, 0, len(actual) - 1)], np.nan)
    if np.isnan(act).all():
        raise DataError(
            f"The actuals do not cover the stored forecasts of {workload} "
            f"({_iso(times[0])} .. {_iso(times[-1])}); the trace spans {_iso(actual.start)} .. {_iso(actual.end)}.",
            "Give the trace that covers the forecast times.",
        )
    by_model: dict[str, list[int]] = {}
    for i, fc in enumerate(stored):
        by_model.setdefault(fc.model or "model", []).append(i)
    # The report scores one set of origins: the most frequent model's. The others' forecasts (a
    # rollout's challenger, the fallback after a checkpoint failed) are named, not scored: until
    # 2026-12-07 they were left out without a word (a review).
    main = max(by_model, key=lambda m: len(by_model[m]))
    rows = by_model[main]
    forecasts = {main: {q: np.stack([stored[i].quantiles[q][:h] for i in rows]) for q in stored[rows[0]].quantiles}}
    source = "stored forecasts"
    others = sorted((m for m in by_model if m != main), key=lambda m: (-len(by_model[m]), m))
    if others:
        named = ", ".join(f"{m} ({len(by_model[m])})" for m in others)
        source += (
            f" of {main} ({len(rows)}); not scored here (the report scores one model's origins): "
            f"the stored forecasts of {named}"
        )
    if left_out:
        source += f" ({left_out} with infinite values, stored before values above 65,504 were kept, left out)"
    return Scored(workload, step, times[rows], act[rows], forecasts, source)


def _num(v: Any, fmt: str) -> str:
    """A number for the table, or a dash where there is none (rel_mae without a seasonal-naive reference)."""
    if v is None or not np.isfinite(v):
        return "&ndash;"
    return format(v, fmt)


def _iso(t: float) -> str:
    return datetime.fromtimestamp(float(t), UTC).strftime("%Y-%m-%d %H:%M")


def _png(fig: Any) -> str:
    import matplotlib.pyplot as plt

    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=90, bbox_inches="tight")
    plt.close(fig)
    return f'<img alt="chart" src="data:image/png;base64,{base64.b64encode(buf.getvalue()).decode()}">'


def _timeline(sc: Scored) -> tuple[FloatArray, FloatArray]:
    """A continuous actual series rebuilt from the per-origin actual rows."""
    h = sc.actual.shape[1]
    t0 = sc.origin_times[0]
    n = int(round((sc.origin_times[-1] - t0) / sc.step_s)) + h
    vals = np.full(n, np.nan)
    for k, t in enumerate(sc.origin_times):
        i = int(round((t - t0) / sc.step_s))
        row = sc.actual[k]
        seg = vals[i : i + h]
        vals[i : i + h] = np.where(np.isnan(seg), row[: len(seg)], seg)
    return t0 + np.arange(n) * sc.step_s, vals


def fan_chart(sc: Scored, models: Sequence[str], k: int, context_steps: int) -> str:
    import matplotlib.pyplot as plt

    times, vals = _timeline(sc)
    h = sc.actual.shape[1]
    t_origin = sc.origin_times[k]
    i = int(round((t_origin - times[0]) / sc.step_s))
    lo = max(0, i - context_steps)
    fig, axes = plt.subplots(1, len(models), figsize=(5.2 * len(models), 3.0), sharey=True, squeeze=False)
    x_hist = (times[lo : i + h] - t_origin) / 60
    for ax, m in zip(axes[0], models, strict=True):
        qs = sc.forecasts[m]
        x = (sc.origin_times[k] + np.arange(h) * sc.step_s - t_origin) / 60
        color = COLORS.get(m, "#333333")
        if 0.99 in qs:
            ax.fill_between(x, qs[0.5][k], qs[0.99][k], color=color, alpha=0.12, label="q0.5-q0.99")
        if 0.1 in qs and 0.9 in qs:
            ax.fill_between(x, qs[0.1][k], qs[0.9][k], color=color, alpha=0.3, label="q0.1-q0.9")
        ax.plot(x, qs[0.5][k], color=color, lw=1.5, label="median")
        ax.plot(x_hist, vals[lo : i + h], color="black", lw=0.8, label="actual")
        ax.axvline(0, color="grey", ls=":", lw=1)
        ax.set_title(m)
        ax.set_xlabel("minutes from origin")
    axes[0][0].legend(fontsize=7, loc="upper left")
    fig.suptitle(f"{sc.workload}: forecast made at {_iso(t_origin)} UTC", fontsize=10, y=1.06)
    return _png(fig)


def mae_by_step_chart(title: str, curves: dict[str, Sequence[float]], step_s: float) -> str:
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.5, 3.2))
    for m, c in curves.items():
        x = (np.arange(len(c)) + 1) * step_s / 60
        ax.plot(x, c, label=m, color=COLORS.get(m), lw=2 if m == "lstm" else 1.2)
    ax.set_xlabel("horizon (minutes)")
    ax.set_ylabel("MAE of the median")
    ax.set_title(title, fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    return _png(fig)


def calibration_chart(title: str, coverage: dict[str, dict[str, float]]) -> str:
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(3.6, 3.4))
    ax.plot([0, 1], [0, 1], color="grey", ls=":", lw=1)
    for m, cov in coverage.items():
        qs = sorted(float(q) for q in cov)
        ax.plot(qs, [cov[f"{q:g}"] for q in qs], marker="o", label=m, color=COLORS.get(m), lw=1)
    ax.set_xlabel("quantile level")
    ax.set_ylabel("observed share at or below")
    ax.set_title(title, fontsize=10)
    ax.legend(fontsize=7)
    ax.grid(alpha=0.3)
    return _png(fig)


def _fan_origins(sc: Scored, windows: int) -> list[int]:
    """Origins worth looking at: the biggest surge, a typical one, the quietest, spread in time."""
    ok = (~np.isnan(sc.actual)).mean(axis=1) >= 0.8  # windows mostly observed: a fan needs actuals
    cand = np.flatnonzero(ok)
    if len(cand) == 0:
        return []
    rise = np.nanmax(sc.actual[cand], axis=1) - np.nanmean(sc.actual[cand], axis=1)
    picks = [int(cand[np.argmax(rise)]), int(cand[len(cand) // 2]), int(cand[np.argmin(rise)])]
    out: list[int] = []
    for p in picks:
        if p not in out:
            out.append(p)
    return out[:windows]


def render(
    summaries: Sequence[dict[str, Any]], scored: Sequence[Scored], title: str = "Forecast accuracy", windows: int = 3
) -> str:
    """The HTML text of the report."""
    import matplotlib

    matplotlib.use("Agg")
    parts = [
        "<!doctype html><html><head><meta charset='utf-8'>",
        f"<title>{html.escape(title)}</title>",
        "<style>body{font-family:system-ui,sans-serif;margin:24px;max-width:1200px;color:#222}"
        "table{border-collapse:collapse;margin:8px 0 20px}td,th{border:1px solid #ccc;padding:4px 8px;"
        "text-align:right}th{background:#f3f3f3}td:first-child,th:first-child{text-align:left}"
        ".best{background:#e4f5e4;font-weight:bold}img{max-width:100%;margin:4px}"
        "h2{border-bottom:2px solid #ddd;padding-bottom:4px;margin-top:36px}.note{color:#666;font-size:90%}</style>",
        "</head><body>",
        f"<h1>{html.escape(title)}</h1>",
        "<p class='note'>MAE of the median; rel_mae = MAE / seasonal-naive MAE on the same origins; "
        "wql = weighted quantile loss (lower is better); coverage_q90 = share of actuals at or below the 0.9 "
        "quantile (ideal 0.90). Protocol: EVALUATION.md section 3.</p>",
    ]
    # Per-workload table
    rows = []
    for s in summaries:
        scored_models = {m: v for m, v in s["models"].items() if "wql" in v}
        # NaN-aware: a NaN wql (all actuals zero) listed first must not leave the table without a best row.
        best_wql = min((v["wql"] for v in scored_models.values() if np.isfinite(v["wql"])), default=float("nan"))
        for m, v in scored_models.items():
            cls = " class='best'" if v["wql"] == best_wql else ""
            rows.append(
                f"<tr{cls}><td>{html.escape(str(s['trace']))}</td><td>{html.escape(m)}</td>"
                f"<td>{v['mae']:.4g}</td><td>{_num(v.get('rel_mae'), '.3f')}</td><td>{_num(v['wql'], '.4f')}</td>"
                f"<td>{v['coverage_q90']:.3f}</td><td>{v.get('scored_points', '')}</td></tr>"
            )
    if not rows:
        parts.append(
            "<p class='note'><b>Nothing was scored</b>: the inputs hold no model with a score (every model "
            "failed, or the runs are empty). See each input's errors.</p>"
        )
    parts.append("<h2>Per workload</h2><table><tr><th>workload</th><th>model</th><th>MAE</th><th>rel_mae</th>")
    parts.append("<th>wql</th><th>coverage_q90</th><th>scored points</th></tr>" + "".join(rows) + "</table>")
    by_name = {sc.workload: sc for sc in scored}
    for s in summaries:
        name = str(s["trace"])
        step = float(s["resolution_s"])
        parts.append(f"<h2>{html.escape(name)}</h2>")
        if "split" in s and "test_start" in s["split"]:
            parts.append(
                f"<p class='note'>test period from {html.escape(str(s['split']['test_start']))}, "
                f"{s.get('origins', '')} origins; source: {html.escape(str(s.get('source', 'benchmark')))}</p>"
            )
        for m, v in s["models"].items():
            if "error" in v:
                parts.append(f"<p class='note'>{html.escape(m)}: not scored: {html.escape(str(v['error']))}</p>")
        curves = {m: v["mae_by_step"] for m, v in s["models"].items() if "mae_by_step" in v}
        cov = {m: v["coverage"] for m, v in s["models"].items() if "coverage" in v}
        parts.append(mae_by_step_chart(f"{name}: MAE by horizon step", curves, step))
        parts.append(calibration_chart(f"{name}: calibration", cov))
        sc = by_name.get(name)
        if sc is not None:
            models = [m for m in ("lstm", s.get("split", {}).get("best_baseline", "")) if m in sc.forecasts]
            models = models or list(sc.forecasts)[:2]
            ctx = int(round(3600 / sc.step_s))
            for k in _fan_origins(sc, windows):
                parts.append(fan_chart(sc, models, k, ctx))
    parts.append("</body></html>")
    return "\n".join(parts)


def summary_of(sc: Scored) -> dict[str, Any]:
    """Table and curves for a ``Scored`` that did not come with a benchmark JSON."""
    models = {}
    ref = None
    for m, qs in sc.forecasts.items():
        models[m] = score(sc.actual, qs, ref)
    return {
        "trace": sc.workload,
        "resolution_s": sc.step_s,
        "origins": len(sc.origin_times),
        "source": sc.source,
        "split": {"test_start": _iso(sc.origin_times[0]) + " UTC"},
        "models": models,
    }
