"""Rebalancing: a bounded set of pod moves that free nodes and keep interfering classes apart.

Why it exists: the replica planner decides *how many* pods a workload runs; the scheduler decides
where a new pod lands, once, with what it knew then. Over time nodes fragment (many half-empty
nodes that cannot be released) and interfering pods end up side by side (a cpu-bound batch pod
next to a latency-critical service). This module proposes a few ``MovePod`` actions that fix that
without ever making things unsafe.

Pure: no I/O and no clock; the same state always gives the same moves, in the same order.

Rules every proposed move set keeps (checked again after each placement, the *safety check*):

- **capacity at the forecast peak**: on a node that receives a pod, the sum of its pods' CPU (each
  at the larger of its forecast peak and its observed usage) stays at or below
  ``max_peak_fraction`` of the node's allocatable CPU, the sum of CPU *requests* stays within
  allocatable and so does the sum of its pods' memory, each pod at the larger of its request and
  its observed use (``pod_memory_mb``: the scheduler's rule, and no node pushed into memory
  pressure), so does the sum of ephemeral-storage requests when the pod requests
  some (a node that reports none takes no such pod), and its pods (node-bound ones included)
  within its pod limit (``Node.max_pods``): the scheduler's own fit rule (NodeResourcesFit);
- **PodDisruptionBudgets**: at most ``disruptions_allowed`` pods covered by a PDB move in one plan,
  counted over every owner it covers (``PdbBudgets``);
- **anti-affinity and host ports** (``planner.pod_rules``): a pod never lands in a domain (a node,
  a zone: a term's ``topology_key``) where a pod runs that one of the two excludes by required
  anti-affinity, whichever of the two has the rule and whether the other moves or stays; nor on a
  node where another pod binds one of its host ports;
- **the pod's node rules**: a pod only lands on a node its ``nodeSelector`` and required node
  affinity select and whose ``NoSchedule``/``NoExecute`` taints it tolerates
  (``planner.placement_rules.fits_node``, as kube-scheduler filters): the replacement of a pod
  moved elsewhere would stay Pending;
- **room for the plan's new pods**: when the same plan adds pods (a scale-up, a larger warm pool:
  ``incoming``, and the pods still waiting for a node), no step leaves room for fewer of them than
  the cluster had before the moves. The room is counted by first fit on their requests (against
  the nodes' CPU requests and memory as ``pod_memory_mb`` counts it) and pod limits over the
  schedulable nodes their node rules allow (``Incoming.rules``), a node the moves free excepted
  (it is freed to be released);
- **interference never grows**: no step leaves more cpu-bound/latency-critical pairs than it found
  (a drain that must form pairs repairs them in the same step, else it is not proposed), unless
  ``drains_may_add_pairs``;
- **bounded**: at most ``max_moves`` moves; pods without an owner (nothing would recreate them),
  pods with a rule the planner does not model (``Pod.unmovable``: required pod affinity, topology
  spread, a volume bound to a node or zone, ...; they stay and count where they are) and pods on
  unschedulable or unknown nodes are never moved; empty nodes never receive pods;
  node-bound pods (a DaemonSet's, mirror pods) stay where they are, count in their node's sums
  and do not keep a node from being freed; a node reporting no allocatable CPU or memory is
  treated as cordoned.

Algorithm (greedy, re-evaluated after each chosen step):

1. *Candidates*. For each node with pods, a **drain**: place all its pods elsewhere (two orders
   tried), each by filter -> score -> safety-check on a scratch copy of the cluster, then repair
   the pairs it had to form with separations and exchanges. For each cpu-bound or latency-critical
   pod sharing a node with the opposite class, a **separation**: move that one pod to the node
   where it forms the fewest pairs (kept if it removes more than it forms). For each pair of nodes
   (one mixed), an **exchange**: up to ``MAX_EXCHANGE_SIDE`` pods each way (a 1-for-1 exchange is
   a *swap*), whose *end state* must hold at the forecast peak on both nodes, ordered so that each
   intermediate state passes the scheduler and stays within the cap at observed usage; of all
   such sets, the one removing most pairs per move.
2. *Filter* keeps target nodes that pass every rule above; *score* prefers the node where the pod
   forms the fewest interfering pairs, then the node most full at the forecast peak after the move
   (packs pods onto nodes that stay, the scheduler's MostAllocated idea applied to the forecast
   peak), ties broken by name; the *safety check* re-checks capacity, requests, the pod limit,
   PDB budgets, anti-affinity, host ports and the pod's node rules on the state after the move
   (requests: CPU, memory and ephemeral storage).
3. *Choice* (of the candidates that keep the room for ``incoming``; each one refused for it is
   named in the plan's notes): drains come first (a freed node saves a whole machine; a separation that fills a
   nearly empty node would spoil its drain; with ``weights.node_freed`` 0 drains get no
   precedence), then separations, swaps and exchanges. Within that order, the candidate with the
   highest gain per move that fits in the remaining move budget wins (then the larger gain, fewer
   moves, least forecast-peak CPU moved); the gain is ``weights.node_freed`` for a freed node plus
   ``weights.pair_separated`` per cpu-bound/latency-critical pair removed (minus per pair
   created). Repeat until no candidate gains more than ``weights.move_cost`` per move or the
   budget is spent.

``MovePod.expected_gain`` is the candidate's gain shared evenly over its moves, in *node
equivalents* (1.0 = one node freed); the reason sentence names the node freed, the pairs
separated, the target node's forecast peak after the move (after the whole exchange for swaps
and exchanges) and ends with the expected gain.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from itertools import combinations, count

import numpy as np
import numpy.typing as npt

from planner.placement_rules import fits_node, placement_signature
from planner.pod_rules import conflicts, neighbour_problem, port_clash
from scaleahead.types import (
    ClusterState,
    FloatArray,
    MovePod,
    Node,
    Pod,
    PodAffinityTerm,
    PodDisruptionBudget,
    Reason,
)

CPU_BOUND = "cpu-bound"
LATENCY_CRITICAL = "latency-critical"
_OPPOSITE = {CPU_BOUND: LATENCY_CRITICAL, LATENCY_CRITICAL: CPU_BOUND}

#: A receiving node's forecast-peak CPU stays at or below this share of its allocatable CPU.
#: 0.9 leaves 10 % for a future peak above the forecast one.
DEFAULT_MAX_PEAK_FRACTION = 0.9
#: At most this many moves per plan (one plan per control cycle): enough to drain a node of 3-4
#: pods; the efficient point of the benchmark's trade-off curve (docs/rebalance.md).
DEFAULT_MAX_MOVES = 4
#: Drains are tried for at most this many nodes (fewest pods first), separations and swaps for
#: at most this many mixed nodes (most pairs first), so planning stays fast on large clusters.
DEFAULT_MAX_CANDIDATE_NODES = 32
#: An exchange moves at most this many pods each way between two nodes.
MAX_EXCHANGE_SIDE = 2
#: Exchanges are searched between pairs of at most this many mixed nodes (most pairs first) and half
#: as many others (most headroom first): every pair of nodes is a small array computation.
MAX_EXCHANGE_NODES = 16
#: Exchanges between two nodes are safety-checked in gain order until one passes, at most this many.
MAX_EXCHANGE_TRIALS = 20


@dataclass(frozen=True, slots=True)
class RebalanceWeights:
    """What a move is worth, in node equivalents (1.0 = one node freed).

    Attributes:
        node_freed: gain of a node left with no pods (it can be released by the node autoscaler).
        pair_separated: gain of one cpu-bound/latency-critical pair no longer sharing a node.
            0.25: four separated pairs are worth as much as a freed node.
        move_cost: churn cost of one eviction; a candidate must gain more than this per move.
    """

    node_freed: float = 1.0
    pair_separated: float = 0.25
    move_cost: float = 0.05


@dataclass(frozen=True, slots=True)
class Incoming:
    """Pods the same plan adds to one workload (a scale-up, a larger warm pool), each with the
    requests of its pod template. The scheduler places them wherever they fit, so the moves keep
    room for them (``plan_moves``). ``rules``: a pod with their node selector, required node
    affinity and tolerations (the pod template's, or the pending pod's): they count only on the
    nodes those allow (``fits_node``); None: on any schedulable node."""

    workload: str
    cpu_request_m: float
    memory_request_mb: float
    count: int
    rules: Pod | None = None


def pod_key(pod: Pod) -> str:
    return f"{pod.namespace}/{pod.name}"


#: Bounds of the demand ratio a pod's CPU is scaled by (``with_forecast_peaks``): a forecast far
#: below now never shrinks a pod below what it uses, and a wild one does not make it unplaceable.
PEAK_RATIO_BOUNDS = (1.0, 4.0)


def with_forecast_peaks(pods: Sequence[Pod], ratios: Mapping[tuple[str, str], float]) -> tuple[Pod, ...]:
    """Pods with ``peak_cpu_m`` = their usage (their request when no usage is known) times their
    workload's demand ratio (its peak ahead / demand observed now), clipped to
    ``PEAK_RATIO_BOUNDS``, and never below their request. ``ratios`` is keyed by
    ``(namespace, workload name)``; a pod whose owner is ``<name>`` (StatefulSet) or
    ``<name>-<hash>`` (a Deployment's ReplicaSet) takes that workload's ratio. Pods of no known
    workload keep ``peak_cpu_m`` as it is. Pure.
    """
    lo, hi = PEAK_RATIO_BOUNDS
    out = []
    for pod in pods:
        ratio = ratios.get((pod.namespace, pod.owner))
        if ratio is None and "-" in pod.owner:
            ratio = ratios.get((pod.namespace, pod.owner.rsplit("-", 1)[0]))
        if ratio is None or not math.isfinite(ratio):
            out.append(pod)
            continue
        # The pod's usage at the peak, never below its request; a pod with no usage reading (no
        # metrics API) scales its request. (Scaling the larger of the two overstated a pod whose
        # request is above its use: a 24-hour ratio on a P90 request made every node look full.)
        use = pod.usage_cpu_m if pod.usage_cpu_m > 0 else float(pod.cpu_request_m)
        out.append(replace(pod, peak_cpu_m=max(float(pod.cpu_request_m), use * min(max(ratio, lo), hi))))
    return tuple(out)


def pod_peak_cpu_m(pod: Pod) -> float:
    """The CPU a receiving node must hold for a pod: the larger of its forecast peak and its observed
    usage (it must fit now as well as at the peak); its request or usage when no peak is known."""
    if pod.peak_cpu_m > 0:
        return float(max(pod.peak_cpu_m, pod.usage_cpu_m))
    return float(max(pod.cpu_request_m, pod.usage_cpu_m))


def pod_memory_mb(pod: Pod) -> float:
    """The memory a node must hold for a pod: the larger of its request (what the scheduler counts)
    and its observed use. A pod above its request on a node whose pods' use passes the node's
    allocatable is the first the kubelet evicts under memory pressure, so a move never makes that."""
    # (``max`` keeps the request when the use is NaN: a comparison with NaN is false)
    return max(pod.memory_request_mb, pod.usage_memory_mb)


def interference_pairs(pods: Iterable[Pod]) -> int:
    """Number of (cpu-bound, latency-critical) pod pairs sharing a node."""
    cpu: dict[str, int] = {}
    lat: dict[str, int] = {}
    for p in pods:
        if p.interference == CPU_BOUND:
            cpu[p.node] = cpu.get(p.node, 0) + 1
        elif p.interference == LATENCY_CRITICAL:
            lat[p.node] = lat.get(p.node, 0) + 1
    return sum(n * lat.get(node, 0) for node, n in cpu.items())


def pdb_budgets(pdbs: Iterable[PodDisruptionBudget]) -> dict[tuple[str, str], int]:
    """Remaining disruptions per (namespace, owner); the tightest PDB wins if several cover one.

    One owner's view only: a PDB that covers several owners allows its disruptions to all of them
    together, which ``PdbBudgets`` keeps (the planner and the benchmark's Eviction API use that).
    """
    out: dict[tuple[str, str], int] = {}
    for pdb in pdbs:
        key = (pdb.namespace, pdb.owner)
        out[key] = min(out.get(key, pdb.disruptions_allowed), max(0, pdb.disruptions_allowed))
    return out


def _pdb_key(pdb: PodDisruptionBudget) -> tuple[str, str]:
    # A PodDisruptionBudget entry per owner it covers (actuator/kubernetes.py), named after its PDB;
    # an unnamed one stands for its owner alone.
    return (pdb.namespace, pdb.name or f"owner:{pdb.owner}")


@dataclass(slots=True)
class PdbBudgets:
    """Disruptions left per PodDisruptionBudget, shared by every owner it covers.

    A PDB over two ReplicaSets (a Deployment mid-rollout, or a ``tier=frontend`` selector over two
    Deployments) with one disruption allowed lets one pod of either move, not one of each: each
    move spends one from every PDB that covers its pod's owner.
    """

    left_by_pdb: dict[tuple[str, str], int]
    covering: dict[tuple[str, str], tuple[tuple[str, str], ...]]

    @classmethod
    def of(cls, pdbs: Iterable[PodDisruptionBudget]) -> PdbBudgets:
        left: dict[tuple[str, str], int] = {}
        covering: dict[tuple[str, str], list[tuple[str, str]]] = {}
        for pdb in pdbs:
            key = _pdb_key(pdb)
            allowed = max(0, pdb.disruptions_allowed)
            left[key] = min(left.get(key, allowed), allowed)
            keys = covering.setdefault((pdb.namespace, pdb.owner), [])
            if key not in keys:
                keys.append(key)
        return cls(left, {owner: tuple(keys) for owner, keys in covering.items()})

    def copy(self) -> PdbBudgets:
        return PdbBudgets(dict(self.left_by_pdb), self.covering)  # covering is never changed

    def left(self, pod: Pod) -> int | None:
        """Disruptions left for ``pod`` (the tightest of its PDBs); None when no PDB covers it."""
        keys = self.covering.get((pod.namespace, pod.owner))
        return min(self.left_by_pdb[k] for k in keys) if keys else None

    def spend(self, pod: Pod, force: bool = False) -> bool:
        """Spend one disruption of each PDB covering ``pod``; False (and nothing spent) if one has none
        left, unless ``force`` (a deletion, which PDBs do not stop: the budget goes below 0)."""
        keys = self.covering.get((pod.namespace, pod.owner), ())
        if not force and any(self.left_by_pdb[k] <= 0 for k in keys):
            return False
        for k in keys:
            self.left_by_pdb[k] -= 1
        return True

    def allow(self, pods: Iterable[Pod]) -> bool:
        """Whether the PDBs allow all of ``pods`` to move together."""
        spent: dict[tuple[str, str], int] = {}
        for p in pods:
            for k in self.covering.get((p.namespace, p.owner), ()):
                spent[k] = spent.get(k, 0) + 1
                if spent[k] > self.left_by_pdb[k]:
                    return False
        return True


_VERSIONS = count()


@dataclass(slots=True)
class _Cluster:
    """A mutable working copy of the cluster: pods per node and the running sums the rules need."""

    nodes: dict[str, Node]
    pods: dict[str, list[Pod]]
    req_cpu: dict[str, float]
    req_mem: dict[str, float]
    peak: dict[str, float]
    classes: dict[str, dict[str, int]]
    budget: PdbBudgets
    arrays: _Arrays
    moved: set[str] = field(default_factory=set)
    _aa: dict[str, _AntiAffinityIndex] = field(default_factory=dict)
    #: a number per node, new (process-wide) each time its pods change: caches are keyed on it
    version: dict[str, int] = field(default_factory=dict)
    #: best exchange per (node, node, their versions); options only shrink as moves are made (PDB
    #: budgets spent, pods moved), so a cached None stays right and a cached step is re-checked
    exchange_cache: dict[tuple[str, str, int, int], _Step | None] = field(default_factory=dict)
    side_cache: dict[tuple[str, int], _Side] = field(default_factory=dict)
    #: per node, what its node-bound pods (DaemonSet, mirror) use: CPU and memory requests, forecast
    #: peak and observed CPU. They stay where they are and are not in ``pods``: a node with only
    #: them counts as free (as the cluster autoscaler and ``kubectl drain --ignore-daemonsets`` see it)
    base: dict[str, tuple[float, float, float, float]] = field(default_factory=dict)
    #: per set of a pod's node rules (``placement_signature``), which nodes they allow, in
    #: ``arrays`` order: they depend on the pod's rules and the nodes only, never on where pods are
    fit_masks: dict[tuple[object, ...], npt.NDArray[np.bool_]] = field(default_factory=dict)
    #: per node, its node-bound pods: never moved, but they take a place of the node's pod limit,
    #: bind host ports and have and meet anti-affinity like any pod
    bound: dict[str, tuple[Pod, ...]] = field(default_factory=dict)
    #: the pods' anti-affinity terms by domain; None when no pod has one (the benchmark's clusters)
    topology: _Topology | None = None
    #: per node, the ephemeral-storage requests of its pods, node-bound ones included (MiB)
    req_eph: dict[str, float] = field(default_factory=dict)
    #: per node, those of its node-bound pods
    base_eph: dict[str, float] = field(default_factory=dict)

    @classmethod
    def of(cls, state: ClusterState) -> _Cluster:
        # A node that reports no allocatable CPU or memory (status not filled in yet) receives no pods
        # and its pods stay, as on a cordoned node.
        nodes = {
            n.name: n if n.cpu_m > 0 and n.memory_mb > 0 else replace(n, schedulable=False)
            for n in sorted(state.nodes, key=lambda n: n.name)
        }
        pods: dict[str, list[Pod]] = {n: [] for n in nodes}
        bound: dict[str, list[Pod]] = {n: [] for n in nodes}
        for p in sorted(state.pods, key=pod_key):
            if p.node in pods:
                (bound if p.node_bound else pods)[p.node].append(p)
        c = cls(nodes, pods, {}, {}, {}, {}, PdbBudgets.of(state.pdbs), _Arrays.empty(nodes))
        c.version = {name: next(_VERSIONS) for name in nodes}
        c.bound = {name: tuple(ps) for name, ps in bound.items()}
        c.arrays.n_bound = np.array([len(c.bound[n]) for n in c.arrays.names], dtype=np.float64)
        c.topology = _Topology.of(nodes, pods, bound)
        c.base = {
            name: (
                float(sum(p.cpu_request_m for p in ps)),
                float(sum(pod_memory_mb(p) for p in ps)),
                float(sum(pod_peak_cpu_m(p) for p in ps)),
                float(sum(p.usage_cpu_m for p in ps if math.isfinite(p.usage_cpu_m))),
            )
            for name, ps in bound.items()
        }
        c.base_eph = {name: float(sum(p.ephemeral_storage_request_mb for p in ps)) for name, ps in bound.items()}
        for name, ps in pods.items():
            b_cpu, b_mem, b_peak, _ = c.base[name]
            c.req_eph[name] = c.base_eph[name] + float(sum(p.ephemeral_storage_request_mb for p in ps))
            c.req_cpu[name] = b_cpu + float(sum(p.cpu_request_m for p in ps))
            c.req_mem[name] = b_mem + float(sum(pod_memory_mb(p) for p in ps))
            c.peak[name] = b_peak + sum(pod_peak_cpu_m(p) for p in ps)
            counts: dict[str, int] = {}
            for p in (*ps, *c.bound[name]):  # a node-bound pod interferes where it stays
                counts[p.interference] = counts.get(p.interference, 0) + 1
            c.classes[name] = counts
            c.arrays.set(name, c.req_cpu[name], c.req_mem[name], c.peak[name], len(ps), counts, c.req_eph[name])
        return c

    def copy(self) -> _Cluster:
        return _Cluster(
            self.nodes,  # never mutated
            dict(self.pods),  # move() replaces a node's list, never changes it in place
            dict(self.req_cpu),
            dict(self.req_mem),
            dict(self.peak),
            dict(self.classes),  # likewise
            self.budget.copy(),
            self.arrays.copy(),
            set(self.moved),
            dict(self._aa),
            dict(self.version),
            # a trial can only have fewer options (spent PDB budgets, moved pods, smaller budget):
            # what this copy cached is right or re-checked there, but not the other way round
            dict(self.exchange_cache),
            dict(self.side_cache),
            self.base,  # never mutated
            self.fit_masks,  # what it holds never changes
            self.bound,  # never mutated
            None if self.topology is None else self.topology.copy(),
            dict(self.req_eph),
            self.base_eph,  # never mutated
        )

    def excluded(self, pod: Pod, node: str) -> bool:
        """Whether the pods already placed keep ``pod`` off ``node``: the shorthand anti-affinity of
        ``pod`` and the pods on ``node``, either way; a host port ``pod`` binds that one of them
        binds too; an anti-affinity term, either way, in a domain of ``node`` (``_Topology``)."""
        index = self._aa.get(node)
        if index is None:
            index = self._aa[node] = _AntiAffinityIndex.of((*self.pods[node], *self.bound[node]))
        if index.excludes(pod):
            return True
        if pod.host_ports and port_clash(pod, (*self.pods[node], *self.bound[node])) is not None:
            return True
        return self.topology is not None and self.topology.refuses(self, pod, node)

    def pods_on(self, node: str) -> int:
        """Pods on ``node`` now, node-bound ones included: what its pod limit counts."""
        return len(self.pods[node]) + len(self.bound[node])

    def neighbours(self, node: str, pod: Pod) -> list[tuple[Pod, Node]]:
        """The pods whose rules, or ``pod``'s, could keep ``pod`` off ``node``, with the node each is
        on: what the safety check gives ``pod_rules.neighbour_problem``, which decides on them from
        where the pods are. Those on ``node``; on the other nodes of a domain of ``node`` by a
        topology key, those with a term on that key that selects ``pod`` and those a term of
        ``pod`` on that key selects (the domain index, ``_Topology``). Any other pod there can keep
        ``pod`` off ``node`` by no rule of that domain, and the others of a zone are thousands."""
        out = [(q, self.nodes[node]) for q in (*self.pods[node], *self.bound[node])]
        if self.topology is None:
            return out
        labels = self.nodes[node].labels
        for key in self.topology.keys:
            value = labels.get(key)
            if value is None:
                continue
            found = list(self.topology.selecting(pod, key, value))
            for term in pod.anti_affinity_terms:
                if term.topology_key == key:
                    found += self.topology.selected_by(self, term, pod.namespace, key, value)
            out += [(q, self.nodes[q.node]) for _, q in found if q.node != node]
        return out

    def fit_mask(self, pod: Pod) -> npt.NDArray[np.bool_]:
        """Per node (``arrays`` order), whether ``pod``'s node selector, required node affinity and
        tolerations allow it there (``fits_node``); worked out once per set of such rules."""
        key = placement_signature(pod)
        mask = self.fit_masks.get(key)
        if mask is None:
            names = self.arrays.names
            mask = self.fit_masks[key] = np.array([fits_node(pod, self.nodes[n]) for n in names], dtype=np.bool_)
        return mask

    def allows(self, pod: Pod, node: str) -> bool:
        """Whether ``pod``'s own node rules let it run on ``node`` (``fit_mask``)."""
        return bool(self.fit_mask(pod)[self.arrays.pos[node]])

    def count(self, node: str, cls_: str) -> int:
        return self.classes[node].get(cls_, 0)

    def budget_left(self, pod: Pod) -> int | None:
        return self.budget.left(pod)

    def movable(self, pod: Pod) -> bool:
        # pods on a cordoned node are left to whoever cordoned it (an upgrade or an operator's drain);
        # a pod with a rule the planner does not model stays (its replacement could stay Pending)
        if pod.unmovable or not pod.owner or pod_key(pod) in self.moved or not self.nodes[pod.node].schedulable:
            return False
        left = self.budget_left(pod)
        return left is None or left > 0

    def move(self, pod: Pod, to: str) -> Pod:
        src = pod.node
        self.pods[src] = [p for p in self.pods[src] if pod_key(p) != pod_key(pod)]
        moved = _relocated(pod, to)
        self.pods[to] = sorted([*self.pods[to], moved], key=pod_key)
        peak = pod_peak_cpu_m(pod)
        for name, sign in ((src, -1.0), (to, 1.0)):
            self.req_cpu[name] += sign * pod.cpu_request_m
            self.req_mem[name] += sign * pod_memory_mb(pod)
            self.req_eph[name] += sign * pod.ephemeral_storage_request_mb
            self.peak[name] += sign * peak
            counts = dict(self.classes[name])
            counts[pod.interference] = counts.get(pod.interference, 0) + int(sign)
            self.classes[name] = counts
        self.budget.spend(pod)  # the callers checked that it may move
        self.moved.add(pod_key(pod))
        if self.topology is not None:
            self.topology.moved(self, pod, moved)
        self._aa.pop(src, None)
        self._aa.pop(to, None)
        self.version[src] = next(_VERSIONS)
        self.version[to] = next(_VERSIONS)
        for name in (src, to):
            self.arrays.set(
                name,
                self.req_cpu[name],
                self.req_mem[name],
                self.peak[name],
                len(self.pods[name]),
                self.classes[name],
                self.req_eph[name],
            )
        return moved


@dataclass(slots=True)
class _Arrays:
    """The running sums as arrays in node-name order, so a placement filters every node at once."""

    pos: dict[str, int]
    names: tuple[str, ...]
    cpu_alloc: FloatArray
    mem_alloc: FloatArray
    schedulable: npt.NDArray[np.bool_]
    req_cpu: FloatArray
    req_mem: FloatArray
    peak: FloatArray
    n_pods: FloatArray
    n_cpu_bound: FloatArray
    n_latency_critical: FloatArray
    max_pods: FloatArray  # the node's pod limit
    n_bound: FloatArray  # its node-bound pods, which also take a place of that limit
    eph_alloc: FloatArray  # allocatable ephemeral storage (MiB)
    req_eph: FloatArray  # ephemeral-storage requests, node-bound pods' included

    @classmethod
    def empty(cls, nodes: Mapping[str, Node]) -> _Arrays:
        names = tuple(nodes)
        n = len(names)
        return cls(
            {name: i for i, name in enumerate(names)},
            names,
            np.array([nodes[x].cpu_m for x in names], dtype=np.float64),
            np.array([nodes[x].memory_mb for x in names], dtype=np.float64),
            np.array([nodes[x].schedulable for x in names], dtype=np.bool_),
            np.zeros(n),
            np.zeros(n),
            np.zeros(n),
            np.zeros(n),
            np.zeros(n),
            np.zeros(n),
            np.array([nodes[x].max_pods for x in names], dtype=np.float64),
            np.zeros(n),
            np.array([nodes[x].ephemeral_storage_mb for x in names], dtype=np.float64),
            np.zeros(n),
        )

    def copy(self) -> _Arrays:
        return _Arrays(
            self.pos,
            self.names,
            self.cpu_alloc,
            self.mem_alloc,
            self.schedulable,
            self.req_cpu.copy(),
            self.req_mem.copy(),
            self.peak.copy(),
            self.n_pods.copy(),
            self.n_cpu_bound.copy(),
            self.n_latency_critical.copy(),
            self.max_pods,  # never changed
            self.n_bound,  # never changed
            self.eph_alloc,  # never changed
            self.req_eph.copy(),
        )

    def set(
        self,
        name: str,
        req_cpu: float,
        req_mem: float,
        peak: float,
        n_pods: int,
        counts: Mapping[str, int],
        req_eph: float,
    ) -> None:
        i = self.pos[name]
        self.req_cpu[i], self.req_mem[i], self.peak[i], self.n_pods[i] = req_cpu, req_mem, peak, n_pods
        self.req_eph[i] = req_eph
        self.n_cpu_bound[i] = counts.get(CPU_BOUND, 0)
        self.n_latency_critical[i] = counts.get(LATENCY_CRITICAL, 0)


@dataclass(frozen=True, slots=True)
class _AntiAffinityIndex:
    """What the pods on one node are and what they exclude, for an O(rules) anti-affinity test."""

    owners: frozenset[tuple[str, str]]  # (namespace, owner) of the pods there
    labels: frozenset[str]  # "key=value" of the pods there
    owner_rules: frozenset[tuple[str, str]]  # (namespace, owner) excluded by a pod there
    label_rules: frozenset[str]  # "key=value" excluded by a pod there

    @classmethod
    def of(cls, pods: Iterable[Pod]) -> _AntiAffinityIndex:
        owners: set[tuple[str, str]] = set()
        labels: set[str] = set()
        owner_rules: set[tuple[str, str]] = set()
        label_rules: set[str] = set()
        for q in pods:
            owners.add((q.namespace, q.owner))
            labels.update(f"{k}={v}" for k, v in q.labels.items())
            for rule in q.anti_affinity:
                if "=" in rule:
                    label_rules.add(rule)
                else:
                    owner_rules.add((q.namespace, rule))
        return cls(frozenset(owners), frozenset(labels), frozenset(owner_rules), frozenset(label_rules))

    def excludes(self, pod: Pod) -> bool:
        for rule in pod.anti_affinity:
            if rule in self.labels if "=" in rule else (pod.namespace, rule) in self.owners:
                return True
        if (pod.namespace, pod.owner) in self.owner_rules:
            return True
        return any(f"{k}={v}" in self.label_rules for k, v in pod.labels.items())


#: A term of a pod's anti-affinity: the pod and one of its ``anti_affinity_terms``.
_Held = tuple[Pod, PodAffinityTerm]


@dataclass(slots=True)
class _Topology:
    """The pods' anti-affinity terms by domain (``pod_rules``), for the filter's test of a term either
    way without scanning every pod each time. Only clusters where some pod has a term have one."""

    #: every topology key some term names
    keys: tuple[str, ...]
    #: per (key, value), the nodes with that label value: a domain (never changes)
    nodes_in: Mapping[tuple[str, str], tuple[str, ...]]
    #: per (key, value), the terms on that key of the pods in that domain (replaced, never changed
    #: in place, when such a pod moves: copies share what they did not change)
    held: dict[tuple[str, str], tuple[_Held, ...]]
    #: per (key, value), a number new (process-wide) each time a pod enters or leaves the domain
    version: dict[tuple[str, str], int]
    #: which pods a term selects in a domain, and which pods there have a term that selects a pod,
    #: per domain version (each pod with its ``pod_key``): shared by copies, since a version is
    #: never reused
    selected: dict[tuple[object, ...], tuple[tuple[str, Pod], ...]]
    #: per (key, value), its nodes as a set (never changes)
    node_set: Mapping[tuple[str, str], frozenset[str]] = field(default_factory=dict)
    #: per label ("key", "value"), every pod with it as the cluster was given (node-bound ones
    #: included), in ``pod_key`` order: a term's candidates are the pods with its first
    #: ``match_labels`` pair (never changes; a pod's labels do not change when it moves)
    by_label: Mapping[tuple[str, str], tuple[Pod, ...]] = field(default_factory=dict)
    #: per ``pod_key``, the pod as it is now, for the pods that moved (``_relocated``)
    relocated: dict[str, Pod] = field(default_factory=dict)
    #: per (key, value), the ``held`` tuple it was made from and its terms (positions in it) by the
    #: first ``match_labels`` pair, and those without one: the terms that can select a pod are those
    #: under one of its labels and the latter (rebuilt when ``held`` of that domain is replaced;
    #: shared by copies, which check that their ``held`` is the one it was made from)
    held_index: dict[tuple[str, str], tuple[tuple[_Held, ...], tuple[int, ...], dict[tuple[str, str], list[int]]]] = (
        field(default_factory=dict)
    )

    @classmethod
    def of(
        cls, nodes: Mapping[str, Node], pods: Mapping[str, list[Pod]], bound: Mapping[str, list[Pod]]
    ) -> _Topology | None:
        holders = [(p, n) for n in nodes for p in (*pods[n], *bound[n]) if p.anti_affinity_terms]
        if not holders:
            return None
        keys = tuple(sorted({t.topology_key for p, _ in holders for t in p.anti_affinity_terms}))
        nodes_in: dict[tuple[str, str], list[str]] = {}
        for name, node in nodes.items():
            for key in keys:
                if key in node.labels:
                    nodes_in.setdefault((key, node.labels[key]), []).append(name)
        held: dict[tuple[str, str], tuple[_Held, ...]] = {}
        for p, n in holders:
            for term in p.anti_affinity_terms:
                value = nodes[n].labels.get(term.topology_key)
                if value is not None:
                    held[term.topology_key, value] = (*held.get((term.topology_key, value), ()), (p, term))
        version = {domain: next(_VERSIONS) for domain in nodes_in}
        by_label: dict[tuple[str, str], list[Pod]] = {}
        for p in sorted((p for n in nodes for p in (*pods[n], *bound[n])), key=pod_key):
            for label in p.labels.items():
                by_label.setdefault(label, []).append(p)
        return cls(
            keys,
            {k: tuple(v) for k, v in nodes_in.items()},
            held,
            version,
            {},
            {k: frozenset(v) for k, v in nodes_in.items()},
            {k: tuple(v) for k, v in by_label.items()},
            {},
            {},
        )

    def copy(self) -> _Topology:
        return _Topology(
            self.keys,
            self.nodes_in,
            dict(self.held),
            dict(self.version),
            self.selected,
            self.node_set,  # never changes
            self.by_label,  # never changes
            dict(self.relocated),
            self.held_index,
        )

    def moved(self, c: _Cluster, before: Pod, after: Pod) -> None:
        """A pod moved from ``before.node`` to ``after.node``: new versions of the domains it left
        and joined, and its terms go with it."""
        src, dst = c.nodes[before.node].labels, c.nodes[after.node].labels
        for key in self.keys:
            for value in (src.get(key), dst.get(key)):
                if value is not None:
                    self.version[key, value] = next(_VERSIONS)
        me = pod_key(before)
        self.relocated[me] = after
        for term in before.anti_affinity_terms:
            key = term.topology_key
            old, new = src.get(key), dst.get(key)
            if old is not None:
                self.held[key, old] = tuple(h for h in self.held[key, old] if pod_key(h[0]) != me)
            if new is not None:
                self.held[key, new] = (*self.held.get((key, new), ()), (after, term))

    def selected_by(
        self, c: _Cluster, term: PodAffinityTerm, namespace: str, key: str, value: str
    ) -> tuple[tuple[str, Pod], ...]:
        """The pods in domain (key, value) that ``term`` of a pod in ``namespace`` selects."""
        cache_key = ("term", term, namespace, key, value, self.version[key, value])
        hit = self.selected.get(cache_key)
        if hit is None:
            if term.selector is not None and term.selector.match_labels:
                # only the pods with the term's first label can match: those of them in the domain
                # now, in the domain's order (node by node, each node's pods, then its node-bound
                # ones, by ``pod_key``), as the scan below gives them
                domain = self.node_set[key, value]
                found = [
                    q
                    for p in self.by_label.get(term.selector.match_labels[0], ())
                    if (q := self.relocated.get(pod_key(p), p)).node in domain and term.selects(q, namespace)
                ]
                found.sort(key=lambda q: (q.node, q.node_bound, pod_key(q)))
                hit = tuple((pod_key(q), q) for q in found)
            else:
                hit = tuple(
                    (pod_key(q), q)
                    for m in self.nodes_in[key, value]
                    for q in (*c.pods[m], *c.bound[m])
                    if term.selects(q, namespace)
                )
            self.selected[cache_key] = hit
        return hit

    def selecting(self, pod: Pod, key: str, value: str) -> tuple[tuple[str, Pod], ...]:
        """The pods in domain (key, value) with a term on ``key`` that selects ``pod``."""
        cache_key = ("pod", pod_key(pod), key, value, self.version[key, value])
        hit = self.selected.get(cache_key)
        if hit is None:
            held = self.held.get((key, value), ())
            index = self.held_index.get((key, value))
            if index is None or index[0] is not held:
                index = self.held_index[key, value] = _index_terms(held)
            _, unlabelled, by_label = index
            # the terms under none of the pod's labels select it by no ``match_labels``
            maybe = sorted([*unlabelled, *(i for label in pod.labels.items() for i in by_label.get(label, ()))])
            hit = self.selected[cache_key] = tuple(
                (pod_key(q), q) for q, term in (held[i] for i in maybe) if term.selects(pod, q.namespace)
            )
        return hit

    def refuses(
        self, c: _Cluster, pod: Pod, node: str, gone: frozenset[str] = frozenset(), came: Sequence[tuple[Pod, str]] = ()
    ) -> bool:
        """Whether a term keeps ``pod`` off ``node``: one of its own terms selects a pod in that
        term's domain of ``node``, or a term of a pod there selects it (the scheduler's check of the
        existing pods' anti-affinity). ``gone``: pods that are no longer where ``c`` has them;
        ``came``: pods on their way, with the node each goes to (an exchange's earlier moves)."""
        labels = c.nodes[node].labels
        me = pod_key(pod)
        coming = [(q, c.nodes[t].labels) for q, t in came if pod_key(q) != me]
        for term in pod.anti_affinity_terms:
            key = term.topology_key
            value = labels.get(key)
            if value is None:
                continue
            if any(k != me and k not in gone for k, _ in self.selected_by(c, term, pod.namespace, key, value)):
                return True
            if any(there.get(key) == value and term.selects(q, pod.namespace) for q, there in coming):
                return True
        for key in self.keys:
            value = labels.get(key)
            if value is None:
                continue
            if any(k != me and k not in gone for k, _ in self.selecting(pod, key, value)):
                return True
            for q, there in coming:
                if there.get(key) == value and any(
                    t.topology_key == key and t.selects(pod, q.namespace) for t in q.anti_affinity_terms
                ):
                    return True
        return False


def _index_terms(
    held: tuple[_Held, ...],
) -> tuple[tuple[_Held, ...], tuple[int, ...], dict[tuple[str, str], list[int]]]:
    """``held`` and its terms' positions by their first ``match_labels`` pair, and those of the terms
    with a selector but no ``match_labels`` (a term without a selector selects no pod)."""
    unlabelled: list[int] = []
    by_label: dict[tuple[str, str], list[int]] = {}
    for i, (_, term) in enumerate(held):
        if term.selector is None:
            continue
        if term.selector.match_labels:
            by_label.setdefault(term.selector.match_labels[0], []).append(i)
        else:
            unlabelled.append(i)
    return held, tuple(unlabelled), by_label


def _relocated(pod: Pod, node: str) -> Pod:
    return replace(pod, node=node)


def _created(c: _Cluster, pod: Pod, node: str) -> int:
    """Interfering pairs ``pod`` would form on ``node``."""
    opposite = _OPPOSITE.get(pod.interference)
    return 0 if opposite is None else c.count(node, opposite)


def _safe(c: _Cluster, pod: Pod, node: str, max_peak_fraction: float) -> bool:
    """The safety check: the target node's sums after the move, recomputed from its pods (not from
    the running sums the filter used), stay within the caps; its pods, node-bound ones included,
    stay within its pod limit; the pod's PDB allows the move; the pods placed keep it off the node
    by no rule (``pod_rules.neighbour_problem`` on ``_Cluster.neighbours``: anti-affinity either
    way, in every domain of the node, and host ports); the pod's node rules allow the node (``fits_node`` again, not the
    filter's cached mask)."""
    n = c.nodes[node]
    if not fits_node(pod, n) or c.pods_on(node) + 1 > n.max_pods:
        return False
    here = [*c.pods[node], pod]
    b_cpu, b_mem, b_peak, _ = c.base[node]
    if b_peak + sum(pod_peak_cpu_m(p) for p in here) > max_peak_fraction * n.cpu_m + 1e-9:
        return False
    if (
        b_cpu + sum(p.cpu_request_m for p in here) > n.cpu_m
        or b_mem + sum(pod_memory_mb(p) for p in here) > n.memory_mb
        or (
            pod.ephemeral_storage_request_mb > 0
            and c.base_eph[node] + sum(p.ephemeral_storage_request_mb for p in here) > n.ephemeral_storage_mb
        )
    ):
        return False
    left = c.budget_left(pod)
    if left is not None and left < 1:
        return False
    return neighbour_problem(pod, n, c.neighbours(node, pod)) is None


def _choose(c: _Cluster, pod: Pod, exclude: frozenset[str], max_peak_fraction: float) -> str | None:
    """Filter -> score -> safety-check for one pod; the chosen node, or None.

    The filter's capacity, pod limit and node rules run on every node at once (arrays);
    anti-affinity, host ports and the safety check run on the best-scored nodes until one passes.
    """
    a = c.arrays
    peak = pod_peak_cpu_m(pod)
    ok = (
        a.schedulable
        & c.fit_mask(pod)
        & (a.n_pods > 0)
        & (a.n_pods + a.n_bound + 1 <= a.max_pods)
        & (a.req_cpu + pod.cpu_request_m <= a.cpu_alloc)
        & (a.req_mem + pod_memory_mb(pod) <= a.mem_alloc)
        & (pod.ephemeral_storage_request_mb <= 0 or a.req_eph + pod.ephemeral_storage_request_mb <= a.eph_alloc)
        & (a.peak + peak <= max_peak_fraction * a.cpu_alloc + 1e-9)
    )
    for name in (pod.node, *exclude):
        if name in a.pos:
            ok[a.pos[name]] = False
    idx = np.flatnonzero(ok)
    if idx.size == 0:
        return None
    if pod.interference == CPU_BOUND:
        created = a.n_latency_critical[idx]
    elif pod.interference == LATENCY_CRITICAL:
        created = a.n_cpu_bound[idx]
    else:
        created = np.zeros(idx.size)
    fill = (a.peak[idx] + peak) / a.cpu_alloc[idx]
    emptiness = -fill
    # score: fewest interfering neighbours, then the fullest node at the forecast peak after the
    # move (pack onto nodes that stay), then the name (arrays are in name order). The best-scored
    # node usually passes: it is found without sorting them all, which is done only if it fails.
    fewest = created == created.min()
    best = int(np.flatnonzero(fewest & (emptiness == emptiness[fewest].min()))[0])
    target = a.names[int(idx[best])]
    if not c.excluded(pod, target) and _safe(c, pod, target, max_peak_fraction):
        return target
    for j in np.lexsort((idx, emptiness, created)):
        if j == best:
            continue
        target = a.names[int(idx[j])]
        if not c.excluded(pod, target) and _safe(c, pod, target, max_peak_fraction):
            return target
    return None


def _place(c: _Cluster, pod: Pod, exclude: frozenset[str], max_peak_fraction: float) -> str | None:
    """``_choose`` and, on success, move the pod on working copy ``c``."""
    target = _choose(c, pod, exclude, max_peak_fraction)
    if target is not None:
        c.move(pod, target)
    return target


@dataclass(frozen=True, slots=True)
class _Step:
    kind: str  # "drain", "separate", "swap" or "exchange"
    source: str
    moves: tuple[tuple[Pod, str], ...]
    gain: float
    pairs_removed: int
    #: per move, when the moves are not all of ``kind``: (kind, group) where moves of one group
    #: form one separation, swap or exchange (a drain's repairs)
    parts: tuple[tuple[str, int], ...] = ()

    def part(self, i: int) -> tuple[str, int]:
        return self.parts[i] if self.parts else (self.kind, 0)

    def rank(self, drains_first: bool = True) -> tuple[int, float, float, int, float, str, str]:
        """Drains first (if asked), then gain per move, gain, fewest moves, least forecast-peak CPU
        moved (less disruption, and the headroom of the nodes that stay is kept for later steps)."""
        first = pod_key(self.moves[0][0])
        drain_first = 0 if self.kind == "drain" and drains_first else 1
        moved = round(sum(pod_peak_cpu_m(p) for p, _ in self.moves), 3)
        return (drain_first, -self.gain / len(self.moves), -self.gain, len(self.moves), moved, self.source, first)


def _drain_orders(pods: list[Pod]) -> list[list[Pod]]:
    """Orders in which a drain places its pods: largest forecast peak first (the hardest to fit),
    and the interfering classes first (so they get the nodes where they form no pair)."""
    by_peak = sorted(pods, key=lambda p: (-pod_peak_cpu_m(p), pod_key(p)))
    rank = {CPU_BOUND: 0, LATENCY_CRITICAL: 0}
    classes_first = sorted(by_peak, key=lambda p: rank.get(p.interference, 1))
    return [by_peak] if classes_first == by_peak else [by_peak, classes_first]


def _repair(
    trial: _Cluster, debt: int, budget: int, mpf: float, w: RebalanceWeights, max_nodes: int
) -> tuple[list[tuple[Pod, str]], list[tuple[str, int]], int]:
    """Separations and exchanges applied to ``trial`` until ``debt`` pairs are removed (or the
    budget or the candidates run out): what a drain that had to form pairs needs to break even."""
    moves: list[tuple[Pod, str]] = []
    parts: list[tuple[str, int]] = []
    gained = 0
    group = 1
    while gained < debt and len(moves) < budget:
        left = budget - len(moves)
        steps = _separations(trial, mpf, w, max_nodes) + _exchanges(trial, mpf, w, max_nodes, left)
        steps = [s for s in steps if len(s.moves) <= left]
        if not steps:
            break
        best = min(steps, key=lambda s: s.rank(drains_first=False))
        for pod, target in best.moves:
            trial.move(pod, target)
            moves.append((pod, target))
            parts.append((best.kind, group))
        gained += best.pairs_removed
        group += 1
    return moves, parts, gained


def _drain(
    c: _Cluster, node: str, budget: int, mpf: float, w: RebalanceWeights, may_add_pairs: bool, max_nodes: int
) -> _Step | None:
    """Every pod of ``node`` placed elsewhere (the order that separates most pairs), or None.

    Unless ``may_add_pairs``, a drain must not leave more interfering pairs than it found: each pod
    already goes to the node where it forms the fewest pairs; if some must still form pairs (every
    node that fits holds the opposite class), the drain is followed, in the same step, by the
    separations and exchanges that remove at least as many, within the budget; else it is refused.
    """
    pods = c.pods[node]
    if not pods or len(pods) > budget or not all(c.movable(p) for p in pods):
        return None
    best: _Step | None = None
    for order in _drain_orders(pods):
        trial = c.copy()
        moves: list[tuple[Pod, str]] = []
        for pod in order:
            target = _place(trial, pod, frozenset({node}), mpf) if trial.movable(pod) else None
            if target is None:  # no node fits, or a PDB spent by an earlier pod of this drain
                break
            moves.append((pod, target))
        if len(moves) < len(pods):
            continue
        touched = {node, *(t for _, t in moves)}
        pairs = sum(_pairs_on(c.count(n, CPU_BOUND), c.count(n, LATENCY_CRITICAL)) for n in touched) - sum(
            _pairs_on(trial.count(n, CPU_BOUND), trial.count(n, LATENCY_CRITICAL)) for n in touched
        )
        parts: list[tuple[str, int]] = []
        if pairs < 0 and not may_add_pairs:
            extra, extra_parts, gained = _repair(trial, -pairs, budget - len(moves), mpf, w, max_nodes)
            if pairs + gained < 0:
                continue
            parts = [("drain", 0)] * len(moves) + extra_parts
            moves += extra
            pairs += gained
        step = _Step("drain", node, tuple(moves), w.node_freed + w.pair_separated * pairs, pairs, tuple(parts))
        if best is None or (pairs, -len(moves)) > (best.pairs_removed, -len(best.moves)):
            best = step
    return best


def _most_mixed(c: _Cluster, max_nodes: int) -> list[str]:
    """Nodes holding both classes, most pairs first (at most ``max_nodes``)."""
    mixed = [n for n in c.nodes if c.count(n, CPU_BOUND) and c.count(n, LATENCY_CRITICAL)]
    mixed.sort(key=lambda n: (-_pairs_on(c.count(n, CPU_BOUND), c.count(n, LATENCY_CRITICAL)), n))
    return mixed[:max_nodes]


def _separations(c: _Cluster, mpf: float, w: RebalanceWeights, max_nodes: int) -> list[_Step]:
    steps: list[_Step] = []
    for node in _most_mixed(c, max_nodes):
        for pod in c.pods[node]:
            opposite = _OPPOSITE.get(pod.interference)
            if opposite is None or not c.movable(pod):
                continue
            pairs = c.count(node, opposite)
            target = _choose(c, pod, frozenset({node}), mpf)
            if target is None:
                continue
            net = pairs - _created(c, pod, target)
            if net > 0:
                steps.append(_Step("separate", node, ((pod, target),), w.pair_separated * net, net))
    return steps


def _pairs_on(cpu: int, lat: int) -> int:
    return cpu * lat


@dataclass(frozen=True, slots=True)
class _Side:
    """Every set of at most ``MAX_EXCHANGE_SIDE`` movable pods of one node, with their sums as arrays."""

    pods: tuple[Pod, ...]  # the movable pods
    sets: tuple[tuple[Pod, ...], ...]
    peak: FloatArray
    req_cpu: FloatArray
    req_mem: FloatArray
    req_eph: FloatArray
    n_cpu: FloatArray
    n_lat: FloatArray
    size: FloatArray
    #: the sets by (size, cpu-bound pods, latency-critical pods), each group's sets in ``sets`` order:
    #: what an exchange's moves and the pairs it removes depend on
    groups: tuple[tuple[tuple[float, float, float], npt.NDArray[np.intp]], ...]

    @classmethod
    def of(cls, c: _Cluster, node: str) -> _Side:
        pods = [p for p in c.pods[node] if c.movable(p)]
        sets: list[tuple[Pod, ...]] = [()]
        for k in range(1, MAX_EXCHANGE_SIDE + 1):
            sets.extend(combinations(pods, k))

        def total(f: Callable[[Pod], float]) -> FloatArray:
            return np.array([sum(f(p) for p in s) for s in sets], dtype=np.float64)

        n_cpu = total(lambda p: p.interference == CPU_BOUND)
        n_lat = total(lambda p: p.interference == LATENCY_CRITICAL)
        size = total(lambda p: 1.0)
        by_kind: dict[tuple[float, float, float], list[int]] = {}
        for i, kind in enumerate(zip(size.tolist(), n_cpu.tolist(), n_lat.tolist(), strict=True)):
            by_kind.setdefault(kind, []).append(i)
        return cls(
            tuple(pods),
            tuple(sets),
            total(pod_peak_cpu_m),
            total(lambda p: p.cpu_request_m),
            total(pod_memory_mb),
            total(lambda p: p.ephemeral_storage_request_mb),
            n_cpu,
            n_lat,
            size,
            tuple((kind, np.array(idx, dtype=np.intp)) for kind, idx in by_kind.items()),
        )


def _exchange_order(
    c: _Cluster, xs: tuple[Pod, ...], a: str, ys: tuple[Pod, ...], b: str, mpf: float
) -> tuple[tuple[Pod, str], ...] | None:
    """The moves of an exchange (``xs`` a -> b, ``ys`` b -> a) in an order the scheduler can follow.

    The end state was checked at the forecast peak by the caller. Here: the pods' PDBs allow every
    move; every pod's node rules allow its new node (``fits_node``); anti-affinity (in every domain
    of the receiving node, with the moves made so far; re-checked by ``_order_safe``) and host
    ports hold at every step and at the end; at every step the receiving node's requests fit its
    allocatable, its pods its pod limit, and its *observed* usage stays within ``mpf`` of it (the
    transient lasts while pods restart, not until the forecast peak). Tries the ``xs`` first, then
    the ``ys`` first; None if neither order is safe.
    """
    if not all(c.movable(p) for p in (*xs, *ys)) or not c.budget.allow((*xs, *ys)):
        return None
    for first, second in (((xs, b), (ys, a)), ((ys, a), (xs, b))):
        here = {a: list(c.pods[a]), b: list(c.pods[b])}
        order: list[tuple[Pod, str]] = []
        ok = True
        for group, dest in (first, second):
            src = a if dest == b else b
            for p in group:
                n = c.nodes[dest]
                there = here[dest]
                b_cpu, b_mem, _, b_use = c.base[dest]
                if (
                    not fits_node(p, n)
                    or len(there) + len(c.bound[dest]) + 1 > n.max_pods
                    or b_cpu + sum(q.cpu_request_m for q in there) + p.cpu_request_m > n.cpu_m
                    or b_mem + sum(pod_memory_mb(q) for q in there) + pod_memory_mb(p) > n.memory_mb
                    or (
                        p.ephemeral_storage_request_mb > 0
                        and c.base_eph[dest]
                        + sum(q.ephemeral_storage_request_mb for q in there)
                        + p.ephemeral_storage_request_mb
                        > n.ephemeral_storage_mb
                    )
                    or b_use + sum(q.usage_cpu_m for q in there) + p.usage_cpu_m > mpf * n.cpu_m + 1e-9
                    or any(conflicts(p, q) for q in (*there, *c.bound[dest]))
                    or port_clash(p, (*there, *c.bound[dest])) is not None
                    or (
                        c.topology is not None
                        and c.topology.refuses(c, p, dest, frozenset(pod_key(q) for q, _ in order), order)
                    )
                ):
                    ok = False
                    break
                here[src] = [q for q in here[src] if pod_key(q) != pod_key(p)]
                here[dest] = [*there, p]
                order.append((p, dest))
            if not ok:
                break
        if ok and (c.topology is None or _order_safe(c, order)):
            return tuple(order)
    return None


def _order_safe(c: _Cluster, order: Sequence[tuple[Pod, str]]) -> bool:
    """The safety check of an exchange's order under anti-affinity terms: each move, with the moves
    before it made, passes ``pod_rules.neighbour_problem`` on the pods of the receiving node's
    domains that could refuse it (``_Cluster.neighbours``) and the pods moved before it."""
    for i, (p, dest) in enumerate(order):
        before = order[:i]
        gone = {pod_key(q) for q, _ in before}
        others = [(q, n) for q, n in c.neighbours(dest, p) if pod_key(q) not in gone]
        others += [(q, c.nodes[t]) for q, t in before]
        if neighbour_problem(p, c.nodes[dest], others) is not None:
            return False
    return True


def _exchange_nodes(c: _Cluster, max_nodes: int) -> list[str]:
    """Nodes an exchange may involve: the mixed ones (most pairs first, at most ``MAX_EXCHANGE_NODES``),
    then half as many others, those with the most forecast-peak headroom."""
    mixed = _most_mixed(c, min(max_nodes, MAX_EXCHANGE_NODES))
    others = [n for n in c.nodes if n not in mixed and c.pods[n] and c.nodes[n].schedulable]
    others.sort(key=lambda n: (-(DEFAULT_MAX_PEAK_FRACTION * c.nodes[n].cpu_m - c.peak[n]), n))
    return mixed + others[: min(max_nodes, MAX_EXCHANGE_NODES) // 2]


def _exchanges(c: _Cluster, mpf: float, w: RebalanceWeights, max_nodes: int, budget: int) -> list[_Step]:
    """For every pair of nodes (one of them mixed), the exchange that removes most pairs per move.

    An exchange moves up to ``MAX_EXCHANGE_SIDE`` pods from ``a`` to ``b`` and up to as many from
    ``b`` to ``a``; the end state must hold at the forecast peak on both nodes (so two pods of
    similar size can trade places on two nearly full nodes, which no single move can); the order of
    the moves is then checked step by step (``_exchange_order``).
    """
    nodes = _exchange_nodes(c, max_nodes)
    mixed = {n for n in nodes if c.count(n, CPU_BOUND) and c.count(n, LATENCY_CRITICAL)}
    sides: dict[str, _Side] = {}
    for n in nodes:
        if c.nodes[n].schedulable:
            key = (n, c.version[n])
            if key not in c.side_cache:
                c.side_cache[key] = _Side.of(c, n)
            sides[n] = c.side_cache[key]
    steps: list[_Step] = []
    for i, a in enumerate(nodes):
        for b in nodes[i + 1 :]:
            if (a not in mixed and b not in mixed) or a not in sides or b not in sides:
                continue
            pair = (a, b, c.version[a], c.version[b])
            cached = c.exchange_cache.get(pair, _MISSING)
            if cached is _MISSING or (
                isinstance(cached, _Step) and (len(cached.moves) > budget or not _still_possible(c, cached, mpf))
            ):
                cached = c.exchange_cache[pair] = _best_exchange(c, a, sides[a], b, sides[b], mpf, w, budget)
            if isinstance(cached, _Step):
                steps.append(cached)
    return steps


_MISSING = object()


def _still_possible(c: _Cluster, step: _Step, mpf: float) -> bool:
    """A cached exchange's PDB budgets and pods are still available (the nodes did not change)."""
    a, b = step.moves[0][0].node, step.moves[0][1]
    xs = tuple(p for p, t in step.moves if t == b)
    ys = tuple(p for p, t in step.moves if t == a)
    return _exchange_order(c, xs, a, ys, b, mpf) is not None


def _best_exchange(
    c: _Cluster, a: str, sa: _Side, b: str, sb: _Side, mpf: float, w: RebalanceWeights, budget: int
) -> _Step | None:
    """Of every set leaving ``a`` (rows) with every set leaving ``b`` (columns), the exchange that
    removes most pairs per move, then most pairs, then takes fewest moves, then moves the least
    forecast-peak CPU (then the first set of ``a``, then of ``b``); the first of at most
    ``MAX_EXCHANGE_TRIALS`` in that order whose moves can be ordered (``_exchange_order``).

    The moves and the pairs removed depend only on each set's size and classes (``_Side.groups``):
    the groups of sets are ranked first, and the capacity and node-rule checks run group by group
    until ``MAX_EXCHANGE_TRIALS`` pairs of sets pass, not on every pair of sets of two nodes of 40
    pods (821 sets each); on small nodes (``_CHECK_AT_ONCE_CELLS``) they run on every pair at once
    and each group looks its pairs up.
    """
    ca, la = c.count(a, CPU_BOUND), c.count(a, LATENCY_CRITICAL)
    cb, lb = c.count(b, CPU_BOUND), c.count(b, LATENCY_CRITICAL)
    #: per (pairs per move, pairs, moves): the pairs of groups with those, in group order
    ranks: dict[tuple[float, float, float], list[tuple[npt.NDArray[np.intp], npt.NDArray[np.intp]]]] = {}
    for (x_size, x_cpu, x_lat), rows in sa.groups:
        for (y_size, y_cpu, y_lat), cols in sb.groups:
            moves = x_size + y_size
            net = (
                ca * la
                + cb * lb
                - (ca - x_cpu + y_cpu) * (la - x_lat + y_lat)
                - (cb - y_cpu + x_cpu) * (lb - y_lat + x_lat)
            )
            if 1 <= moves <= budget and net > 0 and w.pair_separated * net / moves > w.move_cost:
                ranks.setdefault((net / moves, net, moves), []).append((rows, cols))
    if not ranks:
        return None
    a_to_b, b_to_a = _sets_allowed(c, sa, b), _sets_allowed(c, sb, a)  # the pods' node rules
    every: npt.NDArray[np.bool_] | None = None
    if len(sa.sets) * len(sb.sets) <= _CHECK_AT_ONCE_CELLS:  # small nodes: all at once, then looked up
        all_a, all_b = np.arange(len(sa.sets)), np.arange(len(sb.sets))
        every = _exchanges_fit(c, a, sa, all_a, b, sb, all_b, mpf, a_to_b, b_to_a)

    def fitting(rows: npt.NDArray[np.intp], cols: npt.NDArray[np.intp]) -> tuple[npt.NDArray[np.intp], ...]:
        ok = (
            every[np.ix_(rows, cols)]
            if every is not None
            else _exchanges_fit(c, a, sa, rows, b, sb, cols, mpf, a_to_b, b_to_a)
        )
        r, k = np.nonzero(ok)
        return rows[r], cols[k]

    trials: list[tuple[int, int, float]] = []  # (row, column, pairs removed), best first
    for per_move, net, moves in sorted(ranks, key=lambda r: (-r[0], -r[1], r[2])):
        found = [fitting(rows, cols) for rows, cols in ranks[per_move, net, moves]]
        rows = np.concatenate([r for r, _ in found])
        cols = np.concatenate([k for _, k in found])
        moved_peak = sa.peak[rows] + sb.peak[cols]
        for j in np.lexsort((cols, rows, moved_peak))[: MAX_EXCHANGE_TRIALS - len(trials)]:
            trials.append((int(rows[j]), int(cols[j]), net))
        if len(trials) >= MAX_EXCHANGE_TRIALS:
            break
    for row, col, net in trials:
        xs, ys = sa.sets[row], sb.sets[col]
        order = _exchange_order(c, xs, a, ys, b, mpf)
        if order is None or not _end_state_compatible(c, xs, a, ys, b):
            continue
        kind = "separate" if not xs or not ys else ("swap" if len(xs) == len(ys) == 1 else "exchange")
        pairs = int(net)
        return _Step(kind, a if xs else b, order, w.pair_separated * pairs, pairs)
    return None


#: Below this many pairs of sets (two nodes of up to 20 pods), an exchange's capacity checks run on
#: every pair at once (a few array operations), not group by group.
_CHECK_AT_ONCE_CELLS = 50_000


def _exchanges_fit(
    c: _Cluster,
    a: str,
    sa: _Side,
    rows: npt.NDArray[np.intp],
    b: str,
    sb: _Side,
    cols: npt.NDArray[np.intp],
    mpf: float,
    a_to_b: npt.NDArray[np.bool_] | None,
    b_to_a: npt.NDArray[np.bool_] | None,
) -> npt.NDArray[np.bool_]:
    """Per set of ``rows`` of ``a`` (rows) and set of ``cols`` of ``b`` (columns), whether the end
    state of exchanging them holds on both nodes: forecast peak, requests, pod limits, the pods'
    node rules, and neither node left empty."""
    na, nb = c.nodes[a], c.nodes[b]
    x = np.s_[:, None]  # rows: the set leaving a
    y = np.s_[None, :]  # columns: the set leaving b
    xp, yp = sa.peak[rows], sb.peak[cols]
    xc, yc = sa.req_cpu[rows], sb.req_cpu[cols]
    xm, ym = sa.req_mem[rows], sb.req_mem[cols]
    xe, ye = sa.req_eph[rows], sb.req_eph[cols]
    xn, yn = sa.size[rows], sb.size[cols]
    ok = c.peak[a] - xp[x] + yp[y] <= mpf * na.cpu_m + 1e-9
    ok &= c.peak[b] - yp[y] + xp[x] <= mpf * nb.cpu_m + 1e-9
    ok &= c.req_cpu[a] - xc[x] + yc[y] <= na.cpu_m
    ok &= c.req_cpu[b] - yc[y] + xc[x] <= nb.cpu_m
    ok &= c.req_mem[a] - xm[x] + ym[y] <= na.memory_mb
    ok &= c.req_mem[b] - ym[y] + xm[x] <= nb.memory_mb
    # ephemeral storage: only where a set that requests some arrives (NodeResourcesFit checks a pod
    # that requests none against nothing, even on a node that reports none)
    ok &= (ye[y] <= 0) | (c.req_eph[a] - xe[x] + ye[y] <= na.ephemeral_storage_mb)
    ok &= (xe[x] <= 0) | (c.req_eph[b] - ye[y] + xe[x] <= nb.ephemeral_storage_mb)
    ok &= len(c.pods[a]) - xn[x] + yn[y] > 0  # a node left empty is a drain's business
    ok &= len(c.pods[b]) - yn[y] + xn[x] > 0
    ok &= c.pods_on(a) - xn[x] + yn[y] <= na.max_pods
    ok &= c.pods_on(b) - yn[y] + xn[x] <= nb.max_pods
    if a_to_b is not None:
        ok &= a_to_b[rows][x]
    if b_to_a is not None:
        ok &= b_to_a[cols][y]
    return ok


def _sets_allowed(c: _Cluster, side: _Side, node: str) -> npt.NDArray[np.bool_] | None:
    """Per set of ``side``, whether the node rules of all its pods allow ``node``; None: every set."""
    refused = {pod_key(p) for p in side.pods if not c.allows(p, node)}
    if not refused:
        return None
    return np.array([not any(pod_key(p) in refused for p in s) for s in side.sets], dtype=np.bool_)


def _end_state_compatible(c: _Cluster, xs: tuple[Pod, ...], a: str, ys: tuple[Pod, ...], b: str) -> bool:
    """The shorthand anti-affinity on both nodes once every pod of the exchange has moved (terms are
    checked in every domain along the way: ``_exchange_order``)."""
    gone = {pod_key(p) for p in (*xs, *ys)}
    end_a = [q for q in c.pods[a] if pod_key(q) not in gone] + list(ys) + list(c.bound[a])
    end_b = [q for q in c.pods[b] if pod_key(q) not in gone] + list(xs) + list(c.bound[b])
    return not any(conflicts(p, q) for p in ys for q in end_a) and not any(conflicts(p, q) for p in xs for q in end_b)


def _pct(c: _Cluster, node: str) -> int:
    return round(100.0 * c.peak[node] / c.nodes[node].cpu_m)


def _gain_sentence(step: _Step, share: float) -> str:
    parts = [f"{step.source} freed"] if step.kind == "drain" else []
    if step.pairs_removed or step.kind != "drain":
        parts.append(f"{step.pairs_removed} interfering pair{'s' if step.pairs_removed != 1 else ''} fewer")
    n = len(step.moves)
    moves = f"{n} move{'s' if n != 1 else ''}"
    return f"expected gain {share:.3g} node-equivalents per move ({' and '.join(parts)} in {moves})"


def _reasons(c: _Cluster, step: _Step, weights: RebalanceWeights) -> list[MovePod]:
    """Apply ``step`` to ``c`` and describe each move in a sentence that ends with its expected gain."""
    share = step.gain / len(step.moves)
    facts: list[tuple[Pod, str, list[Pod], int]] = []
    #: per swap or exchange, its nodes as they were just before it (after the drain moves before it)
    before: dict[int, dict[str, list[Pod]]] = {}
    for i, (pod, target) in enumerate(step.moves):
        opposite = _OPPOSITE.get(pod.interference)
        if step.part(i)[0] in ("swap", "exchange"):  # described from before to after the exchange
            group = step.part(i)[1]
            members = [(p, t) for j, (p, t) in enumerate(step.moves) if step.part(j)[1] == group]
            if group not in before:
                before[group] = {n: list(c.pods[n]) for m in members for n in (m[0].node, m[1])}
            mates = {pod_key(p) for p, _ in members}
            here = [*c.bound[pod.node], *(q for q in before[group][pod.node] if pod_key(q) not in mates)]
        else:
            here = [*c.bound[pod.node], *c.pods[pod.node]]
        neighbours = [q for q in here if opposite is not None and q.interference == opposite]
        facts.append((pod, target, neighbours, _created(c, pod, target)))
        c.move(pod, target)
    for i, (pod, target, neighbours, _) in enumerate(facts):
        if step.part(i)[0] in ("swap", "exchange"):
            opposite = _OPPOSITE.get(pod.interference)
            facts[i] = (pod, target, neighbours, 0 if opposite is None else c.count(target, opposite))
    end_peak = dict(c.peak)  # after the whole step: what an exchange is checked against
    running = {n: c.peak[n] for n in c.peak}
    for pod, target in reversed(step.moves):  # peaks after each single move, for drains and separations
        running[target] -= pod_peak_cpu_m(pod)
        running[pod.node] += pod_peak_cpu_m(pod)
    out: list[MovePod] = []
    n_drain = sum(1 for i in range(len(step.moves)) if step.part(i)[0] == "drain")
    for i, (pod, target, neighbours, joined) in enumerate(facts):
        src = pod.node
        kind, group = step.part(i)
        two_way = kind in ("swap", "exchange")
        running[src] -= pod_peak_cpu_m(pod)
        running[target] += pod_peak_cpu_m(pod)
        peaks = end_peak if two_way else running
        opposite = _OPPOSITE.get(pod.interference)
        parts: list[str] = []
        if kind == "drain":
            left = n_drain - i - 1
            rest = f"{left} pod{'s' if left != 1 else ''} left to move" if left else "its last pod"
            parts.append(f"frees {src} ({rest})")
        elif step.kind == "drain":
            parts.append(f"so that freeing {step.source} adds no interfering pair")
        if two_way:
            others = [pod_key(p) for j, (p, t) in enumerate(step.moves) if t == src and step.part(j)[1] == group]
            verb = "swaps places with" if kind == "swap" else "exchanged for"
            parts.append(f"{verb} {', '.join(others)}")
        if neighbours:
            names = ", ".join(pod_key(q) for q in neighbours[:3]) + (" ..." if len(neighbours) > 3 else "")
            parts.append(f"separates {pod.interference} {pod_key(pod)} from {opposite} {names}")
        if joined:
            parts.append(f"joins {joined} {opposite} pod{'s' if joined != 1 else ''} on {target}")
        after = "after the exchange" if two_way else "after"
        target_pct = 100.0 * peaks[target] / c.nodes[target].cpu_m
        parts.append(f"{target} peak {round(target_pct)}% of allocatable {after}")
        parts.append(_gain_sentence(step, share))
        message = f"move {pod_key(pod)} {src} -> {target}: " + ", ".join(parts)
        details: Mapping[str, float | int | str] = {
            "step": step.kind,
            "move_kind": kind,
            "step_moves": len(step.moves),
            "step_pairs_removed": step.pairs_removed,
            "frees_node": step.source if step.kind == "drain" else "",
            "pods_left_to_move": max(0, n_drain - i - 1) if kind == "drain" else 0,
            "pairs_separated": len(neighbours),
            "pairs_created": joined,
            "target_peak_pct_after": round(target_pct, 1),
            "source_peak_pct_after": round(100.0 * peaks[src] / c.nodes[src].cpu_m, 1),
            "gain_node_equivalents": round(share, 4),
            "weight_node_freed": weights.node_freed,
            "weight_pair_separated": weights.pair_separated,
        }
        if pod.uid:  # the journal keeps it (reconciliation after a restart reads it back)
            details = {**details, "pod_uid": pod.uid}
        out.append(
            MovePod(
                namespace=pod.namespace,
                pod=pod.name,
                from_node=src,
                to_node=target,
                reason=Reason(f"rebalance.{step.kind}", message, details),
                expected_gain=share,
                pod_uid=pod.uid,
            )
        )
    return out


def plan_moves(
    state: ClusterState,
    max_moves: int = DEFAULT_MAX_MOVES,
    *,
    max_peak_fraction: float = DEFAULT_MAX_PEAK_FRACTION,
    weights: RebalanceWeights | None = None,
    max_candidate_nodes: int = DEFAULT_MAX_CANDIDATE_NODES,
    drains_may_add_pairs: bool = False,
    incoming: Sequence[Incoming] = (),
    notes: list[str] | None = None,
) -> tuple[MovePod, ...]:
    """Propose at most ``max_moves`` pod moves that free nodes and separate interfering pods.

    Args:
        state: nodes (allocatable, pod limit, labels, taints), pods (requests, usage, forecast
            peak ``peak_cpu_m``, interference class, anti-affinity, host ports, node rules, why one
            must not move) and PDBs. Workloads are not used.
        max_moves: upper bound on the number of moves (evictions) returned.
        max_peak_fraction: a receiving node's forecast-peak CPU stays at or below this share of
            its allocatable CPU.
        weights: what a freed node, a separated pair and a move are worth.
        max_candidate_nodes: drains are evaluated for at most this many nodes (fewest pods first),
            separations for at most this many mixed nodes (most pairs first); exchanges for at
            most ``min(max_candidate_nodes, MAX_EXCHANGE_NODES)`` mixed nodes and half as many
            others.
        drains_may_add_pairs: allow a drain to leave more interfering pairs than it found (the
            behaviour before drains were made interference-safe); off by default.
        incoming: pods the same plan adds; no step leaves room for fewer of them (``_room``).
        notes: when given, one sentence is added to it per step left out for the room of
            ``incoming`` and not taken later, the first ``NOTE_ROOM_STEPS`` named.

    Returns:
        The moves, in the order they should be applied; each with its reason and expected gain.
    """
    w = weights or RebalanceWeights()
    if max_moves <= 0:
        return ()
    c = _Cluster.of(state)
    room = _Room.of(c, incoming)
    out: list[MovePod] = []
    while len(out) < max_moves:
        budget = max_moves - len(out)
        drainable = sorted((n for n, ps in c.pods.items() if 0 < len(ps) <= budget), key=lambda n: (len(c.pods[n]), n))
        steps = [
            s
            for n in drainable[:max_candidate_nodes]
            if (s := _drain(c, n, budget, max_peak_fraction, w, drains_may_add_pairs, max_candidate_nodes))
        ]
        steps += _separations(c, max_peak_fraction, w, max_candidate_nodes)
        steps += _exchanges(c, max_peak_fraction, w, max_candidate_nodes, budget)
        steps = [s for s in steps if s.gain / len(s.moves) > w.move_cost]
        if room.shapes:
            ranked = sorted(steps, key=lambda s: s.rank(drains_first=w.node_freed > 0))
            room.round()
            best = next((s for s in ranked if room.may_check(s) and room.keeps(c, s)), None)
            if best is None:
                room.stopped(len(out))
        else:
            best = min(steps, key=lambda s: s.rank(drains_first=w.node_freed > 0)) if steps else None
        if best is None:
            break
        room.take(best)
        out.extend(_reasons(c, best, w))
    if notes is not None:
        notes.extend(room.notes())
    return tuple(out)


@dataclass(slots=True)
class _Room:
    """The room the cluster has for the pods the plan adds (``Incoming``), and the steps refused
    for leaving less of it."""

    #: the new pods as at most ``ROOM_SHAPES`` shapes (``_shapes``): what ``_room`` places
    shapes: tuple[Incoming, ...]
    #: how many new pods, and who asks for them (for the notes)
    total: int
    named: str
    #: nodes with pods (not node-bound) before any move: a move that leaves one empty frees it
    occupied: frozenset[str]
    #: how many of the new pods fit before any move
    start: int
    #: per step refused and not taken since, a sentence (its latest), in the order of those refusals
    refused: dict[tuple[str, str], str] = field(default_factory=dict)
    #: steps checked in the current round, drains and the others apart (``ROOM_CHECKS`` each)
    checked: dict[bool, int] = field(default_factory=dict)
    #: candidates of the current round not checked for lack of checks
    unchecked: int = 0
    #: a sentence when the moves stopped with candidates left unchecked
    stop: str = ""

    #: per shape, the nodes its node rules allow (``_Cluster.fit_mask``; None: any node)
    masks: tuple[npt.NDArray[np.bool_] | None, ...] = ()

    @classmethod
    def of(cls, c: _Cluster, incoming: Sequence[Incoming]) -> _Room:
        wanted = tuple(i for i in incoming if i.count > 0)
        occupied = frozenset(n for n, ps in c.pods.items() if ps)
        shapes = _shapes(wanted)
        masks = tuple(None if i.rules is None else c.fit_mask(i.rules) for i in shapes)
        a = c.arrays
        start = _room(a, a.req_cpu, a.req_mem, a.n_pods, shapes, frozenset(), masks) if shapes else 0
        return cls(shapes, sum(i.count for i in wanted), _named(wanted), occupied, start, masks=masks)

    def round(self) -> None:
        """A new round of the greedy: ``ROOM_CHECKS`` more drains and as many other steps may be
        checked."""
        self.checked = {}
        self.unchecked = 0

    def may_check(self, step: _Step) -> bool:
        """Whether ``step`` may still be checked this round (drains and the others have a budget
        each: refused drains, ranked first, never keep a separation from being checked)."""
        drain = step.kind == "drain"
        if self.checked.get(drain, 0) >= ROOM_CHECKS:
            self.unchecked += 1
            return False
        return True

    def stopped(self, made: int) -> None:
        """No step of this round was taken: say so when some were left unchecked."""
        if self.unchecked:
            self.stop = (
                f"rebalancing stopped after {made} move{'s' if made != 1 else ''}: {ROOM_CHECKS} drain"
                f"{'s' if ROOM_CHECKS != 1 else ''} and {ROOM_CHECKS} other step{'s' if ROOM_CHECKS != 1 else ''} at "
                "most are checked for the room of the new pods in a round, and "
                f"{self.unchecked} more candidate step{'s were' if self.unchecked != 1 else ' was'} not checked"
            )

    def take(self, step: _Step) -> None:
        self.refused.pop((step.kind, step.source), None)  # a later refusal of its key is said again

    def keeps(self, c: _Cluster, step: _Step) -> bool:
        """Whether the cluster after ``step`` still has room for as many of the new pods as before
        any move (each step is held to the start, so the moves together are too)."""
        if not self.shapes:
            return True
        drain = step.kind == "drain"
        self.checked[drain] = self.checked.get(drain, 0) + 1
        a = c.arrays  # the step's moves on copies of the sums alone (a pod moves once in a plan)
        req_cpu, req_mem, n_pods = a.req_cpu.copy(), a.req_mem.copy(), a.n_pods.copy()
        for pod, target in step.moves:
            i, j = a.pos[pod.node], a.pos[target]
            req_cpu[i] -= pod.cpu_request_m
            req_cpu[j] += pod.cpu_request_m
            req_mem[i] -= pod_memory_mb(pod)
            req_mem[j] += pod_memory_mb(pod)
            n_pods[i] -= 1
            n_pods[j] += 1
        freed = frozenset(n for n in self.occupied if n_pods[a.pos[n]] == 0)
        after = _room(a, req_cpu, req_mem, n_pods, self.shapes, freed, self.masks)
        if after >= self.start:
            return True
        what = {
            "drain": f"freeing {step.source}",
            "separate": f"a separation of a pod on {step.source}",
            "swap": f"a swap of pods between {step.source} and {step.moves[0][1]}",
            "exchange": f"an exchange of pods between {step.source} and {step.moves[0][1]}",
        }.get(step.kind, f"a {step.kind} from {step.source}")
        moves = f"{len(step.moves)} move{'s' if len(step.moves) != 1 else ''}"
        key = (step.kind, step.source)
        self.refused.pop(key, None)  # its latest sentence, in the order of refusal
        self.refused[key] = (
            f"rebalancing left out {what} ({moves}): the new pods would then fit {after} of "
            f"{self.total} on the nodes left, against {self.start} before the moves ({self.named})"
        )
        return False

    def notes(self) -> tuple[str, ...]:
        said = list(self.refused.values())
        if len(said) > NOTE_ROOM_STEPS:
            more = len(said) - NOTE_ROOM_STEPS
            said = [
                *said[:NOTE_ROOM_STEPS],
                f"rebalancing left out {more} more step{'s' if more != 1 else ''} for the room of the new pods",
            ]
        return (*said, self.stop) if self.stop else tuple(said)


#: A plan's notes name at most this many steps refused for the room of the plan's new pods.
NOTE_ROOM_STEPS = 3
#: The new pods are placed as at most this many shapes (``_shapes``), so that checking a step
#: costs the same whether 10 or 10,000 workloads scale up.
ROOM_SHAPES = 32
#: At most this many drains, and as many other steps, are checked for the room per round of the
#: greedy, best first; when all are refused, the moves stop there and a note says so.
ROOM_CHECKS = 8
#: At most this many sets of node rules of the new pods are told apart (``_shapes``), those of
#: the most pods; each, and the pods without rules, has ``ROOM_SHAPES`` cells of the grid (the
#: cost: `bench rebalance-speed --new-zoned`, docs/rebalance.md "Speed").
ROOM_RULES = 3
#: The grid's factor stops growing past this (``_grid``): every request up to it is then in one of
#: a few cells (0, 1, or the factor).
ROOM_GRID_MAX = 1e12
#: Beyond ``ROOM_SHAPES`` shapes, each pod's CPU and memory request is rounded up to a power of
#: this factor (a grid cell), the factor squared until at most ``ROOM_SHAPES`` cells are left.
ROOM_GRID = 1.25


def _shapes(incoming: Sequence[Incoming]) -> tuple[Incoming, ...]:
    """``incoming`` merged by (CPU, memory) request within each set of node rules
    (``placement_signature``; the ``ROOM_RULES`` sets of the most pods, the others' pods counting on
    any node as before the rules were read), largest CPU first, the pods with rules first among
    equals. Each set, and the pods without rules, has ``ROOM_SHAPES`` cells (``_grid``): a check
    costs the same whether 10 or 10,000 workloads scale up, and one set's many shapes never
    coarsen another's (a shared budget of 32 cells counted 10,000 pods of independent CPU and memory
    requests in 3 sets at 17 times their CPU: measured on this change's first version)."""
    sigs = [placement_signature(i.rules) if i.rules is not None else None for i in incoming]
    pods_by_rules: dict[tuple[object, ...], int] = {}
    rules_of: dict[tuple[object, ...], Pod] = {}
    for i, sig in zip(incoming, sigs, strict=True):
        if sig is not None and i.rules is not None:
            pods_by_rules[sig] = pods_by_rules.get(sig, 0) + i.count
            rules_of.setdefault(sig, i.rules)
    kept = set(sorted(pods_by_rules, key=lambda k: (-pods_by_rules[k], repr(k)))[:ROOM_RULES])
    groups: dict[tuple[object, ...] | None, dict[tuple[float, float], int]] = {}
    for i, sig in zip(incoming, sigs, strict=True):
        merged = groups.setdefault(sig if sig in kept else None, {})
        key = (i.cpu_request_m, i.memory_request_mb)
        merged[key] = merged.get(key, 0) + i.count
    cells = [(cpu, mem, sig, n) for sig, merged in groups.items() for (cpu, mem), n in _grid(merged).items()]
    cells.sort(key=lambda c: (-c[0], -c[1], c[2] is None, repr(c[2])))
    return tuple(Incoming("", cpu, mem, n, None if sig is None else rules_of[sig]) for cpu, mem, sig, n in cells)


def _grid(merged: Mapping[tuple[float, float], int], cap: int = ROOM_SHAPES) -> Mapping[tuple[float, float], int]:
    """Pod counts by (CPU, memory) request, merged to at most ``cap`` cells: beyond, each request is
    rounded up to the next power of ``ROOM_GRID`` (less than 25 % more), else of its square, and so
    on: a pod is never counted smaller than it is, nor larger than the grid's factor times (a
    review: counted at the largest of a run of pod counts, 250 pods of 100m were counted at 12
    cores beside one such pod, and every step "kept" a room of 0). The factor stops growing past
    ``ROOM_GRID_MAX``: requests of 0, of 1 and of more than 1 stay apart at any factor, so a few
    more cells than ``cap`` may be left (a review found the loop endless with 36 such cells)."""
    cells, factor = merged, ROOM_GRID
    while len(cells) > cap and factor <= ROOM_GRID_MAX:  # each time from the requests themselves
        out: dict[tuple[float, float], int] = {}
        for (cpu, mem), n in merged.items():
            key = (_grid_up(cpu, factor), _grid_up(mem, factor))
            out[key] = out.get(key, 0) + n
        cells, factor = out, factor * factor
    return cells


def _grid_up(value: float, factor: float) -> float:
    """``value`` rounded up to a power of ``factor`` (0 and below stay as they are)."""
    if value <= 0:
        return value
    up = factor ** math.ceil(math.log(value, factor) - 1e-9)
    return float(max(up, value))


def _named(incoming: Sequence[Incoming]) -> str:
    """The new pods in short: the workloads with most of them first, the first three named."""
    top = sorted(incoming, key=lambda i: (-i.count, i.workload))
    parts = [f"{i.count} of {i.workload}" for i in top[:NOTE_NAMED_PODS]]
    if len(top) > NOTE_NAMED_PODS:
        parts.append(f"{len(top) - NOTE_NAMED_PODS} more workloads")
    return ", ".join(parts)


def _room(
    a: _Arrays,
    req_cpu: FloatArray,
    req_mem: FloatArray,
    n_pods: FloatArray,
    incoming: Sequence[Incoming],
    released: frozenset[str],
    masks: Sequence[npt.NDArray[np.bool_] | None] = (),
) -> int:
    """How many of ``incoming``'s pods fit on the schedulable nodes of ``a``, ``released`` ones
    excepted, with the nodes' CPU requests ``req_cpu``, memory ``req_mem`` (``pod_memory_mb``) and
    pods ``n_pods`` (node-bound ones apart): first fit by CPU and memory requests and the pod
    limit, the largest CPU request first (with node rules first among equals), the nodes in name
    order, each shape only on the nodes of its mask (``masks``, by position; none: any node). An
    estimate of what the scheduler can place, the same for every state it compares."""
    ok = a.schedulable.copy()
    for name in released:
        ok[a.pos[name]] = False
    free_cpu = np.where(ok, a.cpu_alloc - req_cpu, 0.0)
    free_mem = np.where(ok, a.mem_alloc - req_mem, 0.0)
    free_pods = np.where(ok, a.max_pods - n_pods - a.n_bound, 0.0)
    placed = 0
    order = sorted(
        range(len(incoming)),
        key=lambda k: (
            -incoming[k].cpu_request_m,
            -incoming[k].memory_request_mb,
            k >= len(masks) or masks[k] is None,  # with node rules first: fewer nodes to go to
            incoming[k].workload,
        ),
    )
    for k in order:
        inc = incoming[k]
        fits = free_pods.copy()
        mask = masks[k] if k < len(masks) else None
        if mask is not None:
            fits = np.where(mask, fits, 0.0)
        for free, need in ((free_cpu, inc.cpu_request_m), (free_mem, inc.memory_request_mb)):
            if need > 0:
                fits = np.minimum(fits, np.floor(free / need + 1e-9))
        fits = np.maximum(fits, 0.0)
        take = np.clip(inc.count - (np.cumsum(fits) - fits), 0.0, fits)
        placed += int(take.sum())
        free_cpu -= take * inc.cpu_request_m
        free_mem -= take * inc.memory_request_mb
        free_pods -= take
    return placed


#: A note names at most this many pods per reason, then counts the others.
NOTE_NAMED_PODS = 3


def unmovable_notes(pods: Iterable[Pod]) -> tuple[str, ...]:
    """One sentence per reason the rebalancer leaves pods where they are for a rule it does not model
    (``Pod.unmovable``), the reason with most pods first, naming the first pods (by namespace and
    name) and counting the others.

    Only pods it would otherwise consider: those with an owner that are not node-bound (a bare pod,
    a DaemonSet's pod or a mirror pod is never moved anyway, which docs/rebalance.md says).
    """
    by_reason: dict[str, list[str]] = {}
    for pod in sorted(pods, key=pod_key):
        if pod.unmovable and pod.owner and not pod.node_bound:
            by_reason.setdefault(pod.unmovable, []).append(pod_key(pod))
    notes = []
    for reason, keys in sorted(by_reason.items(), key=lambda item: (-len(item[1]), item[0])):  # most pods first
        named = ", ".join(keys[:NOTE_NAMED_PODS])
        if len(keys) > NOTE_NAMED_PODS:
            named += f" and {len(keys) - NOTE_NAMED_PODS} more"
        # the reason speaks of one pod ("it mounts ..."): for several, of each
        said = f"each{reason[2:]}" if len(keys) > 1 and reason.startswith("it ") else reason
        notes.append(f"rebalancing leaves {named} where {'they are' if len(keys) > 1 else 'it is'}: {said}")
    return tuple(notes)
