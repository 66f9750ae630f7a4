"""Process-wide settings, grouped (kopf's ``OperatorSettings``); per-workload settings live in policies.

Every field says its unit and why its default is what it is. Values come from the defaults, then
``SCALEAHEAD_*`` environment variables (``SCALEAHEAD_LOOP__INTERVAL_S=5``), then CLI options.
"""

from __future__ import annotations

import os
from typing import Any

from pydantic import BaseModel, Field


class LoopSettings(BaseModel):
    interval_s: float = Field(10.0, gt=0, description="Control interval (s): the native resolution of demand.")
    max_backoff_s: float = Field(300.0, gt=0, description="Longest per-workload back-off after errors (s).")


class ForecastSettings(BaseModel):
    horizon_s: float = Field(900.0, gt=0, description="Forecast horizon (s): 15 min covers start-up plus slack.")
    model: str = Field("lstm", description="Forecaster to use; falls back to fallback_model if unusable.")
    fallback_model: str = Field("seasonal_naive", description="Named fallback forecaster (best baseline).")


class StorageSettings(BaseModel):
    url: str | None = Field(None, description="SQLAlchemy URL; default SQLite under $XDG_DATA_HOME/scaleahead.")
    forecast_interval_s: float = Field(
        120.0, gt=0, description="Store at most one forecast per workload per this many seconds (keeps ~0.6 MB/day)."
    )


class PrometheusSettings(BaseModel):
    url: str | None = Field(None, description="Base URL of Prometheus (or Thanos, Mimir, VictoriaMetrics).")
    timeout_s: float = Field(30.0, gt=0, description="Per-request timeout (s).")
    max_concurrency: int = Field(8, ge=1, description="Parallel range queries.")


class ActuationSettings(BaseModel):
    dry_run: bool = Field(False, description="Print what would change; write nothing.")
    paused: bool = Field(False, description="Kill switch: plan and record, but apply nothing.")
    max_plan_age_s: float = Field(30.0, gt=0, description="Refuse to apply a plan older than this (s).")
    human_edit_hold_s: float = Field(
        3600.0, ge=0, description="Leave a field someone else edited alone this long before managing it again (s)."
    )
    max_conflict_retries: int = Field(3, ge=0, description="Re-reads after a 409 before an action counts as failed.")
    request_timeout_s: float = Field(10.0, gt=0, description="Timeout of one Kubernetes API request (s).")
    namespace: str = Field(
        "scaleahead",
        description="Namespace of scaleahead's own objects: the leader Lease and the kill-switch ConfigMap.",
    )
    kill_switch_configmap: str = Field(
        "scaleahead-kill-switch", description="ConfigMap whose data.paused='true' pauses all actuation."
    )
    lease_name: str = Field("scaleahead-leader", description="Lease for leader election between replicas.")
    lease_duration_s: int = Field(15, ge=1, description="A leader that has not renewed for this long is replaced (s).")


class Settings(BaseModel):
    loop: LoopSettings = Field(default_factory=LoopSettings)
    forecast: ForecastSettings = Field(default_factory=ForecastSettings)
    storage: StorageSettings = Field(default_factory=StorageSettings)
    prometheus: PrometheusSettings = Field(default_factory=PrometheusSettings)
    actuation: ActuationSettings = Field(default_factory=ActuationSettings)

    @classmethod
    def from_env(cls, environ: dict[str, str] | None = None) -> Settings:
        """Defaults overridden by ``SCALEAHEAD_GROUP__FIELD`` environment variables."""
        env = os.environ if environ is None else environ
        data: dict[str, dict[str, Any]] = {}
        for key, value in env.items():
            if key.startswith("SCALEAHEAD_") and "__" in key:
                group, field = key.removeprefix("SCALEAHEAD_").lower().split("__", 1)
                data.setdefault(group, {})[field] = value
        return cls.model_validate(data)
