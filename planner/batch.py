"""Replica decisions for many services at once: the rule of ``planner.replicas``, as arrays.

``decide_replicas`` decides one service in about 30 us of Python; at 10,000 services a plan took
about 300 ms. Here the same rule runs over all services as numpy arrays (window peaks, reactive
floors, stabilization, step limits, bounds) and each reason is a :class:`LazyReason` whose
sentence is formatted on first read. Decisions, codes, sentences and details are exactly those of
``decide_replicas`` (the scalar reference); tests/planner/test_batch.py checks that with hypothesis.
Rows with unusual input (non-finite forecast values, empty or mismatched horizons, absurd replica
counts) are decided by the reference itself. Both paths word their decisions through one
``planner.replicas.explain``; a change to the rule must be made in both modules.

Per plan, only per-plan facts are read row by row, and by ``map`` (which runs in C): states and
forecasts. What comes from policies is read once per set of policy objects (planner/table.py).
Objective-chosen levels (``provision_levels``) are computed for all rows at once, and only for the
steps the windows read.
"""

from __future__ import annotations

import gc
from collections import deque
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from itertools import chain, compress, repeat
from operator import attrgetter, getitem, is_, is_not, itemgetter, methodcaller
from typing import Any, cast

import numpy as np

from planner.replicas import _EPS, Basis, decide_replicas, explain, history_cause, provision_levels
from planner.table import SpecColumns, spec_columns
from scaleahead.policy import PolicySpec
from scaleahead.types import Forecast, LazyReason, QuantileRows, Reason, ScaleTo, WorkloadRef, WorkloadState

_STATE = attrgetter("replicas", "observed_demand", "observed_at")
_REPLICAS = attrgetter("replicas")
_RECENT = attrgetter("recent_desired")
_TREND = attrgetter("observed_trend")
_QUANTILES = attrgetter("quantiles")
_VALUES = methodcaller("values")
_SHAPE = attrgetter("shape")
_ORIGIN_STEP = attrgetter("origin", "step_s")
_BATCH = attrgetter("batch")
_ROW = attrgetter("row")
#: Most forecaster batches the planner gathers directly (more: stacked row by row).
_MAX_BATCHES = 8

# Reason codes by number.
_CODES = (
    "fallback_reactive",
    "fallback_static",
    "fallback_current",
    "reactive_floor",
    "forecast",
    "keep_until_replacement",
    "forecast_down",
    "ramp_floor",
)
_CODE_NAMES = np.array(_CODES, dtype=object)
#: Replica counts at or above this go to the reference (Python ints do not overflow; int64 does).
_BIG = 2.0**52

Item = tuple[WorkloadRef, PolicySpec, WorkloadState, Forecast | None]


def _consume(it: Any) -> None:
    deque(it, maxlen=0)


def _state_columns(
    states: Sequence[WorkloadState],
) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[int]]:
    """Current replicas, observed demand and its time, as arrays; rows with earlier decisions. (The
    ready replicas are read by ``explain`` alone, for the reactive floor's sentence.)"""
    n = len(states)
    st = np.fromiter(chain.from_iterable(map(_STATE, states)), np.float64, count=3 * n).reshape(-1, 3)
    recent = list(compress(range(n), map(bool, map(_RECENT, states))))
    return st[:, 0], st[:, 1], st[:, 2], recent


class _Forecasts:
    """The forecasts of a batch as arrays, one row per service (zeros where a row has none usable).

    ``values`` holds each row's fixed quantile, or for rows whose objective chooses the level
    (``forecastQuantile`` unset) the top quantile until ``provisioned`` replaces it; ``top`` the top
    quantile; ``obj_q`` ``[objective rows, K, horizon]`` the objective rows' quantiles ``obj_keys``
    (ascending, the top one last). ``good`` is False for rows the batch leaves to the reference
    (odd shapes or quantile sets).
    """

    __slots__ = (
        "origin", "step", "has", "values", "top", "fixed_level", "horizon", "good", "top_q",
        "obj_rows", "obj_keys", "obj_q",
    )  # fmt: skip

    def __init__(self, forecasts: Sequence[Forecast | None], c: SpecColumns) -> None:
        n_items = len(forecasts)
        frows = list(compress(range(n_items), map(is_not, forecasts, repeat(None))))
        present = cast(Sequence[Forecast], [forecasts[i] for i in frows] if len(frows) < n_items else forecasts)
        fqs = list(map(_QUANTILES, present))
        self.good = np.ones(n_items, dtype=bool)
        if frows and not all(map(len, fqs)):  # a forecast without quantiles: the reference falls back
            keep = [k for k, qs in enumerate(fqs) if len(qs)]
            self.good[[frows[k] for k, qs in enumerate(fqs) if not len(qs)]] = False
            frows, present, fqs = [frows[k] for k in keep], [present[k] for k in keep], [fqs[k] for k in keep]
        tqs: list[float] | None = None  # each row's top quantile
        objective = c.objective[frows] if frows else np.zeros(0, dtype=bool)
        is_obj = objective.tolist()
        n_obj = sum(is_obj)
        self.obj_keys: tuple[float, ...] | None = None
        V = T = Q = None
        # The level each fixed-quantile row reads when it is not its forecastQuantile (the nearest
        # above, Forecast.quantile): None when every row reads its own; "rows" to look row by row.
        read: np.ndarray | str | None = None
        shared = _one_batch(fqs) if frows and (n_obj == 0 or n_obj == len(frows)) else None
        if shared is not None:
            # Rows of one forecaster batch (QuantileRows): read as it is, nothing stacked.
            Q, levels = shared
            tqs = [levels[-1]] * len(fqs)
            T = Q[:, -1, :]
            if n_obj:
                self.obj_keys = levels
                V = T  # a placeholder until provisioned
            elif c.quantile is not None and c.quantile in levels:
                V = Q[:, levels.index(c.quantile), :]
                Q = None
            else:  # each row's quantile, or the nearest above it (Forecast.quantile)
                want = c.forecast_quantile[frows]
                col = np.minimum(np.searchsorted(np.asarray(levels), want, side="left"), len(levels) - 1)
                V = Q[np.arange(len(fqs)), col, :]
                Q = None
                read = np.asarray(levels)[col]
        elif frows and n_obj == len(frows):
            # Every row at the objective's level: all quantiles, stacked [rows, K, horizon] at once.
            keys = tuple(sorted(fqs[0]))
            if len(keys) >= 2 and set(map(len, fqs)) == {len(keys)}:
                # One np.array call over every row's quantiles in turn: each forecast's arrays are
                # read together (about 1.5 x faster than one pass per quantile).
                try:
                    flat = _stacked(list(chain.from_iterable(map(itemgetter(*keys), fqs))))
                except KeyError:
                    flat = None
                if flat is not None:
                    self.obj_keys = keys
                    tqs = [keys[-1]] * len(fqs)  # every row has these quantiles
                    Q = flat.reshape(len(fqs), len(keys), flat.shape[1])
                    V = T = Q[:, -1, :]  # the top quantile (a placeholder in V until provisioned)
        elif n_obj == 0:
            tqs = list(map(max, fqs))
            tops = list(map(getitem, fqs, tqs))
            arrs: list[Any] | None = None
            if c.quantile is not None:
                try:
                    arrs = list(map(itemgetter(c.quantile), fqs))
                except KeyError:
                    arrs = None
            if arrs is None:
                qcol = c.forecast_quantile.tolist()
                read_keys = [
                    q if q in qs else fc.quantile_key(q)
                    for fc, qs, q in zip(present, fqs, (qcol[i] for i in frows), strict=True)
                ]
                arrs = list(map(getitem, fqs, read_keys))
                read = np.asarray(read_keys, dtype=np.float64)
            V, T = _stacked(arrs), _stacked(tops)
            if V is None or T is None or V.shape != T.shape or not _one_shape(fqs, V.shape[1:]):
                V = T = None
        if V is not None and T is not None:  # every forecast 1-D, of one length
            horizon = V.shape[1]
            ok_rows = frows
            obj_pos = list(range(len(frows))) if n_obj else []
        else:  # mixed or odd: row by row, and rows unlike the first go to the reference
            read = "rows" if n_obj < len(frows) else None
            tqs = list(map(max, fqs))
            horizon, ok_rows, obj_pos, V, T, Q = self._row_by_row(present, fqs, tqs, frows, is_obj, c)
        width = max(horizon, 1)
        self.horizon = horizon
        self.has = np.zeros(n_items, dtype=bool)
        self.has[ok_rows] = True
        self.origin = np.zeros(n_items)
        self.step = np.ones(n_items)
        top_q = np.zeros(n_items)
        self.fixed_level = np.zeros(n_items)
        if ok_rows:
            os_ = np.fromiter(chain.from_iterable(map(_ORIGIN_STEP, (forecasts[i] for i in ok_rows))), np.float64)
            self.origin[ok_rows] = os_[0::2]
            self.step[ok_rows] = os_[1::2]
            top_q[frows] = tqs if tqs is not None else list(map(max, fqs))
            self.fixed_level[ok_rows] = c.forecast_quantile[ok_rows]
            if isinstance(read, np.ndarray):  # named by the level read (every row fixed: ok_rows is frows)
                self.fixed_level[ok_rows] = read
            elif read == "rows":
                rows = np.asarray(ok_rows, dtype=np.int64)
                for i in rows[~c.objective[rows]].tolist():
                    fc = cast(Forecast, forecasts[i])
                    q = float(self.fixed_level[i])
                    if q not in fc.quantiles:
                        self.fixed_level[i] = fc.quantile_key(q)
        self.top_q: list[float] = top_q.tolist()
        self.obj_rows = np.array(ok_rows, dtype=np.int64)[obj_pos] if obj_pos else np.zeros(0, dtype=np.int64)
        self.obj_q = Q
        if len(ok_rows) == n_items and V is not None and T is not None:
            self.values, self.top = V, T
        else:
            self.values = np.zeros((n_items, width))
            self.top = np.zeros((n_items, width))
            if ok_rows and V is not None and T is not None:
                self.values[ok_rows] = V
                self.top[ok_rows] = T

    def _row_by_row(
        self,
        present: Sequence[Forecast],
        fqs: list[Mapping[float, Any]],
        tqs: list[float],
        frows: list[int],
        is_obj: list[bool],
        c: SpecColumns,
    ) -> tuple[int, list[int], list[int], Any, Any, Any]:
        """The checks of the gathering loop, one row at a time (mixed quantile settings, odd shapes)."""
        qcol = c.forecast_quantile.tolist()
        horizon = -1
        keep: list[int] = []
        obj_lists: list[list[Any]] = []
        obj_pos: list[int] = []
        self.obj_keys = None
        arrs: list[Any] = []
        tops: list[Any] = []
        for k, (fc, qs, tq, ob) in enumerate(zip(present, fqs, tqs, is_obj, strict=True)):
            top = qs[tq]
            if ob:
                levels = tuple(sorted(qs))
                if self.obj_keys is None:
                    self.obj_keys = levels
                arr = top
                rows = [qs[x] for x in levels]
                if levels != self.obj_keys or len(levels) < 2 or any(r.shape != top.shape for r in rows):
                    self.good[frows[k]] = False
                    continue
            else:
                q = qcol[frows[k]]
                arr = qs[q] if q in qs else fc.quantile(q)
                if any(np.shape(x) != top.shape for x in qs.values()):  # an unread one too (shape_fault)
                    self.good[frows[k]] = False
                    continue
            if horizon < 0:
                horizon = arr.shape[0]
            if len(arr) != horizon or len(top) != horizon or horizon == 0 or arr.ndim != 1 or top.ndim != 1:
                self.good[frows[k]] = False
                continue
            if ob:
                obj_pos.append(len(keep))
                obj_lists.append(rows)
            keep.append(k)
            arrs.append(arr)
            tops.append(top)
        if not keep:
            return horizon, [], [], None, None, None
        V = np.concatenate(arrs).reshape(len(keep), -1)
        T = np.concatenate(tops).reshape(len(keep), -1)
        Q = None
        if obj_lists:
            Q = np.concatenate(list(chain.from_iterable(obj_lists))).reshape(len(obj_lists), len(obj_lists[0]), -1)
        return horizon, [frows[k] for k in keep], obj_pos, V, T, Q

    def provisioned(
        self, cols: int, per: np.ndarray, w_cost: np.ndarray, w_slo: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Values to provision for, their quantile levels and the top quantile, in the first ``cols`` columns.

        Fixed-quantile rows keep their quantile; objective rows get ``provision_levels`` (computed
        only for the columns the windows read: it is step by step, so the rest is never needed).
        """
        cols = max(1, min(cols, self.values.shape[1]))
        V, T = self.values[:, :cols], self.top[:, :cols]
        oi = self.obj_rows
        if not (oi.size and self.obj_keys is not None and self.obj_q is not None):
            return V, np.repeat(self.fixed_level[:, None], cols, axis=1), T
        # The objective's provisioning levels, for all its rows at once (planner.replicas).
        every = oi.size == V.shape[0]  # then oi is every row, in order
        per_o, cost_o, slo_o = (per, w_cost, w_slo) if every else (per[oi], w_cost[oi], w_slo[oi])
        with np.errstate(divide="ignore"):
            ratio = np.where(slo_o > 0, cost_o / slo_o, np.inf)
        # [rows, K, cols] as a view of a [K, rows, cols] copy: the same values, each quantile one
        # contiguous plane (provision_levels works plane by plane: about 1.5 x faster).
        q = np.ascontiguousarray(self.obj_q[:, :, :cols].transpose(1, 0, 2)).transpose(1, 0, 2)
        x, tau = provision_levels(self.obj_keys, q, per_o, ratio)
        if every:
            return x, tau, T
        V = V.copy()
        Lv = np.repeat(self.fixed_level[:, None], cols, axis=1)
        V[oi], Lv[oi] = x, tau
        return V, Lv, T


def _one_batch(fqs: list[Any]) -> tuple[np.ndarray, tuple[float, ...]] | None:
    """``([rows, K, horizon], levels)`` when every mapping is a row of a ``QuantileRows`` batch, else None.

    One batch with all its rows in order: the batch itself (no copy). Otherwise (a part of a batch,
    or a few batches, as when a rollout splits the workloads between two forecasters) each batch's
    rows are taken in one go. None for plain mappings, more than ``_MAX_BATCHES`` batches, or batches
    whose quantile levels or horizons differ (the stacking path checks those row by row).
    """
    first = fqs[0]
    if not isinstance(first, QuantileRows) or len(first.levels) < 2:
        return None
    try:
        batches = list(map(_BATCH, fqs))
    except AttributeError:  # a plain mapping among them
        return None
    rows = np.fromiter(map(_ROW, fqs), np.int64, count=len(fqs))
    batch = first.batch
    if batch.ndim != 3 or batch.shape[2] == 0:
        return None
    if all(map(is_, batches, repeat(batch))):
        if len(rows) == batch.shape[0] and (rows == np.arange(len(rows))).all():
            return batch, first.levels
        return batch[rows], first.levels
    where: dict[int, list[int]] = {}
    for i, b in enumerate(map(id, batches)):
        where.setdefault(b, []).append(i)
    if len(where) > _MAX_BATCHES:
        return None
    out = np.empty((len(fqs), *batch.shape[1:]))
    for pos in where.values():
        qr = fqs[pos[0]]
        if not isinstance(qr, QuantileRows) or qr.levels != first.levels or qr.batch.shape[1:] != batch.shape[1:]:
            return None
        out[pos] = qr.batch[rows[pos]]
    return out, first.levels


def _one_shape(fqs: list[Any], shape: tuple[int, ...]) -> bool:
    """Whether every quantile array of every mapping has ``shape`` (the unread ones too: a forecast
    with one of another shape is malformed, ``planner.replicas.shape_fault``, and goes to the
    reference). One pass in C over the arrays' shapes: about 4 ms for 10,000 plain forecasts of 3
    quantiles; forecaster batches (``QuantileRows``) are one array and never come here."""
    try:
        return set(map(_SHAPE, chain.from_iterable(map(_VALUES, fqs)))) == {shape}
    except AttributeError:  # not arrays: row by row
        return False


def _stacked(arrays: list[Any]) -> np.ndarray | None:
    """``arrays`` as the rows of one ``[rows, horizon]`` array, or None unless all are 1-D of one length > 0."""
    if not arrays:
        return None
    try:
        m = np.array(arrays)
    except ValueError:  # lengths or dimensions differ
        return None
    return m if m.ndim == 2 and m.shape[1] > 0 and m.dtype != object else None


def _scale_actions(
    refs: Sequence[WorkloadRef], current: list[Any], desired: list[int], codes: list[str], source: ReplicaBatch
) -> list[ScaleTo]:
    """The ``ScaleTo(ref, current, desired, LazyReason(code, source, row))`` of every row.

    The same objects the constructors make, set slot by slot and column by column (``map`` over
    the slots' descriptors runs in C: about 0.5 us a row instead of 2 us through ``__init__``).
    """
    n = len(refs)
    new = object.__new__
    with gc_paused():
        reasons = list(map(new, repeat(LazyReason, n)))
        _consume(map(_SET_CODE, reasons, codes))
        _consume(map(_SET_SOURCE, reasons, repeat(source, n)))
        _consume(map(_SET_ROW, reasons, range(n)))
        actions = list(map(new, repeat(ScaleTo, n)))
        _consume(map(_SET_WORKLOAD, actions, refs))
        _consume(map(_SET_FROM, actions, current))
        _consume(map(_SET_TO, actions, desired))
        _consume(map(_SET_REASON, actions, reasons))
        _consume(map(_SET_KIND, actions, repeat("ScaleTo", n)))
    return actions


@contextmanager
def gc_paused() -> Iterator[None]:
    """No cyclic garbage collection while many objects are made (none of them is garbage yet).

    Python runs a young-generation collection every 700 new container objects, and each one
    scans the young objects again: about 10 % of a 10,000-service plan. Paused, the new objects
    are scanned once, at the next collection. (The Prometheus client pauses it while decoding,
    docs/adr/0001-prometheus-http.md.) Re-enabled only if it was enabled.
    """
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


_SET_CODE = Reason.__dict__["code"].__set__
_SET_SOURCE, _SET_ROW = (LazyReason.__dict__[f].__set__ for f in ("_source", "_row"))
_SET_WORKLOAD, _SET_FROM, _SET_TO, _SET_REASON, _SET_KIND = (
    ScaleTo.__dict__[f].__set__ for f in ("workload", "from_replicas", "to_replicas", "reason", "kind")
)


def _rf(demand: np.ndarray, per: np.ndarray) -> np.ndarray:
    """``replicas_for`` over arrays, as float (exact integers below 2**52)."""
    ok = np.isfinite(demand) & (demand > 0)
    with np.errstate(all="ignore"):
        r = np.ceil(demand / per - _EPS)
    return np.where(ok, r, 0.0)


def _window_max(v: np.ndarray, lo: np.ndarray, hi: np.ndarray, argmax: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """Max (and first argmax) of ``v[i, lo[i]:hi[i]]`` per row; rows must have ``hi > lo``."""
    rows = v.shape[0]
    if rows == 0:
        return np.zeros(0), np.zeros(0, dtype=np.int64)
    if rows > 1 and lo.min() == lo.max() and hi.min() == hi.max():
        w = v[:, int(lo[0]) : int(hi[0])]
        return w.max(axis=1), (w.argmax(axis=1) if argmax else np.zeros(rows, dtype=np.int64))
    width = int((hi - lo).max())
    cols = lo[:, None] + np.arange(width)[None, :]
    inside = cols < hi[:, None]
    g = v[np.arange(rows)[:, None], np.minimum(cols, v.shape[1] - 1)]
    g = np.where(inside, g, -np.inf)
    i = g.argmax(axis=1) if argmax else np.zeros(rows, dtype=np.int64)
    return g.max(axis=1), i


def _last_column(*ends: np.ndarray, default: int) -> int:
    """The end of the furthest window (``default`` when there is none): no column after it is read."""
    return max((int(e.max()) for e in ends if e.size), default=default)


class ReplicaBatch:
    """The decided batch; also the :class:`ReasonSource` of its actions' reasons (never changed)."""

    def __init__(
        self,
        refs: Sequence[WorkloadRef],
        columns: SpecColumns,
        states: Sequence[WorkloadState],
        forecasts: Sequence[Forecast | None],
        now: float,
        interval_s: float,
    ) -> None:
        self.refs = refs
        self.columns = columns
        self.states = states
        self.forecasts = forecasts
        self.now = now
        self.interval_s = interval_s
        self.actions: list[ScaleTo] = []
        #: Row -> named fallback mode, for the rows that fell back (in row order).
        self.fallback_rows: dict[int, str] = {}
        self._top_q: list[float] = []
        self._cols: dict[str, list[Any]] | None = None
        self._arrays: dict[str, np.ndarray] = {}
        self._decide()

    def _decide(self) -> None:
        now = self.now
        states = self.states
        n_items = len(states)
        c = self.columns
        cap, tu, minr, maxr = c.capacity, c.target_utilization, c.min_replicas, c.max_replicas
        startup, stab, up, down = c.startup_s, c.stabilization_s, c.max_step_up, c.max_step_down
        mode_r, mode_s, static, stale = c.fallback_reactive, c.fallback_static, c.static_replicas, c.stale_after_s
        cur, obs, obs_at, recent = _state_columns(states)
        replicas = list(map(_REPLICAS, states))
        fc = _Forecasts(self.forecasts, c)
        o, s, hasf, horizon, good, self._top_q = fc.origin, fc.step, fc.has, fc.horizon, fc.good, fc.top_q
        w_cost, w_slo = c.cost_weight, c.slo_weight
        n = float(max(horizon, 0))
        good &= ~hasf | (np.isfinite(o) & np.isfinite(s) & (s > 0))

        per = cap * tu
        with np.errstate(all="ignore"):
            # nothing stamped after now is read (decide_replicas): such an observation is none
            observed_ok = np.isfinite(obs) & np.isfinite(obs_at) & (obs_at <= now)
            fresh = observed_ok & (now - obs_at <= stale)
            reactive = np.where(observed_ok, _rf(obs, per), 0.0)
            future = hasf & (o > now)
            old = hasf & (now - o > stale)
            short_h = hasf & (o + n * s < now + startup)
        usable = hasf & fresh & ~future & ~old & ~short_h

        # Forecast windows (as in _overlapping), clipped to [0, n]: the same branches follow.
        ok = usable & good

        def overlap(t0: np.ndarray, t1: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
            with np.errstate(all="ignore"):
                lo = np.clip(np.floor((t0 - o) / s + 1e-9), 0, n)
                hi = np.clip(np.ceil((t1 - o) / s - 1e-9), 0, n)
            return np.where(ok, lo, 0).astype(np.int64), np.where(ok, hi, 0).astype(np.int64)

        t_ready = now + startup
        t_end = t_ready + self.interval_s
        lo, hi = overlap(t_ready, t_end)
        empty = lo >= hi
        lo = np.where(empty, horizon - 1, lo)
        hi = np.where(empty, horizon, hi)
        t_keep = np.maximum(t_end, now + stab)
        klo, khi = overlap(np.full(n_items, now), t_keep)
        kempty = khi <= klo
        u = np.flatnonzero(ok)
        # The values to provision for (the objective's levels), only in the columns the windows read.
        V, Lv, T = fc.provisioned(_last_column(hi[u], khi[u], default=max(horizon, 1)), per, w_cost, w_slo)
        width = V.shape[1]
        peak = np.zeros(n_items)
        peak_i = np.zeros(n_items, dtype=np.int64)
        top_peak = np.zeros(n_items)
        hold_peak = np.zeros(n_items)
        hold_i = np.zeros(n_items, dtype=np.int64)
        top_hold = np.full(n_items, np.inf)
        peak[u], peak_i[u] = _window_max(V[u], lo[u], hi[u], argmax=True)
        top_peak[u], _ = _window_max(T[u], lo[u], hi[u])
        hold_peak[u] = peak[u]
        hold_i[u] = lo[u] + peak_i[u]
        top_hold[u] = top_peak[u]
        kr = u[~kempty[u]]
        hold_peak[kr], hold_i[kr] = _window_max(V[kr], klo[kr], khi[kr], argmax=True)
        hold_i[kr] += klo[kr]
        top_hold[kr], _ = _window_max(T[kr], klo[kr], khi[kr])
        # Only the windows are read: a non-finite value in one goes to the reference (NaN argmax etc.).
        good &= ~usable | (np.isfinite(peak) & np.isfinite(top_peak) & np.isfinite(hold_peak) & np.isfinite(top_hold))
        peak_t = o + (lo + peak_i) * s
        with np.errstate(invalid="ignore"):  # rows without a forecast (step inf, index 0) are never read
            hold_t = o + hold_i * s
        rows_all = np.arange(n_items)
        level = Lv[rows_all, np.clip(lo + peak_i, 0, width - 1)]
        hold_level = Lv[rows_all, np.clip(hold_i, 0, width - 1)]
        need = _rf(peak, per)
        hold = _rf(hold_peak, per)
        with np.errstate(invalid="ignore"):
            missed = observed_ok & (obs > top_peak)
        floor = np.maximum(np.maximum(need, reactive), hold)
        is_react = (reactive > need) & (reactive > cur)  # replicas.decide_replicas: never below the reactive need
        is_fc = ~is_react & (need >= cur)
        down_d = np.minimum(cur, floor)
        f_desired = np.where(is_react, reactive, np.where(is_fc, need, down_d))
        f_code = np.where(is_react, 3, np.where(is_fc, 4, np.where(down_d == cur, 5, 6)))
        # Ramp floor (replicas.ramp_floor), read only for the rows whose state has a trend.
        ramp_t = now + startup + self.interval_s
        ramp = np.zeros(n_items)
        ramp_demand = np.full(n_items, np.nan)
        trends = list(map(_TREND, states))
        trows: Any = slice(None)  # every row has a trend (the control loop's usual case): no gather
        if any(map(is_, trends, repeat(None))):
            trows = np.fromiter(compress(range(n_items), map(is_not, trends, repeat(None))), np.int64)
            trends = [trends[i] for i in trows.tolist()]
        if trends:
            # A Trend is a tuple (level, slope, t_stat, at, window_s, samples): one flat run of floats.
            tr = np.fromiter(chain.from_iterable(trends), np.float64, count=6 * len(trends)).reshape(-1, 6)
            with np.errstate(all="ignore"):
                on = (c.ramp_window_s[trows] > 0) & (tr[:, 1] > 0) & (tr[:, 2] >= c.ramp_min_t[trows])
                on &= np.isfinite(tr[:, 0]) & np.isfinite(tr[:, 3]) & (tr[:, 3] <= now)  # no peeking
                dem = tr[:, 0] + tr[:, 1] * np.maximum(0.0, ramp_t[trows] - tr[:, 3])
            ramp[trows] = np.where(on, _rf(dem, per[trows]), 0.0)
            ramp_demand[trows] = np.where(on, dem, np.nan)
        is_ramp = ramp > f_desired
        f_desired = np.where(is_ramp, ramp, f_desired)
        f_code = np.where(is_ramp, 7, f_code)
        fb_react = mode_r & observed_ok
        # a stale observation may scale out but not in (decide_replicas)
        b_desired = np.where(
            fb_react, np.where(fresh, reactive, np.maximum(cur, reactive)), np.where(mode_s, static, cur)
        )
        b_code = np.where(fb_react, 0, np.where(mode_s, 1, 2))
        desired = np.where(usable, f_desired, b_desired)
        code = np.where(usable, f_code, b_code)
        stab_cap = np.where(usable, _rf(top_hold, per), maxr)
        for a in (need, hold, reactive, stab_cap, desired, floor):
            good &= ~(a >= _BIG)

        raw = desired.copy()
        wmax = desired.copy()
        cond = (desired < cur) & (stab > 0)
        for i in recent:
            if cond[i]:
                w = stab[i]
                ds = [d for t, d in states[i].recent_desired if 0 <= now - t <= w]
                if ds:
                    m = max(ds)
                    if not (abs(m) < _BIG):
                        good[i] = False
                    wmax[i] = m
        held = np.minimum(wmax, np.maximum(desired, stab_cap))
        did_hold = cond & (held > desired)
        desired = np.where(did_hold, np.minimum(cur, held), desired)
        held_note = did_hold & (held < np.minimum(cur, wmax))
        # Churn (as decide_replicas): a scale-down must save at least the two scale events it may cost.
        churn = c.churn_weight
        with np.errstate(all="ignore"):  # rows with absurd counts (inf) go to the reference
            saving = (cur - desired) * w_cost * np.maximum(self.interval_s, stab)
        churn_kept = (desired < cur) & (churn > 0) & (saving < 2.0 * churn)
        churn_n = np.where(churn_kept, cur - desired, 0)
        desired = np.where(churn_kept, cur, desired)
        step_up = desired > cur + up
        desired = np.where(step_up, cur + up, desired)
        step_down = desired < cur - down
        desired = np.where(step_down, cur - down, desired)
        raised = desired < minr
        desired = np.where(raised, minr, desired)
        capped = desired > maxr
        desired = np.where(capped, maxr, desired)

        self._arrays = {
            "usable": usable,
            "observed_ok": observed_ok,
            "fresh": fresh,
            "old": old,
            "future": future,
            "code": code,
            "peak": peak,
            "peak_t": peak_t,
            "level": level,
            "hold_level": hold_level,
            "need": need,
            "hold": hold,
            "hold_peak": hold_peak,
            "reactive": reactive,
            "top_peak": top_peak,
            "top_hold": top_hold,
            "t_keep": t_keep,
            "hold_t": hold_t,
            "hold_soon": hold_i < hi,
            "floor": floor,
            "missed": missed,
            "raw": raw,
            "held": held,
            "did_hold": did_hold,
            "held_note": held_note,
            "churn_n": churn_n,
            "saving": saving,
            "step_up": step_up,
            "step_down": step_down,
            "raised": raised,
            "capped": capped,
            "desired": desired,
            "origin": o,
            "ramp": ramp,
            "ramp_demand": ramp_demand,
            "ramp_t": ramp_t,
        }
        self._emit(code, desired, replicas, usable, good)

    def _emit(
        self, code: np.ndarray, desired: np.ndarray, replicas: list[Any], usable: np.ndarray, good: np.ndarray
    ) -> None:
        """Make the actions: ``ScaleTo``/``LazyReason`` objects column by column; odd rows by the reference."""
        n_items = len(self.states)
        self.actions = _scale_actions(
            self.refs,
            replicas,
            desired.astype(np.int64).tolist(),
            _CODE_NAMES[code].tolist(),
            self,
        )
        # The rule that decided (a reactive fallback with nothing observed keeps the current count).
        fallbacks = {i: _CODES[code[i]].removeprefix("fallback_") for i in np.flatnonzero(~usable & good).tolist()}
        for i in np.flatnonzero(~good).tolist():
            d = decide_replicas(
                self.refs[i], self.columns.specs[i], self.states[i], self.forecasts[i], self.now, self.interval_s
            )
            self.actions[i] = d.action
            if d.fallback:
                fallbacks[i] = d.fallback
        self.fallback_rows = dict(sorted(fallbacks.items())) if n_items else {}

    def needs_now(self) -> dict[WorkloadRef, int]:
        """Each service's reactive need: the replicas demand observed now needs (0 when nothing
        usable was observed). Under shortage it is part of the service's floor (``planner.planning``)."""
        # at most maxReplicas (the floor never exceeds what is wanted): a huge but finite observation
        # (1e30) does not wrap around int64 (a review)
        need = np.minimum(self._arrays["reactive"], self.columns.max_replicas).astype(np.int64)
        return dict(zip(self.refs, need.tolist(), strict=True))

    def _columns(self) -> dict[str, list[Any]]:
        if self._cols is None:
            self._cols = {k: v.tolist() for k, v in self._arrays.items()}
        return self._cols

    def reason_of(self, i: int) -> tuple[str, Mapping[str, float | int | str]]:
        """The sentence and details of row ``i``, worded by ``explain`` as ``decide_replicas`` does."""
        c = self._columns()
        ref, spec, ws, fc = self.refs[i], self.columns.specs[i], self.states[i], self.forecasts[i]
        now = self.now
        code = _CODES[c["code"][i]]
        b = Basis(code, int(c["reactive"][i]), raw=int(c["raw"][i]), top_q=self._top_q[i] if c["usable"][i] else 0.0)
        if not c["usable"][i]:
            if fc is None:
                b.why = "no forecast"
            elif not c["fresh"][i]:
                b.why = history_cause(ws, now)
            elif c["future"][i]:
                b.why = f"forecast made after now (origin {fc.origin - now:g} s ahead)"
            elif c["old"][i]:
                b.why = f"stale forecast (made {now - fc.origin:.0f} s ago)"
            else:
                b.why = "forecast too short"
        else:
            b.peak, b.peak_t, b.need = c["peak"][i], c["peak_t"][i], int(c["need"][i])
            b.level, b.hold_level = c["level"][i], c["hold_level"][i]
            b.hold_peak, b.t_keep, b.hold = c["hold_peak"][i], c["t_keep"][i], int(c["hold"][i])
            b.hold_t, b.hold_soon = c["hold_t"][i], bool(c["hold_soon"][i])
            b.floor, b.top_peak, b.missed = int(c["floor"][i]), c["top_peak"][i], bool(c["missed"][i])
            if code == "ramp_floor":
                b.ramp, b.ramp_demand, b.ramp_t = int(c["ramp"][i]), c["ramp_demand"][i], c["ramp_t"][i]
        if c["did_hold"][i]:
            b.held, b.held_note, b.top_hold = int(c["held"][i]), bool(c["held_note"][i]), c["top_hold"][i]
        b.step_up, b.step_down = bool(c["step_up"][i]), bool(c["step_down"][i])
        b.raised, b.capped = bool(c["raised"][i]), bool(c["capped"][i])
        if c["churn_n"][i]:
            b.churn_kept, b.churn_saving = int(c["churn_n"][i]), c["saving"][i]
        return explain(ref, spec, ws, now, int(c["desired"][i]), b, self.interval_s)


def decide_replicas_many(
    items: Sequence[Item], now: float, interval_s: float = 10.0
) -> tuple[list[ScaleTo], list[str | None]]:
    """``decide_replicas`` for every ``(workload, spec, state, forecast)``: actions and fallbacks, in order."""
    if not items:
        return [], []
    refs, specs, states, forecasts = (list(col) for col in zip(*items, strict=True))
    batch = ReplicaBatch(refs, spec_columns(specs), states, forecasts, now, interval_s)
    return batch.actions, [batch.fallback_rows.get(i) for i in range(len(items))]
