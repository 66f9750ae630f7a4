"""A simulated service cluster: the second ``Target`` beside Kubernetes, for replay and the demo.

The replica model is EVALUATION.md section 4, nothing more:

- a replica added at ``t`` is ready at ``t + startup_s`` and counts as allocated (costs) from ``t``;
- removing replicas is immediate: pending (not yet ready) replicas go first, newest first, then
  ready ones, newest first.

Replicas are kept in the order they were added, so "newest first" is always "from the end", and
pending replicas (the newest) always go before ready ones. Each replica that became ready leaves
its readiness time (ready time minus add time) in ``WorkloadState.startup_samples``, as a real
cluster's pods do, so the loop can learn the start-up delay; replicas present at the start and
replicas removed before they were ready leave none. Time comes from a clock the caller
moves (``scaleahead.clock.VirtualClock``), never from the wall clock.

Plans reach this target through the same ``actuator.base.apply_plan`` as a real cluster.
"""

from __future__ import annotations

import bisect
from collections import deque
from collections.abc import Sequence

from actuator.base import ActionResult
from scaleahead.clock import Clock
from scaleahead.types import Action, ClusterState, ScaleTo, WorkloadRef, WorkloadState


class SimulatedService:
    """One or more simulated services (Deployments) whose replicas start after a fixed delay.

    Args:
        clock: where "now" comes from (a ``VirtualClock`` in replay and the demo).
        startup_s: start-up delay L of a new replica (s).
        initial: ready replicas per workload at the start (none pending).
        history_s: how long applied scale decisions are remembered for ``recent_desired`` (s).
        max_samples: most readiness times kept per workload (the newest).
    """

    def __init__(
        self,
        clock: Clock,
        startup_s: float,
        initial: dict[WorkloadRef, int] | None = None,
        history_s: float = 900.0,
        max_samples: int = 200,
    ) -> None:
        if startup_s < 0:
            raise ValueError("startup_s must be >= 0")
        self.clock = clock
        self.startup_s = float(startup_s)
        self.history_s = float(history_s)
        self._ready_at: dict[WorkloadRef, list[float]] = {}
        self._applied: dict[WorkloadRef, deque[tuple[float, int]]] = {}
        # Parallel to ``_ready_at``: when each replica was added; ``_seen``: how many of the
        # oldest replicas already left a readiness sample (or never will: the initial ones).
        self._added_at: dict[WorkloadRef, list[float]] = {}
        self._seen: dict[WorkloadRef, int] = {}
        self._samples: dict[WorkloadRef, deque[float]] = {}
        self.max_samples = int(max_samples)
        self.calls = 0
        now = clock.now()
        for ref, n in (initial or {}).items():
            # Ready from the start: as if they had been added one start-up delay ago.
            self._ready_at[ref] = [now - self.startup_s] * int(n)
            self._added_at[ref] = [now - self.startup_s] * int(n)
            self._seen[ref] = int(n)

    def replicas(self, ref: WorkloadRef) -> int:
        """Allocated replicas (ready and pending): what costs."""
        return len(self._ready_at.get(ref, ()))

    def ready(self, ref: WorkloadRef, now: float | None = None) -> int:
        """Replicas ready at ``now`` (default: the clock's now)."""
        t = self.clock.now() if now is None else now
        return bisect.bisect_right(self._ready_at.get(ref, []), t + 1e-9)

    def startup_samples(self, ref: WorkloadRef, now: float) -> tuple[float, ...]:
        """Readiness times (s) of the replicas that became ready by ``now``, oldest first."""
        ready_at = self._ready_at.get(ref)
        samples = self._samples.get(ref)
        if ready_at is not None:
            added_at = self._added_at[ref]
            i = self._seen.get(ref, 0)
            while i < len(ready_at) and ready_at[i] <= now + 1e-9:
                if samples is None:
                    samples = self._samples[ref] = deque(maxlen=self.max_samples)
                samples.append(ready_at[i] - added_at[i])
                i += 1
            self._seen[ref] = i
        return tuple(samples) if samples else ()

    def read_state(self, workloads: Sequence[WorkloadRef]) -> ClusterState:
        now = self.clock.now()
        states: dict[WorkloadRef, WorkloadState] = {}
        for ref in workloads:
            applied = self._applied.get(ref, deque())
            while applied and now - applied[0][0] > self.history_s:
                applied.popleft()
            states[ref] = WorkloadState(
                ref,
                replicas=self.replicas(ref),
                ready_replicas=self.ready(ref, now),
                recent_desired=tuple(applied),
                startup_samples=self.startup_samples(ref, now),
            )
        return ClusterState(workloads=states)

    def apply(self, action: Action) -> ActionResult:
        if not isinstance(action, ScaleTo):
            return ActionResult(action, "skipped", f"a simulated service has no {action.kind}")
        self.calls += 1
        now = self.clock.now()
        ref = action.workload
        self.startup_samples(ref, now)  # replicas ready by now leave their sample before any removal
        ready_at = self._ready_at.setdefault(ref, [])
        added_at = self._added_at.setdefault(ref, [])
        have = len(ready_at)
        want = max(0, int(action.to_replicas))
        if want > have:
            ready_at.extend([now + self.startup_s] * (want - have))
            added_at.extend([now] * (want - have))
        elif want < have:
            del ready_at[want:]  # newest first; the newest are the pending ones
            del added_at[want:]
            self._seen[ref] = min(self._seen.get(ref, 0), want)
        self._applied.setdefault(ref, deque()).append((now, want))
        return ActionResult(action, "applied", f"{have} -> {want} replicas")
