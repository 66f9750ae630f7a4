"""The reactive reference: the Kubernetes HPA algorithm as a pure decision rule.

It lives in the planner because the planner measures itself against it (``planner.risk``: the
objective's sloRisk adapts while a service runs short more often than this rule would on the same
demand); the service replay (``scaleahead.bench.peers``) uses the same class as its ``hpa`` peer.
No I/O, no clock: it gets the demand observed strictly before the decision time and the replica
counts, and returns a desired count with a reason.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass

import numpy as np

from scaleahead.types import FloatArray

#: Relative slack before rounding up, so that float noise (4.0000001) does not add a replica.
_EPS = 1e-9
#: Kubernetes' most replicas (an int32): a recommendation beyond what a float holds counts as it.
_MOST = 2**31 - 1


def _ceil(x: float) -> int:
    """``ceil(x)`` less float noise, and ``_MOST`` where ``x`` overflowed to infinity (a huge but
    finite usage over a small target), never ``OverflowError``."""
    return int(math.ceil(x - _EPS)) if math.isfinite(x) else _MOST


@dataclass(frozen=True, slots=True)
class HpaConfig:
    """The HPA's defaults (Kubernetes v1.30 docs and ``kube-controller-manager`` flags).

    - ``--horizontal-pod-autoscaler-sync-period`` = 15 s;
    - ``--horizontal-pod-autoscaler-tolerance`` = 0.1;
    - default ``behavior.scaleUp``: no stabilization, policies ``Percent 100 / 15 s`` and
      ``Pods 4 / 15 s``, ``selectPolicy: Max``;
    - default ``behavior.scaleDown``: stabilization window 300 s, policy ``Percent 100 / 15 s``;
    - the target (0.7 of one replica's capacity) and the 60 s metric window are EVALUATION.md's.
    """

    target_utilization: float = 0.7
    tolerance: float = 0.1
    sync_s: float = 15.0
    scale_up_pods: int = 4
    scale_up_percent: float = 100.0
    scale_down_stabilization_s: float = 300.0
    metric_window_s: float = 60.0
    min_replicas: int = 1
    max_replicas: int = 100_000


class Hpa:
    """The Kubernetes HPA algorithm (``autoscaling/v2``) for one resource-utilization metric.

    Source: https://kubernetes.io/docs/tasks/run-application/horizontal-pod-autoscale/
    ("Algorithm details", "Configurable scaling behavior", "Default Behavior") and
    ``pkg/controller/podautoscaler/replica_calculator.go`` (``GetResourceReplicas``) and
    ``horizontal.go`` (``stabilizeRecommendationWithBehaviors``, ``calculateScaleUpLimitWithScalingRules``).

    Per sync:

    1. Usage ``U`` = mean demand over the metric window / capacity of one replica (in replicas);
       utilization of the ready pods = ``U / ready``; ``ratio`` = utilization / target.
    2. Without pending (not yet ready) pods: within the tolerance ``|ratio - 1| <= 0.1`` keep the
       current count, else ``ceil(ratio * ready)``. With pending pods and ``ratio > 1`` they are
       counted at 0 % usage (``ratio' = U / (ready + pending) / target``); if ``ratio'`` is within
       the tolerance or no longer above 1, keep the current count, else ``ceil(ratio' * (ready +
       pending))``. For a scale-down, pending pods are set aside.
    3. Stabilization: the recommendation is recorded; a scale-down goes only to the highest
       recommendation of the last 300 s (scale-up has no window by default).
    4. Scale-up limit per 15 s period: ``max(current * 2, current + 4)``; scale-down limit 100 %.
    5. Bounds ``[min_replicas, max_replicas]``.

    Usage is not capped at a replica's capacity (CPU can exceed its request), so a saturated
    service still shows how far above target it is.
    """

    def __init__(self, capacity: float, config: HpaConfig | None = None, explain: bool = True) -> None:
        if capacity <= 0:
            raise ValueError("capacity must be > 0")
        self.capacity = float(capacity)
        self.config = config or HpaConfig()
        #: Whether decisions come with a reason (False: "" and no string formatting, for simulations
        #: that only need the counts, such as the risk adaptation's reference HPA).
        self.explain = explain
        self._recs: deque[tuple[float, int]] = deque()
        self._last_sync: float | None = None

    def syncs_due(self, now: float) -> int:
        """How many sync ticks (every ``sync_s``) fell in ``(last decision, now]`` (1 for the first)."""
        period = self.config.sync_s
        if self._last_sync is None:
            return 1
        return int(math.floor(now / period + 1e-9) - math.floor(self._last_sync / period + 1e-9))

    def recommend(self, usage: float, ready: int, allocated: int) -> tuple[int, str]:
        """The replica calculator: a raw recommendation from usage (in replicas) and pod counts."""
        cfg = self.config
        current = allocated
        explain = self.explain
        if ready <= 0:
            return current, "no ready pod reports a metric: keep the current count" if explain else ""
        pending = max(0, allocated - ready)
        ratio = usage / ready / cfg.target_utilization
        if pending > 0 and ratio > 1.0:
            pods = ready + pending
            new_ratio = usage / pods / cfg.target_utilization
            if abs(1.0 - new_ratio) <= cfg.tolerance or new_ratio < 1.0:
                return current, (
                    f"utilization {ratio * cfg.target_utilization:.0%} of ready pods, but counting "
                    f"{pending} starting pods at 0 % it is within tolerance: keep {current}"
                    if explain
                    else ""
                )
            return _ceil(new_ratio * pods), (
                f"utilization {new_ratio * cfg.target_utilization:.0%} (starting pods at 0 %) "
                f"vs target {cfg.target_utilization:.0%}"
                if explain
                else ""
            )
        if abs(1.0 - ratio) <= cfg.tolerance:
            return current, (
                f"utilization {ratio * cfg.target_utilization:.0%} within tolerance of target: keep" if explain else ""
            )
        return _ceil(ratio * ready), (
            f"utilization {ratio * cfg.target_utilization:.0%} of {ready} ready pods vs target "
            f"{cfg.target_utilization:.0%}"
            if explain
            else ""
        )

    def usage(self, window_demand: FloatArray) -> float | None:
        """Mean demand of the metric window in replicas (None when the window has no finite value)."""
        finite = window_demand[np.isfinite(window_demand)]
        return float(finite.mean()) / self.capacity if finite.size else None

    def sync(self, now: float, window_demand: FloatArray, ready: int, allocated: int) -> tuple[int, str]:
        """One HPA sync at ``now``: demand of the last metric window (NaN = missing) -> desired count."""
        return self._sync(now, self.usage(window_demand), ready, allocated)

    def _sync(self, now: float, usage: float | None, ready: int, allocated: int) -> tuple[int, str]:
        cfg = self.config
        current = allocated
        if usage is None:
            return current, "no metric in the last window: keep the current count"
        rec, why = self.recommend(usage, ready, allocated)
        self._recs.append((now, rec))
        # Kubernetes keeps the recommendations stamped after now - window (horizontal.go,
        # stabilizeRecommendationWithBehaviors: rec.timestamp.After(cutoff)): one exactly a window
        # old is gone, so a 300 s window holds 20 syncs of 15 s, not 21.
        while self._recs and now - self._recs[0][0] >= cfg.scale_down_stabilization_s - _EPS:
            self._recs.popleft()
        desired = current
        if rec > current:
            desired = rec
        elif rec < current:
            down = max(r for _, r in self._recs)
            desired = min(current, down)
            if desired > rec and self.explain:
                why += f"; held at {desired} by the 300 s scale-down stabilization"
        limit = max(int(math.ceil(current * (1 + cfg.scale_up_percent / 100.0))), current + cfg.scale_up_pods)
        if desired > limit:
            desired = limit
            if self.explain:
                why += f"; limited to {limit} by the scale-up policy"
        desired = max(cfg.min_replicas, min(cfg.max_replicas, desired))
        return desired, why

    def decide(
        self,
        now: float,
        window_demand: FloatArray,
        ready: int,
        allocated: int,
        earlier_window: FloatArray | None = None,
    ) -> tuple[int, str]:
        """Run every sync due at ``now`` (a step longer than 15 s holds several) on data before ``now``.

        Each sync after the first sees the count the previous one set (no replica becomes ready in
        between, as the simulated cluster only moves at step boundaries).

        ``earlier_window``: the metric window known at the sync ticks between the previous decision
        and this one (the caller's window one step earlier). Kubernetes syncs every 15 s, each sync
        on the metric known at its own tick, and its scale-down stabilization takes the highest
        recommendation stamped in the last 300 s (the source above: "Algorithm details",
        "Stabilization window"; ``horizontal.go``, ``stabilizeRecommendationWithBehaviors``;
        docs/replay.md, section "Policies"). So, when it is given, sync ``j`` of the ``n`` due is
        stamped at its own tick ``floor(now / 15) * 15 - (n - 1 - j) * 15``, and every sync but the
        last sees ``earlier_window``; the last sees ``window_demand``. On a 300 s grid the previous
        step's recommendations then stay in the window while the ticks after it sync on the old
        value, and one low sample no longer scales down alone, as in Kubernetes. A scale-down by an
        earlier sync of the step leaves the later ones at most that many ready pods (the simulated
        service removes pods at once; Kubernetes' replica calculator leaves out deleted pods). With
        at most one sync per step (a 10 s grid) the decisions are the same as without it.

        Without it every sync due sees ``window_demand`` and is stamped ``now``, as before
        2026-12-07: the first decision, and ``planner.risk``'s reference HPA right after a gap
        (there is no earlier window then).
        """
        n = self.syncs_due(now)
        self._last_sync = now
        desired, why = allocated, "between syncs: keep"
        if n <= 0:
            return desired, why
        period = self.config.sync_s
        usage = self.usage(window_demand)
        earlier = usage if earlier_window is None else self.usage(earlier_window)
        tick = math.floor(now / period + 1e-9) * period
        count = allocated
        ticks = earlier_window is not None
        for j in range(n):
            last = j == n - 1
            # a scale-down removes pods at once (pending first), so a later sync counts at most `count` ready
            desired, why = self._sync(
                tick - (n - 1 - j) * period if ticks else now,
                usage if last else earlier,
                min(ready, count) if ticks else ready,
                count,
            )
            count = desired
        return desired, why
