"""Process-wide settings, grouped (kopf's ``OperatorSettings``); per-workload settings live in policies.

Every field says its unit and why its default is what it is. Values come from the defaults, then
``SCALEAHEAD_*`` environment variables (``SCALEAHEAD_LOOP__INTERVAL_S=5``), then CLI options.
"""

from __future__ import annotations

import ipaddress
import json
import logging
import os
import re
from collections.abc import Collection
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictInt, ValidationError, field_validator, model_validator

from scaleahead.errors import ConfigError

#: The variables Kubernetes sets for a Service ``scaleahead-<name>`` in the pod's namespace (service
#: links: ``SCALEAHEAD_WEBHOOK_SERVICE_HOST``, ``SCALEAHEAD_WEBHOOK_PORT``, ...): never settings. The
#: name alone does not tell: ``SCALEAHEAD_SERVER_PORT`` is also ``server.port`` one underscore short,
#: so the value must have a service link's shape too (``_is_service_link``).
_SERVICE_LINK = re.compile(
    r"^[A-Z0-9_]+?_(?:(?P<host>SERVICE_HOST)|(?P<service_port>SERVICE_PORT(?:_[A-Z0-9_]+)?)|(?P<url>PORT)"
    r"|PORT_\d+_(?:TCP|UDP|SCTP)(?:(?P<url_n>)|_(?P<proto>PROTO)|_(?P<port>PORT)|_(?P<addr>ADDR)))$"
)
_LINK_URL = re.compile(r"^(?:tcp|udp|sctp)://\[?[0-9A-Fa-f.:]+\]?:\d{1,5}$")


def _is_ip(value: str) -> bool:
    try:
        ipaddress.ip_address(value.strip())
    except ValueError:
        return False
    return True


def _is_service_link(key: str, value: str) -> bool:
    """``key=value`` is a variable Kubernetes sets for a Service, in name and in value.

    ``SCALEAHEAD_WEBHOOK_PORT=tcp://10.96.0.12:443`` is one; ``SCALEAHEAD_WEBHOOK_PORT=9443`` is
    ``webhook.port`` written with one underscore too few.
    """
    m = _SERVICE_LINK.match(key)
    if m is None:
        return False
    value = value.strip()
    if m["host"] is not None or m["addr"] is not None:
        return _is_ip(value)
    if m["service_port"] is not None or m["port"] is not None:
        return value.isascii() and value.isdigit()
    if m["proto"] is not None:
        return value in ("tcp", "udp", "sctp")
    return _LINK_URL.match(value) is not None  # {SVC}_PORT, {SVC}_PORT_443_TCP


#: No setting may be infinite or NaN: ``SCALEAHEAD_LOOP__INTERVAL_S=inf`` passed every ``gt=0`` check
#: and failed every cycle.
_NO_INF_NAN = ConfigDict(allow_inf_nan=False)


class LoopSettings(BaseModel):
    model_config = _NO_INF_NAN
    interval_s: float = Field(10.0, gt=0, description="Control interval (s): the native resolution of demand.")
    max_backoff_s: float = Field(300.0, gt=0, description="Longest per-workload back-off after errors (s).")
    history_days: float = Field(
        2.0,
        gt=0,
        le=30,
        description="History the loop reads and keeps per workload (days): 2 holds the daily pattern. The LSTM "
        "also reads the half hour around one week back, which only 7.02 days or more give it (it is trained with "
        "it; about 3.5x the history memory); shorter, that input is missing at every forecast (docs/forecaster.md).",
    )
    max_history_points: int | None = Field(
        None,
        ge=1,
        description="Most points one policy's history window (history_days at its demand.stepSeconds) may hold: "
        "a policy over it is refused (in the cluster: status Accepted False, reason Refused; from --policies "
        "files: run stops with a message) and never read, since every read of its window costs window / step "
        "points in requests, decoding and memory. The retraining window (jobs.history_days) is held to the same "
        "multiple. None: twice the points of the default 10 s step (34,560 for 2 days: steps of 5 s or more) "
        "(docs/prometheus.md, 'Points per window').",
    )
    max_moves: int = Field(
        0,
        ge=0,
        description="Rebalancing pod moves per plan (0: off). Above 0 the loop also reads nodes, pods and "
        "PDBs (RBAC: nodes list) and proposes moves once per rebalance_interval_s (docs/rebalance.md).",
    )
    rebalance_interval_s: float = Field(
        300.0, gt=0, description="Time between two plans with rebalancing moves (s), when max_moves is above 0."
    )
    rebalance_node_freed: float = Field(
        1.0,
        ge=0,
        description="Rebalancing's worth of a node left with no pods (the unit of the other rebalance_ weights: "
        "node-equivalents); 0 gives drains no precedence (docs/rebalance.md, Algorithm).",
    )
    rebalance_pair_separated: float = Field(
        0.25,
        ge=0,
        description="Rebalancing's worth of one cpu-bound/latency-critical pair of pods no longer sharing a node "
        "(node-equivalents): 0.25, four pairs are worth a freed node.",
    )
    rebalance_move_cost: float = Field(
        0.05,
        ge=0,
        description="Rebalancing's churn cost of one eviction (node-equivalents): a step is proposed only when it "
        "gains more than this per move.",
    )
    rebalance_max_peak_fraction: float = Field(
        0.9,
        gt=0,
        le=1,
        description="A node receiving a moved pod keeps its pods' forecast-peak CPU at or below this share of "
        "its allocatable CPU.",
    )
    capacity: dict[str, Annotated[StrictInt, Field(ge=0)]] = Field(
        default_factory=dict,
        description="Replicas to share under shortage: a tenant's name (spec.tenant) -> the most replicas (and "
        "warm-pool instances) its workloads may hold together, '*' -> all workloads together; as an environment "
        "variable shop=40,*=200 or a JSON object. A whole number of at least 0 (not true or false); a tenant "
        "named twice is an error. Empty: no limit (docs/planner.md).",
    )
    warm_memory_budget_mb: float | None = Field(
        None,
        gt=0,
        description="Memory all warm pools may hold together (MB): when the functions' warm-pool decisions want "
        "more, the instances that avoid the fewest expected cold starts per MB are left cold, and their reasons "
        "say so (docs/serverless.md, 'Memory across functions'). With run --shard, split among the shards. "
        "None: no limit beyond each function's own.",
    )
    namespace_quotas: bool = Field(
        True,
        description="Read each managed namespace's ResourceQuotas on pods, CPU and memory every cycle and share "
        "what they allow among the namespace's services and warm pools (a scoped quota: among those it selects) "
        "by priority and weight, instead of first come, first served.",
    )

    @field_validator("capacity", mode="before")
    @classmethod
    def _capacity_from_text(cls, value: Any) -> Any:
        """``shop=40,*=200`` (as an environment variable can give it) or a JSON object; a tenant named
        twice is an error, not a silent "last one wins"."""
        if not isinstance(value, str):
            return value
        text = value.strip()
        if text.startswith("{"):
            return json.loads(text, object_pairs_hook=_unique_tenants)
        out: dict[str, Any] = {}
        for part in filter(None, (p.strip() for p in text.split(","))):
            name, sep, count = part.partition("=")
            name, count = name.strip(), count.strip()
            if not sep or not name:
                raise ValueError(f"{part!r} is not TENANT=REPLICAS (for example shop=40,*=200)")
            if name in out:
                raise ValueError(f"tenant {name!r} is given twice ({out[name]} and {count}): give it once")
            # A whole number is read as one; anything else stays text, which the strict integer refuses.
            out[name] = int(count) if re.fullmatch(r"[+-]?\d+", count) else count
        return out


def _unique_tenants(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """A JSON object's pairs as a dict; a key written twice is an error (``json`` keeps the last one)."""
    out: dict[str, Any] = {}
    for key, count in pairs:
        if key in out:
            raise ValueError(f"tenant {key!r} is given twice ({out[key]} and {count}): give it once")
        out[key] = count
    return out


class ForecastSettings(BaseModel):
    model_config = _NO_INF_NAN
    horizon_s: float = Field(900.0, gt=0, description="Forecast horizon (s): 15 min covers start-up plus slack.")
    model: str = Field(
        "lstm",
        description="Forecaster to use: lstm, lstm_clock (the LSTM also given the 5-minute clock phase) or a "
        "baseline (docs/forecaster.md); falls back to fallback_model if unusable.",
    )
    fallback_model: str = Field(
        "seasonal_naive",
        description="Named fallback forecaster: a baseline, fitted at start-up (the best baseline by accuracy differs "
        "by trace: bench forecast's split.best_baseline).",
    )


class StorageSettings(BaseModel):
    model_config = _NO_INF_NAN
    url: str | None = Field(None, description="SQLAlchemy URL; default SQLite under $XDG_DATA_HOME/scaleahead.")
    forecast_interval_s: float = Field(
        120.0, gt=0, description="Store at most one forecast per workload per this many seconds (keeps ~0.6 MB/day)."
    )
    migration_lock_timeout_s: float = Field(
        10.0,
        gt=0,
        description="PostgreSQL: how long a schema migration waits for a table lock another session holds (an old "
        "replica's transaction, an idle-in-transaction psql) before it rolls back, letting that table's readers go; "
        "it tries 3 times, logging the sessions that hold locks, then fails naming them (s; docs/storage.md).",
    )


class PrometheusSettings(BaseModel):
    model_config = _NO_INF_NAN
    url: str | None = Field(None, description="Base URL of Prometheus (or Thanos, Mimir, VictoriaMetrics).")
    timeout_s: float = Field(
        30.0,
        gt=0,
        description="Per-request timeout (s). Each query is sent Prometheus' own timeout= a tenth below it (at most "
        "1 s below: 29 s by default), so the server stops an expensive query instead of finishing it for nobody; "
        "a policy's query that timed out is not retried (docs/prometheus.md, Timeouts).",
    )
    max_concurrency: int = Field(8, ge=1, description="Parallel range queries.")
    bearer_token_file: str | None = Field(
        None, description="File holding a bearer token, re-read on every request (rotated tokens keep working)."
    )
    username: str | None = Field(None, description="Basic-auth user (with password_file).")
    password_file: str | None = Field(None, description="File holding the basic-auth password.")
    ca_file: str | None = Field(None, description="PEM bundle that verifies the server's certificate.")
    cert_file: str | None = Field(None, description="Client certificate for mutual TLS (with key_file).")
    key_file: str | None = Field(None, description="Client key for mutual TLS.")
    accept_partial: bool = Field(
        False,
        description=(
            "Use answers that warn they may be partial (Thanos with a store down, a failed remote read) as if "
            "complete; off, such an answer fails its workloads' read and the planner falls back."
        ),
    )


#: ``actuation.concurrent_writes``' upper bound (``bench control-plane --concurrent-writes`` too).
MAX_CONCURRENT_WRITES = 32


class ActuationSettings(BaseModel):
    model_config = _NO_INF_NAN
    dry_run: bool = Field(
        False,
        description="Apply nothing: plans are recorded and each change journaled 'dry-run' with its diff.",
    )
    paused: bool = Field(False, description="Kill switch: plan and record, but apply nothing.")
    max_plan_age_s: float = Field(30.0, gt=0, description="Refuse to apply a plan older than this (s).")
    human_edit_hold_s: float = Field(
        3600.0, ge=0, description="Leave a field someone else edited alone this long before managing it again (s)."
    )
    max_conflict_retries: int = Field(3, ge=0, description="Re-reads after a 409 before an action counts as failed.")
    concurrent_writes: int = Field(
        4,
        ge=1,
        le=MAX_CONCURRENT_WRITES,
        description="Kubernetes API requests of one plan in flight at once, at most one per namespace (1: one "
        "action at a time). Each action is still read, checked, journaled and written in order within its "
        "namespace, the most urgent first; only the requests overlap (docs/actuator.md, 'Throughput'). "
        "Reconciliation reads this many rows' objects at once.",
    )
    drain_fence_s: float = Field(
        900.0,
        ge=0,
        le=86400,
        description="Before the first write of a plan with a rebalancing drain, the drained node gets the taint "
        "scaleahead.io/draining:NoSchedule for this long (s), so that no new pod (a moved pod's replacement, "
        "a scale-up's of the same plan) is scheduled onto the node being freed while the cluster autoscaler "
        "removes it: keep it above the autoscaler's --scale-down-unneeded-time (10 min by default) plus the "
        "pods' termination. A drain the plan does not complete is unfenced at once; a fence whose time is over "
        "is lifted after the leader's next plan's writes. Set by 'scaleahead run' with loop.max_moves above 0 "
        "(not with --once or --ticks). 0: no fences (docs/rebalance.md, 'Drain fences'). Needs 'get' and "
        "'patch' on nodes (deploy/components/rebalance).",
    )
    reconcile_retry_s: float = Field(
        60.0,
        ge=0,
        description="While journaled actions stay 'planned' because their objects could not be read when the "
        "leader reconciled them (a 5xx, a 429, a timeout), reconcile them again this often (s; 0: only when "
        "a replica starts to lead, or by 'scaleahead actuator reconcile').",
    )
    release_removed_after_s: float | None = Field(
        600.0,
        ge=0,
        description="When no policy names a Knative Service whose min-scale scaleahead set, give it back the "
        "min-scale it had before scaleahead first wrote it (none: the annotation is removed; unknown for a "
        "record from before migration 0008_original: 0) after this long (s; 0: at the next check, once a "
        "minute), if it still holds the value scaleahead wrote; never (null): keep it (docs/serverless.md, "
        "'Removing a function's policy').",
    )

    @field_validator("release_removed_after_s", mode="before")
    @classmethod
    def _never(cls, value: Any) -> Any:
        """``never`` (or ``null``, ``none``), as an environment variable can say None."""
        if isinstance(value, str) and value.strip().lower() in ("never", "null", "none"):
            return None
        return value

    request_timeout_s: float = Field(10.0, gt=0, description="Timeout of one Kubernetes API request (s).")
    cross_namespace_targets: bool = Field(
        False,
        description="Let a PredictiveScalingPolicy object scale a workload of another namespace than its own "
        "(spec.target.namespace). Off, such an object is refused (status Accepted False, reason Refused): "
        "scaleahead may scale workloads in every namespace, so anyone allowed to create policies in one "
        "namespace could otherwise scale the workloads of all (docs/operations.md, Security). Policy files "
        "(--policies) are the operator's and may always name any namespace.",
    )
    tenant_from_namespace: bool = Field(
        True,
        description="A PredictiveScalingPolicy object's tenant (the name loop.capacity limits) is its own namespace: "
        "one without spec.tenant (or with 'default') gets its namespace, one naming another tenant is refused "
        "(status Accepted False, reason Refused), so no policy escapes its namespace's limit or draws on another's. "
        "Off: the tenant is whatever spec.tenant says, for clusters where only the operators create policies "
        "(docs/operations.md, Security). Policy files (--policies) are the operator's and are not bound.",
    )
    max_policy_priority: int | None = Field(
        None,
        description="A PredictiveScalingPolicy object whose spec.priority is above this is refused (reason "
        "Refused): a higher priority is served in full first under shortage, so an unbounded one lets any "
        "policy author take a shared capacity. None: no bound (docs/operations.md, Security). Policy files are "
        "not bound.",
    )
    max_policy_weight: float | None = Field(
        None,
        gt=0,
        description="A PredictiveScalingPolicy object whose spec.weight is above this is refused (reason Refused): "
        "the weight decides the share of a shared capacity within a priority. None: no bound "
        "(docs/operations.md, Security). Policy files are not bound.",
    )
    min_policy_memory_mb_per_instance: float | None = Field(
        None,
        gt=0,
        description="A PredictiveScalingPolicy object of a function with a warm pool whose "
        "warmPool.memoryMbPerInstance is below this is refused (reason Refused): the declared memory decides "
        "the function's share of loop.warm_memory_budget_mb. None: no bound (docs/operations.md, Security). "
        "Policy files are not bound.",
    )
    policy_floors_within_capacity: bool = Field(
        True,
        description="The minReplicas of a tenant's PredictiveScalingPolicy objects together may not exceed the "
        "tenant's loop.capacity entry, nor '*': floors are served before any limit, so one above would pass it. "
        "The objects planned before, then the oldest, keep theirs; one that does not fit is refused (reason "
        "Refused). Off: floors are not bounded (docs/operations.md, Security). Policy files are not bound.",
    )
    namespace: str = Field(
        "scaleahead",
        description="Namespace of scaleahead's own objects: the leader Lease and the kill-switch ConfigMap.",
    )
    kill_switch_configmap: str = Field(
        "scaleahead-kill-switch",
        description="ConfigMap whose data.paused='true' pauses all actuation. The shipped Role grants get on "
        "this name only (deploy/base/rbac.yaml, resourceNames): rename it there too.",
    )
    lease_name: str = Field(
        "scaleahead-leader",
        description="Lease for leader election between replicas (run --shard i/N appends -shard-i-of-N).",
    )
    lease_duration_s: int = Field(
        15,
        ge=1,
        description="A leader that has not renewed for this long is replaced (s); more than request_timeout_s, "
        "since a write starts only with at least one request timeout of the lease left.",
    )

    @model_validator(mode="after")
    def _lease_outlasts_a_request(self) -> ActuationSettings:
        if self.lease_duration_s <= self.request_timeout_s:
            raise ValueError(
                f"lease_duration_s ({self.lease_duration_s}) must be more than request_timeout_s "
                f"({self.request_timeout_s:g}): a write starts only with a request timeout of the lease left, "
                "so no write could ever start"
            )
        return self


class JobSettings(BaseModel):
    """The daemon's scheduled jobs (cron expressions in UTC, APScheduler's ``CronTrigger`` syntax)."""

    model_config = _NO_INF_NAN
    retrain_in_process: bool = Field(
        True, description="Retrain inside the daemon; false when the retraining CronJob (deploy/) does it instead."
    )
    retrain_cron: str = Field(
        "0 3 * * *", description="When to retrain (cron, UTC): daily at 03:00, a quiet hour for most services."
    )
    history_days: float = Field(
        7.0, gt=0, description="History a retraining fits on (days): a week holds both daily and weekly patterns."
    )
    drift_ratio: float = Field(
        1.5,
        gt=0,
        description="Retrain early when the live forecast error (WAPE of the median over matured forecasts) "
        "exceeds this many times the error the production model scored on held-out history at start-up: "
        "1.5 leaves room for day-to-day noise.",
    )
    drift_threshold: float = Field(
        1.0,
        gt=0,
        description="Absolute live WAPE that triggers retraining when no reference error is known.",
    )
    drift_min_forecasts: int = Field(
        20, ge=1, description="Matured forecasts needed before drift may trigger a retraining (avoids noise)."
    )
    drift_cooldown_s: float = Field(
        3600.0, ge=0, description="Least time between two drift-triggered retrainings (s): one model per hour at most."
    )
    error_sample_interval_s: float = Field(
        300.0, gt=0, description="Keep one forecast per workload per this many seconds to measure live error (s)."
    )
    rollout_mode: Literal["shadow", "canary", "ab"] = Field(
        "shadow", description="Mode of the rollout a retrained model enters as challenger (shadow, canary or ab)."
    )
    retrain_allow_failed_reads: bool = Field(
        False,
        description="Retrain even when the history of some workloads could not be read (Prometheus failing for "
        "them): the model is fitted on the others and lists them in its metrics (left_out). False refuses such a "
        "retraining, so a model fitted on part of the workloads never supersedes the running retrained rollout.",
    )
    record_outcomes: bool = Field(
        True,
        description="Record each service's measured outcome (steps short of capacity, capacity run, demand, forecast "
        "error) per 5-minute bucket in the database (table outcomes), with the rollout arm that acted: what "
        "`scaleahead rollout evaluate --measured` and evaluate_canaries compare.",
    )
    evaluate_canaries: bool = Field(
        False,
        description="The leader evaluates every running canary it follows on the measured outcomes once its window "
        "has passed, as `scaleahead rollout evaluate --measured` does: it advances, promotes or rolls back without a "
        "person (a retraining's canary too, with rollout_mode canary). False leaves that to the operator.",
    )
    outcome_retention_days: float = Field(
        3.0,
        gt=0,
        description="Recorded outcomes older than this are deleted (days): a canary's baselines need the day "
        "before its window (about 5.8 million rows a day for 10,000 services).",
    )
    report_cron: str = Field("5 0 * * *", description="When to write the daily accuracy report (cron, UTC).")
    report_dir: str | None = Field(
        None,
        description="Folder for daily accuracy reports (JSON); default: reports/ under --artifacts, else logged only.",
    )
    prune_cron: str = Field("30 0 * * *", description="When to prune old records (cron, UTC).")

    @field_validator("retrain_cron", "report_cron", "prune_cron")
    @classmethod
    def _cron(cls, value: str) -> str:
        # Checked with the settings (at start, before any database or history is touched), with
        # the parser the scheduler uses.
        from scaleahead.cronexpr import parse_cron

        try:
            parse_cron(value)  # cron's meaning: 0 and 7 are Sunday; both day fields: either matches
        except ValueError as exc:
            raise ValueError(f"not a cron expression ({exc}); use five fields, e.g. '0 3 * * *' (03:00 UTC)") from exc
        return value

    forecast_retention_days: float = Field(
        14.0, gt=0, description="Stored forecasts older than this are deleted (days): two weeks for comparisons."
    )
    plan_retention_days: float = Field(
        90.0,
        gt=0,
        description=(
            "Plans and their journaled actions older than this are deleted (days): a quarter of audit; so are pod "
            "steers no longer pending, and the recorded risk-adaptation steps of workloads without a policy not "
            "written for as long."
        ),
    )
    model_retention_days: float = Field(
        30.0,
        gt=0,
        description=(
            "Stored checkpoints of model versions older than this are deleted (days), unless the version is a "
            "champion, an arm of a running rollout or one of the newest keep_retired_models former champions; a "
            "former champion's age counts from when it was retired."
        ),
    )
    keep_retired_models: int = Field(
        3,
        ge=0,
        description=(
            "Former champions per model family (the most recently retired) that keep their checkpoint whatever "
            "their age (rollbacks)."
        ),
    )


class ServerSettings(BaseModel):
    """The HTTP endpoint with ``/metrics``, ``/healthz`` and ``/readyz``."""

    model_config = _NO_INF_NAN
    host: str = Field(
        "0.0.0.0",  # noqa: S104
        description="Listen address of the metrics and health endpoint ('::': IPv6, and IPv4 where the host allows).",
    )
    port: int = Field(8080, ge=0, le=65535, description="Port of the metrics and health endpoint (0: any free port).")
    stale_after_intervals: float = Field(
        6.0, gt=0, description="/healthz fails when no tick happened for this many control intervals."
    )


class WebhookSettings(BaseModel):
    """The mutating admission webhook that steers replacements of moved pods (docs/adr/0009)."""

    model_config = _NO_INF_NAN
    enabled: bool = Field(
        False, description="Serve the pod steering webhook and record steers before moving owned pods."
    )
    host: str = Field(
        "0.0.0.0",  # noqa: S104
        description="Listen address of the webhook (HTTPS; '::': IPv6, and IPv4 where the host allows).",
    )
    port: int = Field(8443, ge=0, le=65535, description="Port of the webhook (0: any free port).")
    cert_file: str = Field(
        "/etc/scaleahead/webhook/tls.crt",
        description="TLS certificate the API server trusts (PEM; deploy/webhook/gen-cert.sh makes one, "
        "docs/operations.md, Install).",
    )
    key_file: str = Field("/etc/scaleahead/webhook/tls.key", description="Private key of cert_file (PEM).")
    client_ca_file: str = Field(
        "",
        description="CA bundle (PEM) that signs the client certificate the API server presents (its "
        "admission configuration's kubeConfigFile; deploy/webhook/gen-client-cert.sh makes one): when set, "
        "a client without a certificate signed by it is refused before any review is read. Empty: no "
        "client authentication, anyone who can reach the port can send reviews (docs/actuator.md, Steering).",
    )
    client_name: str = Field(
        "",
        description="When set (with client_ca_file), the client certificate's subject CN or one of its DNS "
        "names must be this name; needed when client_ca_file also signs other clients' certificates.",
    )
    affinity: Literal["required", "preferred"] = Field(
        "required",
        description="Node affinity given to a steered pod: required pins it (it may wait Pending if the "
        "node filled up), preferred (weight 100) lets the scheduler fall back to another node.",
    )
    steer_ttl_s: float = Field(
        300.0,
        gt=0,
        description="A steer not consumed by a new pod within this time expires and is reported (s); "
        "controllers replace an evicted pod within seconds.",
    )

    @model_validator(mode="after")
    def _client_name_needs_a_ca(self) -> WebhookSettings:
        if self.client_name.strip() and not self.client_ca_file.strip():
            raise ValueError(
                f"client_name ({self.client_name!r}) is set but client_ca_file ('') is not: a name is only "
                "checked on a client certificate verified against client_ca_file"
            )
        return self


class LogSettings(BaseModel):
    model_config = _NO_INF_NAN
    format: Literal["json", "text"] = Field(
        "json", description="json (one object per line, for log pipelines) or text."
    )
    level: str = Field(
        "INFO", description="Log level: DEBUG, INFO, WARNING, ERROR or CRITICAL (any case; Python logging's names)."
    )

    @field_validator("level")
    @classmethod
    def _known_level(cls, value: str) -> str:
        """One of Python logging's level names (``logging.getLevelNamesMapping``), upper-cased."""
        name = value.strip().upper()
        if name not in logging.getLevelNamesMapping():
            raise ValueError(f"{value!r} is not a log level: use DEBUG, INFO, WARNING, ERROR or CRITICAL (any case)")
        return name


class Settings(BaseModel):
    loop: LoopSettings = Field(default_factory=LoopSettings)
    forecast: ForecastSettings = Field(default_factory=ForecastSettings)
    storage: StorageSettings = Field(default_factory=StorageSettings)
    prometheus: PrometheusSettings = Field(default_factory=PrometheusSettings)
    actuation: ActuationSettings = Field(default_factory=ActuationSettings)
    jobs: JobSettings = Field(default_factory=JobSettings)
    server: ServerSettings = Field(default_factory=ServerSettings)
    webhook: WebhookSettings = Field(default_factory=WebhookSettings)
    log: LogSettings = Field(default_factory=LogSettings)

    @classmethod
    def _fields_of(cls, group: str) -> dict[str, Any]:
        """The fields of settings group ``group`` (none for a field that is not a group)."""
        sub = cls.model_fields[group].annotation
        return dict(sub.model_fields) if isinstance(sub, type) and issubclass(sub, BaseModel) else {}

    @classmethod
    def from_env(cls, environ: dict[str, str] | None = None, known_models: Collection[str] | None = None) -> Settings:
        """Defaults overridden by ``SCALEAHEAD_GROUP__FIELD`` environment variables.

        ``known_models``: the forecasters that can be built (``forecaster.registry.available_models()``,
        given by the composition root: settings import no adapter, and the registry can gain models);
        ``forecast.model`` and ``forecast.fallback_model`` must be among them, else a ``ConfigError``
        naming the variable and the known models, before any work.
        """
        env = os.environ if environ is None else environ
        data: dict[str, dict[str, Any]] = {}
        names: dict[tuple[str, str], str] = {}
        for key, value in env.items():
            if key.startswith("SCALEAHEAD_") and "__" not in key and not _is_service_link(key, value):
                # SCALEAHEAD_ACTUATION_DRY_RUN: a real setting one underscore short, never ignored. Only
                # real group and field names: Kubernetes gives pods SCALEAHEAD_WEBHOOK_SERVICE_HOST and
                # the like for the Services of the namespace (service links), which are not settings; a
                # service link's name with another value (SCALEAHEAD_SERVER_PORT=9090) is a setting.
                head = key.removeprefix("SCALEAHEAD_").lower()
                for group in cls.model_fields:
                    if head.startswith(group + "_") and head.removeprefix(group + "_") in cls._fields_of(group):
                        link = (
                            f" ({key} is also the name of a Kubernetes service-link variable, but {value!r} is not "
                            "the value of one)"
                            if _SERVICE_LINK.match(key)
                            else ""
                        )
                        raise ConfigError(
                            f"Unknown setting {key}: a group and its field are joined by two underscores{link}.",
                            f"Did you mean SCALEAHEAD_{group.upper()}__{head.removeprefix(group + '_').upper()}? "
                            "(docs/configuration.md)",
                        )
            if key.startswith("SCALEAHEAD_") and "__" in key:
                group, field = key.removeprefix("SCALEAHEAD_").lower().split("__", 1)
                groups = cls.model_fields
                if group not in groups:
                    raise ConfigError(
                        f"Unknown setting {key}: there is no settings group {group!r}.",
                        f"Groups: {', '.join(groups)} (docs/configuration.md lists every SCALEAHEAD_GROUP__FIELD).",
                    )
                fields = cls._fields_of(group)
                if field not in fields:
                    raise ConfigError(
                        f"Unknown setting {key}: group {group!r} has no field {field!r}.",
                        f"Fields of {group}: {', '.join(fields)} (docs/configuration.md).",
                    )
                data.setdefault(group, {})[field] = value
                names[(group, field)] = key
        try:
            settings = cls.model_validate(data)
        except ValidationError as exc:
            lines = []
            for err in exc.errors():
                loc = tuple(str(x) for x in err["loc"])
                if len(loc) < 2:  # a rule across a group's fields: the variables it names
                    msg_fields = set(re.findall(r"\b[a-z_]+(?= \()", str(err["msg"])))
                    group_vars = sorted(v for (g, f), v in names.items() if loc and g == loc[0] and f in msg_fields)
                    msg = str(err["msg"]).removeprefix("Value error, ")
                    lines.append(f"{', '.join(group_vars) or '.'.join(loc)}: {msg}")
                    continue
                key = names.get((loc[0], loc[1]), ".".join(loc))
                key += "".join(f"[{x}]" for x in loc[2:]) if (loc[0], loc[1]) in names else ""
                lines.append(f"{key}={err.get('input')!r}: {err['msg']}")
            raise ConfigError(
                "Invalid setting(s) from the environment: " + "; ".join(lines) + ".",
                "Fix or unset the variable (docs/configuration.md gives each field's type and default).",
            ) from exc
        if known_models is not None:
            unknown = [
                f"{names.get(('forecast', f), f'forecast.{f}')}={name!r}"
                for f, name in (
                    ("model", settings.forecast.model),
                    ("fallback_model", settings.forecast.fallback_model),
                )
                if name not in known_models
            ]
            if unknown:
                raise ConfigError(
                    f"Unknown model(s) in the settings: {'; '.join(unknown)}.",
                    f"Known models: {', '.join(sorted(known_models))} (docs/forecaster.md); fix or unset the variable.",
                )
        return settings
