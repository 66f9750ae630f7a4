"""Shared limits around workloads whose state cannot be read this cycle.

A workload whose object the target could not read (``ClusterState.unreadable``: a 5xx, a timeout)
is not planned that cycle, but its pods still run. Left out of the sums, they would let the others
take the whole shared capacity (``loop.capacity``) or warm-memory budget
(``loop.warm_memory_budget_mb``) and overfill it by that workload's pods. :class:`UnreadBook`
remembers each workload's last read count and takes it off those limits while the workload cannot
be read: a service's replicas (at least its ``minReplicas`` when it has never been read since the
process started), a function's warm instances at their memory. Namespace quotas need none of
this: the API server still counts the pods in a quota's ``used``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from planner.fairness import CLUSTER
from scaleahead.policy import Policy, WorkloadClass
from scaleahead.types import ClusterState, WorkloadRef


@dataclass(frozen=True, slots=True)
class Held:
    """What the shared limits keep for the unreadable workloads this cycle."""

    capacity: dict[str, int] | None
    warm_memory_budget_mb: float | None
    notes: tuple[str, ...] = ()


@dataclass
class UnreadBook:
    """Each planned workload's pods as last read: ``(replicas, warm instances, time read)``."""

    last: dict[WorkloadRef, tuple[int, int, float]] = field(default_factory=dict)

    def update(self, state: ClusterState, refs: Sequence[WorkloadRef], now: float) -> None:
        """Remember this cycle's reads; an unread workload keeps its last read. Only ``refs`` (the
        workloads with a policy now) are kept, so a removed workload is forgotten."""
        old, read = self.last, state.workloads
        new: dict[WorkloadRef, tuple[int, int, float]] = {}
        for ref in refs:
            ws = read.get(ref)
            if ws is not None and ref not in state.unreadable:
                new[ref] = (max(ws.replicas, 0), max(ws.warm_instances, 0), now)
            elif ref in old:
                new[ref] = old[ref]
        self.last = new

    def hold(
        self,
        policies: Sequence[Policy],
        unreadable: Mapping[WorkloadRef, str],
        capacity: Mapping[str, int] | None,
        warm_memory_budget_mb: float | None,
    ) -> Held:
        """``capacity`` and ``warm_memory_budget_mb`` less what the unreadable workloads hold."""
        if not unreadable or (not capacity and warm_memory_budget_mb is None):
            return Held(dict(capacity) if capacity else None, warm_memory_budget_mb)
        cap = dict(capacity) if capacity else {}
        budget = warm_memory_budget_mb
        notes: list[str] = []
        for p in policies:
            ref = p.workload
            if ref not in unreadable:
                continue
            seen = self.last.get(ref)
            function = p.spec.workload_class == WorkloadClass.FUNCTION
            if function:
                pods = seen[1] if seen is not None else 0
            else:
                pods = seen[0] if seen is not None else max(p.spec.min_replicas, 0)
            if pods <= 0:
                continue
            what = f"{pods} warm instance{'s' * (pods != 1)}" if function else f"{pods} replica{'s' * (pods != 1)}"
            since = "as last read" if seen is not None else "its minReplicas: not read since the start"
            taken: list[str] = []
            for key in (p.spec.tenant, CLUSTER):
                if key in cap:
                    cap[key] = max(cap[key] - pods, 0)
                    taken.append(f"loop.capacity[{key!r}]")
            if function and budget is not None and p.spec.warm_pool.enabled:
                mb = pods * p.spec.warm_pool.memory_mb_per_instance
                budget = max(budget - mb, 0.0)
                taken.append(f"{mb:g} MB of loop.warm_memory_budget_mb")
            if taken:
                notes.append(
                    f"{ref.key}: its state cannot be read, so its {what} ({since}) stay counted against "
                    f"{' and '.join(taken)}"
                )
        return Held(cap or None, budget, tuple(notes))
