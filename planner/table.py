"""What the planner reads from policies, read once per set of policies rather than once per plan.

A plan for 10,000 services used to spend about half its time on facts that only change when a
policy does: building each policy's ``WorkloadRef``, telling services from warm-pool functions,
and reading every spec field the batch rule needs (pydantic attribute reads, about 9 per
service). Policies are frozen pydantic models, so those facts can be kept: ``policy_table``
returns a :class:`PolicyTable` built once and handed out again while ``plan`` is called with the
very same policy objects (checked by identity, element by element, so a reloaded or edited
policy, always a new object, builds a new table). The table is an immutable cache: it never
changes a decision, only how fast the same decision is reached.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from operator import attrgetter, is_
from threading import Lock

import numpy as np
import numpy.typing as npt

from planner.replicas import stale_limit
from scaleahead.policy import FallbackMode, Policy, PolicySpec, WorkloadClass
from scaleahead.types import WorkloadRef

FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]

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
    "objective.churn",
    "ramp_floor.window_seconds",
    "ramp_floor.min_t_stat",
)
_FALLBACK = attrgetter("mode", "static_replicas")


@dataclass(frozen=True, slots=True, eq=False)
class SpecColumns:
    """The spec fields of the replica rule for a list of services, one array element per service.

    ``specs[i]`` is the spec of row ``i`` (for wording reasons and for the scalar reference).
    ``forecast_quantile`` is NaN where the policy sets none (the objective chooses the level, then
    ``objective`` is True); ``quantile`` is the fixed quantile when every row plans at the same one,
    else None. ``cost_weight``, ``slo_weight`` and ``churn_weight`` are the objective's weights;
    ``ramp_window_s`` and ``ramp_min_t`` the ramp floor's window and t statistic.
    ``stale_after_s`` is ``replicas.stale_limit`` (staleAfterSeconds, or one demand step if longer).
    """

    specs: Sequence[PolicySpec]
    capacity: FloatArray
    target_utilization: FloatArray
    min_replicas: FloatArray
    max_replicas: FloatArray
    startup_s: FloatArray
    stabilization_s: FloatArray
    max_step_up: FloatArray
    max_step_down: FloatArray
    forecast_quantile: FloatArray
    objective: BoolArray
    quantile: float | None
    cost_weight: FloatArray
    slo_weight: FloatArray
    churn_weight: FloatArray
    ramp_window_s: FloatArray
    ramp_min_t: FloatArray
    fallback_reactive: BoolArray
    fallback_static: BoolArray
    static_replicas: FloatArray
    stale_after_s: FloatArray


def spec_columns(specs: Sequence[PolicySpec]) -> SpecColumns:
    """Read the rule's fields of ``specs`` (each distinct spec object once) into arrays."""
    rows: dict[int, int] = {}
    uniq: list[PolicySpec] = []
    for spec in specs:
        if id(spec) not in rows:
            rows[id(spec)] = len(uniq)
            uniq.append(spec)
    idx = np.fromiter((rows[id(s)] for s in specs), np.int64, count=len(specs))
    raw = [_SPEC(s) for s in uniq]
    params = np.array([[np.nan if v is None else v for v in r] for r in raw], dtype=np.float64).reshape(-1, 14)[idx]
    # staleAfterSeconds, or one demand step when that is longer (replicas.stale_limit)
    fb = [(*_FALLBACK(s.fallback), stale_limit(s)) for s in uniq]
    flags = np.array(
        [(m == FallbackMode.REACTIVE, m == FallbackMode.STATIC, r or 0, a) for m, r, a in fb], dtype=np.float64
    ).reshape(-1, 4)[idx]
    qs = {s.forecast_quantile for s in uniq}
    return SpecColumns(
        specs=specs,
        capacity=params[:, 0],
        target_utilization=params[:, 1],
        min_replicas=params[:, 2],
        max_replicas=params[:, 3],
        startup_s=params[:, 4],
        stabilization_s=params[:, 5],
        max_step_up=params[:, 6],
        max_step_down=params[:, 7],
        forecast_quantile=params[:, 8],
        objective=np.isnan(params[:, 8]),
        quantile=next(iter(qs)) if len(qs) == 1 and None not in qs else None,
        cost_weight=params[:, 9],
        slo_weight=params[:, 10],
        churn_weight=params[:, 11],
        ramp_window_s=params[:, 12],
        ramp_min_t=params[:, 13],
        fallback_reactive=flags[:, 0] > 0,
        fallback_static=flags[:, 1] > 0,
        static_replicas=flags[:, 2],
        stale_after_s=flags[:, 3],
    )


class PolicyTable:
    """One set of policies, split and read for the planner. Immutable once built.

    ``refs[i]`` is policy ``i``'s workload. Services (every workload but warm-pool functions) are
    the policies at ``service_index``, with their workloads ``service_refs`` and rule fields
    ``services``; warm-pool functions are at ``function_index``. ``ref_set``: every workload.
    """

    __slots__ = ("policies", "refs", "ref_set", "service_index", "service_refs", "services", "function_index")

    def __init__(self, policies: Sequence[Policy]) -> None:
        self.policies: tuple[Policy, ...] = tuple(policies)
        self.refs: tuple[WorkloadRef, ...] = tuple(p.workload for p in self.policies)
        self.ref_set: frozenset[WorkloadRef] = frozenset(self.refs)
        function = WorkloadClass.FUNCTION
        is_function = [p.spec.workload_class == function and p.spec.warm_pool.enabled for p in self.policies]
        self.service_index: tuple[int, ...] = tuple(i for i, f in enumerate(is_function) if not f)
        self.function_index: tuple[int, ...] = tuple(i for i, f in enumerate(is_function) if f)
        self.service_refs: tuple[WorkloadRef, ...] = tuple(self.refs[i] for i in self.service_index)
        self.services = spec_columns([self.policies[i].spec for i in self.service_index])

    def matches(self, policies: Sequence[Policy]) -> bool:
        """True when ``policies`` are the very objects this table was built from, in order."""
        return len(policies) == len(self.policies) and all(map(is_, policies, self.policies))


#: Tables of the policy sets planned most recently (a loop plans one set; a rollout or shadow
#: plan may add another). Newest last.
_TABLES: list[PolicyTable] = []
_TABLES_KEPT = 4
_LOCK = Lock()


def policy_table(policies: Sequence[Policy]) -> PolicyTable:
    """The :class:`PolicyTable` of ``policies``: a kept one if built from the same objects, else a new one."""
    for table in reversed(tuple(_TABLES)):
        if table.matches(policies):
            return table
    table = PolicyTable(policies)
    with _LOCK:
        _TABLES.append(table)
        del _TABLES[:-_TABLES_KEPT]
    return table
