"""Helpers shared by the serverless tests."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Mapping, Sequence

from scaleahead.policy import Policy
from scaleahead.types import Series, WorkloadRef

#: A function's policy; ``{name}`` and ``{warm}`` (extra ``warmPool`` fields, e.g. ``memoryMbPerInstance: 128``).
FUNCTION_POLICY = """
apiVersion: scaleahead.io/v1alpha1
kind: PredictiveScalingPolicy
metadata: {{name: {name}, namespace: fn}}
spec:
  target: {{kind: KnativeService, name: {name}}}
  demand: {{query: 'sum(rate(invocations{{fn="{name}"}}[1m]))', unit: invocations/min, stepSeconds: 60}}
  capacityPerReplica: 100
  workloadClass: function
  warmPool: {{enabled: true, maxInstances: 1, {warm}}}
"""


def cli(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """``scaleahead bench serverless ARGS`` in a fresh interpreter."""
    return subprocess.run(
        [sys.executable, "-m", "scaleahead.cli", "bench", "serverless", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
    )


class FixedHistory:
    """A loop ``HistorySource`` over fixed series: only the values before ``now``."""

    def __init__(self, series: Mapping[WorkloadRef, Series]) -> None:
        self.series = series

    def read(self, policies: Sequence[Policy], now: float) -> Mapping[WorkloadRef, Series]:
        return {p.workload: self.series[p.workload].before(now) for p in policies if p.workload in self.series}
