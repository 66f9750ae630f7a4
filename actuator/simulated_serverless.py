"""A simulated serverless platform: warm instances, cold starts and memory, minute by minute.

It is an actuator ``Target`` like the Kubernetes one, so ``scaleahead bench serverless`` drives the
real planner through the real ``actuator.base.apply_plan`` path, as EVALUATION.md section 5 asks.

The platform's model (the same one the benchmark's metrics define):

- ``apply(SetWarmPool)`` sets how many warm instances a function holds from now on (until the next
  change); ``keep_warm_s`` is recorded as the planner's stated intent.
- ``step(counts)`` plays one step of invocations: a function with invocations and no warm instance
  has one cold start (its first call; the rest of the step is served by that instance); a function
  with warm instances and no invocation wastes ``memory_mb[f]`` MB for the step (one instance's
  worth, as in the paper's metric). The platform keeps nothing warm by itself: what stays warm is
  what the warm pool says.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from actuator.base import ActionResult
from scaleahead.types import Action, ClusterState, FloatArray, SetWarmPool, WorkloadRef, WorkloadState


@dataclass
class ServerlessTotals:
    """Running totals of the simulation."""

    invocations: int = 0
    cold_starts: int = 0
    wasted_memory_mb_steps: float = 0.0
    cold_by_function: npt.NDArray[np.int64] = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    invocations_by_function: npt.NDArray[np.int64] = field(default_factory=lambda: np.zeros(0, dtype=np.int64))


class SimulatedServerless:
    """Functions ``workloads[i]`` with memory ``memory_mb[i]``; time advances one step per ``step``."""

    def __init__(
        self, workloads: Sequence[WorkloadRef], memory_mb: Sequence[float] | FloatArray, start: float, step_s: float
    ) -> None:
        if len(workloads) != len(memory_mb):
            raise ValueError("one memory size per function is needed")
        self.workloads = list(workloads)
        self.index = {ref: i for i, ref in enumerate(self.workloads)}
        self.memory_mb = np.asarray(memory_mb, dtype=np.float64)
        self.step_s = step_s
        self.now = start
        n = len(self.workloads)
        self.warm = np.zeros(n, dtype=np.int64)
        self.keep_warm_s = np.zeros(n)
        self.last_counts = np.full(n, np.nan)
        self.last_at = np.full(n, np.nan)
        self.applied = 0
        self.totals = ServerlessTotals(
            cold_by_function=np.zeros(n, dtype=np.int64), invocations_by_function=np.zeros(n, dtype=np.int64)
        )

    def read_state(self, workloads: Sequence[WorkloadRef]) -> ClusterState:
        states = {}
        for ref in workloads:
            i = self.index[ref]
            states[ref] = WorkloadState(
                ref,
                replicas=0,
                ready_replicas=0,
                observed_demand=float(self.last_counts[i]),
                observed_at=float(self.last_at[i]),
                warm_instances=int(self.warm[i]),
            )
        return ClusterState(workloads=states)

    def apply(self, action: Action) -> ActionResult:
        if not isinstance(action, SetWarmPool):
            return ActionResult(action, "failed", f"the serverless platform cannot apply {action.kind}")
        i = self.index.get(action.workload)
        if i is None:
            return ActionResult(action, "failed", f"unknown function {action.workload}")
        if action.to_instances < 0:
            return ActionResult(action, "failed", "negative warm instances")
        self.warm[i] = action.to_instances
        self.keep_warm_s[i] = action.keep_warm_s
        self.applied += 1
        return ActionResult(action, "applied", f"{action.from_instances} -> {action.to_instances} warm")

    def step(self, counts: npt.NDArray[np.int64]) -> npt.NDArray[np.bool_]:
        """Play one step of invocations; returns which functions were warm for it (decided before it)."""
        n = np.asarray(counts, dtype=np.int64)
        warm = self.warm > 0
        active = n > 0
        cold = active & ~warm
        t = self.totals
        t.invocations += int(n.sum())
        t.cold_starts += int(cold.sum())
        t.wasted_memory_mb_steps += float(self.memory_mb[warm & ~active].sum())
        t.cold_by_function += cold
        t.invocations_by_function += n
        self.last_counts = n.astype(np.float64)
        self.last_at = np.full(len(n), self.now)
        self.now += self.step_s
        return warm
