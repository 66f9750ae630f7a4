"""Replica decisions for many services at once: the rule of ``planner.replicas``, as arrays.

``decide_replicas`` decides one service in about 30 us of Python; at 10,000 services a plan took
about 300 ms. Here the same rule runs over all services as numpy arrays (window peaks, reactive
floors, stabilization, step limits, bounds) and each reason is a :class:`LazyReason` whose
sentence is formatted on first read. Decisions, codes, sentences and details are exactly those of
``decide_replicas`` (the scalar reference); tests/planner/test_batch.py checks that with hypothesis.
Rows with unusual input (non-finite forecast values, empty or mismatched horizons, absurd replica
counts) are decided by the reference itself. Both paths word their decisions through one
``planner.replicas.explain``; a change to the rule must be made in both modules.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from itertools import chain
from operator import attrgetter
from typing import Any

import numpy as np

from planner.replicas import _EPS, Basis, decide_replicas, explain, provision_levels
from scaleahead.policy import FallbackMode, PolicySpec
from scaleahead.types import Forecast, LazyReason, Reason, ScaleTo, WorkloadRef, WorkloadState

_SPEC = attrgetter(
    "capacity_per_replica",
    "target_utilization",
    "min_replicas",
    "max_replicas",
    "startup_seconds",
    "scale_down_stabilization_seconds",
    "max_step_up",
    "max_step_down",
    "forecast_quantile",
    "objective.cost",
    "objective.slo_risk",
)
_FALLBACK = attrgetter("mode", "static_replicas", "stale_after_seconds")
_STATE = attrgetter("replicas", "ready_replicas", "observed_demand", "observed_at")

# Reason codes by number.
_CODES = (
    "fallback_reactive",
    "fallback_static",
    "fallback_current",
    "reactive_floor",
    "forecast",
    "keep_until_replacement",
    "forecast_down",
)
#: Replica counts at or above this go to the reference (Python ints do not overflow; int64 does).
_BIG = 2.0**52

Item = tuple[WorkloadRef, PolicySpec, WorkloadState, Forecast | None]


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


class ReplicaBatch:
    """The decided batch; also the :class:`ReasonSource` of its actions' reasons (never changed)."""

    def __init__(self, items: Sequence[Item], now: float, interval_s: float) -> None:
        self.items = items
        self.now = now
        self.interval_s = interval_s
        self.actions: list[ScaleTo] = []
        self.fallbacks: list[str | None] = []
        self._cols: dict[str, list[Any]] | None = None
        self._arrays: dict[str, np.ndarray] = {}
        self._decide()

    def _decide(self) -> None:
        now, items = self.now, self.items
        n_items = len(items)
        keys: dict[tuple[Any, ...], int] = {}
        kidx = [0] * n_items
        fb_keys: dict[int, int] = {}  # by id: every spec (so its fallback) lives as long as the batch
        fb_list: list[Any] = []
        fidx = [0] * n_items
        states = [(0, 0, 0.0, 0.0)] * n_items
        origin = [0.0] * n_items
        step = [1.0] * n_items
        has = [False] * n_items
        top_q = [0.0] * n_items
        qrows: list[Any] = []
        trows: list[Any] = []
        frows: list[int] = []
        fixed_q: list[float] = []  # per row of qrows: its fixed quantile, or NaN (the objective's)
        obj_keys: tuple[float, ...] | None = None  # the quantile levels of objective rows (all the same)
        obj_rows: list[int] = []  # positions in qrows of the objective rows
        obj_stack: list[Any] = []
        recent: list[int] = []
        scalar: list[int] = []
        horizon = -1
        for i, (_, spec, ws, fc) in enumerate(items):
            key = _SPEC(spec)
            k = keys.get(key)
            if k is None:
                k = keys[key] = len(keys)
            kidx[i] = k
            fb = spec.fallback
            f = fb_keys.get(id(fb))
            if f is None:
                f = fb_keys[id(fb)] = len(fb_list)
                fb_list.append(_FALLBACK(fb))
            fidx[i] = f
            states[i] = _STATE(ws)
            if ws.recent_desired:
                recent.append(i)
            if fc is not None:
                qs = fc.quantiles
                q = key[8]
                tq = max(qs)
                top = qs[tq]
                if q is None:
                    # The objective's level: every quantile goes into provision_levels below.
                    levels = tuple(sorted(qs))
                    if obj_keys is None:
                        obj_keys = levels
                    arr = top
                    rows = [qs[k] for k in levels]
                    if levels != obj_keys or len(levels) < 2 or any(r.shape != top.shape for r in rows):
                        scalar.append(i)
                        continue
                else:
                    arr = qs[q] if q in qs else fc.quantile(q)
                if horizon < 0:
                    horizon = arr.shape[0]
                if len(arr) != horizon or len(top) != horizon or horizon == 0 or arr.ndim != 1 or top.ndim != 1:
                    scalar.append(i)
                    continue
                if q is None:
                    obj_rows.append(len(qrows))
                    obj_stack.append(rows)
                    fixed_q.append(np.nan)
                else:
                    fixed_q.append(q)
                has[i] = True
                origin[i] = fc.origin
                step[i] = fc.step_s
                top_q[i] = tq
                qrows.append(arr)
                trows.append(top)
                frows.append(i)
        P = np.array(list(keys), dtype=np.float64).reshape(-1, 11)
        ki = np.array(kidx, dtype=np.int64)
        cap, tu, minr, maxr, startup, stab, up, down, _q, w_cost, w_slo = (P[ki, j] for j in range(11))
        F = np.array([(m == FallbackMode.REACTIVE, m == FallbackMode.STATIC, r or 0, a) for m, r, a in fb_list])
        fi = np.array(fidx, dtype=np.int64)
        mode_r, mode_s = F[fi, 0] > 0, F[fi, 1] > 0
        static, stale = F[fi, 2], F[fi, 3]
        modes = [m for m, _, _ in fb_list]
        st = np.fromiter(chain.from_iterable(states), np.float64, count=4 * n_items).reshape(-1, 4)
        cur, ready, obs, obs_at = st[:, 0], st[:, 1], st[:, 2], st[:, 3]
        o = np.array(origin)
        s = np.array(step)
        hasf = np.array(has, dtype=bool)
        n = float(max(horizon, 0))
        fr = np.array(frows, dtype=np.int64)
        width = max(horizon, 1)
        if frows:
            Vf = np.concatenate(qrows).reshape(-1, width)
            Lf = np.repeat(np.array(fixed_q, dtype=np.float64)[:, None], width, axis=1)
            if obj_rows and obj_keys is not None:
                # The objective's provisioning levels, for all its rows at once (planner.replicas).
                orow = np.array(obj_rows, dtype=np.int64)
                oi = fr[orow]
                per_o = cap[oi] * tu[oi]
                with np.errstate(divide="ignore"):
                    ratio = np.where(w_slo[oi] > 0, w_cost[oi] / w_slo[oi], np.inf)
                Q = np.concatenate(list(chain.from_iterable(obj_stack))).reshape(len(obj_rows), len(obj_keys), width)
                Vf[orow], Lf[orow] = provision_levels(obj_keys, Q, per_o, ratio)
        if len(frows) == n_items:
            V = Vf
            Lv = Lf
            T = np.concatenate(trows).reshape(n_items, width)
        else:
            V = np.zeros((n_items, width))
            Lv = np.zeros((n_items, width))
            T = np.zeros((n_items, width))
            if frows:
                V[fr] = Vf
                Lv[fr] = Lf
                T[fr] = np.concatenate(trows).reshape(-1, width)
        good = np.ones(n_items, dtype=bool)
        good[scalar] = False
        good &= ~hasf | (np.isfinite(o) & np.isfinite(s) & (s > 0))

        per = cap * tu
        with np.errstate(all="ignore"):
            observed_ok = np.isfinite(obs) & np.isfinite(obs_at)
            fresh = observed_ok & (now - obs_at <= stale)
            reactive = np.where(observed_ok, _rf(obs, per), 0.0)
            old = hasf & (now - o > stale)
            short_h = hasf & (o + n * s < now + startup)
        usable = hasf & fresh & ~old & ~short_h

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
        rows_all = np.arange(n_items)
        level = Lv[rows_all, np.clip(lo + peak_i, 0, width - 1)]
        hold_level = Lv[rows_all, np.clip(hold_i, 0, width - 1)]
        need = _rf(peak, per)
        hold = _rf(hold_peak, per)
        with np.errstate(invalid="ignore"):
            missed = observed_ok & (obs > top_peak)
            short_now = observed_ok & (obs > cap * ready)
        floor = np.maximum(np.maximum(need, reactive), hold)
        is_react = (reactive > need) & (reactive > cur) & (missed | short_now)
        is_fc = ~is_react & (need >= cur)
        down_d = np.minimum(cur, floor)
        f_desired = np.where(is_react, reactive, np.where(is_fc, need, down_d))
        f_code = np.where(is_react, 3, np.where(is_fc, 4, np.where(down_d == cur, 5, 6)))
        fb_react = mode_r & observed_ok
        b_desired = np.where(fb_react, reactive, np.where(mode_s, static, cur))
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
                ds = [d for t, d in items[i][2].recent_desired if now - t <= w]
                if ds:
                    m = max(ds)
                    if not (abs(m) < _BIG):
                        good[i] = False
                    wmax[i] = m
        held = np.minimum(wmax, np.maximum(desired, stab_cap))
        did_hold = cond & (held > desired)
        desired = np.where(did_hold, np.minimum(cur, held), desired)
        held_note = did_hold & (held < np.minimum(cur, wmax))
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
            "floor": floor,
            "missed": missed,
            "raw": raw,
            "held": held,
            "did_hold": did_hold,
            "held_note": held_note,
            "step_up": step_up,
            "step_down": step_down,
            "raised": raised,
            "capped": capped,
            "desired": desired,
            "origin": o,
        }
        self._top_q = top_q
        cur_l = [int(x) for x in st[:, 0].tolist()]
        des_l = desired.astype(np.int64).tolist()
        code_l = code.tolist()
        good_l = good.tolist()
        use_l = usable.tolist()
        mode_l = [modes[k_] for k_ in fidx]
        # The same objects ScaleTo(...) and LazyReason(...) make, set slot by slot (twice as fast).
        new = object.__new__
        set_code = Reason.__dict__["code"].__set__
        set_source, set_row = (LazyReason.__dict__[f].__set__ for f in ("_source", "_row"))
        set_workload, set_from, set_to, set_reason, set_kind = (
            ScaleTo.__dict__[f].__set__ for f in ("workload", "from_replicas", "to_replicas", "reason", "kind")
        )
        actions = self.actions
        fallbacks = self.fallbacks
        for i, (ref, spec, ws, fc) in enumerate(items):
            if not good_l[i]:
                d = decide_replicas(ref, spec, ws, fc, now, self.interval_s)
                actions.append(d.action)
                fallbacks.append(d.fallback)
                continue
            r = new(LazyReason)
            set_code(r, _CODES[code_l[i]])
            set_source(r, self)
            set_row(r, i)
            a = new(ScaleTo)
            set_workload(a, ref)
            set_from(a, cur_l[i])
            set_to(a, des_l[i])
            set_reason(a, r)
            set_kind(a, "ScaleTo")
            actions.append(a)
            fallbacks.append(None if use_l[i] else mode_l[i].value)

    def _columns(self) -> dict[str, list[Any]]:
        if self._cols is None:
            self._cols = {k: v.tolist() for k, v in self._arrays.items()}
        return self._cols

    def reason_of(self, i: int) -> tuple[str, Mapping[str, float | int | str]]:
        """The sentence and details of row ``i``, worded by ``explain`` as ``decide_replicas`` does."""
        c = self._columns()
        ref, spec, ws, fc = self.items[i]
        now = self.now
        code = _CODES[c["code"][i]]
        b = Basis(code, int(c["reactive"][i]), raw=int(c["raw"][i]), top_q=self._top_q[i] if c["usable"][i] else 0.0)
        if not c["usable"][i]:
            if fc is None:
                b.why = "no forecast"
            elif not c["fresh"][i]:
                b.why = "stale history"
            elif c["old"][i]:
                b.why = f"stale forecast (made {now - fc.origin:.0f} s ago)"
            else:
                b.why = "forecast too short"
        else:
            b.peak, b.peak_t, b.need = c["peak"][i], c["peak_t"][i], int(c["need"][i])
            b.level, b.hold_level = c["level"][i], c["hold_level"][i]
            b.hold_peak, b.t_keep, b.hold = c["hold_peak"][i], c["t_keep"][i], int(c["hold"][i])
            b.floor, b.top_peak, b.missed = int(c["floor"][i]), c["top_peak"][i], bool(c["missed"][i])
        if c["did_hold"][i]:
            b.held, b.held_note, b.top_hold = int(c["held"][i]), bool(c["held_note"][i]), c["top_hold"][i]
        b.step_up, b.step_down = bool(c["step_up"][i]), bool(c["step_down"][i])
        b.raised, b.capped = bool(c["raised"][i]), bool(c["capped"][i])
        return explain(ref, spec, ws, now, int(c["desired"][i]), b)


def decide_replicas_many(
    items: Sequence[Item], now: float, interval_s: float = 10.0
) -> tuple[list[ScaleTo], list[str | None]]:
    """``decide_replicas`` for every ``(workload, spec, state, forecast)``: actions and fallbacks, in order."""
    if not items:
        return [], []
    batch = ReplicaBatch(items, now, interval_s)
    return batch.actions, batch.fallbacks
