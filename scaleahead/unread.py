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

from actuator.base import ActionResult
from actuator.safety import desired_value
from planner.fairness import CLUSTER
from scaleahead.policy import Policy, WorkloadClass
from scaleahead.types import ClusterState, ScaleTo, SetWarmPool, WorkloadRef


@dataclass(frozen=True, slots=True)
class Held:
    """What the shared limits keep for the unreadable workloads this cycle."""

    capacity: dict[str, int] | None
    warm_memory_budget_mb: float | None
    notes: tuple[str, ...] = ()
    #: Memory of ``loop.warm_memory_budget_mb`` held for them (``plan(warm_memory_held_mb=...)``).
    warm_memory_held_mb: float = 0.0


@dataclass
class UnreadBook:
    """Each planned workload's pods as last read: ``(replicas, warm instances, time read)``."""

    last: dict[WorkloadRef, tuple[int, int, float]] = field(default_factory=dict)
    #: The workloads whose ``last`` entry is scaleahead's own write since their last read (``wrote``).
    written: set[WorkloadRef] = field(default_factory=set)

    def update(self, state: ClusterState, refs: Sequence[WorkloadRef], now: float) -> None:
        """Remember this cycle's reads; an unread workload keeps its last read. Only ``refs`` (the
        workloads with a policy now) are kept, so a removed workload is forgotten."""
        old, read = self.last, state.workloads
        new: dict[WorkloadRef, tuple[int, int, float]] = {}
        for ref in refs:
            ws = read.get(ref)
            if ws is not None and ref not in state.unreadable:
                new[ref] = (max(ws.replicas, 0), max(ws.warm_instances, 0), now)
                self.written.discard(ref)
            elif ref in old:
                new[ref] = old[ref]
        self.last = new
        self.written &= new.keys()

    def wrote(self, results: Sequence[ActionResult], policies: Sequence[Policy], now: float) -> None:
        """Remember this cycle's own writes as a read right after them would show them: an applied
        warm-pool size, or replica count of a Deployment or StatefulSet scaled directly (the value
        written, ``ActionResult.written``). A floor (``mode: floor``'s HPA minReplicas, a Knative
        Service's min-scale) only raises what runs: a raised one is counted, a lowered one leaves the
        last read. Without this a workload unreadable the next cycle kept what was read before
        scaleahead's own write (loop reasons audit: a function cooled 2 -> 0, then unreadable, held
        2 instances' memory against the budget)."""
        direct: set[WorkloadRef] | None = None
        for r in results:
            a = r.action
            if r.outcome != "applied" or not isinstance(a, ScaleTo | SetWarmPool):
                continue
            old = self.last.get(a.workload)
            if old is None:
                continue  # a workload with no policy now is not tracked
            value = max(r.written if r.written is not None else desired_value(a), 0)
            self.written.add(a.workload)
            if isinstance(a, SetWarmPool):
                self.last[a.workload] = (old[0], value, now)
                continue
            if direct is None:
                direct = {
                    p.workload
                    for p in policies
                    if p.spec.target.mode == "direct" and p.spec.target.kind in ("Deployment", "StatefulSet")
                }
            self.last[a.workload] = (value if a.workload in direct else max(old[0], value), old[1], now)

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
            since = (
                "its minReplicas: not read since the start"
                if seen is None
                else "as scaleahead last wrote it"
                if ref in self.written
                else "as last read"
            )
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
        held = 0.0 if budget is None or warm_memory_budget_mb is None else warm_memory_budget_mb - budget
        return Held(cap or None, budget, tuple(notes), held)
