"""The shared vocabulary: every package speaks in these types and nothing else.

All types are frozen, slotted dataclasses. Times are epoch seconds (float, UTC) and durations are
seconds, named ``*_s``; demand is in the policy's demand unit (requests per step, req/s, CPU %...).

Guarantees:
- ``Series.values`` is float64, one value per ``step_s`` from ``start``; NaN means *missing*,
  never zero demand.
- ``Forecast`` made at ``origin`` uses only data strictly before ``origin``; ``quantiles[q][i]`` is
  the q-quantile of demand in the step ``[origin + i*step_s, origin + (i+1)*step_s)``. Quantile
  arrays all have the same length and never cross (q1 < q2 implies values1 <= values2).
- Every action carries a ``Reason`` with a sentence a person can read.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal, NamedTuple, Protocol

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]

#: The largest float32, the LSTM's number type. A sample beyond it, though finite in float64 (a
#: counter glitch such as 1e42), is never demand: every forecaster reads it as missing
#: (``forecaster.base.glitches_as_missing``), as do the control loop and the dry-run plan, and a
#: series CSV holding one is refused (``scaleahead.traces``).
F32_MAX = float(np.finfo(np.float32).max)


@dataclass(frozen=True, slots=True, order=True)
class WorkloadRef:
    """A scalable workload: a Deployment, StatefulSet or a function (Knative Service)."""

    kind: str
    namespace: str
    name: str

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def key(self) -> str:
        """A stable string key, ``Kind/namespace/name``, used by storage and metrics."""
        return f"{self.kind}/{self.namespace}/{self.name}"

    @classmethod
    def parse(cls, key: str) -> WorkloadRef:
        kind, namespace, name = key.split("/", 2)
        return cls(kind, namespace, name)


@dataclass(frozen=True, slots=True, eq=False)
class Series:
    """A regular time series: ``values[i]`` is the value at ``start + i * step_s``.

    Missing points are NaN. ``start`` and ``step_s`` are in seconds.
    """

    name: str
    start: float
    step_s: float
    values: FloatArray
    unit: str = ""

    def __len__(self) -> int:
        return int(self.values.shape[0])

    @property
    def end(self) -> float:
        """Time just after the last step (exclusive end)."""
        return self.start + len(self) * self.step_s

    def times(self) -> FloatArray:
        return self.start + np.arange(len(self), dtype=np.float64) * self.step_s

    def index_of(self, t: float) -> int:
        """Index of the step that contains time ``t`` (may be out of range)."""
        return int(np.floor((t - self.start) / self.step_s + 1e-9))

    def before(self, t: float) -> Series:
        """The part of the series strictly before time ``t`` (no peeking)."""
        n = max(0, min(len(self), int(np.ceil((t - self.start) / self.step_s - 1e-9))))
        return Series(self.name, self.start, self.step_s, self.values[:n], self.unit)

    def known_by(self, t: float) -> Series:
        """The samples whose step has ended by time ``t`` (a sample covers its step from its
        timestamp on and is known when the step ends); ``before(t)`` on the step grid."""
        n = max(0, min(len(self), int(np.floor((t - self.start) / self.step_s + 1e-9))))
        return Series(self.name, self.start, self.step_s, self.values[:n], self.unit)

    def between(self, t0: float, t1: float) -> Series:
        """Steps whose start lies in ``[t0, t1)``."""
        i0 = max(0, int(np.ceil((t0 - self.start) / self.step_s - 1e-9)))
        i1 = max(i0, min(len(self), int(np.ceil((t1 - self.start) / self.step_s - 1e-9))))
        return Series(self.name, self.start + i0 * self.step_s, self.step_s, self.values[i0:i1], self.unit)


class QuantileRows(Mapping[float, FloatArray]):
    """One workload's quantiles as a row of a batch ``[workloads, K, horizon]``: ``{q: batch[row, k]}``.

    A forecaster that forecasts many workloads at once (``forecast_many``) keeps the batch as one
    read-only array and gives each ``Forecast`` its row, instead of K small arrays per workload.
    It reads like any ``{q: array}`` mapping; the planner, handed many forecasts of one batch,
    reads the batch as it is instead of stacking thousands of small arrays (planner/batch.py).
    ``levels`` (its keys) are ascending and shared by every row of the batch.
    """

    __slots__ = ("batch", "levels", "row", "_index")

    def __init__(self, batch: FloatArray, levels: tuple[float, ...], row: int, index: Mapping[float, int]) -> None:
        self.batch = batch
        self.levels = levels
        self.row = row
        self._index = index

    def __getitem__(self, q: float) -> FloatArray:
        out: FloatArray = self.batch[self.row, self._index[q]]
        return out

    def __contains__(self, q: object) -> bool:
        return q in self._index

    def __iter__(self) -> Iterator[float]:
        return iter(self.levels)

    def __len__(self) -> int:
        return len(self.levels)

    def __repr__(self) -> str:
        return f"QuantileRows(row {self.row} of {self.batch.shape[0]}, quantiles {list(self.levels)})"


def quantile_batch(
    quantiles: FloatArray, keys: Sequence[float]
) -> tuple[FloatArray, tuple[float, ...], dict[float, int]]:
    """``quantiles [workloads, K, horizon]`` (K in the order of ``keys``) as a read-only batch with ascending keys.

    The array is taken over, not copied, when it is already float64, C-contiguous and in ascending
    key order: it is made read-only, so a forecaster hands over an array it made for the purpose.
    Raises ValueError unless the array has that shape and the keys are distinct.
    """
    order = sorted(range(len(keys)), key=lambda j: keys[j])
    skeys = tuple(float(keys[j]) for j in order)
    q = np.asarray(quantiles, dtype=np.float64)
    if q.ndim != 3 or q.shape[1] != len(skeys) or len(set(skeys)) != len(skeys):
        raise ValueError(f"a quantile batch needs shape [workloads, {len(skeys)}, horizon] and distinct keys")
    if order != list(range(len(order))):
        q = q[:, order, :]
    batch = np.ascontiguousarray(q)
    batch.flags.writeable = False
    return batch, skeys, {k: j for j, k in enumerate(skeys)}


def batch_forecasts(
    workloads: Sequence[WorkloadRef],
    origins: Sequence[float],
    steps_s: Sequence[float],
    quantiles: FloatArray,
    keys: Sequence[float],
    model: str = "",
) -> list[Forecast]:
    """One ``Forecast`` per workload, each reading its row of one read-only batch (``QuantileRows``).

    ``quantiles[i, k, :]`` is workload ``i``'s forecast at quantile ``keys[k]``.
    """
    batch, skeys, index = quantile_batch(quantiles, keys)
    if not (len(workloads) == len(origins) == len(steps_s) == batch.shape[0]):
        raise ValueError("one workload, origin and step per row of the quantile batch")
    return [
        Forecast(w, o, st, QuantileRows(batch, skeys, i, index), model)
        for i, (w, o, st) in enumerate(zip(workloads, origins, steps_s, strict=True))
    ]


@dataclass(frozen=True, slots=True, eq=False)
class Forecast:
    """Quantile forecast of one workload's demand, made at ``origin``."""

    workload: WorkloadRef
    origin: float
    step_s: float
    quantiles: Mapping[float, FloatArray]
    model: str = ""

    @property
    def horizon_steps(self) -> int:
        return int(next(iter(self.quantiles.values())).shape[0]) if self.quantiles else 0

    @property
    def horizon_s(self) -> float:
        return self.horizon_steps * self.step_s

    def quantile(self, q: float) -> FloatArray:
        """The forecast at quantile ``q``; the nearest available quantile at or above it."""
        return self.quantiles[self.quantile_key(q)]

    def quantile_key(self, q: float) -> float:
        """The level ``quantile(q)`` reads: ``q`` itself, else the nearest above it, else the top one."""
        if q in self.quantiles:
            return q
        above = [k for k in self.quantiles if k >= q]
        return min(above) if above else max(self.quantiles)

    def times(self) -> FloatArray:
        return self.origin + np.arange(self.horizon_steps, dtype=np.float64) * self.step_s


@dataclass(frozen=True, slots=True)
class Reason:
    """Why a decision was made: a machine-readable code, a sentence, and the numbers behind it."""

    code: str
    message: str
    details: Mapping[str, float | int | str] = field(default_factory=dict)

    def __str__(self) -> str:
        return self.message

    def __eq__(self, other: object) -> bool:
        # By value, also against a LazyReason (the generated __eq__ demands the very same class).
        if not isinstance(other, Reason):
            return NotImplemented
        return (self.code, self.message, self.details) == (other.code, other.message, other.details)


class ReasonSource(Protocol):
    """What a :class:`LazyReason` asks for its sentence and numbers: ``(message, details)`` of row ``i``."""

    def reason_of(self, i: int) -> tuple[str, Mapping[str, float | int | str]]: ...


_REASON_MESSAGE = Reason.__dict__["message"]
_REASON_DETAILS = Reason.__dict__["details"]
_REASON_CODE = Reason.__dict__["code"]


class LazyReason(Reason):
    """A :class:`Reason` whose ``message`` and ``details`` are made on first read.

    The planner decides thousands of workloads in one batch; formatting every sentence there would
    cost more than the decisions themselves, and most sentences are read only when the plan is
    recorded or shown. It reads (and is equal to) a plain ``Reason`` with the same code, message
    and details; it is still frozen, and pickles/copies as a plain ``Reason``. ``source`` must be
    immutable once handed over (the planner's batch never changes after the decision).
    """

    __slots__ = ("_source", "_row")
    _source: ReasonSource
    _row: int

    def __init__(self, code: str, source: ReasonSource, row: int) -> None:
        _REASON_CODE.__set__(self, code)
        _LAZY_SOURCE.__set__(self, source)
        _LAZY_ROW.__set__(self, row)

    def _fill(self) -> None:
        message, details = self._source.reason_of(self._row)
        _REASON_MESSAGE.__set__(self, message)
        _REASON_DETAILS.__set__(self, details)

    @property  # type: ignore[override]
    def message(self) -> str:
        try:
            return str(_REASON_MESSAGE.__get__(self, Reason))
        except AttributeError:
            self._fill()
            return str(_REASON_MESSAGE.__get__(self, Reason))

    @property  # type: ignore[override]
    def details(self) -> Mapping[str, float | int | str]:
        try:
            return _REASON_DETAILS.__get__(self, Reason)  # type: ignore[no-any-return]
        except AttributeError:
            self._fill()
            return _REASON_DETAILS.__get__(self, Reason)  # type: ignore[no-any-return]

    def __repr__(self) -> str:
        return f"Reason(code={self.code!r}, message={self.message!r}, details={self.details!r})"

    def __reduce__(self) -> tuple[type[Reason], tuple[str, str, dict[str, float | int | str]]]:
        return (Reason, (self.code, self.message, dict(self.details)))


_LAZY_SOURCE = LazyReason.__dict__["_source"]
_LAZY_ROW = LazyReason.__dict__["_row"]


@dataclass(frozen=True, slots=True)
class ScaleTo:
    """Set a workload's replica count (or its HPA floor, by the policy's mode)."""

    workload: WorkloadRef
    from_replicas: int
    to_replicas: int
    reason: Reason
    kind: Literal["ScaleTo"] = "ScaleTo"

    @property
    def is_noop(self) -> bool:
        return self.from_replicas == self.to_replicas

    @property
    def target(self) -> str:
        return self.workload.key


@dataclass(frozen=True, slots=True)
class SetWarmPool:
    """Keep ``to_instances`` warm (pre-provisioned) instances of a function for ``keep_warm_s``."""

    workload: WorkloadRef
    from_instances: int
    to_instances: int
    keep_warm_s: float
    reason: Reason
    #: Remove the field instead of writing ``to_instances`` (0), so that the platform's default
    #: applies again: a released function whose Service had no ``min-scale`` before scaleahead.
    restore_default: bool = False
    kind: Literal["SetWarmPool"] = "SetWarmPool"

    @property
    def is_noop(self) -> bool:
        return self.from_instances == self.to_instances and not self.restore_default

    @property
    def target(self) -> str:
        return self.workload.key


@dataclass(frozen=True, slots=True)
class MovePod:
    """Evict a pod from ``from_node`` so that it lands on ``to_node``."""

    namespace: str
    pod: str
    from_node: str
    to_node: str
    reason: Reason
    expected_gain: float = 0.0
    #: The UID of the pod the plan means (``""``: unknown). A pod re-created under the same name
    #: since (a StatefulSet's ``db-0``) is another pod: the actuator does not evict it, and
    #: reconciliation counts the planned one as gone.
    pod_uid: str = ""
    kind: Literal["MovePod"] = "MovePod"

    @property
    def is_noop(self) -> bool:
        return self.from_node == self.to_node

    @property
    def target(self) -> str:
        return f"Pod/{self.namespace}/{self.pod}"


Action = ScaleTo | SetWarmPool | MovePod


def action_endpoints(action: Action) -> tuple[str, str]:
    """The ``from`` and ``to`` of an action as strings, for tables and JSON."""
    if isinstance(action, ScaleTo):
        return str(action.from_replicas), str(action.to_replicas)
    if isinstance(action, SetWarmPool):
        return str(action.from_instances), str(action.to_instances)
    return action.from_node, action.to_node


def action_endpoint_values(action: Action) -> tuple[int | str, int | str]:
    """The ``from`` and ``to`` of an action as JSON values: replica and instance counts as numbers,
    nodes as names."""
    if isinstance(action, ScaleTo):
        return action.from_replicas, action.to_replicas
    if isinstance(action, SetWarmPool):
        return action.from_instances, action.to_instances
    return action.from_node, action.to_node


def endpoint_value(kind: str, text: str) -> int | str:
    """A stored ``from``/``to`` (text in the journal) as its JSON value: a count for ``ScaleTo`` and
    ``SetWarmPool``, the text otherwise (a node name, or a count that was stored unreadable)."""
    if kind in ("ScaleTo", "SetWarmPool"):
        try:
            return int(text)
        except ValueError:
            return text
    return text


class Trend(NamedTuple):
    """A straight line fitted by least squares to the observed demand of a recent window.

    ``level`` is the line's value at ``at`` (the end of the last sample's step), ``slope`` its rise
    per second, ``t_stat`` the slope over its standard error (``inf`` for a perfect line),
    ``window_s`` the window it was fitted on and ``samples`` how many finite samples it held
    (scaleahead/observed.py, ``demand_trend``). The planner's ramp floor reads it (docs/planner.md,
    "Ramp floor"); a tuple, so the batch planner reads thousands in one pass.
    """

    level: float
    slope: float
    t_stat: float
    at: float
    window_s: float
    samples: int = 0


@dataclass(frozen=True, slots=True)
class WorkloadState:
    """What the cluster says about one workload now.

    ``observed_demand`` is the latest observed demand (NaN if unknown) measured at
    ``observed_at``; ``recent_desired`` holds ``(time, replicas)`` of earlier decisions, which the
    planner uses for scale-down stabilization. ``startup_samples`` are observed readiness times
    (s from a replica's pod being created to it becoming Ready), oldest first; the control loop
    learns the start-up delay from them (``planner.startup``). Empty when the target does not know.
    ``observed_trend`` is the line fitted to the observed demand of the policy's ramp-floor window
    (None: not measured, or fewer than three samples). ``last_active_at`` is when the newest step
    with demand above 0 ended, looked for over the last ``warmPool.keepAliveSeconds`` of a
    function's history (``-inf``: none there; NaN: not measured): its last call, for the reactive
    fallback of a warm pool. ``startup_pods``: when the target names them (Kubernetes: pod UIDs),
    the pods the readiness times come from, in the same order; the loop keeps each pod's first
    readiness time after the target stops reporting it (``StartupBook``).
    """

    workload: WorkloadRef
    replicas: int
    ready_replicas: int
    observed_demand: float = float("nan")
    observed_at: float = float("nan")
    warm_instances: int = 0
    recent_desired: tuple[tuple[float, int], ...] = ()
    startup_samples: tuple[float, ...] = ()
    observed_trend: Trend | None = None
    last_active_at: float = float("nan")
    startup_pods: tuple[str, ...] = ()


class Taint(NamedTuple):
    """A node taint (``spec.taints``): ``effect`` ``NoSchedule``, ``PreferNoSchedule`` or ``NoExecute``."""

    key: str
    value: str = ""
    effect: str = "NoSchedule"


class Toleration(NamedTuple):
    """A pod toleration (``spec.tolerations``), as Kubernetes matches it against a taint.

    ``operator`` ``Equal`` (the default; ``""`` means the same) or ``Exists``; an empty ``key``
    matches every key, an empty ``effect`` every effect (``Exists`` with an empty key tolerates
    everything).
    """

    key: str = ""
    operator: str = "Equal"
    value: str = ""
    effect: str = ""


class NodeSelectorRequirement(NamedTuple):
    """One requirement of a required node-affinity term (``nodeSelectorTerms[i]``).

    ``operator``: ``In``, ``NotIn``, ``Exists``, ``DoesNotExist``, ``Gt`` or ``Lt`` (``Gt``/``Lt``
    compare ``values[0]`` as an integer). ``field`` False: a ``matchExpressions`` requirement on the
    node's labels; True: a ``matchFields`` one on the node's fields (``key`` ``metadata.name``).
    """

    key: str
    operator: str
    values: tuple[str, ...] = ()
    field: bool = False


#: A required node-affinity term: its requirements, ANDed.
NodeSelectorTerm = tuple[NodeSelectorRequirement, ...]


class LabelRequirement(NamedTuple):
    """One ``matchExpressions`` entry of a label selector: ``operator`` ``In`` (the label is one of
    ``values``), ``NotIn`` (absent, or none of them), ``Exists`` or ``DoesNotExist``."""

    key: str
    operator: str
    values: tuple[str, ...] = ()


class LabelSelector(NamedTuple):
    """A label selector: every ``match_labels`` pair and every ``match_expressions`` requirement
    holds (ANDed). The empty selector selects every set of labels.

    An operator the API server would refuse is read as matching: the callers use selectors to keep
    pods apart or to count them under a PodDisruptionBudget, where matching more is the safe side.
    """

    match_labels: tuple[tuple[str, str], ...] = ()
    match_expressions: tuple[LabelRequirement, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        """Whether a pod with these labels is selected."""
        if any(labels.get(k) != v for k, v in self.match_labels):
            return False
        for key, op, values in self.match_expressions:
            have = labels.get(key)
            if (
                (op == "In" and (have is None or have not in values))
                or (op == "NotIn" and have is not None and have in values)
                or (op == "Exists" and have is None)
                or (op == "DoesNotExist" and have is not None)
            ):
                return False
        return True


class PodAffinityTerm(NamedTuple):
    """One term of a pod's required pod anti-affinity
    (``podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution[i]``).

    The pods it selects may not run in the same *domain* as the pod that has it: the nodes whose
    label ``topology_key`` has the same value (``kubernetes.io/hostname``: one node;
    ``topology.kubernetes.io/zone``: a zone). A node without that label is in no domain.
    ``selector`` None (no ``labelSelector``) selects no pod. ``namespaces``: the namespaces of the
    pods it selects; ``()``: the namespace of the pod that has the term; None: every namespace (a
    term with a ``namespaceSelector``, which is read as selecting every namespace: the planner does
    not read namespaces' labels, and selecting more only keeps more pods apart).
    """

    selector: LabelSelector | None
    namespaces: tuple[str, ...] | None
    topology_key: str

    def selects(self, pod: Pod, namespace: str) -> bool:
        """Whether this term of a pod in ``namespace`` selects ``pod`` (by namespace and labels, not
        by where it runs)."""
        if self.selector is None:
            return False
        if self.namespaces is not None and pod.namespace not in (self.namespaces or (namespace,)):
            return False
        return self.selector.matches(pod.labels)


class HostPort(NamedTuple):
    """A host port a pod's container binds (``ports[i].hostPort``; 0 binds none), on ``host_ip``
    (``""``: every address) with ``protocol`` ``TCP``, ``UDP`` or ``SCTP``."""

    port: int
    protocol: str = "TCP"
    host_ip: str = ""


#: The kubelet's default ``maxPods``: a node's pod limit when it reports none.
DEFAULT_MAX_PODS = 110


@dataclass(frozen=True, slots=True)
class Node:
    name: str
    cpu_m: int
    memory_mb: int
    labels: Mapping[str, str] = field(default_factory=dict)
    schedulable: bool = True
    #: ``spec.taints``: a pod lands here only if it tolerates every ``NoSchedule`` and ``NoExecute`` one.
    taints: tuple[Taint, ...] = ()
    #: ``status.allocatable.pods``: the most pods it runs at once, node-bound ones included.
    max_pods: int = DEFAULT_MAX_PODS
    #: ``status.allocatable["ephemeral-storage"]`` in MiB (rounded down); 0 when it reports none,
    #: and then, as kube-scheduler's NodeResourcesFit, it receives no pod that requests any.
    ephemeral_storage_mb: int = 0


@dataclass(frozen=True, slots=True)
class Pod:
    """A pod with its requests, observed and forecast-peak usage, interference class and the rules
    of where it may run (anti-affinity, node selector, required node affinity, tolerations, host
    ports).

    ``cpu_request_m``, ``memory_request_mb`` and ``ephemeral_storage_request_mb`` are what the
    scheduler counts against a node's allocatable: the larger of the containers' sum and any init
    container (a sidecar, an init container that keeps running, adds to both), plus the pod's
    overhead. ``unmovable``, when set, is why the rebalancer leaves the pod where it is: a rule of
    it the planner does not model (the scheduler could refuse its replacement on the planned
    node); the pod still counts on its node.
    """

    namespace: str
    name: str
    node: str
    cpu_request_m: int
    memory_request_mb: int
    owner: str = ""
    usage_cpu_m: float = 0.0
    peak_cpu_m: float = 0.0
    interference: Literal["cpu-bound", "io-bound", "latency-critical", "none"] = "none"
    labels: Mapping[str, str] = field(default_factory=dict)
    #: Anti-affinity in short, node by node: an owner name (``"cart"``: no other pod of owner
    #: ``cart`` in its namespace on its node) or a label ``"key=value"`` (no pod of any namespace with
    #: that label on its node). The benchmark's and hand-built clusters use it; the cluster reader
    #: gives Kubernetes' rules in full in ``anti_affinity_terms``.
    anti_affinity: tuple[str, ...] = ()
    #: Bound to its node (a DaemonSet's or a mirror pod): never moved, and it does not keep its node
    #: from being freed (the cluster autoscaler and ``kubectl drain --ignore-daemonsets`` ignore it).
    node_bound: bool = False
    #: ``spec.nodeSelector``: a node it may land on has every one of these labels.
    node_selector: Mapping[str, str] = field(default_factory=dict)
    #: Required node affinity (``requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms``):
    #: a node it may land on matches at least one term (every requirement of it); () is no such rule.
    required_node_terms: tuple[NodeSelectorTerm, ...] = ()
    #: ``spec.tolerations``: the taints it may land next to.
    tolerations: tuple[Toleration, ...] = ()
    #: Required pod anti-affinity as Kubernetes states it: no pod a term selects may run in the
    #: pod's domain of that term, and the pod may not join a domain where such a pod runs.
    #: (``anti_affinity`` above is a shorthand of the same rule, node by node.)
    anti_affinity_terms: tuple[PodAffinityTerm, ...] = ()
    #: The host ports its containers bind: no two pods on a node bind one port (``NodePorts``).
    host_ports: tuple[HostPort, ...] = ()
    #: Why it must not be moved (a sentence; ``""``: it may be), for a rule the planner does not
    #: model: required pod affinity, topology spread, a volume bound to a node or zone, ...
    unmovable: str = ""
    #: Its ``ephemeral-storage`` request in MiB (rounded up), counted as ``memory_request_mb`` is;
    #: a node takes a pod that requests some only within its ``Node.ephemeral_storage_mb``.
    ephemeral_storage_request_mb: int = 0
    #: ``metadata.uid`` (``""`` where unknown, as in the benchmark's clusters): a move the planner
    #: proposes names it, so that a pod re-created under the same name is not taken for this one.
    uid: str = ""
    #: Its observed memory use in MiB (the metrics API; 0 where unknown). The rebalancer counts a pod's
    #: memory on a node as the larger of this and ``memory_request_mb`` (``planner.rebalance.pod_memory_mb``).
    usage_memory_mb: float = 0.0


@dataclass(frozen=True, slots=True)
class PodDisruptionBudget:
    namespace: str
    name: str
    owner: str
    disruptions_allowed: int


@dataclass(frozen=True, slots=True)
class ClusterState:
    """A snapshot of what the planner may know about the cluster at decision time."""

    workloads: Mapping[WorkloadRef, WorkloadState] = field(default_factory=dict)
    nodes: tuple[Node, ...] = ()
    pods: tuple[Pod, ...] = ()
    pdbs: tuple[PodDisruptionBudget, ...] = ()
    #: Per namespace, how many pods the namespace's ResourceQuotas (``pods`` / ``count/pods``) let
    #: the managed workloads read in it hold together: ``hard - used`` (the smallest over the
    #: quotas) plus the pods those workloads have now. Only namespaces with such a quota appear;
    #: a quota whose scopes select only some of them is keyed ``namespace/quota-name`` (``quota_members``).
    pod_quotas: Mapping[str, int] = field(default_factory=dict)
    #: Per namespace, the same for its ResourceQuotas on CPU and memory: ``{"requests.cpu":
    #: millicores, "requests.memory": MiB, "limits.cpu": ..., "limits.memory": ...}`` the managed
    #: workloads read in it may hold together (what is left plus what their pods ask for now).
    resource_quotas: Mapping[str, Mapping[str, int]] = field(default_factory=dict)
    #: Per managed Deployment or StatefulSet, what one of its pods counts against those quotas
    #: (``actuator.kubernetes.pod_shape``).
    pod_shapes: Mapping[WorkloadRef, Mapping[str, int]] = field(default_factory=dict)
    #: Per managed workload read with its placement (rebalancing on), the node rules of its pod
    #: template as a ``Pod`` on no node (node selector, required node affinity, tolerations): the
    #: nodes its new pods may land on, for the room the moves keep for them.
    pod_rules: Mapping[WorkloadRef, Pod] = field(default_factory=dict)
    #: Pools of ``pod_quotas`` / ``resource_quotas`` that are not a whole namespace: a ResourceQuota
    #: whose scopes count the pods of only some of the namespace's managed workloads, keyed
    #: ``namespace/quota-name``, and those workloads. A key without ``/`` is a namespace: every
    #: managed workload read in it.
    quota_members: Mapping[str, frozenset[WorkloadRef]] = field(default_factory=dict)
    #: Managed workloads whose new pods a ResourceQuota refuses outright, and why: the quota
    #: constrains a resource (``requests.cpu``, ...) that a container of the pod template (with the
    #: namespace's LimitRange defaults) leaves unset ("must specify requests.cpu"). The planner holds
    #: them at their current count instead of planning pods the API server would refuse.
    quota_refused: Mapping[WorkloadRef, str] = field(default_factory=dict)
    #: Workloads asked for whose object could not be read, and why (the API server's status or the
    #: field at fault, naming the workload). They are not in ``workloads``; the control loop reports
    #: each as an error at stage ``state`` and leaves it out of the cycle's plan rather than plan it
    #: from a count it does not know. Empty from targets that always read every workload.
    unreadable: Mapping[WorkloadRef, str] = field(default_factory=dict)
    #: Knative Services in a quota pool whose autoscaler runs more pods than their warm instances
    #: (``min-scale``): the pods each runs now. The pools hold them (they are in the quota's
    #: ``used``); what a claim does not want of them is not free for the others, so the planner
    #: takes ``running - wanted`` off the pools before sharing (``planner.planning``).
    pods_running: Mapping[WorkloadRef, int] = field(default_factory=dict)
    #: Pods not bound to a node yet (``Pending``, no ``spec.nodeName``), with their requests and
    #: owner (``node`` is ""): what the scheduler still has to place, such as the new pods of an
    #: earlier cycle's scale-up. The rebalancing moves keep room for them as for the plan's own new
    #: pods. Read with the placement (``loop.max_moves``); empty otherwise.
    pending_pods: tuple[Pod, ...] = ()


@dataclass(frozen=True, slots=True)
class Plan:
    """The planner's output for one cycle: actions (no-ops included, as explained holds)."""

    created_at: float
    actions: tuple[Action, ...]
    fallbacks: Mapping[WorkloadRef, str] = field(default_factory=dict)
    notes: tuple[str, ...] = ()

    @property
    def changes(self) -> tuple[Action, ...]:
        return tuple(a for a in self.actions if not a.is_noop)


@dataclass(frozen=True, slots=True, eq=False)
class InvocationForecast:
    """Forecast of a function's invocations, made at ``origin`` from data strictly before it.

    ``probability[k]`` is the probability of at least one invocation in the step
    ``[origin + k*step_s, origin + (k+1)*step_s)`` given that none comes in the steps before it
    (the quantity a keep-alive decision needs: "if it stays idle until then, will it be called
    then?"). Values lie in [0, 1]. ``idle_s`` is how long the function had been idle at ``origin``
    (``inf`` if it was never seen). ``data_until`` is when the newest finite sample it was made
    from ended (None: at ``origin``): a step missing before ``origin`` counts as no call, so a
    history that stopped must make the forecast stale, not "idle since" (the planner's check).
    """

    workload: WorkloadRef
    origin: float
    step_s: float
    probability: FloatArray
    idle_s: float = float("inf")
    model: str = ""
    data_until: float | None = None

    @property
    def horizon_steps(self) -> int:
        return int(self.probability.shape[0])

    @property
    def horizon_s(self) -> float:
        return self.horizon_steps * self.step_s
