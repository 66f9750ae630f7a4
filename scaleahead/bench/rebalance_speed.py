"""``scaleahead bench rebalance-speed``: how long one rebalancing plan takes on a large synthetic cluster.

Why it exists: the control loop calls ``planner.rebalance.plan_moves`` inside its cycle, so a plan
must take well under the cycle's interval on the largest cluster it may run on. This module builds
synthetic clusters, deterministic by seed, and times one plan per cluster size and move budget
(docs/rebalance.md, "Speed").

Two kinds of cluster (``kind``), the two scripts docs/rebalance.md quoted before this command:

- ``zones`` (the review's script): nodes of 64 cores and 256 GiB, node ``i`` named ``n{i:04d}``
  with its ``kubernetes.io/hostname`` label and zone ``z{i % 3}``; each pod of 100-2,000 mCPU
  (memory request twice that in MiB, forecast peak 1.3 times its request), an owner ``o0``-``o999``
  at random and label ``app`` = its owner (1 % of pods: owner + ``x``), a random interference
  class; a share ``hostname_terms`` of pods with a hostname anti-affinity term against their own
  ``app``, a share ``zone_terms`` with a zone term against ``app`` = a random owner + ``x`` (a label
  1 % of pods carry).
- ``plain`` (the first script): nodes of 32 cores and 128 GiB without labels, pod ``j`` of a node
  owned by ``o{j}``, no labels, no rules.

Pods per node: ``pods_per_node`` (``lo``, ``hi``) drawn uniformly, both included.
"""

from __future__ import annotations

import resource
import time
import tracemalloc
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from scaleahead.types import ClusterState, LabelSelector, MovePod, Node, Pod, PodAffinityTerm

KINDS = ("zones", "plain")
HOSTNAME = "kubernetes.io/hostname"
ZONE = "topology.kubernetes.io/zone"
Interference = Literal["cpu-bound", "io-bound", "latency-critical", "none"]
_CLASSES: tuple[Interference, ...] = ("cpu-bound", "io-bound", "latency-critical", "none")


@dataclass(frozen=True, slots=True)
class SpeedCluster:
    """A synthetic cluster and how it was built."""

    kind: str
    nodes: int
    pods_per_node: tuple[int, int]
    zone_terms: float
    hostname_terms: float
    seed: int
    state: ClusterState

    def describe(self) -> dict[str, Any]:
        pods = self.state.pods
        return {
            "kind": self.kind,
            "nodes": self.nodes,
            "pods": len(pods),
            "pods_per_node": list(self.pods_per_node),
            "zone_terms": self.zone_terms,
            "hostname_terms": self.hostname_terms,
            "pods_with_zone_term": sum(1 for p in pods if any(t.topology_key == ZONE for t in p.anti_affinity_terms)),
            "pods_with_hostname_term": sum(
                1 for p in pods if any(t.topology_key == HOSTNAME for t in p.anti_affinity_terms)
            ),
            "seed": self.seed,
        }


def _term(app: str, key: str) -> PodAffinityTerm:
    return PodAffinityTerm(LabelSelector((("app", app),)), (), key)


def build_cluster(
    kind: str,
    nodes: int,
    pods_per_node: tuple[int, int],
    *,
    zone_terms: float = 0.0,
    hostname_terms: float = 0.0,
    seed: int = 0,
) -> SpeedCluster:
    """A synthetic cluster of ``nodes`` nodes (module docstring); the same arguments, the same cluster."""
    if kind not in KINDS:
        raise ValueError(f"unknown cluster kind {kind!r}")
    lo, hi = pods_per_node
    rng = np.random.default_rng(seed)
    pods: list[Pod] = []
    if kind == "plain":
        node_list = tuple(Node(f"n{i:04d}", 32000, 131072) for i in range(nodes))
        for i in range(nodes):
            for j in range(int(rng.integers(lo, hi + 1))):
                c = int(rng.integers(100, 2000))
                cls = _CLASSES[int(rng.integers(4))]
                pods.append(
                    Pod("ns", f"p{i}-{j}", f"n{i:04d}", c, c * 2, owner=f"o{j}", peak_cpu_m=c * 1.3, interference=cls)
                )
    else:
        node_list = tuple(
            Node(f"n{i:04d}", 64000, 262144, {HOSTNAME: f"n{i:04d}", ZONE: f"z{i % 3}"}) for i in range(nodes)
        )
        for i in range(nodes):
            for j in range(int(rng.integers(lo, hi + 1))):
                c = int(rng.integers(100, 2000))
                owner = f"o{int(rng.integers(0, 1000))}"
                terms: tuple[PodAffinityTerm, ...] = ()
                if rng.random() < hostname_terms:
                    terms += (_term(owner, HOSTNAME),)
                if rng.random() < zone_terms:
                    terms += (_term(f"o{int(rng.integers(0, 1000))}x", ZONE),)
                labels = {"app": owner + "x"} if rng.random() < 0.01 else {"app": owner}
                cls = _CLASSES[int(rng.integers(4))]
                pods.append(
                    Pod(
                        "ns",
                        f"p{i}-{j}",
                        f"n{i:04d}",
                        c,
                        c * 2,
                        owner=owner,
                        peak_cpu_m=c * 1.3,
                        interference=cls,
                        labels=labels,
                        anti_affinity_terms=terms,
                    )
                )
    state = ClusterState(nodes=node_list, pods=tuple(pods))
    return SpeedCluster(kind, nodes, (lo, hi), zone_terms, hostname_terms, seed, state)


def peak_rss_mb() -> float:
    """The process's peak resident set so far (Linux reports KiB)."""
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0, 1)


def move_record(move: MovePod) -> dict[str, Any]:
    """A move as the comparison of two runs needs it: what moves where, and why."""
    return {
        "pod": f"{move.namespace}/{move.pod}",
        "from": move.from_node,
        "to": move.to_node,
        "reason": move.reason.message,
        "expected_gain": move.expected_gain,
    }


def new_pods(count: int, seed: int, zoned: float = 0.0) -> tuple[Any, ...]:
    """``count`` workloads each adding 1-3 pods in the same plan (``planner.rebalance.Incoming``),
    shaped as the clusters' pods (100-2,000 mCPU, memory twice that in MiB), deterministic by seed.
    A share ``zoned`` of them select one zone by node selector (``z0``-``z2`` in turn: three sets of
    node rules, which the room counts apart)."""
    from planner.rebalance import Incoming

    rng = np.random.default_rng([seed, 1])
    which = np.random.default_rng([seed, 2])  # apart: the shapes are the same whatever ``zoned``
    out = []
    for i in range(count):
        c = float(rng.integers(100, 2000))
        n = int(rng.integers(1, 4))
        rules = None
        if which.random() < zoned:
            rules = Pod("ns", "", "", 0, 0, owner=f"new{i}", node_selector={ZONE: f"z{i % 3}"})
        out.append(Incoming(f"Deployment/ns/new{i}", c, 2 * c, n, rules))
    return tuple(out)


def time_plan(
    cluster: SpeedCluster,
    max_moves: int,
    *,
    repeats: int = 1,
    trace_memory: bool = False,
    incoming: Sequence[Any] = (),
) -> tuple[dict[str, Any], tuple[MovePod, ...]]:
    """Time ``plan_moves`` on ``cluster`` (the median of ``repeats`` runs, wall-clock and the process's
    CPU time) and return its row and moves. ``incoming``: pods the same plan adds (``new_pods``),
    for which the moves keep room.

    ``trace_memory``: one more, untimed run under ``tracemalloc`` for the plan's own peak of Python
    allocations (``tracemalloc_peak_mb``; tracing slows the run several times, so it is not timed).
    """
    from planner.rebalance import plan_moves

    times: list[float] = []
    cpu: list[float] = []
    moves: tuple[MovePod, ...] = ()
    for _ in range(repeats):
        t0, c0 = time.perf_counter(), time.process_time()
        moves = plan_moves(cluster.state, max_moves, incoming=incoming)
        times.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
    row: dict[str, Any] = {
        "nodes": cluster.nodes,
        "pods": len(cluster.state.pods),
        "max_moves": max_moves,
        "new_pods": sum(i.count for i in incoming),
        "moves": len(moves),
        "wall_s": round(float(np.median(times)), 3),
        "wall_s_runs": [round(t, 3) for t in times],
        # the process's CPU time: on a shared machine, what the plan cost whatever else ran
        "cpu_s": round(float(np.median(cpu)), 3),
        "peak_rss_mb": peak_rss_mb(),
    }
    if trace_memory:
        tracemalloc.start()
        try:
            plan_moves(cluster.state, max_moves, incoming=incoming)
            row["tracemalloc_peak_mb"] = round(tracemalloc.get_traced_memory()[1] / 2**20, 1)
        finally:
            tracemalloc.stop()
    return row, moves


def bench_rebalance_speed(
    kind: str,
    nodes: Sequence[int],
    pods_per_node: tuple[int, int],
    max_moves: Sequence[int],
    *,
    zone_terms: float = 0.0,
    hostname_terms: float = 0.0,
    seed: int = 0,
    repeats: int = 1,
    trace_memory: bool = False,
    progress: Any = None,
    new_workloads: int = 0,
    new_zoned: float = 0.0,
) -> tuple[dict[str, Any], dict[str, list[dict[str, Any]]]]:
    """One row per (cluster size, move budget), and the moves of each plan keyed ``"<nodes>x<max_moves>"``.

    ``progress``: called with each row as soon as it is measured (a slow run shows its rows).
    ``new_workloads``: that many workloads scale up in the same plan (``new_pods``), a share
    ``new_zoned`` of them with a zone's node selector.
    """
    incoming = new_pods(new_workloads, seed, new_zoned)
    rows: list[dict[str, Any]] = []
    clusters: list[dict[str, Any]] = []
    moves_out: dict[str, list[dict[str, Any]]] = {}
    for n in nodes:
        cluster = build_cluster(kind, n, pods_per_node, zone_terms=zone_terms, hostname_terms=hostname_terms, seed=seed)
        clusters.append(cluster.describe())
        for mm in max_moves:
            row, moves = time_plan(cluster, mm, repeats=repeats, trace_memory=trace_memory, incoming=incoming)
            rows.append(row)
            moves_out[f"{n}x{mm}"] = [move_record(m) for m in moves]
            if progress is not None:
                progress(row)
    result = {
        "params": {
            "kind": kind,
            "nodes": list(nodes),
            "pods_per_node": list(pods_per_node),
            "max_moves": list(max_moves),
            "zone_terms": zone_terms,
            "hostname_terms": hostname_terms,
            "seed": seed,
            "repeats": repeats,
            "new_workloads": new_workloads,
            "new_zoned": new_zoned,
        },
        "clusters": clusters,
        "rows": rows,
    }
    return result, moves_out
