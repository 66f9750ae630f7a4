"""Model inputs built from a series at many origins, with time-defined windows (numpy only).

Why a module of its own: the LSTM's training windows, its batched inference and the benchmark all
need the same inputs from the same arithmetic, and none of it needs torch. Every window is
defined in *seconds* and turned into steps for the series' resolution, so one definition serves
10 s, 60 s and 5 min series.

For an origin ``o`` (index of the first forecast step) only ``values[:o]`` is read. The inputs are:

- ``seq``: the recent history at native resolution, ``[n, L, 2]`` = (value / scale, observed),
  L = ``recent_s / step_s``. Missing points are masked (value 0 *and* observed 0), never zeros
  that look like demand.
- ``static``: a coarse summary of the last ``long_s`` (bucket means and observed shares), the same
  around one day and one week back (``[-seasonal_before_s, +seasonal_after_s)`` of the lagged
  time, so the model sees what happened over the horizon a day/week ago), calendar features of
  the origin (time of day, day of week as sin/cos) and the log of the scale; with
  ``clock_period_s`` (off at 0) also the origin's phase within that period as a one-hot, so the
  model can learn which of the coming steps fall on a clock mark (jobs started by cron or a batch
  scheduler every 5 minutes, say: docs/forecaster.md, "Clock phase").
- ``scale``: per-series-and-origin scale (mean of the last hour, else of the long window, else of
  the seasonal windows); everything the model sees and predicts is divided by it, so one model
  serves series of any magnitude. An origin with no observation in any window is ``usable=False``.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np
import numpy.typing as npt

from scaleahead.types import FloatArray

DAY_S = 86400.0
WEEK_S = 7 * DAY_S

IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]


@dataclass(frozen=True, slots=True)
class Segment:
    """A contiguous window ``[start, start + n_buckets * bucket_len)`` in steps relative to the origin."""

    start: int
    bucket_len: int
    n_buckets: int

    @property
    def length(self) -> int:
        return self.bucket_len * self.n_buckets


@dataclass(frozen=True, slots=True)
class FeatureSpec:
    """Window lengths in seconds and the resolution they were turned into steps for."""

    step_s: float
    horizon_s: float = 900.0
    recent_s: float = 450.0
    min_recent_steps: int = 24
    long_s: float = 6 * 3600.0
    long_bucket_s: float = 300.0
    seasonal_before_s: float = 900.0
    seasonal_after_s: float = 900.0
    seasonal_bucket_s: float = 150.0
    scale_s: float = 3600.0
    #: One-hot of the origin's phase within this period (s) among the static inputs; 0 = none.
    clock_period_s: float = 0.0

    def steps(self, seconds: float) -> int:
        return max(1, int(round(seconds / self.step_s)))

    @property
    def horizon_steps(self) -> int:
        return self.steps(self.horizon_s)

    @property
    def recent(self) -> Segment:
        n = max(self.min_recent_steps, self.steps(self.recent_s))
        return Segment(-n, 1, n)

    @property
    def long(self) -> Segment:
        b = self.steps(self.long_bucket_s)
        n = max(1, int(round(self.long_s / (b * self.step_s))))
        return Segment(-n * b, b, n)

    def seasonal(self, lag_s: float) -> Segment:
        b = self.steps(self.seasonal_bucket_s)
        n = max(1, int(round((self.seasonal_before_s + self.seasonal_after_s) / (b * self.step_s))))
        return Segment(-self.steps(lag_s) - self.steps(self.seasonal_before_s), b, n)

    @property
    def segments(self) -> tuple[Segment, ...]:
        return (self.recent, self.long, self.seasonal(DAY_S), self.seasonal(WEEK_S))

    @property
    def clock_phases(self) -> int:
        """Phases of the clock input (``clock_period_s`` in steps), 0 without one."""
        return self.steps(self.clock_period_s) if self.clock_period_s > 0 else 0

    @property
    def n_static(self) -> int:
        return 2 * (self.long.n_buckets + 2 * self.seasonal(DAY_S).n_buckets) + 5 + self.clock_phases

    @property
    def n_seq_features(self) -> int:
        return 2

    @property
    def lookback_steps(self) -> int:
        """How many steps before the origin the inputs can reach (the longest window)."""
        return max(-seg.start for seg in self.segments)

    def to_dict(self) -> dict[str, float | int]:
        return asdict(self)


@dataclass(frozen=True, slots=True)
class Inputs:
    seq: npt.NDArray[np.float32]  # [n, L, 2]
    static: npt.NDArray[np.float32]  # [n, n_static]
    scale: FloatArray  # [n]
    usable: BoolArray  # [n] a scale from observed values, and every input finite in float32
    #: [n] every value observed in every input window is exactly 0 (an idle workload): its forecast
    #: is 0, not the network's output times a placeholder scale of 1 (until 2026-12-07 about 1
    #: unit of demand, a review). None: not computed.
    zero: BoolArray | None = None


def gather(values: FloatArray, origins: IntArray, seg: Segment) -> FloatArray:
    """``values[o + seg.start : o + seg.start + seg.length]`` per origin, NaN outside ``[0, o)``."""
    idx = origins[:, None] + seg.start + np.arange(seg.length)[None, :]  # [n, length]
    ok = (idx >= 0) & (idx < origins[:, None]) & (idx < len(values))
    out = values[np.clip(idx, 0, max(len(values) - 1, 0))] if len(values) else np.full(idx.shape, np.nan)
    return np.where(ok, out, np.nan)


def _bucket(window: FloatArray, seg: Segment) -> tuple[FloatArray, FloatArray]:
    """Bucket means (NaN where a bucket is empty) and observed shares, each ``[n, n_buckets]``."""
    w = window.reshape(window.shape[0], seg.n_buckets, seg.bucket_len)
    seen = ~np.isnan(w)
    cnt = seen.sum(axis=2)
    total = np.where(seen, w, 0.0).sum(axis=2)
    mean = np.where(cnt > 0, total / np.maximum(cnt, 1), np.nan)
    return mean, cnt / seg.bucket_len


def _nanmean_rows(a: FloatArray) -> FloatArray:
    seen = ~np.isnan(a)
    cnt = seen.sum(axis=1)
    return np.where(cnt > 0, np.where(seen, a, 0.0).sum(axis=1) / np.maximum(cnt, 1), np.nan)


def offsets(spec: FeatureSpec) -> IntArray:
    """Steps relative to the origin read by the inputs, segment after segment (recent, long, day, week)."""
    return np.concatenate([seg.start + np.arange(seg.length) for seg in spec.segments]).astype(np.int64)


def windows(values: FloatArray, origins: IntArray, spec: FeatureSpec) -> FloatArray:
    """Every value the inputs read, ``[n, len(offsets)]``, NaN outside ``[0, origin)``."""
    idx = origins[:, None] + offsets(spec)[None, :]
    ok = (idx >= 0) & (idx < origins[:, None]) & (idx < len(values))
    if not len(values):
        return np.full(idx.shape, np.nan)
    return np.where(ok, values[np.clip(idx, 0, len(values) - 1)], np.nan)


def build_inputs(values: FloatArray, start: float, spec: FeatureSpec, origins: IntArray) -> Inputs:
    """Model inputs for ``origins`` of one series (``values[:o]`` only for origin ``o``)."""
    origins = np.asarray(origins, dtype=np.int64)
    times = start + origins.astype(np.float64) * spec.step_s
    return inputs_from_windows(windows(values, origins, spec), times, spec)


def inputs_from_windows(w: FloatArray, times: FloatArray, spec: FeatureSpec) -> Inputs:
    """Model inputs from gathered windows ``w`` (``windows()``) and origin times (epoch s)."""
    segs = spec.segments
    cuts = np.cumsum([0] + [seg.length for seg in segs])
    w_rec, w_long, w_day, w_week = (w[:, cuts[k] : cuts[k + 1]] for k in range(4))
    rec, lon, day, week = segs

    scale = _nanmean_rows(np.abs(w_long[:, -min(spec.steps(spec.scale_s), lon.length) :]))
    for fallback in (w_long, w_day, w_week):
        scale = np.where(np.isnan(scale), _nanmean_rows(np.abs(fallback)), scale)
    usable = ~np.isnan(scale)
    scale = np.where(usable, scale, 1.0)
    scale = np.where(scale > 1e-9, scale, 1.0)  # a flat-zero window: any positive scale will do

    s = scale[:, None]
    seen = ~np.isnan(w_rec)
    # centred on the scale (level 1 -> 0) so a missing point (0) reads as 'typical', flagged by the mask
    seq = np.stack([np.where(seen, w_rec / s - 1.0, 0.0), seen.astype(np.float64)], axis=2)  # [n, L, 2]

    parts = []
    for window, seg in ((w_long, lon), (w_day, day), (w_week, week)):
        mean, share = _bucket(window, seg)
        parts += [np.where(np.isnan(mean), 0.0, mean / s - 1.0), share]
    tod = 2 * np.pi * (times % DAY_S) / DAY_S
    dow = 2 * np.pi * (((times // DAY_S) + 3) % 7) / 7  # epoch day 0 was a Thursday; Monday = 0
    parts.append(np.stack([np.sin(tod), np.cos(tod), np.sin(dow), np.cos(dow), np.log10(scale + 1.0) / 5], axis=1))
    if spec.clock_phases:
        parts.append(clock_one_hot(times, spec))
    static = np.concatenate(parts, axis=1)  # [n, n_static]
    with np.errstate(over="ignore"):  # a scaled value beyond float32: its row is not usable (below)
        seq32, static32 = seq.astype(np.float32), static.astype(np.float32)
    # A window whose scaled inputs overflow the network's float32 (a sample far above the window's
    # scale: 1e37 a day back over a scale of 0.01) is not usable: training leaves it out, a forecast
    # from it takes the named per-origin fallback (as for a window with no observed value).
    usable &= np.isfinite(seq32).all(axis=(1, 2)) & np.isfinite(static32).all(axis=1)
    with np.errstate(invalid="ignore"):  # all-NaN rows: not zero (and not usable)
        zero = usable & (np.nanmax(np.where(np.isnan(w), -1.0, np.abs(w)), axis=1) == 0.0)
    return Inputs(seq32, static32, scale, usable, zero)


def clock_one_hot(times: FloatArray, spec: FeatureSpec) -> FloatArray:
    """``[n, clock_phases]``: 1 at the origin's step within ``clock_period_s`` (epoch-aligned, UTC)."""
    k = spec.clock_phases
    phase = np.floor(np.mod(times, spec.clock_period_s) / spec.step_s + 1e-6).astype(np.int64) % k
    return np.eye(k, dtype=np.float64)[phase]


@dataclass(frozen=True, slots=True)
class ClockRises:
    """How often a series' sudden rises start on a clock mark (``clock_rises``)."""

    rises: int  # steps whose value is above ``rise`` x the step before
    on_mark: int  # of them, how many start on a mark: the step of phase 0 within ``period_s`` (``clock_one_hot``)
    chance: float  # the share of steps that are on a mark: what ``on_mark / rises`` would be by chance

    @property
    def lift(self) -> float:
        """``on_mark / rises`` over ``chance`` (1: no clock effect); 0 without rises."""
        return self.on_mark / self.rises / self.chance if self.rises and self.chance > 0 else 0.0

    def suggests_clock(self, min_on_mark: int = 10, min_lift: float = 3.0) -> bool:
        """Enough rises on marks, and at least ``min_lift`` times as often as by chance."""
        return self.on_mark >= min_on_mark and self.lift >= min_lift


def clock_rises(
    values: FloatArray, start: float, step_s: float, period_s: float = 300.0, rise: float = 1.2
) -> ClockRises:
    """Count the steps whose value rises above ``rise`` x the one before, and those of them that start
    on a ``period_s`` mark: demand started by cron or a batch scheduler jumps there (the ``lstm_clock``
    model's input). Missing values and a zero before are not rises."""
    v = np.asarray(values, dtype=np.float64)
    if len(v) < 2 or period_s < 2 * step_s:
        return ClockRises(0, 0, step_s / period_s if period_s > 0 else 0.0)
    prev, cur = v[:-1], v[1:]
    ok = np.isfinite(prev) & np.isfinite(cur) & (prev > 0)
    up = np.flatnonzero(ok & (cur > rise * np.where(ok, prev, 0.0))) + 1
    # the step whose phase (as clock_one_hot counts it) is 0: the mark, also on a grid not aligned to it
    phase = np.floor(np.mod(start + up * step_s, period_s) / step_s + 1e-6).astype(np.int64)
    on = phase % max(1, int(round(period_s / step_s))) == 0
    return ClockRises(int(len(up)), int(on.sum()), step_s / period_s)


#: Bounds of a prior forecast in units of scale (a wild baseline forecast cannot blow up the input).
PRIOR_MAX = 50.0


def with_prior(inp: Inputs, prior: FloatArray) -> Inputs:
    """``inp`` with a baseline's point forecast ``prior`` ``[n, H]`` appended to ``static``.

    In units of the window's scale, minus 1 (like the recent values), clipped to ``[0, PRIOR_MAX]``
    before the shift: ``static`` becomes ``[n, n_static + H]`` with the prior last.
    """
    p = np.clip(prior / inp.scale[:, None], 0.0, PRIOR_MAX) - 1.0
    p = np.where(np.isfinite(p), p, 0.0)
    static = np.concatenate([inp.static, p.astype(np.float32)], axis=1)
    return Inputs(inp.seq, static, inp.scale, inp.usable, inp.zero)


def targets(values: FloatArray, origins: IntArray, horizon_steps: int) -> FloatArray:
    """``values[o : o + horizon]`` per origin, NaN past the end: ``[n, horizon]``."""
    idx = origins[:, None] + np.arange(horizon_steps)[None, :]
    out = values[np.clip(idx, 0, len(values) - 1)]
    return np.where(idx < len(values), out, np.nan)
