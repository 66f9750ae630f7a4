"""``scaleahead bench serverless``: pre-warming against cold starts, EVALUATION.md section 5 exactly.

Composition root: the ``scaleahead`` policy is the real thing end to end: the invocation
forecaster (``forecaster.invocations``) -> ``planner.plan`` with one ``workloadClass: function``
policy per function -> ``actuator.base.apply_plan`` -> the simulated serverless platform
(``actuator.simulated_serverless``). The peers (``scaleahead.bench.serverless_peers``) decide
warm minutes directly. All are scored by one function, ``score``, from the warm matrix and the
counts, which is also what the ``--decisions`` file holds, so anyone can recompute the metrics.

Trade-off curves (``--sweep-cost``, ``--peer-curves``) and the calibration of the default
``coldStartCostMbMinutes`` (``--calibrate``, on the history only) use a vectorized copy of the
planner's rule (``warm_from_probabilities``) on the same forecaster's probabilities; a test checks
that it decides exactly what the planner path decides.
"""

from __future__ import annotations

import csv
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from actuator.base import apply_plan
from actuator.simulated_serverless import SimulatedServerless
from forecaster.invocations import InvocationForecaster
from planner import plan as make_plan
from planner.warm import break_even_probabilities
from planner.warm_budget import budget_period, with_cold_start_cost
from scaleahead.bench import open_text_out
from scaleahead.bench.serverless_peers import FixedKeepAlive, HybridHistogram, Oracle
from scaleahead.errors import DataError
from scaleahead.policy import Policy, PolicySpec, WarmPool, to_dns_label
from scaleahead.traces import FunctionsTrace
from scaleahead.types import WorkloadRef
from scaleahead.warm_budgets import WINDOW_S, rebuild

POLICIES = ("scaleahead", "fixed_keepalive_10m", "fixed_keepalive_20m", "hybrid_histogram", "oracle")
BoolMatrix = npt.NDArray[np.bool_]
FloatMatrix = npt.NDArray[np.float64]
IntMatrix = npt.NDArray[np.int64]
#: Default warm-pool threshold of the scaleahead policy: the schema's default (docs/serverless.md).
DEFAULT_MIN_PROBABILITY = WarmPool.model_fields["min_probability"].default
#: Default worth of one avoided cold start (MB-minutes) of the scaleahead policy: the schema's default.
DEFAULT_COLD_START_COST: float | None = WarmPool.model_fields["cold_start_cost_mb_minutes"].default
#: Default warm-memory budget (x the 10-minute keep-alive's waste) of the scaleahead policy: the schema's default.
DEFAULT_BUDGET_RATIO: float | None = WarmPool.model_fields["keep_alive_budget_ratio"].default
#: The keep-alive the budget is measured against (s): the schema's default.
DEFAULT_REFERENCE_KEEP_ALIVE_S: float = WarmPool.model_fields["reference_keep_alive_seconds"].default
#: Keep-alive lengths (minutes) and hybrid-histogram ranges (minutes) of the peers' trade-off curves.
FIXED_CURVE_MINUTES = (2, 5, 10, 15, 20, 30, 45, 60, 120, 240)
HYBRID_CURVE_RANGES = (30, 60, 120, 240, 480)


@dataclass(frozen=True, slots=True)
class ServerlessRun:
    """The outcome of one run: warm matrices ``[functions, test minutes]`` and metrics per policy."""

    trace: str
    history_minutes: int
    test_minutes: int
    counts: IntMatrix  # [functions, test minutes]
    warm: dict[str, BoolMatrix]
    metrics: dict[str, dict[str, float | int | None]]
    names: tuple[str, ...]
    memory_mb: npt.NDArray[np.float64]
    params: dict[str, Any]


def score(counts: IntMatrix, warm: BoolMatrix, memory_mb: npt.NDArray[np.float64]) -> dict[str, float | int | None]:
    """The metrics of EVALUATION.md section 5 (without ``wasted_memory_rel_fixed10``).

    Args:
        counts: invocations ``[functions, minutes]`` of the test period.
        warm: whether each function had a warm instance for each minute (decided before it).
        memory_mb: memory of one warm instance of each function.
    """
    active = counts > 0
    cold = active & ~warm
    invocations = int(counts.sum())
    cold_starts = int(cold.sum())
    wasted = float(((warm & ~active) * memory_mb[:, None]).sum())
    inv_f = counts.sum(axis=1)
    called = inv_f > 0
    cold_pct = 100.0 * cold.sum(axis=1)[called] / inv_f[called]
    return {
        "cold_start_fraction": cold_starts / invocations if invocations else None,
        "p75_function_cold_pct": float(np.percentile(cold_pct, 75)) if cold_pct.size else None,
        "wasted_memory_mb_min": wasted,
        "cold_starts": cold_starts,
        "invocations": invocations,
        "warm_minutes": int(warm.sum()),
    }


def add_relative(metrics: dict[str, dict[str, float | int | None]]) -> None:
    """Add ``wasted_memory_rel_fixed10`` = wasted memory / that of ``fixed_keepalive_10m``."""
    base = metrics.get("fixed_keepalive_10m", {}).get("wasted_memory_mb_min")
    for m in metrics.values():
        wasted = m["wasted_memory_mb_min"]
        m["wasted_memory_rel_fixed10"] = (
            float(wasted) / float(base) if base and wasted is not None and float(base) > 0 else None
        )


def function_policies(
    trace: FunctionsTrace,
    min_probability: float,
    cold_start_cost: float | None = DEFAULT_COLD_START_COST,
    keep_alive_budget_ratio: float | None = None,
    step_s: float = 60.0,
) -> tuple[list[WorkloadRef], list[Policy]]:
    """One ``workloadClass: function`` policy per function, warm pool on, its memory per instance,
    at ``step_s`` (``demand.stepSeconds``: the planner's break-even depends on it)."""
    refs: list[WorkloadRef] = []
    policies: list[Policy] = []
    for i, name in enumerate(trace.names):
        fn = name[:48]
        app = trace.apps[i][:48]
        # Kubernetes names (the policy refuses others): a trace's hashes are lowercase hex already, a
        # CSV of other function names is made lowercase ASCII; the index keeps the names unique.
        ref = WorkloadRef("KnativeService", to_dns_label(f"app-{app}"), to_dns_label(f"fn-{i}-{fn}"))
        spec = PolicySpec.model_validate(
            {
                "target": {"kind": "KnativeService", "namespace": ref.namespace, "name": ref.name},
                "demand": {
                    "query": f'invocations{{function="{name}"}}',
                    "unit": "invocations/min",
                    "stepSeconds": step_s,
                },
                "capacityPerReplica": 1.0,
                "workloadClass": "function",
                "warmPool": {
                    "enabled": True,
                    "maxInstances": 1,
                    "memoryMbPerInstance": float(trace.memory_mb[i]),
                    "minProbability": min_probability,
                    "coldStartCostMbMinutes": cold_start_cost,
                    "keepAliveBudgetRatio": keep_alive_budget_ratio,
                },
                "fallback": {"staleAfterSeconds": 120},
            }
        )
        refs.append(ref)
        policies.append(
            Policy.model_validate({"metadata": {"name": ref.name, "namespace": ref.namespace}, "spec": spec})
        )
    return refs, policies


def run_scaleahead(
    trace: FunctionsTrace,
    history: int,
    min_probability: float = DEFAULT_MIN_PROBABILITY,
    step_s: float = 60.0,
    cold_start_cost: float | None = DEFAULT_COLD_START_COST,
    keep_alive_budget_ratio: float | None = DEFAULT_BUDGET_RATIO,
    costs_out: list[float] | None = None,
) -> tuple[BoolMatrix, SimulatedServerless]:
    """The project's policy through the real forecaster, planner and actuator path."""
    counts = trace.counts
    refs, policies = function_policies(trace, min_probability, cold_start_cost, keep_alive_budget_ratio, step_s)
    model = InvocationForecaster(len(refs), step_s=step_s).fit(counts[:, :history])
    sim = SimulatedServerless(refs, trace.memory_mb, start=trace.start + history * step_s, step_s=step_s)
    n_test = counts.shape[1] - history
    warm = np.zeros((len(refs), n_test), dtype=bool)
    planned_cost = cold_start_cost
    costs: list[float] = []
    for k in range(n_test):
        now = sim.now
        if (
            keep_alive_budget_ratio is not None
            and cold_start_cost is not None
            and (k == 0 or _period_starts(trace, history + k, step_s))
        ):
            # the warm-memory budget's cost for this period, rebuilt as the control loop does
            cost = period_cost(trace, history + k, keep_alive_budget_ratio, cold_start_cost, step_s)
            if cost != planned_cost:
                planned_cost = cost
                policies = [with_cold_start_cost(p, cost) for p in policies]
        if planned_cost is not None:
            costs.append(planned_cost)
        forecasts = model.forecasts(refs, now)
        state = sim.read_state(refs)
        result = make_plan({}, state, policies, now, step_s, invocations=forecasts)
        for r in apply_plan(result, sim):
            if r.outcome == "failed":
                raise RuntimeError(f"simulated platform refused {r.action}: {r.detail}")
        column = counts[:, history + k]
        warm[:, k] = sim.step(column)
        model.observe(column)
    if costs_out is not None:
        costs_out.extend(costs)
    return warm, sim


def subset(trace: FunctionsTrace, n: int) -> FunctionsTrace:
    """``n`` functions evenly spaced over the rows (rows ``i * total // n``), for quick iterations."""
    total = len(trace.names)
    if not 1 <= n <= total:
        raise DataError(
            f"--functions {n} is not between 1 and the trace's {total} functions.", "Give a count in range."
        )
    rows = np.array([i * total // n for i in range(n)], dtype=np.int64)
    return FunctionsTrace(
        names=tuple(trace.names[i] for i in rows),
        apps=tuple(trace.apps[i] for i in rows),
        start=trace.start,
        counts=trace.counts[rows],
        memory_mb=trace.memory_mb[rows],
        mean_duration_ms=trace.mean_duration_ms[rows],
    )


def probabilities(counts: IntMatrix, start: int, end: int, warm_from: int = 0, step_s: float = 60.0) -> FloatMatrix:
    """The scaleahead forecaster's P(invocation) for each function and minute in ``[start, end)``.

    The forecaster observes minutes ``[warm_from, start)`` first, then each minute after deciding
    it, exactly as in ``run_scaleahead`` (column ``k`` uses minutes before ``start + k`` only).
    """
    model = InvocationForecaster(counts.shape[0], step_s=step_s, horizon=1).fit(counts[:, warm_from:start])
    out = np.zeros((counts.shape[0], end - start))
    for k in range(end - start):
        out[:, k] = model.predict(1)[:, 0]
        model.observe(counts[:, start + k])
    return out


def warm_from_probabilities(
    prob: FloatMatrix,
    memory_mb: npt.NDArray[np.float64],
    min_probability: float = DEFAULT_MIN_PROBABILITY,
    cold_start_cost: float | None = DEFAULT_COLD_START_COST,
    step_s: float = 60.0,
) -> BoolMatrix:
    """The planner's warm rule (``planner.warm``, one instance at most) for a whole probability matrix.

    ``step_s``: the step the probabilities are for; the break-even is the planner's at that step
    (until 2026-12-07 ``m / (m + cost)`` whatever the step, the planner's at 60 s only).
    """
    threshold = np.full(len(memory_mb), min_probability, dtype=np.float64)
    if cold_start_cost is not None:
        threshold = np.maximum(threshold, break_even_probabilities(memory_mb, cold_start_cost, step_s))
    out: BoolMatrix = prob >= threshold[:, None]
    return out


def _period_starts(trace: FunctionsTrace, minute: int, step_s: float) -> bool:
    """Whether ``minute`` starts a warm-budget period (where the loop's ``budget_period`` changes)."""
    now = trace.start + minute * step_s
    return budget_period(now, step_s) != budget_period(now - step_s, step_s)


def period_cost(
    trace: FunctionsTrace, minute: int, ratio: float, cold_start_cost: float, step_s: float = 60.0
) -> float:
    """The budget's cost from ``minute`` on: ``scaleahead.warm_budgets.rebuild`` on the day before it."""
    day = int(WINDOW_S / step_s)
    counts = trace.counts[:, max(0, minute - day) : minute]
    key = (step_s, ratio, DEFAULT_REFERENCE_KEEP_ALIVE_S, cold_start_cost)
    return rebuild(counts, trace.memory_mb.tolist(), step_s, key).cost


def budget_warm(
    trace: FunctionsTrace,
    history: int,
    ratio: float,
    cold_start_cost: float,
    prob: FloatMatrix | None = None,
    step_s: float = 60.0,
) -> BoolMatrix:
    """The warm-memory budget's decisions over the test period, vectorized (what ``run_scaleahead`` decides).

    ``prob`` is ``probabilities(counts, history, end)`` when already computed; the cost of each period
    is ``period_cost``, as in ``run_scaleahead``.
    """
    counts = trace.counts
    test_prob = probabilities(counts, history, counts.shape[1], step_s=step_s) if prob is None else prob
    warm = np.zeros(test_prob.shape, dtype=bool)
    cost = cold_start_cost
    for k in range(test_prob.shape[1]):
        if k == 0 or _period_starts(trace, history + k, step_s):
            cost = period_cost(trace, history + k, ratio, cold_start_cost, step_s)
        warm[:, k] = warm_from_probabilities(test_prob[:, k : k + 1], trace.memory_mb, 0.0, cost, step_s)[:, 0]
    return warm


def fixed_keepalive_warm(counts: IntMatrix, history: int, minutes: int) -> BoolMatrix:
    """Warm matrix of ``FixedKeepAlive(minutes)`` over the test period ``[history, end)``."""
    return _run_online(FixedKeepAlive(len(counts), minutes), counts, history)


@dataclass(frozen=True, slots=True)
class Calibration:
    """The cold-start cost that spends, over a validation window of the history, what fixed 10 min spends."""

    cold_start_cost_mb_minutes: float
    warmup_minutes: int
    validation_minutes: tuple[int, int]
    wasted_memory_rel_fixed10: float
    cold_starts: int
    fixed10_cold_starts: int
    target_rel: float


def calibrate_cost(
    trace: FunctionsTrace, history: int, warmup: int = 120, target_rel: float = 1.0, step_s: float = 60.0
) -> Calibration:
    """Choose ``coldStartCostMbMinutes`` on the history only (minutes before ``history``).

    The forecaster starts empty at minute 0 and runs online; on the validation minutes
    ``[warmup, history)`` the largest cost (the most warm memory) whose wasted memory is at most
    ``target_rel`` x that of the fixed 10-minute keep-alive over the same minutes is chosen
    (bisection in log space, rounded down to two significant digits). Minutes from ``history`` on
    are never read.
    """
    if not 0 < warmup < history:
        raise DataError(f"warm-up {warmup} must lie inside the {history} minutes of history.", "Give a smaller one.")
    counts = trace.counts[:, :history]
    prob = probabilities(counts, warmup, history, step_s=step_s)
    val = counts[:, warmup:]
    ref = score(val, fixed_keepalive_warm(counts, warmup, 10), trace.memory_mb)
    ref_waste = float(ref["wasted_memory_mb_min"] or 0.0)

    def rel(cost: float) -> float:
        m = score(val, warm_from_probabilities(prob, trace.memory_mb, 0.0, cost, step_s), trace.memory_mb)
        return float(m["wasted_memory_mb_min"] or 0.0) / ref_waste if ref_waste > 0 else math.inf

    lo, hi = 0.0, 7.0  # log10 of the cost in MB-minutes
    for _ in range(50):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if rel(10**mid) <= target_rel else (lo, mid)
    raw = 10**lo
    digits = 10 ** (math.floor(math.log10(raw)) - 1)
    cost = math.floor(raw / digits) * digits
    m = score(val, warm_from_probabilities(prob, trace.memory_mb, 0.0, cost, step_s), trace.memory_mb)
    return Calibration(
        cold_start_cost_mb_minutes=float(cost),
        warmup_minutes=warmup,
        validation_minutes=(warmup, history),
        wasted_memory_rel_fixed10=rel(cost),
        cold_starts=int(m["cold_starts"] or 0),
        fixed10_cold_starts=int(ref["cold_starts"] or 0),
        target_rel=target_rel,
    )


@dataclass(frozen=True, slots=True)
class CurvePoint:
    """One point of a trade-off curve: a policy at one setting, scored on the test period."""

    policy: str
    setting: str
    value: float
    cold_start_fraction: float
    wasted_memory_rel_fixed10: float
    cold_starts: int


def _point(policy: str, setting: str, value: float, m: dict[str, float | int | None], base: float) -> CurvePoint:
    return CurvePoint(
        policy,
        setting,
        value,
        float(m["cold_start_fraction"] or 0.0),
        float(m["wasted_memory_mb_min"] or 0.0) / base if base > 0 else math.nan,
        int(m["cold_starts"] or 0),
    )


def tradeoff_curves(
    trace: FunctionsTrace,
    history: int,
    costs: Sequence[float] = (),
    min_probabilities: Sequence[float] = (),
    peers: bool = False,
    budget_ratios: Sequence[float] = (),
    cold_start_cost: float = DEFAULT_COLD_START_COST or 9000.0,
) -> list[CurvePoint]:
    """Cold starts against wasted memory as each policy's one setting varies (scored like ``score``).

    ``costs``: scaleahead with a fixed ``coldStartCostMbMinutes`` (no budget); ``budget_ratios``: with
    the warm-memory budget at each ``keepAliveBudgetRatio`` (starting from ``cold_start_cost``).
    """
    counts = trace.counts
    test = counts[:, history:]
    base = float(score(test, fixed_keepalive_warm(counts, history, 10), trace.memory_mb)["wasted_memory_mb_min"] or 0)
    points: list[CurvePoint] = []
    if costs or min_probabilities or budget_ratios:
        prob = probabilities(counts, history, counts.shape[1])
        for r in budget_ratios:
            w = budget_warm(trace, history, r, cold_start_cost, prob)
            m = score(test, w, trace.memory_mb)
            points.append(_point("scaleahead_budget", "keep_alive_budget_ratio", r, m, base))
        for c in costs:
            w = warm_from_probabilities(prob, trace.memory_mb, 0.0, c)
            points.append(_point("scaleahead", "cold_start_cost_mb_minutes", c, score(test, w, trace.memory_mb), base))
        for p in min_probabilities:
            w = warm_from_probabilities(prob, trace.memory_mb, p, None)
            points.append(
                _point("scaleahead_probability_only", "min_probability", p, score(test, w, trace.memory_mb), base)
            )
    if peers:
        for k in FIXED_CURVE_MINUTES:
            w = fixed_keepalive_warm(counts, history, k)
            points.append(_point("fixed_keepalive", "minutes", k, score(test, w, trace.memory_mb), base))
        for r in HYBRID_CURVE_RANGES:
            w = _run_online(HybridHistogram(trace.apps, range_minutes=r), counts, history)
            points.append(_point("hybrid_histogram", "range_minutes", r, score(test, w, trace.memory_mb), base))
    return points


def _run_online(peer: FixedKeepAlive | HybridHistogram, counts: IntMatrix, history: int) -> BoolMatrix:
    for t in range(history):
        peer.observe(counts[:, t])
    warm = np.zeros((counts.shape[0], counts.shape[1] - history), dtype=bool)
    for k in range(warm.shape[1]):
        warm[:, k] = peer.decide()
        peer.observe(counts[:, history + k])
    return warm


def run_policies(
    trace: FunctionsTrace,
    history: int,
    policies: Sequence[str] = POLICIES,
    min_probability: float = DEFAULT_MIN_PROBABILITY,
    trace_name: str = "",
    progress: Callable[[str], None] | None = None,
    cold_start_cost: float | None = DEFAULT_COLD_START_COST,
    keep_alive_budget_ratio: float | None = DEFAULT_BUDGET_RATIO,
) -> ServerlessRun:
    """Run every policy on the test period ``[history, end)`` and score it."""
    counts = trace.counts
    minutes = counts.shape[1]
    if history < 1 or history >= minutes:
        raise DataError(
            f"The trace has {minutes} minutes, too few for {history} minutes of history and a test period.",
            "Give a longer functions CSV or a smaller --history-minutes.",
        )
    warm: dict[str, BoolMatrix] = {}
    costs: list[float] = []
    for name in policies:
        if progress:
            progress(name)
        if name == "scaleahead":
            warm[name], _ = run_scaleahead(
                trace,
                history,
                min_probability,
                cold_start_cost=cold_start_cost,
                keep_alive_budget_ratio=keep_alive_budget_ratio,
                costs_out=costs,
            )
        elif name.startswith("fixed_keepalive_"):
            warm[name] = _run_online(
                FixedKeepAlive(len(counts), int(name.removeprefix("fixed_keepalive_")[:-1])), counts, history
            )
        elif name == "hybrid_histogram":
            warm[name] = _run_online(HybridHistogram(trace.apps), counts, history)
        elif name == "oracle":
            oracle = Oracle()
            warm[name] = np.stack([oracle.decide_with(counts[:, t]) for t in range(history, minutes)], axis=1)
        else:
            raise DataError(f"Unknown serverless policy {name!r}.", f"Use one of {', '.join(POLICIES)}.")
    test = counts[:, history:]
    metrics = {name: score(test, w, trace.memory_mb) for name, w in warm.items()}
    add_relative(metrics)
    params: dict[str, Any] = {}
    if min_probability != DEFAULT_MIN_PROBABILITY:
        params["min_probability"] = min_probability
    if cold_start_cost != DEFAULT_COLD_START_COST:
        params["cold_start_cost_mb_minutes"] = cold_start_cost
    if keep_alive_budget_ratio != DEFAULT_BUDGET_RATIO:
        params["keep_alive_budget_ratio"] = keep_alive_budget_ratio
    if costs:
        # the cost the warm-memory budget planned each test minute with: first, range and how often it moved
        params["cold_start_cost_used"] = {
            "first": costs[0],
            "last": costs[-1],
            "min": min(costs),
            "max": max(costs),
            "changes": sum(a != b for a, b in zip(costs, costs[1:], strict=False)),
        }
    return ServerlessRun(
        trace_name, history, minutes - history, test, warm, metrics, trace.names, trace.memory_mb, params
    )


def to_json(run: ServerlessRun, extra_params: dict[str, Any] | None = None) -> dict[str, Any]:
    def clean(v: float | int | None) -> float | int | None:
        return None if isinstance(v, float) and not math.isfinite(v) else v

    out: dict[str, Any] = {
        "trace": run.trace,
        "resolution_s": 60,
        "split": {
            "history_minutes": run.history_minutes,
            "test_minutes": run.test_minutes,
            "test_start_minute": run.history_minutes + 1,
        },
        "functions": len(run.names),
        "policies": {p: {k: clean(v) for k, v in m.items()} for p, m in run.metrics.items()},
    }
    params = {**run.params, **(extra_params or {})}
    if params:
        out["params"] = params
    return out


def write_decisions(run: ServerlessRun, path: Path) -> None:
    """``policy,function,minute,invocations,warm``; ``minute`` is the trace's 1-based ``minute_N``."""
    first = run.history_minutes + 1
    with open_text_out(path) as fh:
        w = csv.writer(fh)
        w.writerow(["policy", "function", "minute", "invocations", "warm"])
        minutes = [str(first + k) for k in range(run.test_minutes)]
        for policy, warm in run.warm.items():
            for f, name in enumerate(run.names):
                inv = run.counts[f]
                wf = warm[f]
                w.writerows((policy, name, minutes[k], int(inv[k]), int(wf[k])) for k in range(run.test_minutes))


def write_plot(
    run: ServerlessRun,
    path: Path,
    curve: Sequence[tuple[float, float, float]] = (),
    curves: Sequence[CurvePoint] = (),
) -> None:
    """Cold-start share against wasted memory: one point per policy, the trade-off curves, the default marked.

    ``curve`` is the minProbability sweep ``(threshold, rel memory, cold fraction)``; ``curves`` the
    points of ``tradeoff_curves`` (scaleahead's budget ratio and fixed cold-start cost, fixed keep-alive,
    hybrid histogram).
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8.5, 5.5), dpi=110)
    if curve:
        xs = [c[1] for c in curve]
        ys = [100 * c[2] for c in curve]
        ax.plot(xs, ys, ":", color="tab:purple", alpha=0.6, marker=".", label="scaleahead, minProbability only")
    styles = {
        "scaleahead": ("tab:cyan", "o", "scaleahead, fixed coldStartCostMbMinutes varied (no budget)"),
        "scaleahead_budget": ("tab:blue", "D", "scaleahead, keepAliveBudgetRatio varied"),
        "scaleahead_probability_only": ("tab:purple", ".", "scaleahead, minProbability only"),
        "fixed_keepalive": ("tab:gray", "s", "fixed keep-alive, minutes varied"),
        "hybrid_histogram": ("tab:red", "^", "hybrid histogram, range varied"),
    }
    for policy, (colour, marker, label) in styles.items():
        pts = sorted((p for p in curves if p.policy == policy), key=lambda p: p.wasted_memory_rel_fixed10)
        if not pts:
            continue
        xs = [p.wasted_memory_rel_fixed10 for p in pts]
        ys = [100 * p.cold_start_fraction for p in pts]
        ax.plot(xs, ys, "-", color=colour, marker=marker, ms=4, alpha=0.55, label=label)
        for p in pts:
            ax.annotate(
                f"{p.value:g}",
                (p.wasted_memory_rel_fixed10, 100 * p.cold_start_fraction),
                fontsize=6,
                color=colour,
                xytext=(3, 4),
                textcoords="offset points",
            )
    colours = {"scaleahead": "tab:blue", "oracle": "black", "hybrid_histogram": "tab:red"}
    for name, m in run.metrics.items():
        rel = m.get("wasted_memory_rel_fixed10")
        frac = m.get("cold_start_fraction")
        if rel is None or frac is None or float(frac) <= 0:
            continue  # the oracle (no cold starts) has no place on the log scale
        big = name == "scaleahead"
        ax.scatter(
            [rel],
            [100 * float(frac)],
            s=140 if big else 60,
            color=colours.get(name, "tab:gray"),
            zorder=3,
            marker="*" if big else "o",
            edgecolors="black" if big else "none",
        )
        label = f"{name} (default)" if big else name
        ax.annotate(label, (float(rel), 100 * float(frac)), xytext=(6, -10), textcoords="offset points", fontsize=9)
    fixed10 = run.metrics.get("fixed_keepalive_10m", {}).get("cold_start_fraction")
    if fixed10 is not None:
        ax.axhline(50 * float(fixed10), color="tab:green", lw=0.8, ls="--", label="target: 0.5 x fixed 10 min cold")
        ax.axvline(1.0, color="tab:green", lw=0.8, ls=":", label="target: memory <= fixed 10 min")
    ax.set_xlabel("wasted memory, relative to fixed_keepalive_10m")
    ax.set_ylabel("cold starts, % of invocations (log scale; the oracle has none)")
    ax.set_yscale("log")
    ax.set_title(
        f"Serverless pre-warming, {run.trace}\n{len(run.names)} functions, {run.test_minutes} test minutes", fontsize=10
    )
    ax.grid(alpha=0.3)
    ax.legend(loc="upper right", fontsize=7)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
