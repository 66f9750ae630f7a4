"""Sources and targets for running the daemon without a cluster: replayed traces and a memory.

``TraceHistory`` serves a real trace as if it were Prometheus: each read returns the window of
the trace whose steps have ended by ``now`` (shifted by ``offset_s`` so a 1995 trace can drive a 2026
clock). ``InMemoryTarget`` keeps replica counts in a dict. Together they let ``scaleahead run
--history trace:NAME --target memory``, the daemon tests and ``scaleahead bench speed`` exercise
the whole control loop; the Prometheus source and the Kubernetes target plug into the same
protocols (``scaleahead.loop.HistorySource``, ``actuator.base.Target``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from actuator.base import ActionResult
from scaleahead.policy import Policy
from scaleahead.types import Action, ClusterState, ScaleTo, Series, SetWarmPool, WorkloadRef, WorkloadState


class TraceHistory:
    """History from traces: ``series[ref]`` for a workload, else ``default`` (scaled per workload),
    each named after its workload (``WorkloadRef.key``), as ``PrometheusHistory`` names them.

    Args:
        series: a trace per workload key (``Kind/namespace/name``).
        default: the trace for every other workload; workload ``i`` (in policy order) sees it times
            ``1 + scale_spread * (i % 7) / 6`` so that many workloads do not all look the same.
        window_s: how much history one read returns (the loop needs a day for seasonal-naive).
        offset_s: trace time = clock time + ``offset_s``.
    """

    def __init__(
        self,
        series: Mapping[str, Series] | None = None,
        default: Series | None = None,
        window_s: float = 2 * 86400.0,
        offset_s: float = 0.0,
        scale_spread: float = 0.0,
    ) -> None:
        self.series = dict(series or {})
        self.default = default
        self.window_s = window_s
        self.offset_s = offset_s
        self.scale_spread = scale_spread
        self.reads = 0

    def read(self, policies: Sequence[Policy], now: float) -> Mapping[WorkloadRef, Series]:
        self.reads += 1
        t = now + self.offset_s
        out: dict[WorkloadRef, Series] = {}
        for i, policy in enumerate(policies):
            ref = policy.workload
            src = self.series.get(ref.key)
            scale = 1.0
            if src is None:
                src = self.default
                scale = 1.0 + self.scale_spread * (i % 7) / 6.0
            if src is None:
                continue
            # Only the steps that have ended by t: a trace bucket is known when it ends (Series.known_by).
            part = src.known_by(t).between(t - self.window_s, t)
            if len(part) == 0:
                continue
            values = part.values * scale if scale != 1.0 else part.values
            # named after the workload, as the Prometheus source names it: a per-series baseline
            # (``forecaster.per_series``) then fits each workload on its own here too (until
            # 2026-12-07 every workload of one trace had the trace's name and was pooled into one
            # model, unlike production, with a retraining's peak memory 2.7 GiB at 1,000 workloads)
            out[ref] = Series(ref.key, part.start - self.offset_s, part.step_s, values, part.unit)
        return out


class InMemoryTarget:
    """A cluster that is a dict: scale-ups are ready at once, warm pools are a number.

    ``fail`` holds workload keys whose actions raise (to test per-workload back-off); ``applied``
    lists every action applied, in order.
    """

    def __init__(self, replicas: Mapping[WorkloadRef, int] | None = None, default_replicas: int = 1) -> None:
        self.replicas: dict[WorkloadRef, int] = dict(replicas or {})
        self.warm: dict[WorkloadRef, int] = {}
        self.default_replicas = default_replicas
        self.fail: set[str] = set()
        self.fail_reads = False
        self.applied: list[Action] = []
        self.reads = 0

    def read_state(self, workloads: Sequence[WorkloadRef]) -> ClusterState:
        self.reads += 1
        if self.fail_reads:
            raise ConnectionError("cluster unreachable (injected)")
        states = {}
        for ref in workloads:
            n = self.replicas.setdefault(ref, self.default_replicas)
            states[ref] = WorkloadState(ref, n, n, warm_instances=self.warm.get(ref, 0))
        return ClusterState(states)

    def apply(self, action: Action) -> ActionResult:
        if action.target in self.fail:
            raise RuntimeError(f"injected failure for {action.target}")
        if isinstance(action, ScaleTo):
            self.replicas[action.workload] = action.to_replicas
        elif isinstance(action, SetWarmPool):
            self.warm[action.workload] = action.to_instances
        else:
            return ActionResult(action, "skipped", "pod moves are not simulated here")
        self.applied.append(action)
        return ActionResult(action, "applied", "in memory")


def spread_series(base: Series, n: int, seed: int = 0) -> list[Series]:
    """``n`` distinct series from one real trace: each scaled and shifted by whole hours.

    For benchmarks with many workloads when only a few real series exist; the shape of every
    series is still the real trace's.
    """
    rng = np.random.default_rng(seed)
    steps_per_hour = max(1, int(round(3600.0 / base.step_s)))
    out = []
    for i in range(n):
        shift = int(rng.integers(0, 24)) * steps_per_hour
        scale = float(rng.uniform(0.5, 2.0))
        values = np.roll(base.values, shift) * scale
        out.append(Series(f"{base.name}#{i}", base.start, base.step_s, values, base.unit))
    return out
