"""The peers scaleahead is measured against in the service replay (EVALUATION.md section 4).

Each peer is a pure decision rule (no I/O, no clock): it gets the demand observed strictly before
the decision time and the simulated cluster's replica counts, and returns a desired replica count
with a reason. The replay driver turns that into a ``ScaleTo`` and applies it through the same
``actuator.base.apply_plan`` as the planner's plans.

- ``Hpa``: the Kubernetes Horizontal Pod Autoscaler algorithm with its documented defaults
  (``planner.reactive``, re-exported here).
- ``static_peak_replicas``: the peak of the history, provisioned once and never changed.
- ``oracle_replicas``: perfect foresight, zero violations at the least replica-seconds.
"""

from __future__ import annotations

import math

import numpy as np

from planner.reactive import Hpa, HpaConfig
from scaleahead.types import FloatArray

__all__ = ["Hpa", "HpaConfig", "need", "needs", "oracle_replicas", "static_peak_replicas"]

#: Relative slack before rounding up, so that float noise (4.0000001) does not add a replica.
_EPS = 1e-9


def need(demand: float, capacity: float) -> int:
    """Ready replicas that serve ``demand`` at 100 % of ``capacity`` each (0 for missing demand)."""
    if not math.isfinite(demand) or demand <= 0:
        return 0
    return int(math.ceil(demand / capacity - _EPS))


def needs(demand: FloatArray, capacity: float) -> np.ndarray:
    """``need`` for a whole array (missing demand needs nothing)."""
    d = np.nan_to_num(demand, nan=0.0)
    return np.maximum(0, np.ceil(d / capacity - _EPS)).astype(np.int64)


def static_peak_replicas(history: FloatArray, capacity: float) -> int:
    """Static peak provisioning: ``ceil(max(history) / capacity)``, never changed.

    The classic over-provisioning baseline (e.g. Gandhi et al., "AutoScale", ACM TOCS 2012, and
    Roy et al., IEEE CLOUD 2011, compare against it): buy for the worst case seen so far.
    """
    finite = history[np.isfinite(history)]
    if finite.size == 0:
        raise ValueError("the history has no observed value")
    return max(1, need(float(finite.max()), capacity))


def oracle_replicas(demand: FloatArray, capacity: float, startup_steps: int) -> np.ndarray:
    """Perfect foresight: ``A(t) = max of need(d(u)) for u in [t, t + L]`` (steps ``t .. t + startup_steps``).

    Each replica level k is needed on some intervals; a replica must be added L before an
    interval starts and may go when it ends; when two intervals are at most L apart, keeping it
    is cheaper than removing and re-adding it (re-adding costs L of start-up). The union of
    ``[start - L, end)`` over a level's intervals is exactly where the forward max above is at
    least k, so this schedule has zero violations at the least replica-seconds (under the
    removal order of ``actuator.simulated``, the oldest replicas stay and are ready when needed).
    This is the "optimal offline" lower bound used e.g. by Urgaonkar et al. (ACM TAAS 2008).
    """
    n = needs(demand, capacity)
    if startup_steps <= 0 or n.size == 0:
        return n
    padded = np.concatenate([n, np.zeros(startup_steps, dtype=np.int64)])
    windows = np.lib.stride_tricks.sliding_window_view(padded, startup_steps + 1)
    out: np.ndarray = windows.max(axis=1)[: n.size]
    return out
