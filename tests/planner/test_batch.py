"""The batch path (planner/batch.py) decides exactly as the scalar reference ``decide_replicas``.

For random batches of services (varied bounds, steps, quantiles, fallback modes, start-up and
stabilization; missing, stale, short, empty (no steps), ragged or odd forecasts; values so large
that a replica count overflows a float; forecasts, observations and earlier decisions stamped
after now; NaN, huge or stale observed demand; earlier desired counts) every action, target
count, reason code, sentence and detail, and every fallback of ``planner.plan`` equals what
``decide_replicas`` gives one workload at a time.
"""

from __future__ import annotations

import copy
import pickle
from typing import Any

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from planner_helpers import service_policy

from planner import plan
from planner.batch import _one_batch, decide_replicas_many
from planner.replicas import decide_replicas
from scaleahead.policy import Policy
from scaleahead.types import (
    ClusterState,
    Forecast,
    LazyReason,
    QuantileRows,
    Reason,
    ScaleTo,
    Trend,
    WorkloadRef,
    WorkloadState,
    batch_forecasts,
)

NOW = 1_000_000.0
_VALUES = st.one_of(
    st.floats(0, 2000, allow_nan=False),
    st.floats(-5, 5, allow_nan=False),
    st.sampled_from([0.0, 9.999999999, 10.0, 1e6, 1e30, 1e308, float("nan"), float("inf"), -float("inf")]),
)


_TRENDS = st.builds(
    Trend,
    level=st.one_of(st.floats(-10, 2000), st.sampled_from([float("nan"), 1e30, float("inf"), -float("inf")])),
    slope=st.sampled_from([-1.0, 0.0, 0.01, 0.5, 5.0, 1e20, float("nan"), float("inf")]),
    t_stat=st.sampled_from([float("nan"), -2.0, 0.5, 2.9999, 3.0, 10.0, float("inf")]),
    at=st.sampled_from([NOW, NOW - 10.0, NOW - 300.0, NOW + 5.0, float("nan"), float("inf"), -float("inf")]),
    window_s=st.just(300.0),
    samples=st.sampled_from([3, 30]),
)


@st.composite
def services(
    draw: st.DrawFn, i: int, shared: tuple[float | None, tuple[float, ...], int] | None = None
) -> tuple[Policy, WorkloadState, Forecast | None]:
    """One service; ``shared`` fixes its forecastQuantile, forecast quantiles and length (one batch of them)."""
    lo = draw(st.integers(0, 10))
    hi = draw(st.integers(max(lo, 1), 60))
    mode = draw(st.sampled_from(["reactive", "current", "static"]))
    fallback: dict[str, Any] = {"mode": mode, "staleAfterSeconds": draw(st.sampled_from([30.0, 60.0, 600.0]))}
    step = draw(st.sampled_from([10.0, 10.0, 120.0]))
    if mode == "static" or draw(st.booleans()):
        fallback["staticReplicas"] = draw(st.integers(0, 70))
    policy = service_policy(
        f"w{i}",
        minReplicas=lo,
        maxReplicas=hi,
        maxStepUp=draw(st.integers(1, 20)),
        maxStepDown=draw(st.integers(1, 20)),
        scaleDownStabilizationSeconds=draw(st.sampled_from([0, 45, 300])),
        startupSeconds=draw(st.sampled_from([0.0, 30.0, 60.0, 125.0])),
        forecastQuantile=shared[0] if shared else draw(st.sampled_from([None, None, 0.5, 0.8, 0.9, 0.95, 0.99])),
        objective={
            "cost": draw(st.sampled_from([1.0, 1.0, 0.0])),
            "sloRisk": draw(st.sampled_from([3.0, 300.0, 1e5])),
            "churn": draw(st.sampled_from([0.1, 0.0, 30.0, 1e4])),
        },
        targetUtilization=draw(st.sampled_from([0.5, 0.8, 1.0])),
        capacityPerReplica=draw(st.sampled_from([0.5, 2.0, 10.0, 1470.0])),
        fallback=fallback,
        demand={
            "query": "q",
            "unit": draw(st.sampled_from(["req/s", "CPU %"])),
            # a step longer than staleAfterSeconds moves the stale limit (replicas.stale_limit)
            "stepSeconds": step,
        },
        rampFloor={
            "windowSeconds": draw(st.sampled_from([0.0, 300.0, 300.0] if step < 100 else [0.0, 600.0])),
            "minTStat": draw(st.sampled_from([0.5, 3.0])),
        },
    )
    # negative ages: decisions stamped after now (never counted)
    history = draw(st.lists(st.tuples(st.integers(-120, 600), st.integers(0, 80)), max_size=4))
    ws = WorkloadState(
        policy.workload,
        replicas=draw(st.integers(0, 80)),
        ready_replicas=draw(st.integers(0, 80)),
        observed_demand=draw(st.one_of(st.floats(0, 1000), st.sampled_from([float("nan"), float("inf"), 1.7e308]))),
        observed_at=NOW - draw(st.sampled_from([0, 5, 45, 200, 10_000, -0.5, -3600])),  # < 0: after now
        recent_desired=tuple((NOW - age, n) for age, n in history),
        observed_trend=draw(st.one_of(st.none(), _TRENDS)),
    )
    if draw(st.integers(0, 5)) == 0:
        return policy, ws, None
    step = draw(st.sampled_from([10.0, 60.0]))
    n = shared[2] if shared else draw(st.sampled_from([90, 90, 90, 3, 1, 0]))
    origin = NOW + draw(st.sampled_from([0.0, 0.0, 5.0, -35.0, -120.0, -5000.0, 3.3, 1000.0]))  # > 0: after now
    keys = shared[1] if shared else draw(st.sampled_from([(0.1, 0.5, 0.9, 0.99), (0.5, 0.9), (0.5,), ()]))
    base = np.array(draw(st.lists(_VALUES, min_size=n, max_size=n)), dtype=np.float64)
    if draw(st.booleans()):
        base = np.full(n, draw(st.floats(0, 500)))
    with np.errstate(over="ignore"):  # 1e308 x 1.99 is inf: a non-finite value, as it may come
        quantiles = {q: base * (1.0 + q) for q in keys}
    if keys and not shared and draw(st.integers(0, 5)) == 0:
        # malformed: one quantile (read or not) one step shorter or longer, or 2-D
        k = draw(st.sampled_from(keys))
        quantiles[k] = draw(st.sampled_from([quantiles[k][:-1], np.append(quantiles[k], 1.0), quantiles[k][:, None]]))
    return policy, ws, Forecast(policy.workload, origin, step, quantiles)


@st.composite
def batches(draw: st.DrawFn) -> list[tuple[Policy, WorkloadState, Forecast | None]]:
    return [draw(services(i)) for i in range(draw(st.integers(1, 8)))]


@st.composite
def uniform_batches(draw: st.DrawFn) -> list[tuple[Policy, WorkloadState, Forecast | None]]:
    """Services with one quantile setting and one forecast shape: what one forecaster batch plans."""
    shared = (
        draw(st.sampled_from([None, 0.5, 0.8, 0.9, 0.99])),
        draw(st.sampled_from([(0.1, 0.5, 0.9, 0.99), (0.5, 0.9)])),
        draw(st.sampled_from([90, 3])),
    )
    return [draw(services(i, shared)) for i in range(draw(st.integers(1, 8)))]


def _reference(items: list[tuple[Policy, WorkloadState, Forecast | None]]) -> tuple[list[ScaleTo], dict[Any, str]]:
    actions, fallbacks = [], {}
    for policy, ws, fc in items:
        d = decide_replicas(policy.workload, policy.spec, ws, fc, NOW, 10.0)
        actions.append(d.action)
        if d.fallback:
            fallbacks[policy.workload] = d.fallback
    return actions, fallbacks


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(batches())
def test_the_batch_path_gives_exactly_the_reference_plan(
    items: list[tuple[Policy, WorkloadState, Forecast | None]],
) -> None:
    forecasts = {p.workload: fc for p, _, fc in items if fc is not None}
    state = ClusterState({p.workload: ws for p, ws, _ in items})
    result = plan(forecasts, state, [p for p, _, _ in items], NOW, 10.0)
    expected, fallbacks = _reference(items)
    assert len(result.actions) == len(expected)
    for got, want in zip(result.actions, expected, strict=True):
        assert isinstance(got, ScaleTo)
        assert (got.to_replicas, got.reason.code) == (want.to_replicas, want.reason.code)
        assert got.reason.message == want.reason.message
        # repr, so that a NaN forecast peak equals itself
        assert repr(got) == repr(want).replace("Reason(", "Reason(", 1)
        assert [type(v) for v in got.reason.details.values()] == [type(v) for v in want.reason.details.values()]
    assert dict(result.fallbacks) == fallbacks


def test_a_lazy_reason_reads_pickles_and_compares_as_a_plain_reason() -> None:
    policy = service_policy("web")
    ws = WorkloadState(policy.workload, 2, 2, 55.0, NOW - 5)
    fc = Forecast(policy.workload, NOW, 10.0, {0.5: np.full(90, 30.0), 0.99: np.full(90, 40.0)})
    actions, fallbacks = decide_replicas_many([(policy.workload, policy.spec, ws, fc)], NOW)
    reason = actions[0].reason
    assert isinstance(reason, LazyReason)
    want = decide_replicas(policy.workload, policy.spec, ws, fc, NOW).action.reason
    assert reason == want
    assert str(reason) == want.message
    assert type(pickle.loads(pickle.dumps(reason))) is Reason
    assert copy.deepcopy(reason) == want
    assert fallbacks == [None]


def test_ten_thousand_identical_services_decide_like_one() -> None:
    policy = service_policy("web", maxReplicas=50)
    ws = WorkloadState(policy.workload, 3, 3, 42.0, NOW - 5)
    fc = Forecast(policy.workload, NOW, 10.0, {0.9: np.linspace(10, 200, 90), 0.99: np.linspace(20, 300, 90)})
    actions, _ = decide_replicas_many([(policy.workload, policy.spec, ws, fc)] * 10_000, NOW)
    want = decide_replicas(policy.workload, policy.spec, ws, fc, NOW).action
    assert actions[0] == want
    assert actions[-1] == want


def test_ordinary_services_take_the_batch_path_and_a_nan_forecast_the_reference() -> None:
    items = []
    for i, values in enumerate([np.full(90, 30.0), np.full(90, np.nan), np.linspace(0, 90, 90)]):
        policy = service_policy(f"w{i}")
        ws = WorkloadState(policy.workload, 2, 2, 25.0, NOW - 5)
        fc = Forecast(policy.workload, NOW, 10.0, {0.9: values, 0.99: values * 1.5})
        items.append((policy.workload, policy.spec, ws, fc))
    actions, _ = decide_replicas_many(items, NOW)
    assert [type(a.reason) for a in actions] == [LazyReason, Reason, LazyReason]
    for item, action in zip(items, actions, strict=True):
        assert repr(action) == repr(decide_replicas(*item, NOW).action)


def _malformed(fc: Forecast) -> bool:
    """Quantile arrays that are not 1-D of one length (no forecaster batch holds them)."""
    shapes = {q.shape for q in fc.quantiles.values()}
    return len(shapes) > 1 or any(len(s) != 1 for s in shapes)


def _as_forecaster_batches(
    items: list[tuple[Policy, WorkloadState, Forecast | None]], reverse: bool, parts: int
) -> dict[WorkloadRef, Forecast]:
    """The same forecasts as rows of read-only batches (QuantileRows): per quantile set and length,
    ``parts`` batches (workloads dealt to them in turn, as a rollout splits them between forecasters)."""
    groups: dict[tuple[tuple[float, ...], int, int], list[Forecast]] = {}
    out: dict[WorkloadRef, Forecast] = {}
    for i, (_, _, fc) in enumerate(items):
        if fc is not None and (not fc.quantiles or _malformed(fc)):
            out[fc.workload] = fc  # no batch holds a forecast without quantiles, or with ragged ones
        elif fc is not None:
            groups.setdefault((tuple(sorted(fc.quantiles)), fc.horizon_steps, i % parts), []).append(fc)
    for (keys, _, _), fcs in groups.items():
        fcs = fcs[::-1] if reverse else fcs
        q = np.stack([np.stack([fc.quantiles[k] for k in keys]) for fc in fcs])
        made = batch_forecasts([f.workload for f in fcs], [f.origin for f in fcs], [f.step_s for f in fcs], q, keys)
        out.update({f.workload: f for f in made})
    return out


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(batches(), uniform_batches()), st.booleans(), st.integers(1, 3))
def test_forecasts_that_are_rows_of_forecaster_batches_plan_exactly_like_plain_ones(
    items: list[tuple[Policy, WorkloadState, Forecast | None]], reverse: bool, parts: int
) -> None:
    forecasts = _as_forecaster_batches(items, reverse, parts)
    assert all(isinstance(f.quantiles, QuantileRows) for f in forecasts.values() if f.quantiles and not _malformed(f))
    state = ClusterState({p.workload: ws for p, ws, _ in items})
    result = plan(forecasts, state, [p for p, _, _ in items], NOW, 10.0)
    expected, fallbacks = _reference(items)  # the plain {q: array} forecasts, one workload at a time
    for got, want in zip(result.actions, expected, strict=True):
        assert isinstance(got, ScaleTo)
        assert repr(got) == repr(want)
    assert dict(result.fallbacks) == fallbacks


def test_the_planner_reads_a_whole_batch_in_order_without_copying_it() -> None:
    policies = [service_policy(f"w{i}") for i in range(3)]
    q = np.stack([np.stack([np.full(90, 10.0 * i), np.full(90, 10.0 * i + 5)]) for i in range(3)])
    fcs = batch_forecasts([p.workload for p in policies], [NOW] * 3, [10.0] * 3, q, (0.5, 0.99))
    rows = [f.quantiles for f in fcs]
    got = _one_batch(rows)
    assert got is not None and got[0] is fcs[0].quantiles.batch and got[1] == (0.5, 0.99)  # type: ignore[attr-defined]
    # out of order, or a part of it: the rows taken in one go
    part = _one_batch(rows[::-1])
    assert part is not None and part[0][0, 0, 0] == 20.0
    # a plain mapping among them: not one batch
    assert _one_batch([*rows[:2], {0.5: np.zeros(90), 0.99: np.zeros(90)}]) is None
    state = ClusterState({p.workload: WorkloadState(p.workload, 2, 2, 25.0, NOW - 5) for p in policies})
    result = plan({f.workload: f for f in fcs}, state, policies, NOW, 10.0)
    plain = {f.workload: Forecast(f.workload, f.origin, f.step_s, dict(f.quantiles)) for f in fcs}
    assert repr(result.actions) == repr(plan(plain, state, policies, NOW, 10.0).actions)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(services(0), services(1))
def test_one_service_alone_decides_as_it_does_in_a_batch(
    one: tuple[Policy, WorkloadState, Forecast | None], other: tuple[Policy, WorkloadState, Forecast | None]
) -> None:
    """A plan of one service takes the reference (``decide_replicas``), a plan of two the batch
    (since 2026-12-07: the replay's 127,000 plans of one service each cost 287 us in the batch
    against 21 us): the first service's decision is the same either way."""
    alone_items, pair_items = [one], [one, other]
    results = []
    for items in (alone_items, pair_items):
        forecasts = {p.workload: fc for p, _, fc in items if fc is not None}
        state = ClusterState({p.workload: ws for p, ws, _ in items})
        results.append(plan(forecasts, state, [p for p, _, _ in items], NOW, 10.0))
    alone, pair = results
    assert repr(alone.actions[0]) == repr(pair.actions[0])
    assert alone.actions[0].reason.message == pair.actions[0].reason.message
    ref = one[0].workload
    assert alone.fallbacks.get(ref) == pair.fallbacks.get(ref)
