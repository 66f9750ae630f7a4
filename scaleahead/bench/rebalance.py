"""``scaleahead bench rebalance``: pod moves on a cluster snapshot built from real machine usage.

Why it exists: EVALUATION.md section 5b measures whether the planner's moves free nodes and
separate interfering pods *safely*, against the Kubernetes descheduler. Nothing here decides
anything: the snapshot comes from the Alibaba 2018 per-machine trace, the moves from
``planner.rebalance`` or the peers in ``scaleahead.bench.descheduler``, and the scoring replays
the trace's later part.

Snapshot (reproducible from ``seed``; see docs/rebalance.md):

- Trace ``alibaba2018_machine_usage_16machines`` (raw CSV, no header). Each machine's
  ``cpu_util_percent`` samples are held (last value) on a 10 s grid for at most ``HOLD_S`` after a
  sample, then averaged into ``STEP_S`` steps; a step with no held sample is missing (NaN).
- Split (EVALUATION.md section 2): the first 75 % of the time span is history, the rest the
  future. The snapshot is taken at the split; a machine is a node if it reported in the last hour
  of history (``m_1947`` stopped reporting at 52 h, so 15 nodes).
- Every node has ``NODE_CPU_M`` allocatable CPU and ``NODE_MEMORY_MB`` memory. Its usage is the
  load of the pods placed on it: 3 to 8 pods (uniform, seeded) whose owners are drawn from
  ``OWNERS`` (never two replicas of an anti-affine owner on one node); each pod takes a fixed
  share of the machine's CPU over time (class weight x Gamma(2) draw, normalised).
- Per pod, from history only: forecast peak = max of its usage; observed usage = mean of the last
  hour; CPU request = 90th percentile of its usage (rounded up to 10 m); memory request = request
  cores x the class's GiB per core. PDBs: ``disruptions_allowed`` per owner as in ``OWNERS``.

Scoring on the future part: ``peak_overcommit`` counts node-steps where the pods placed on a node
use more CPU than it has; a pod whose machine did not report in a step counts at its forecast
peak (missing data is never zero), and how many pod-steps were so filled is reported.
``forecast_peak_overcommit`` is EVALUATION.md's words read literally: node-steps where the sum of
the forecast peaks of the pods placed on a node exceeds its allocatable CPU (one peak per pod, so
a node over it counts every future step). Neither reading is stricter in general.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from planner.rebalance import (
    CPU_BOUND,
    DEFAULT_MAX_MOVES,
    DEFAULT_MAX_PEAK_FRACTION,
    LATENCY_CRITICAL,
    RebalanceWeights,
    interference_pairs,
    plan_moves,
    pod_key,
    with_forecast_peaks,
)
from scaleahead.bench.descheduler import SimCluster, run_descheduler
from scaleahead.errors import DataError
from scaleahead.traces import traces_dir
from scaleahead.types import ClusterState, FloatArray, MovePod, Node, Pod, PodDisruptionBudget

TRACE = "alibaba2018_machine_usage_16machines"
TRACE_FILE = "machine_usage_m_1932-m_1947_raw.csv.gz"
STEP_S = 300
GRID_S = 10
HOLD_S = 900
HISTORY_FRACTION = 0.75
NODE_CPU_M = 96_000
NODE_MEMORY_MB = 384 * 1024
PODS_PER_NODE = (3, 8)
DEFAULT_SEED = 7
POLICIES = ("scaleahead", "descheduler_low_node_utilization", "descheduler_high_node_utilization", "none")
#: The move budgets of the trade-off curves.
TRADEOFF_BUDGETS = (1, 2, 3, 4, 5, 6, 8, 10, 12, 15, 20, 25, 30, 40)
#: The issue 5 targets are stated against this peer.
REFERENCE = "descheduler_high_node_utilization"
#: The metrics summarised over seeds.
SEED_METRICS = (
    "nodes_freed",
    "moves",
    "interference_pairs_before",
    "interference_pairs_after",
    "peak_overcommit",
    "forecast_peak_overcommit",
    "pdb_violations",
)


@dataclass(frozen=True, slots=True)
class Owner:
    namespace: str
    name: str
    interference: str
    class_weight: float
    gib_per_core: float
    disruptions_allowed: int | None  # None: no PDB
    anti_affine: bool  # replicas never share a node


#: The pod mix: latency-critical web services, cpu-bound batch, io-bound data pipelines.
OWNERS: tuple[Owner, ...] = (
    Owner("shop", "cart", LATENCY_CRITICAL, 1.0, 4.0, 1, True),
    Owner("shop", "checkout", LATENCY_CRITICAL, 1.0, 4.0, 1, True),
    Owner("shop", "search", LATENCY_CRITICAL, 1.5, 4.0, 1, True),
    Owner("shop", "frontend", LATENCY_CRITICAL, 1.0, 2.0, 2, True),
    Owner("batch", "etl", CPU_BOUND, 3.0, 2.0, None, False),
    Owner("batch", "train", CPU_BOUND, 3.0, 2.0, None, False),
    Owner("batch", "render", CPU_BOUND, 3.0, 2.0, None, False),
    Owner("data", "kafka", "io-bound", 1.5, 8.0, 1, True),
    Owner("data", "logs", "io-bound", 1.0, 8.0, None, False),
)


@dataclass(frozen=True, slots=True)
class Snapshot:
    """The cluster at the split and every pod's CPU usage (millicores) over the future steps."""

    state: ClusterState
    future_usage: dict[str, FloatArray]
    start_s: float
    split_s: float
    end_s: float
    seed: int
    machines: tuple[str, ...]


def trace_path() -> Path:
    path = traces_dir() / TRACE / TRACE_FILE
    if not path.is_file():
        raise DataError(
            f"The trace {TRACE} was not found at {path}.",
            "Set SCALEAHEAD_TRACES to the folder that holds the shared traces.",
        )
    return path


def resample(times: FloatArray, values: FloatArray, n_steps: int) -> FloatArray:
    """Irregular samples -> mean per ``STEP_S`` step of the last value held for <= ``HOLD_S``."""
    grid = np.arange(n_steps * STEP_S // GRID_S, dtype=np.float64) * GRID_S
    idx = np.searchsorted(times, grid, side="right") - 1
    held = np.full(grid.shape, np.nan)
    ok = idx >= 0
    age = grid[ok] - times[idx[ok]]
    held_ok = np.where(age <= HOLD_S, values[idx[ok]], np.nan)
    held[ok] = held_ok
    per_step = held.reshape(n_steps, STEP_S // GRID_S)
    counts = np.sum(~np.isnan(per_step), axis=1)
    sums = np.nansum(per_step, axis=1)
    out = np.full(n_steps, np.nan)
    out[counts > 0] = sums[counts > 0] / counts[counts > 0]
    return out


def load_machines(path: Path) -> tuple[dict[str, FloatArray], int]:
    """Per machine, CPU utilization (0-100) per ``STEP_S`` step from time 0; and the step count."""
    try:
        df = pd.read_csv(path, header=None, usecols=[0, 1, 2], names=["machine", "t", "cpu"])
    except (OSError, ValueError) as exc:
        raise DataError(f"Cannot read {path}: {exc}.", "Check the file is the raw Alibaba CSV.") from exc
    if df.empty:
        raise DataError(f"{path} has no rows.", "Use the raw machine_usage CSV of Alibaba 2018.")
    df = df.dropna().sort_values(["machine", "t"])
    n_steps = int(np.ceil((float(df["t"].max()) + GRID_S) / STEP_S))
    out: dict[str, FloatArray] = {}
    for machine, g in df.groupby("machine", sort=True):
        out[str(machine)] = resample(g["t"].to_numpy(np.float64), g["cpu"].to_numpy(np.float64), n_steps)
    return out, n_steps


def build_snapshot(
    seed: int = DEFAULT_SEED,
    path: Path | None = None,
    peak_ratio: float | None = None,
    peak_lookback_s: float | None = None,
) -> Snapshot:
    """The reproducible cluster snapshot of the module docstring.

    Each pod's forecast peak is its history's maximum (a long-horizon peak). With ``peak_ratio``
    or ``peak_lookback_s`` it is what the control loop computes instead
    (``scaleahead.loop.with_forecast_peaks_of``, through ``planner.rebalance.with_forecast_peaks``:
    the usage times a ratio, never below the request): the forecast ratio
    ``peak_ratio`` (1 if not given; the same for every pod), or, when larger, the highest usage of
    the pod's last ``peak_lookback_s`` of history over its usage now (the loop's
    ``PLACEMENT_LOOKBACK_S``, a day, on its workload's demand).
    """
    machines, n_steps = load_machines(path or trace_path())
    split = int(np.floor(HISTORY_FRACTION * n_steps))
    last_hour = slice(split - 3600 // STEP_S, split)
    rng = np.random.default_rng(seed)
    nodes: list[Node] = []
    pods: list[Pod] = []
    future: dict[str, FloatArray] = {}
    counters: dict[str, int] = {}
    recent_max: dict[str, float] = {}  # pod key -> its highest usage over the last peak_lookback_s
    kept = [m for m, cpu in machines.items() if np.any(~np.isnan(cpu[last_hour]))]
    for i, machine in enumerate(kept):
        node = f"node-{i + 1:02d}"
        nodes.append(Node(node, NODE_CPU_M, NODE_MEMORY_MB, labels={"alibaba/machine": machine}))
        usage_m = machines[machine] / 100.0 * NODE_CPU_M
        k = int(rng.integers(PODS_PER_NODE[0], PODS_PER_NODE[1] + 1))
        owners: list[Owner] = []
        for _ in range(k):
            allowed = [o for o in OWNERS if not (o.anti_affine and o in owners)]
            owners.append(allowed[int(rng.integers(len(allowed)))])
        raw = np.array([o.class_weight for o in owners]) * rng.gamma(2.0, size=k)
        shares = raw / raw.sum()
        for owner, share in zip(owners, shares, strict=True):
            counters[owner.name] = counters.get(owner.name, 0) + 1
            name = f"{owner.name}-{counters[owner.name]}"
            series = share * usage_m
            hist = series[:split]
            peak = float(np.nanmax(hist))
            if peak_lookback_s is not None:
                tail = hist[-max(1, int(round(peak_lookback_s / STEP_S))) :]
                recent_max[f"{owner.namespace}/{name}"] = (
                    float(np.nanmax(tail)) if np.isfinite(tail).any() else math.nan
                )
            req_m = int(np.ceil(float(np.nanpercentile(hist, 90)) / 10.0) * 10)
            pods.append(
                Pod(
                    namespace=owner.namespace,
                    name=name,
                    node=node,
                    cpu_request_m=req_m,
                    memory_request_mb=int(np.ceil(req_m / 1000.0 * owner.gib_per_core * 1024)),
                    owner=owner.name,
                    usage_cpu_m=float(np.nanmean(series[last_hour])),
                    peak_cpu_m=peak,
                    interference=owner.interference,  # type: ignore[arg-type]
                    labels={"app": owner.name},
                    anti_affinity=(owner.name,) if owner.anti_affine else (),
                )
            )
            fut = series[split:].copy()
            fut[np.isnan(fut)] = peak
            future[f"{owner.namespace}/{name}"] = fut
    pdbs = tuple(
        PodDisruptionBudget(o.namespace, f"{o.name}-pdb", o.name, o.disruptions_allowed)
        for o in OWNERS
        if o.disruptions_allowed is not None and counters.get(o.name, 0) > 0
    )
    if peak_ratio is not None or peak_lookback_s is not None:
        loop_pods = []
        for pod in pods:
            ratio = peak_ratio or 1.0
            recent = recent_max.get(pod_key(pod), math.nan)
            if math.isfinite(recent) and pod.usage_cpu_m > 0:
                ratio = max(ratio, recent / pod.usage_cpu_m)
            (placed,) = with_forecast_peaks([pod], {(pod.namespace, pod.owner): ratio})
            loop_pods.append(placed)
        pods = loop_pods
    return Snapshot(
        ClusterState(nodes=tuple(nodes), pods=tuple(pods), pdbs=pdbs),
        future,
        0.0,
        float(split * STEP_S),
        float(n_steps * STEP_S),
        seed,
        tuple(kept),
    )


def missing_future_steps(path: Path | None = None) -> int:
    """Machine-steps of the future with no data (filled at the pod's forecast peak)."""
    machines, n_steps = load_machines(path or trace_path())
    split = int(np.floor(HISTORY_FRACTION * n_steps))
    last_hour = slice(split - 3600 // STEP_S, split)
    return int(sum(np.isnan(c[split:]).sum() for c in machines.values() if np.any(~np.isnan(c[last_hour]))))


@dataclass(slots=True)
class Outcome:
    """Where every pod ended up after a policy acted, and what it took."""

    placement: dict[str, str | None]  # pod key -> node (None: Pending)
    moves: int
    pdb_violations: int
    evictions_refused: int


def apply_moves(state: ClusterState, moves: tuple[MovePod, ...]) -> Outcome:
    """Apply a policy's own moves: evict (deleting, so a PDB is *not* enforced: it is counted),
    then bind to ``to_node`` if the scheduler's filter accepts it there, else let the default
    scheduler (LeastAllocated) place it."""
    c = SimCluster.of(state)
    by_key = {pod_key(p): p for p in state.pods}
    budgets = c.budgets.copy()
    violations = 0
    done = 0
    for m in moves:
        pod = by_key.get(f"{m.namespace}/{m.pod}")
        if pod is None or m.is_noop:
            continue
        pod = _current(c, pod)
        left = budgets.left(pod)
        if left is not None and left <= 0:
            violations += 1
        budgets.spend(pod, force=True)
        c.pods[pod.node] = [p for p in c.pods[pod.node] if pod_key(p) != pod_key(pod)]
        done += 1
        if m.to_node in c.nodes and c.fits(pod, m.to_node):
            c.bind(pod, m.to_node)
        else:
            c.schedule(pod, "least")
    return Outcome(_placement(c, state), done, violations, 0)


def _current(c: SimCluster, pod: Pod) -> Pod:
    for ps in c.pods.values():
        for p in ps:
            if pod_key(p) == pod_key(pod):
                return p
    return pod


def _placement(c: SimCluster, state: ClusterState) -> dict[str, str | None]:
    where: dict[str, str | None] = dict.fromkeys((pod_key(p) for p in state.pods), None)
    for node, ps in c.pods.items():
        for p in ps:
            where[pod_key(p)] = node
    return where


def run_policy(
    name: str,
    snap: Snapshot,
    max_moves: int,
    max_peak_fraction: float = DEFAULT_MAX_PEAK_FRACTION,
    weights: RebalanceWeights | None = None,
) -> tuple[Outcome, tuple[MovePod, ...]]:
    state = snap.state
    if name == "none":
        return Outcome({pod_key(p): p.node for p in state.pods}, 0, 0, 0), ()
    if name == "scaleahead":
        moves = plan_moves(state, max_moves, max_peak_fraction=max_peak_fraction, weights=weights)
        return apply_moves(state, moves), moves
    c, _pending = run_descheduler(state, "low" if name == "descheduler_low_node_utilization" else "high")
    return Outcome(_placement(c, state), len(c.evicted), 0, c.refused), ()


def score(snap: Snapshot, outcome: Outcome) -> dict[str, float | int]:
    """EVALUATION.md section 5b metrics (plus a few that explain them)."""
    state = snap.state
    before_nodes = {p.node for p in state.pods}
    after_nodes = {n for n in outcome.placement.values() if n is not None}
    moved_pods = [
        Pod(
            p.namespace,
            p.name,
            outcome.placement[pod_key(p)] or "",
            p.cpu_request_m,
            p.memory_request_mb,
            p.owner,
            interference=p.interference,
        )
        for p in state.pods
        if outcome.placement[pod_key(p)] is not None
    ]
    n_future = len(next(iter(snap.future_usage.values())))
    load = {n.name: np.zeros(n_future) for n in state.nodes}
    for key, node in outcome.placement.items():
        if node is not None:
            load[node] += snap.future_usage[key]
    alloc = {n.name: float(n.cpu_m) for n in state.nodes}
    over = sum(int(np.sum(load[n] > alloc[n] + 1e-6)) for n in load)
    # EVALUATION.md's "forecast-peak usage" (a review of 2026-12-07: the usage that followed alone
    # counted 3 node-steps against the high-utilization descheduler that this reading does not)
    peaks = dict.fromkeys(alloc, 0.0)
    for p in state.pods:
        node = outcome.placement[pod_key(p)]
        if node is not None:
            peaks[node] += p.peak_cpu_m
    forecast_over = n_future * sum(1 for n in peaks if peaks[n] > alloc[n] + 1e-6)
    max_pct = max(float(np.max(load[n]) / alloc[n]) for n in load if np.any(load[n] > 0))
    return {
        "nodes_freed": len(before_nodes - after_nodes),
        "moves": outcome.moves,
        "interference_pairs_before": interference_pairs(state.pods),
        "interference_pairs_after": interference_pairs(moved_pods),
        "peak_overcommit": over,
        "forecast_peak_overcommit": forecast_over,
        "pdb_violations": outcome.pdb_violations,
        "evictions_refused": outcome.evictions_refused,
        "pods_pending": sum(1 for v in outcome.placement.values() if v is None),
        "nodes_with_pods": len(after_nodes),
        "max_node_usage_pct": round(100.0 * max_pct, 2),
        "scored_node_steps": n_future * len(load),
    }


def run_bench(
    seed: int = DEFAULT_SEED,
    max_moves: int = DEFAULT_MAX_MOVES,
    path: Path | None = None,
    max_peak_fraction: float = DEFAULT_MAX_PEAK_FRACTION,
    on_policy: Callable[[str], None] | None = None,
    peak_ratio: float | None = None,
    peak_lookback_s: float | None = None,
) -> tuple[dict[str, Any], dict[str, tuple[MovePod, ...]]]:
    """Run every policy on the snapshot; returns the EVALUATION.md section 7 object and the moves."""
    snap = build_snapshot(seed, path, peak_ratio, peak_lookback_s)
    policies: dict[str, dict[str, float | int]] = {}
    moves: dict[str, tuple[MovePod, ...]] = {}
    for name in POLICIES:
        if on_policy:
            on_policy(name)
        outcome, proposed = run_policy(name, snap, max_moves, max_peak_fraction)
        policies[name] = score(snap, outcome)
        moves[name] = proposed
    result: dict[str, Any] = {
        "trace": TRACE,
        "resolution_s": STEP_S,
        "split": {
            "history_start_s": snap.start_s,
            "snapshot_at_s": snap.split_s,
            "future_end_s": snap.end_s,
            "history_fraction": HISTORY_FRACTION,
        },
        "snapshot": {
            "seed": seed,
            "nodes": len(snap.state.nodes),
            "pods": len(snap.state.pods),
            "pdbs": len(snap.state.pdbs),
            "machines": list(snap.machines),
            "node_cpu_m": NODE_CPU_M,
            "node_memory_mb": NODE_MEMORY_MB,
            "future_machine_steps_missing": missing_future_steps(path),
        },
        "policies": policies,
    }
    params: dict[str, Any] = {}
    if seed != DEFAULT_SEED:
        params["seed"] = seed
    if max_moves != DEFAULT_MAX_MOVES:
        params["max_moves"] = max_moves
    if max_peak_fraction != DEFAULT_MAX_PEAK_FRACTION:
        params["max_peak_fraction"] = max_peak_fraction
    if peak_ratio is not None:
        params["peak_ratio"] = peak_ratio
    if peak_lookback_s is not None:
        params["peak_lookback_s"] = peak_lookback_s
    if params:
        result["params"] = params
    result["targets"] = targets(policies)
    return result, moves


def targets(policies: dict[str, dict[str, float | int]]) -> dict[str, Any]:
    """The issue 5 rebalancing targets, checked against ``REFERENCE``: at least as many nodes freed
    with at most half its evictions, pairs cut by at least 80 %, no overcommit, no PDB violation."""
    sa, ref = policies["scaleahead"], policies[REFERENCE]
    before = int(sa["interference_pairs_before"])
    cut = 1.0 - float(sa["interference_pairs_after"]) / before if before else 0.0
    return {
        "reference": REFERENCE,
        "nodes_freed_at_least_reference": sa["nodes_freed"] >= ref["nodes_freed"],
        "evictions_at_most_half_reference": 2 * int(sa["moves"]) <= int(ref["moves"]),
        "pairs_cut_fraction": round(cut, 4),
        "pairs_cut_at_least_80pct": cut >= 0.8,
        "zero_overcommit_and_pdb_violations": sa["peak_overcommit"] == 0
        and sa["forecast_peak_overcommit"] == 0
        and sa["pdb_violations"] == 0,
    }


def seed_summary(
    seeds: list[int],
    max_moves: int = DEFAULT_MAX_MOVES,
    path: Path | None = None,
    max_peak_fraction: float = DEFAULT_MAX_PEAK_FRACTION,
    peak_ratio: float | None = None,
    peak_lookback_s: float | None = None,
) -> dict[str, Any]:
    """Every policy on the snapshot of each seed: per-seed metrics, and mean/min/max per metric."""
    per_seed: dict[str, dict[str, dict[str, float | int]]] = {}
    met: dict[str, dict[str, Any]] = {}
    for seed in seeds:
        snap = build_snapshot(seed, path, peak_ratio, peak_lookback_s)
        rows = {name: score(snap, run_policy(name, snap, max_moves, max_peak_fraction)[0]) for name in POLICIES}
        per_seed[str(seed)] = rows
        met[str(seed)] = targets(rows)
    summary: dict[str, dict[str, dict[str, float]]] = {}
    for name in POLICIES:
        summary[name] = {}
        for m in SEED_METRICS:
            values = np.array([float(per_seed[str(s)][name][m]) for s in seeds])
            summary[name][m] = {
                "mean": round(float(values.mean()), 3),
                "min": float(values.min()),
                "max": float(values.max()),
            }
    return {"seeds": seeds, "summary": summary, "per_seed": per_seed, "targets": met}


def tradeoff(
    snap: Snapshot,
    budgets: list[int] | tuple[int, ...] = TRADEOFF_BUDGETS,
    max_peak_fraction: float = DEFAULT_MAX_PEAK_FRACTION,
    weights: RebalanceWeights | None = None,
) -> list[dict[str, float | int]]:
    """scaleahead's metrics as its move budget varies (the trade-off curve)."""
    rows = []
    for b in budgets:
        outcome, _ = run_policy("scaleahead", snap, b, max_peak_fraction, weights)
        rows.append({"max_moves": b, **score(snap, outcome)})
    return rows


def cycles(
    snap: Snapshot,
    n_cycles: int = 10,
    max_moves: int = DEFAULT_MAX_MOVES,
    max_peak_fraction: float = DEFAULT_MAX_PEAK_FRACTION,
) -> list[dict[str, float | int]]:
    """scaleahead run as a controller: one plan per control cycle on the state the previous ones
    left, ``max_moves`` each, the PDBs' disruption budgets renewed every cycle (the moved pods are
    Ready again). Per cycle, the metrics of everything done so far against the snapshot; stops
    early when a cycle proposes nothing. The forecast peaks stay those of the snapshot."""
    state = snap.state
    rows: list[dict[str, float | int]] = []
    total = violations = 0
    for k in range(1, n_cycles + 1):
        moves = plan_moves(state, max_moves, max_peak_fraction=max_peak_fraction)
        if not moves:
            break
        outcome = apply_moves(state, moves)
        total += outcome.moves
        violations += outcome.pdb_violations
        pods = tuple(replace(p, node=node) for p in state.pods if (node := outcome.placement[pod_key(p)]) is not None)
        state = replace(state, pods=pods)
        rows.append({"cycle": k, **score(snap, Outcome(outcome.placement, total, violations, 0))})
    return rows
