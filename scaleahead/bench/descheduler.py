"""The reactive peers of the rebalancing benchmark: the Kubernetes descheduler and default scheduler.

Why it exists: ``scaleahead bench rebalance`` (EVALUATION.md section 5b) compares the planner's
moves with what a cluster gets today. This module re-implements, on a ``ClusterState``:

- the **descheduler** strategies ``LowNodeUtilization`` and ``HighNodeUtilization``
  (kubernetes-sigs/descheduler, ``pkg/framework/plugins/nodeutilization``): node utilization is
  the sum of pod *requests* (cpu, memory, pod count) over allocatable (pods: the node's
  ``max_pods``, the kubelet's default 110 in the benchmark); nodes are classified by thresholds,
  pods are evicted from source nodes in order while the destination nodes' total available
  capacity stays positive. Evictions go through the Eviction API, which refuses an eviction a
  PodDisruptionBudget forbids (HTTP 429); the descheduler then tries the next pod.
- the **default scheduler** placing the evicted pods' replacements: filter (node schedulable,
  requests fit, the node's pod limit, required inter-pod anti-affinity either way in every domain
  and host ports: ``planner.pod_rules.neighbour_problem``, the pod's node selector and required
  node affinity, the node's taints tolerated: ``planner.placement_rules.fits_node``),
  then score with ``NodeResourcesFit`` ``LeastAllocated`` (the default) or ``MostAllocated``
  (what the descheduler README says HighNodeUtilization must be used with), equal weights for
  cpu and memory; ties go to the node name (the real scheduler picks at random among the best).

Thresholds (percent of allocatable, the descheduler README's examples; the plugin code has no
built-in default, ``SetDefaults_*`` leaves them nil and unset resources default to 100 %):

- LowNodeUtilization: ``thresholds`` cpu 20, memory 20, pods 20; ``targetThresholds`` cpu 50,
  memory 50, pods 50 (also the values shipped in the descheduler Helm chart's ``values.yaml``).
- HighNodeUtilization: ``thresholds`` cpu 20, memory 20, pods 20 (``targetThresholds`` fixed at
  100 by ``setDefaultForThresholds``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Literal

from planner.placement_rules import fits_node
from planner.pod_rules import neighbour_problem
from planner.rebalance import PdbBudgets, pod_key
from scaleahead.types import ClusterState, Node, Pod

LOW_THRESHOLDS = {"cpu": 20.0, "memory": 20.0, "pods": 20.0}
LOW_TARGET_THRESHOLDS = {"cpu": 50.0, "memory": 50.0, "pods": 50.0}
HIGH_THRESHOLDS = {"cpu": 20.0, "memory": 20.0, "pods": 20.0}
_RESOURCES = ("cpu", "memory", "pods")

Scoring = Literal["least", "most"]


def _alloc(node: Node) -> dict[str, float]:
    return {"cpu": float(node.cpu_m), "memory": float(node.memory_mb), "pods": float(node.max_pods)}


def _pod_req(pod: Pod) -> dict[str, float]:
    return {"cpu": float(pod.cpu_request_m), "memory": float(pod.memory_request_mb), "pods": 1.0}


@dataclass(slots=True)
class SimCluster:
    """Pods per node with requested totals; the state the descheduler and scheduler act on."""

    nodes: dict[str, Node]
    pods: dict[str, list[Pod]]
    budgets: PdbBudgets
    refused: int = 0
    evicted: list[Pod] = field(default_factory=list)

    @classmethod
    def of(cls, state: ClusterState) -> SimCluster:
        nodes = {n.name: n for n in sorted(state.nodes, key=lambda n: n.name)}
        pods: dict[str, list[Pod]] = {n: [] for n in nodes}
        for p in sorted(state.pods, key=pod_key):
            if p.node in pods:
                pods[p.node].append(p)
        return cls(nodes, pods, PdbBudgets.of(state.pdbs))

    def usage(self, node: str) -> dict[str, float]:
        out = dict.fromkeys(_RESOURCES, 0.0)
        for p in self.pods[node]:
            for r, v in _pod_req(p).items():
                out[r] += v
        return out

    def evict(self, pod: Pod) -> bool:
        """The Eviction API: refuses (False) when a PDB covering the pod allows no disruption."""
        if not self.budgets.spend(pod):
            self.refused += 1
            return False
        self.pods[pod.node] = [p for p in self.pods[pod.node] if pod_key(p) != pod_key(pod)]
        self.evicted.append(pod)
        return True

    def fits(self, pod: Pod, node: str) -> bool:
        """The scheduler's filter: schedulable, the pod's node rules allow the node, requests (CPU,
        memory, ephemeral storage when the pod requests some) and the pod limit fit, anti-affinity
        (either way, in every domain) and host ports hold."""
        n = self.nodes[node]
        if not n.schedulable or not fits_node(pod, n):
            return False
        used, alloc, req = self.usage(node), _alloc(n), _pod_req(pod)
        if any(used[r] + req[r] > alloc[r] for r in _RESOURCES):
            return False
        storage = pod.ephemeral_storage_request_mb
        if (
            storage > 0
            and sum(q.ephemeral_storage_request_mb for q in self.pods[node]) + storage > n.ephemeral_storage_mb
        ):
            return False  # NodeResourcesFit checks ephemeral storage only for a pod that requests some
        placed = [(q, self.nodes[m]) for m, ps in self.pods.items() for q in ps]
        return neighbour_problem(pod, n, placed) is None

    def bind(self, pod: Pod, node: str) -> Pod:
        placed = _on(pod, node)
        self.pods[node] = sorted([*self.pods[node], placed], key=pod_key)
        return placed

    def schedule(self, pod: Pod, scoring: Scoring) -> str | None:
        """Place one pod like kube-scheduler with NodeResourcesFit; None if it stays Pending."""
        best: tuple[float, str] | None = None
        for name in self.nodes:
            if not self.fits(pod, name):
                continue
            alloc, used, req = _alloc(self.nodes[name]), self.usage(name), _pod_req(pod)
            fracs = [(used[r] + req[r]) / alloc[r] for r in ("cpu", "memory")]
            score = sum(100.0 * (f if scoring == "most" else 1.0 - f) for f in fracs) / len(fracs)
            if best is None or score > best[0]:
                best = (score, name)
        if best is None:
            return None
        self.bind(pod, best[1])
        return best[1]


def _on(pod: Pod, node: str) -> Pod:
    return replace(pod, node=node)


def _below(used: dict[str, float], alloc: dict[str, float], pct: dict[str, float]) -> bool:
    """``isNodeWithLowUtilization``: every resource at or below its threshold."""
    return all(used[r] <= int(pct[r] * 0.01 * alloc[r]) for r in _RESOURCES)


def _above(used: dict[str, float], alloc: dict[str, float], pct: dict[str, float]) -> bool:
    """``isNodeAboveTargetUtilization``: some resource above its threshold."""
    return any(used[r] > int(pct[r] * 0.01 * alloc[r]) for r in _RESOURCES)


def _sort_key(used: dict[str, float]) -> float:
    # sortNodesByUsage adds memory bytes, CPU millicores and the pod count
    return used["memory"] * 1024 * 1024 + used["cpu"] + used["pods"]


def _evict_from(
    c: SimCluster,
    sources: Sequence[str],
    available: dict[str, float],
    keep_going: str,
) -> None:
    """``evictPodsFromSourceNodes``: evict pods (name order: equal priority and QoS) per node."""
    for node in sources:
        alloc = _alloc(c.nodes[node])
        removable = [p for p in c.pods[node] if p.owner]  # bare pods are not evictable
        if not removable or not all(v > 0 for v in available.values()):
            continue
        if keep_going == "low" and not _above(c.usage(node), alloc, LOW_TARGET_THRESHOLDS):
            continue
        for pod in removable:
            if not c.evict(pod):
                continue
            for r, v in _pod_req(pod).items():
                available[r] -= v
            if not all(v > 0 for v in available.values()):
                break
            if keep_going == "low" and not _above(c.usage(node), alloc, LOW_TARGET_THRESHOLDS):
                break


def low_node_utilization(c: SimCluster) -> None:
    """LowNodeUtilization: evict from nodes above targetThresholds towards nodes below thresholds."""
    usage = {n: c.usage(n) for n in c.nodes}
    allocs = {n: _alloc(node) for n, node in c.nodes.items()}
    low = [n for n in c.nodes if c.nodes[n].schedulable and _below(usage[n], allocs[n], LOW_THRESHOLDS)]
    high = [n for n in c.nodes if n not in low and _above(usage[n], allocs[n], LOW_TARGET_THRESHOLDS)]
    if not low or len(low) == len(c.nodes) or not high:
        return
    available = dict.fromkeys(_RESOURCES, 0.0)
    for n in low:
        for r in _RESOURCES:
            available[r] += int(LOW_TARGET_THRESHOLDS[r] * 0.01 * allocs[n][r]) - usage[n][r]
    high.sort(key=lambda n: (-_sort_key(usage[n]), n))
    _evict_from(c, high, available, "low")


def high_node_utilization(c: SimCluster) -> None:
    """HighNodeUtilization: evict from nodes below thresholds so pods pack onto the others."""
    usage = {n: c.usage(n) for n in c.nodes}
    allocs = {n: _alloc(node) for n, node in c.nodes.items()}
    low = [n for n in c.nodes if _below(usage[n], allocs[n], HIGH_THRESHOLDS)]
    dest = [n for n in c.nodes if n not in low and c.nodes[n].schedulable]
    if not low or len(low) == len(c.nodes) or not dest:
        return
    available = dict.fromkeys(_RESOURCES, 0.0)
    for n in dest:
        for r in _RESOURCES:
            available[r] += allocs[n][r] - usage[n][r]
    low.sort(key=lambda n: (_sort_key(usage[n]), n))
    _evict_from(c, low, available, "high")


def run_descheduler(state: ClusterState, strategy: Literal["low", "high"]) -> tuple[SimCluster, list[Pod]]:
    """One descheduler pass, then the default scheduler re-places the evicted pods.

    Returns the cluster after the pass and the pods left Pending (no node fits them).
    ``LowNodeUtilization`` pairs with ``LeastAllocated`` scoring (the scheduler's default),
    ``HighNodeUtilization`` with ``MostAllocated``.
    """
    c = SimCluster.of(state)
    if strategy == "low":
        low_node_utilization(c)
    else:
        high_node_utilization(c)
    scoring: Scoring = "least" if strategy == "low" else "most"
    pending = [p for p in c.evicted if c.schedule(p, scoring) is None]
    return c, pending
