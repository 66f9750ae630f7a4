"""Small builders for planner tests."""

from __future__ import annotations

from typing import Any

import numpy as np

from scaleahead.policy import Policy
from scaleahead.types import Forecast, InvocationForecast, WorkloadRef


def service_policy(name: str = "web", **spec: Any) -> Policy:
    doc: dict[str, Any] = {
        "metadata": {"name": name, "namespace": "shop"},
        "spec": {
            "target": {"name": name, "namespace": "shop"},
            "demand": {"query": "q"},
            "capacityPerReplica": 10.0,
            "targetUtilization": 1.0,
            "scaleDownStabilizationSeconds": 0,
            # These helpers' forecasts put the level at 0.9; the objective's choice is tested on its own.
            "forecastQuantile": 0.9,
            **spec,
        },
    }
    return Policy.model_validate(doc)


def function_policy(name: str = "fn", fallback: dict[str, Any] | None = None, **warm: Any) -> Policy:
    doc: dict[str, Any] = {
        "metadata": {"name": name, "namespace": "fns"},
        "spec": {
            "target": {"kind": "KnativeService", "name": name, "namespace": "fns"},
            "demand": {"query": "q", "unit": "invocations/min", "stepSeconds": 60},
            "capacityPerReplica": 1.0,
            "workloadClass": "function",
            "warmPool": {"enabled": True, "memoryMbPerInstance": 200, **warm},
            "fallback": fallback or {},
        },
    }
    return Policy.model_validate(doc)


def flat_forecast(ref: WorkloadRef, origin: float, level: float, steps: int = 90, step_s: float = 10.0) -> Forecast:
    base = np.full(steps, level, dtype=np.float64)
    return Forecast(ref, origin, step_s, {0.5: base * 0.8, 0.9: base, 0.99: base * 1.2})


def invocation_forecast(
    ref: WorkloadRef, origin: float, probs: list[float], idle_s: float = 120.0
) -> InvocationForecast:
    return InvocationForecast(ref, origin, 60.0, np.asarray(probs, dtype=np.float64), idle_s, "test")
