"""The per-workload policy: one schema for the YAML file (CLI) and the CRD (in cluster).

A policy file is a Kubernetes-style object::

    apiVersion: scaleahead.io/v1alpha1
    kind: PredictiveScalingPolicy
    metadata: {name: web, namespace: default}
    spec: {...}

A file may hold several documents (``---``). Field names are camelCase, as in the CRD. Errors
name the file, the line and the field (``ConfigError``).

Numbers are checked as a person means them: an integer field takes an integer (not ``true`` nor
``"3"``), a number field takes an integer or a float (not a boolean nor a string), and neither takes
``.inf`` or ``.nan``. A boolean field takes ``true`` or ``false`` only (not ``"yes"``, ``"true"``,
``1`` nor null); an unquoted ``yes``/``on``/``no``/``off`` is a YAML 1.1 boolean, read as one by the
YAML parser before any field sees it. A key repeated in one mapping and a workload targeted by two
policies are errors, not a silent "last one wins". ``1e3`` is a number, as in JSON and YAML 1.2
(PyYAML alone reads it as a string).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PrivateAttr,
    ValidationError,
    model_validator,
)
from pydantic.alias_generators import to_camel
from pydantic_core import PydanticCustomError

from scaleahead.errors import ConfigError
from scaleahead.types import WorkloadRef

API_VERSION: Literal["scaleahead.io/v1alpha1"] = "scaleahead.io/v1alpha1"
KIND: Literal["PredictiveScalingPolicy"] = "PredictiveScalingPolicy"


#: Longest ``startupSeconds`` (s): a day. Longer is a typo (``1e12``) rather than a start-up, and any
#: start-up beyond the forecast horizon (``forecast.horizon_s``) already plans on the fallback.
MAX_STARTUP_SECONDS = 86400.0
#: Replica and instance counts are int32 in the Kubernetes API (and far beyond any cluster).
MAX_INT32 = 2**31 - 1
#: Longest ``rolloutGroup``: the width of ``rollouts.group`` (storage/schema.py; a test checks they
#: agree). A longer one failed every retraining on PostgreSQL after it had registered the model.
MAX_ROLLOUT_GROUP = 128
#: Shortest ``demand.stepSeconds`` (s). Every read of a policy's window costs window / step points: at
#: 0.001 s the 2-day window was 172.8 M points, 15,710 requests and 3 GB, so one policy object got the
#: controller (2 GiB) OOM-killed at every start and no workload was scaled (until 2026-12-06 any step
#: above 0 was accepted). ``history_points_refusal`` bounds the points of a window at any step.
MIN_STEP_SECONDS = 1.0
#: The default ``demand.stepSeconds`` (s): what a window's points are counted against by default.
DEFAULT_STEP_SECONDS = 10.0
#: Unless the operator sets a limit (``loop.max_history_points``), a window may hold this many times
#: the points of the default step: a policy costs at most twice a default one (steps of 5 s or more).
DEFAULT_POINTS_FACTOR = 2.0


def _spelt(value: Any) -> str:
    """``value`` as it was written in YAML (``true``, ``'3'``), for error messages."""
    return str(value).lower() if isinstance(value, bool) else repr(value)


def _no_bool_or_text(kind: str) -> BeforeValidator:
    """Reject the booleans and strings pydantic would otherwise coerce to ``kind`` (1, 3.0 pass)."""
    article = "an" if kind[0] in "aeiou" else "a"

    def check(value: Any) -> Any:
        if isinstance(value, bool):
            raise PydanticCustomError(
                f"{kind}_type", f"Input should be {article} {kind}, not the boolean {{value}}", {"value": _spelt(value)}
            )
        if isinstance(value, str | bytes):
            hint = ""
            try:  # a quoted number: written without quotes it is one (nan and inf are refused as numbers too)
                if math.isfinite(float(value)):
                    hint = " (write it without quotes)"
            except ValueError:
                pass
            raise PydanticCustomError(
                f"{kind}_type",
                f"Input should be {article} {kind}, not the string {{value}}{hint}",
                {"value": _spelt(value)},
            )
        return value

    return BeforeValidator(check)


#: An integer field: ``3`` (or ``3.0``), never ``true`` nor ``"3"``.
Int = Annotated[int, _no_bool_or_text("integer")]
#: A number field: an integer or a float, never a boolean nor a string; ``.inf``/``.nan`` are
#: rejected by ``allow_inf_nan=False`` on the models.
Float = Annotated[float, _no_bool_or_text("number")]
#: ``Int`` or null (the check wraps the union, so bounds still reach the JSON schema and the CRD).
OptInt = Annotated[int | None, _no_bool_or_text("integer")]
#: ``Float`` or null.
OptFloat = Annotated[float | None, _no_bool_or_text("number")]


def _what(value: Any) -> str:
    """``value`` named as written in YAML: ``the string 'yes'``, ``the integer 1``, ``null``."""
    if value is None:
        return "null"
    if isinstance(value, str | bytes):
        return f"the string {_spelt(value)}"
    if isinstance(value, int):
        return f"the integer {value}"
    if isinstance(value, float):
        return f"the number {_spelt(value)}"
    return {"dict": "a mapping", "list": "a list"}.get(type(value).__name__, f"a {type(value).__name__}")


def _only_bool(value: Any) -> Any:
    """Reject what pydantic's lax mode would take as a boolean (``"yes"``, ``"on"``, ``1``, ``"true"``)."""
    if isinstance(value, bool):
        return value
    raise PydanticCustomError(
        "bool_type",
        "Input should be true or false, not {value} (write true or false without quotes)",
        {"value": _what(value)},
    )


#: A boolean field: YAML ``true`` or ``false`` (a JSON boolean in the custom resource), never a
#: string, a number or null.
Bool = Annotated[bool, BeforeValidator(_only_bool)]


#: ``json_schema_extra`` of a field whose absence means more than its default (a loader or validator
#: tells "unset" from the default). The API server fills a CRD's ``default`` into every object it
#: stores, so the CRD leaves these out (``scaleahead.crd``) and the object reaches the loader as written.
NO_SERVER_DEFAULT = "x-scaleahead-no-server-default"


class _Model(BaseModel):
    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, extra="forbid", frozen=True, allow_inf_nan=False
    )


class FallbackMode(StrEnum):
    """What to do when the forecast is missing, stale or unusable (KEDA's ``fallback``)."""

    REACTIVE = "reactive"  # the HPA rule on the latest observed demand (a stale one: scale out, never in)
    CURRENT = "current"  # keep the current replica count
    STATIC = "static"  # a fixed replica count (``fallback.staticReplicas``)


class WorkloadClass(StrEnum):
    SERVICE = "service"
    FUNCTION = "function"


#: A DNS-1123 label (RFC 1123): a namespace's name. Lowercase letters, digits and '-', starting and
#: ending with a letter or digit, at most 63 characters.
DNS_LABEL = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
DNS_LABEL_MAX = 63
#: A DNS-1123 subdomain: the name of a Deployment, StatefulSet or HPA. DNS labels joined by '.', at
#: most 253 characters.
DNS_SUBDOMAIN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
DNS_SUBDOMAIN_MAX = 253
_NAME_RULES = {
    "label": (
        re.compile(DNS_LABEL),
        DNS_LABEL_MAX,
        "a DNS-1123 label: lowercase letters, digits and '-', starting and ending with a letter or digit",
    ),
    "subdomain": (
        re.compile(DNS_SUBDOMAIN),
        DNS_SUBDOMAIN_MAX,
        "a DNS-1123 subdomain: lowercase letters, digits, '-' and '.', each dot-separated part starting and "
        "ending with a letter or digit",
    ),
}


def _kubernetes_name(kind: Literal["label", "subdomain"], what: str) -> AfterValidator:
    """Check a string is a Kubernetes object name of ``kind``, with a message saying what one is.

    The same rule goes into the JSON schema (and so into the CRD) as ``pattern`` and ``maxLength``
    (``_name_schema``): an object the API server takes, the loader takes, and the other way round.
    """
    pattern, longest, rule = _NAME_RULES[kind]

    def check(value: str) -> str:
        if len(value) > longest:
            raise PydanticCustomError(
                "kubernetes_name",
                f"{{value}}... ({{length}} characters) is not a Kubernetes {what}: at most {longest} characters",
                {"value": value[:20], "length": len(value)},
            )
        if not pattern.fullmatch(value):  # fullmatch: "$" also matches before a final "\n"
            raise PydanticCustomError(
                "kubernetes_name",
                f"{{value}} is not a Kubernetes {what}: it must be {rule} (at most {longest} characters)",
                {"value": repr(value)},
            )
        return value

    return AfterValidator(check)


#: A tenant's name: what ``loop.capacity`` and ``--capacity`` can give a limit to (``TENANT=REPLICAS``,
#: entries joined by ',', ``*`` for all workloads), so none of '=', ',', '*' or spaces.
TENANT = r"^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$"
TENANT_MAX = 63
_TENANT_RE = re.compile(TENANT)


def _check_tenant(value: str) -> str:
    if len(value) > TENANT_MAX or not _TENANT_RE.fullmatch(value):
        raise PydanticCustomError(
            "tenant_name",
            "{value} is not a tenant name: it must be letters, digits, '-', '_' and '.', starting and ending with "
            f"a letter or digit, at most {TENANT_MAX} characters ('*' means all workloads in loop.capacity and "
            "--capacity, whose entries are TENANT=REPLICAS joined by ',')",
            {"value": repr(value) if len(value) <= 40 else f"{value[:20]!r}... ({len(value)} characters)"},
        )
    return value


def _name_schema(kind: Literal["label", "subdomain"]) -> dict[str, Any]:
    pattern, longest, _ = _NAME_RULES[kind]
    return {"minLength": 1, "maxLength": longest, "pattern": pattern.pattern}


def to_dns_label(text: str, longest: int = DNS_LABEL_MAX, fallback: str = "x") -> str:
    """``text`` made a DNS-1123 label (a valid namespace or object name) of at most ``longest``
    characters: lowercased, every other character than an ASCII letter or digit made '-', no '-' at
    either end; ``fallback`` when nothing is left. For names built from trace or function names."""
    clean = "".join(c if c.isascii() and c.isalnum() else "-" for c in text.lower())
    clean = re.sub("-+", "-", clean)[:longest].strip("-")
    return clean or fallback


WARM_POOL_NEEDS_KNATIVE = (
    "a function's warm pool is a Knative Service's min-scale: workloadClass function with warmPool.enabled "
    "needs target.kind KnativeService (for a Deployment, leave warmPool off and it is scaled as a service)"
)
FLOOR_NEEDS_HPA = "mode floor needs target.hpaName: the HPA whose minReplicas scaleahead raises"


class Target(_Model):
    """The scaled object."""

    model_config = ConfigDict(
        json_schema_extra={
            "x-kubernetes-validations": [
                {
                    "rule": "!has(self.mode) || self.mode != 'floor' || has(self.hpaName)",
                    "message": FLOOR_NEEDS_HPA,
                    "fieldPath": ".hpaName",
                }
            ]
        }
    )

    kind: Literal["Deployment", "StatefulSet", "KnativeService"] = Field(
        "Deployment", description="Kind of the scaled object."
    )
    namespace: Annotated[str, _kubernetes_name("label", "namespace name")] = Field(
        "default",
        description="Namespace of the scaled object (a DNS-1123 label). Unset: the policy object's own namespace "
        "(metadata.namespace; default when that is unset too). A policy object in the cluster may name only its "
        "own namespace unless actuation.cross_namespace_targets allows more (docs/operations.md, Security).",
        json_schema_extra={NO_SERVER_DEFAULT: True, **_name_schema("label")},
    )
    name: Annotated[str, _kubernetes_name("subdomain", "object name")] = Field(
        ...,
        description="Name of the scaled object (a DNS-1123 subdomain).",
        json_schema_extra=_name_schema("subdomain"),
    )
    mode: Literal["direct", "floor"] = Field(
        "direct",
        description="direct: set replicas through the scale subresource; floor: set minReplicas of "
        "the HPA named by hpaName, leaving the HPA to handle the unforeseen.",
    )
    hpa_name: Annotated[str, _kubernetes_name("subdomain", "object name")] | None = Field(
        None,
        description="HPA whose minReplicas is the floor; required in mode floor.",
        json_schema_extra=_name_schema("subdomain"),
    )

    @model_validator(mode="after")
    def _check_floor(self) -> Target:
        if self.mode == "floor" and self.hpa_name is None:
            raise ValueError(f"{FLOOR_NEEDS_HPA} (in the same namespace as {self.kind} {self.name})")
        return self


class Demand(_Model):
    """Where demand comes from and in which unit."""

    query: str = Field(..., min_length=1, description="PromQL giving one series of demand.")
    unit: str = Field("req/s", description="Unit of the query's value, used in reasons.")
    step_seconds: Float = Field(
        DEFAULT_STEP_SECONDS,
        ge=MIN_STEP_SECONDS,
        description="Resolution of history and forecasts (s): the step of the Prometheus query, at least 1. A "
        "trace or series CSV given as history (plan --history, run --history trace:) must be at this step: it is "
        "not resampled, and another step is an error. The loop's history window at this step may hold at most "
        "loop.max_history_points points (by default steps of 5 s or more; docs/prometheus.md).",
    )


class Fallback(_Model):
    mode: FallbackMode = Field(FallbackMode.REACTIVE, description="Fallback mode when the forecast is unusable.")
    static_replicas: OptInt = Field(None, ge=0, le=MAX_INT32, description="Replicas in mode static.")
    stale_after_seconds: Float = Field(
        60.0,
        gt=0,
        description="History whose newest point (or a forecast whose origin) is older than this, or than "
        "one demand.stepSeconds when that is longer, is stale (s).",
    )


#: Default ``warmPool.coldStartCostMbMinutes``: chosen by ``scaleahead bench serverless --calibrate`` on the
#: history (first 360 minutes) of azure-functions-1m, never on its test period (docs/serverless.md).
DEFAULT_COLD_START_COST_MB_MINUTES = 9000.0


class WarmPool(_Model):
    """Pre-provisioned (warm) instances for functions, against cold starts."""

    enabled: Bool = Field(False, description="Manage a warm pool for this workload.")
    max_instances: Int = Field(1, ge=0, le=MAX_INT32, description="Most warm instances to keep.")
    memory_mb_per_instance: Float = Field(128.0, gt=0, description="Memory one warm instance holds (MB).")
    memory_budget_mb: OptFloat = Field(None, gt=0, description="Cap on warm memory for this workload (MB).")
    min_probability: Float = Field(
        0.0,
        ge=0,
        le=1,
        description="Floor on the probability of an invocation in the next step that keeps (or pre-warms) an "
        "instance; the break-even of coldStartCostMbMinutes decides above it. Without coldStartCostMbMinutes "
        "this alone is the rule.",
    )
    cold_start_cost_mb_minutes: OptFloat = Field(
        DEFAULT_COLD_START_COST_MB_MINUTES,
        gt=0,
        description="What one avoided cold start is worth, in MB-minutes of idle warm memory: keep warm while "
        "P(invocation in the next step) >= M / (M + this), M = memoryMbPerInstance x demand.stepSeconds / 60 (the "
        "MB-minutes one instance idles in a step). The default was chosen on the "
        "history part of azure-functions-1m to spend what a 10-minute keep-alive spends (docs/serverless.md); "
        "null: minProbability alone decides.",
    )
    keep_alive_seconds: Float = Field(
        600.0,
        ge=0,
        description=(
            "Keep-alive of the reactive fallback: warm while the last invocation is at most this old (s). With a "
            "usable forecast, its invocation probability decides each cycle instead (a function idle longer stays "
            "warm while the forecast stays above the threshold); a decision's stated keep-warm is at most this long."
        ),
    )
    keep_alive_budget_ratio: OptFloat = Field(
        1.0,
        gt=0,
        description="Warm-memory budget: re-choose coldStartCostMbMinutes every hour (for all functions with the "
        "same budget at once) so that idle warm memory stays at this multiple of what a fixed keep-alive of "
        "referenceKeepAliveSeconds would waste on the same invocations; coldStartCostMbMinutes is the cost until "
        "the first choice (docs/serverless.md, 'Warm-memory budget'). null: coldStartCostMbMinutes is fixed.",
    )
    reference_keep_alive_seconds: Float = Field(
        600.0, gt=0, description="The fixed keep-alive keepAliveBudgetRatio is measured against (s)."
    )


class StartupLearning(_Model):
    """Learn the start-up delay from observed readiness times (docs/planner.md, "Learned start-up delay")."""

    enabled: Bool = Field(
        True,
        description="Plan with the start-up delay observed in the cluster (pod created -> Ready) once minSamples "
        "readiness times exist; startupSeconds is used until then.",
    )
    quantile: Float = Field(
        0.9, gt=0, le=1, description="Quantile of the recent readiness times to plan with (0.9: p90)."
    )
    min_samples: Int = Field(5, ge=1, description="Fewest readiness times before the learned delay is used.")
    window: Int = Field(50, ge=1, description="Most recent readiness times the quantile is taken over.")
    max_seconds: Float = Field(
        900.0,
        gt=0,
        description="Longest believable start-up (s); a longer readiness time (a flapping or restarted pod) is "
        "dropped.",
    )
    allow_shorter: Bool = Field(
        False,
        description="Let a learned delay below startupSeconds replace it (false: startupSeconds is a floor; "
        "a longer learned delay always replaces it).",
    )

    @model_validator(mode="after")
    def _check_window(self) -> StartupLearning:
        if self.min_samples > self.window:
            raise ValueError(f"minSamples ({self.min_samples}) must not exceed window ({self.window})")
        return self


class RiskAdaptation(_Model):
    """Raise sloRisk while a service runs short more often than a reactive HPA would (docs/planner.md)."""

    enabled: Bool = Field(
        True,
        description="Once per periodSeconds, compare the last windowSeconds with an HPA simulated on the same observed "
        "demand: raise sloRisk by stepFactor while the service ran short on more than violationRatio x the HPA's "
        "short steps and spent at most costRatio x its replica-seconds; lower it back (never below sloRisk) when it "
        "spent more, or ran short on at most a quarter of that. Services with forecastQuantile are not adapted.",
    )
    violation_ratio: Float = Field(0.5, ge=0, description="Short steps allowed, as a multiple of the HPA's.")
    cost_ratio: Float = Field(1.0, gt=0, description="Replica-seconds allowed, as a multiple of the HPA's.")
    reference_utilization: Float = Field(
        0.7, gt=0, le=1, description="Target utilization of the simulated HPA (the usual 70 %)."
    )
    window_seconds: Float = Field(86400.0, gt=0, description="Past compared at each decision (s).")
    period_seconds: Float = Field(3600.0, gt=0, description="Time between two decisions (s).")
    step_factor: Float = Field(1.25, gt=1, description="sloRisk is multiplied or divided by this per decision.")
    max_factor: Float = Field(
        64.0, ge=1, description="Cap on the multiple of sloRisk: the highest power of stepFactor not above it."
    )

    @model_validator(mode="after")
    def _check_window(self) -> RiskAdaptation:
        if self.window_seconds < self.period_seconds:
            raise ValueError(
                f"windowSeconds ({self.window_seconds:g}) must be at least periodSeconds ({self.period_seconds:g})"
            )
        return self


class RampFloor(_Model):
    """Never below what a steady rise of the observed demand needs when a replica started now is ready."""

    window_seconds: Float = Field(
        300.0,
        ge=0,
        description="Fit a straight line to the observed demand of this last window (s); while it rises "
        "significantly, provision for where it leads by the end of the first interval a replica asked for now "
        "serves (now + startup + one interval). 0 turns the ramp floor off; a window of fewer than 3 samples "
        "(e.g. the default 300 s at 5-minute steps) fits no line. Given explicitly, such a window is refused; "
        "unset, it only leaves the ramp floor off at such steps.",
        json_schema_extra={NO_SERVER_DEFAULT: True},
    )
    min_t_stat: Float = Field(
        3.0,
        gt=0,
        description="How significant the rise must be: the fitted slope over its standard error (a t statistic).",
    )


class Objective(_Model):
    """Weights of the planner's single objective (see docs/planner.md)."""

    cost: Float = Field(1.0, ge=0, description="Weight of one replica-second.")
    slo_risk: Float = Field(
        80.0,
        ge=0,
        description=(
            "Weight of one second in which demand exceeds what the replicas serve at targetUtilization, in "
            "the unit of cost: at 80 a second short is worth 80 replica-seconds. Sets the forecast quantile "
            "services are provisioned at, unless forecastQuantile is given."
        ),
    )
    churn: Float = Field(
        0.1,
        ge=0,
        description="Weight of one scale event, in the unit of cost: a scale-down is made only when the "
        "replica-seconds it saves over the stabilization window are at least two events' weight.",
    )
    fairness: Float = Field(
        1.0,
        ge=0,
        description="Inequality aversion (alpha) of sharing under shortage, within a priority: 1 shares in "
        "proportion to the weights (weighted max-min), higher evens the shares out whatever the weights (max-min "
        "as it grows), 0 serves the highest weight first. A shared capacity uses the largest among its "
        "workloads' policies.",
    )
    risk_adaptation: RiskAdaptation = Field(default_factory=RiskAdaptation)  # type: ignore[arg-type]
    #: The policy's own sloRisk when ``slo_risk`` is the risk adaptation's (``planner.risk.with_slo_risk``),
    #: so that a reason can say so; None for a policy as written. Not a field: not in the CRD or
    #: any file.
    _slo_risk_policy: float | None = PrivateAttr(default=None)


class PolicySpec(_Model):
    target: Target
    demand: Demand
    capacity_per_replica: Float = Field(
        ..., gt=0, description="Demand one ready replica serves at 100 % utilization (demand units)."
    )
    target_utilization: Float = Field(0.9, gt=0, le=1, description="Share of capacity to plan for.")
    min_replicas: Int = Field(1, ge=0, le=MAX_INT32, description="Fewest replicas.")
    max_replicas: Int = Field(100, ge=1, le=MAX_INT32, description="Most replicas.")
    startup_seconds: Float = Field(
        60.0,
        ge=0,
        le=MAX_STARTUP_SECONDS,
        description="Lead time: a new replica is ready after this (s), at most a day; replaced by the observed "
        "delay when startupLearning has enough readiness times. The forecast must reach this far ahead "
        "(forecast.horizon_s, 900 s by default): beyond it every decision is the fallback ('forecast too short').",
    )
    startup_learning: StartupLearning = Field(default_factory=StartupLearning)  # type: ignore[arg-type]
    scale_down_stabilization_seconds: Float = Field(
        60.0,
        ge=0,
        description=(
            "Scale down only to the highest desired count over this window (s); with a usable forecast, at most "
            "what its top quantile (p99) needs over the window, so a count set for a spike the forecast now rules "
            "out is released (docs/planner.md)."
        ),
    )
    observed_window_seconds: Float = Field(
        60.0,
        ge=0,
        description="The reactive floor reads demand averaged over this last window (s), like the HPA's 60 s "
        "metric window; 0 = the last sample alone.",
    )
    ramp_floor: RampFloor = Field(default_factory=RampFloor)  # type: ignore[arg-type]
    max_step_up: Int = Field(100, ge=1, le=MAX_INT32, description="Most replicas added in one decision.")
    max_step_down: Int = Field(100, ge=1, le=MAX_INT32, description="Most replicas removed in one decision.")
    forecast_quantile: OptFloat = Field(
        None,
        gt=0,
        lt=1,
        description="Provision at this fixed forecast quantile instead of the one the objective chooses.",
    )
    fallback: Fallback = Field(default_factory=Fallback)  # type: ignore[arg-type]
    workload_class: WorkloadClass = Field(WorkloadClass.SERVICE, description="service or function.")
    warm_pool: WarmPool = Field(default_factory=WarmPool)  # type: ignore[arg-type]
    rollout_group: str = Field(
        "default",
        min_length=1,
        max_length=MAX_ROLLOUT_GROUP,
        description="Rollouts of models and policies act per group.",
    )
    tenant: Annotated[str, AfterValidator(_check_tenant)] = Field(
        "default",
        description="Tenant for fair sharing under shortage (letters, digits, '-', '_', '.'). A policy object in "
        "the cluster belongs to its namespace's tenant: unset (or default) it is the namespace, another name is "
        "refused unless actuation.tenant_from_namespace is off (docs/operations.md, Security).",
        json_schema_extra={"minLength": 1, "maxLength": TENANT_MAX, "pattern": TENANT},
    )
    priority: Int = Field(0, description="Higher priority is served first under shortage.")
    weight: Float = Field(1.0, gt=0, description="Share weight within a priority under shortage.")
    objective: Objective = Field(default_factory=Objective)  # type: ignore[arg-type]

    @model_validator(mode="after")
    def _check_bounds(self) -> PolicySpec:
        if self.min_replicas > self.max_replicas:
            raise ValueError(f"minReplicas ({self.min_replicas}) must not exceed maxReplicas ({self.max_replicas})")
        if self.fallback.mode == FallbackMode.STATIC and self.fallback.static_replicas is None:
            raise ValueError("fallback.mode static needs fallback.staticReplicas")
        if self.objective.cost <= 0 and self.objective.slo_risk <= 0:
            raise ValueError("objective.cost and objective.sloRisk are both 0: at least one must be positive")
        if (
            self.workload_class == WorkloadClass.FUNCTION
            and self.warm_pool.enabled
            and self.target.kind != "KnativeService"
        ):
            raise ValueError(f"{WARM_POOL_NEEDS_KNATIVE} (target.kind is {self.target.kind})")
        window, step = self.ramp_floor.window_seconds, self.demand.step_seconds
        if "window_seconds" in self.ramp_floor.model_fields_set and 0 < window < 3 * step:
            raise ValueError(
                f"rampFloor.windowSeconds ({window:g}) holds fewer than 3 samples at demand.stepSeconds {step:g}, "
                f"so no line could be fitted: give 0 (off) or at least {3 * step:g}"
            )
        return self


class Metadata(_Model):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="allow", frozen=True)
    name: Annotated[str, _kubernetes_name("subdomain", "policy name")] = Field(...)
    namespace: Annotated[str, _kubernetes_name("label", "namespace name")] = "default"


class Policy(_Model):
    """A ``PredictiveScalingPolicy`` object."""

    api_version: Literal["scaleahead.io/v1alpha1"] = API_VERSION
    kind: Literal["PredictiveScalingPolicy"] = KIND
    metadata: Metadata
    spec: PolicySpec

    @property
    def workload(self) -> WorkloadRef:
        t = self.spec.target
        return WorkloadRef(t.kind, t.namespace, t.name)


def history_points_limit(window_s: float, max_points: int | None = None) -> int:
    """The most points a policy's history window of ``window_s`` may hold: ``max_points`` (the
    operator's ``loop.max_history_points``), or by default ``DEFAULT_POINTS_FACTOR`` times the
    window's points at the default step (34,560 for 2 days)."""
    if max_points is not None:
        return max(1, int(max_points))
    return max(1, math.floor(DEFAULT_POINTS_FACTOR * window_s / DEFAULT_STEP_SECONDS + 1e-9))


def history_points_refusal(policy: Policy, window_s: float, max_points: int | None = None) -> str | None:
    """Why ``policy`` may not be read over a history window of ``window_s`` (None: it may): its
    ``demand.stepSeconds`` would put more than ``history_points_limit`` points in the window.

    Each read of a first (or lost) window costs window / step points in requests to Prometheus,
    decoding and memory, for as long as the policy exists: a tenant's tiny step cost every tenant
    their scaling (docs/prometheus.md, "Points per window")."""
    step = policy.spec.demand.step_seconds
    points = math.floor(window_s / step + 1e-9)
    limit = history_points_limit(window_s, max_points)
    if points <= limit:
        return None
    least = math.ceil(window_s / limit * 1000.0 - 1e-6) / 1000.0
    days = window_s / 86400.0
    source = (
        "loop.max_history_points"
        if max_points is not None
        else f"twice the {DEFAULT_STEP_SECONDS:g} s default step's points, unless loop.max_history_points says"
    )
    return (
        f"demand.stepSeconds {step:g} puts {points:,} points in the {days:g}-day history window "
        f"(loop.history_days), more than the {limit:,} a policy's window may hold ({source}): "
        f"set demand.stepSeconds to {least:g} or more, or have the operator raise "
        "SCALEAHEAD_LOOP__MAX_HISTORY_POINTS (docs/prometheus.md)"
    )


class _DuplicateKey(yaml.constructor.ConstructorError):
    """A key written twice in one mapping (PyYAML would keep the last one)."""

    def __init__(self, key: str, first: yaml.Mark, second: yaml.Mark) -> None:
        super().__init__(None, None, f"key {key!r} appears twice in one mapping", second)
        self.key, self.first, self.second = key, first, second


class _NotUnicode(yaml.constructor.ConstructorError):
    """A string holding a lone surrogate (the escape ``"\\ud800"`` in a double-quoted string): not
    valid Unicode, so it could not be stored, logged as UTF-8 or sent to the API server (the plan's
    record failed with a traceback, every cycle)."""

    def __init__(self, value: str, position: int, mark: yaml.Mark) -> None:
        super().__init__(None, None, f"{value!r} is not valid Unicode", mark)
        self.value, self.position, self.mark = value, position, mark


class _PolicyLoader(yaml.SafeLoader):
    """``yaml.SafeLoader`` that rejects duplicate keys and reads ``1e3`` as a number (YAML 1.2, JSON)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: dict[tuple[str, str], yaml.Node] = {}
        for key_node, _ in node.value:
            if not isinstance(key_node, yaml.ScalarNode) or key_node.tag == "tag:yaml.org,2002:merge":
                continue  # merged keys (<<: *anchor) may be overridden: that is what merging means
            ident = (key_node.tag, _paired(key_node.value))  # "\\ud83d\\ude00" and "😀" are one key
            if ident in seen:
                raise _DuplicateKey(key_node.value, seen[ident].start_mark, key_node.start_mark)
            seen[ident] = key_node
        return super().construct_mapping(node, deep=deep)

    def construct_yaml_str(self, node: yaml.Node) -> str:
        value = _paired(str(super().construct_yaml_str(node)))
        if not value.isascii():
            lone = next((i for i, c in enumerate(value) if "\ud800" <= c <= "\udfff"), None)
            if lone is not None:
                raise _NotUnicode(value, lone, node.start_mark)
        return value


def _paired(value: str) -> str:
    """``value`` with each JSON-style pair of escapes (``"\\ud83d\\ude00"``, which PyYAML keeps as two
    halves) made the one character it spells; a lone half is left as it is."""
    if value.isascii() or not any("\ud800" <= c <= "\udfff" for c in value):
        return value
    out: list[str] = []
    i = 0
    while i < len(value):
        c = value[i]
        if "\ud800" <= c <= "\udbff" and i + 1 < len(value) and "\udc00" <= value[i + 1] <= "\udfff":
            out.append((c + value[i + 1]).encode("utf-16-le", "surrogatepass").decode("utf-16-le"))
            i += 2
            continue
        out.append(c)
        i += 1
    return "".join(out)


_PolicyLoader.add_constructor("tag:yaml.org,2002:str", _PolicyLoader.construct_yaml_str)
_PolicyLoader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"^[-+]?[0-9][0-9_]*(?:\.[0-9_]*)?[eE][-+]?[0-9]+$"),
    list("-+0123456789"),
)


def _line_of(node: yaml.Node | None, loc: tuple[int | str, ...]) -> int | None:
    """The 1-based line of the YAML node at pydantic location ``loc`` (deepest one found)."""
    line = node.start_mark.line + 1 if node is not None else None
    for part in loc:
        if isinstance(node, yaml.MappingNode):
            child = None
            for key, value in node.value:
                if key.value == part:
                    child = value
                    line = key.start_mark.line + 1
                    break
            node = child
        elif isinstance(node, yaml.SequenceNode) and isinstance(part, int) and part < len(node.value):
            node = node.value[part]
            line = node.start_mark.line + 1
        else:
            break
    return line


def parse_policies(text: str, source: str = "<string>") -> list[Policy]:
    """Parse one or more policy documents; raise ``ConfigError`` naming file, line and field.

    Two documents targeting the same workload are an error naming both (each would plan for it).
    """
    located = _parse_located(text, source)
    check_unique_targets(located)
    return [policy for policy, _ in located]


def _parse_located(text: str, source: str) -> list[tuple[Policy, str]]:
    """The policies of ``text`` with where each one's target is written (``file:line``)."""
    try:
        nodes = list(yaml.compose_all(text, Loader=_PolicyLoader))
        docs = list(yaml.load_all(text, Loader=_PolicyLoader))  # noqa: S506 - a SafeLoader subclass
    except _DuplicateKey as exc:
        raise ConfigError(
            f"{source}:{exc.second.line + 1}: key {exc.key!r} appears twice in one mapping (lines "
            f"{exc.first.line + 1} and {exc.second.line + 1}); YAML would silently keep the last one.",
            "Keep one of them.",
        ) from exc
    except _NotUnicode as exc:
        shown = exc.value if len(exc.value) <= 60 else f"{exc.value[:40]}...{exc.value[-12:]}"
        raise ConfigError(
            f"{source}:{exc.mark.line + 1}: the string {shown!r} holds {exc.value[exc.position]!r}, a lone "
            "surrogate: an escape of half a character, which is not valid Unicode and could not be recorded "
            "or sent anywhere.",
            "Write the character itself or its whole escape (\\U0001F600, or both halves of its pair: "
            "\\ud83d\\ude00), or remove it.",
        ) from exc
    except RecursionError as exc:
        raise ConfigError(
            f"{source}: the YAML is nested too deeply to be a policy (thousands of levels).",
            "A policy nests a few levels; check the file.",
        ) from exc
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{source}:{mark.line + 1}" if mark is not None else source
        raise ConfigError(
            f"{where}: not valid YAML ({getattr(exc, 'problem', exc)}).",
            "Fix the syntax (indentation, quotes, colons); see examples/policy.yaml.",
        ) from exc
    policies: list[tuple[Policy, str]] = []
    for node, doc in zip(nodes, docs, strict=True):
        if doc is None:
            continue
        if not isinstance(doc, dict):
            raise ConfigError(
                f"{source}: a policy document must be a mapping, got {type(doc).__name__}.", "See examples/policy.yaml."
            )
        try:
            policy = Policy.model_validate(_defaults_from_metadata(doc))
        except ValidationError as exc:
            lines = []
            for err in exc.errors():
                loc = tuple(err["loc"])
                msg = str(err["msg"]).removeprefix("Value error, ")  # pydantic's prefix says nothing
                named = re.match(r"([a-z][A-Za-z]*(?:\.[a-z][A-Za-z]*)*)\b", msg)
                if loc == ("spec",) and named:
                    # a check across fields (minReplicas above maxReplicas): at the first field it names,
                    # not at `spec:` (a review of 2026-12-07)
                    inner = ("spec", *named.group(1).split("."))
                    if _line_of(node, inner) != _line_of(node, loc):
                        loc = inner
                line = _line_of(node, loc)
                field = ".".join(str(p) for p in loc) or "(document)"
                lines.append(f"{source}:{line}: field '{field}': {msg}")
            raise ConfigError(
                "Invalid policy. " + "; ".join(lines) + ".",
                "Fix these fields; examples/policy.yaml shows every field with a comment, "
                "and docs/configuration.md lists types, defaults and bounds.",
            ) from exc
        policies.append((policy, f"{source}:{_line_of(node, ('spec', 'target'))}"))
    if not policies:
        raise ConfigError(f"{source}: no policy found in the file.", "See examples/policy.yaml.")
    return policies


def check_unique_targets(located: Iterable[tuple[Policy, str]]) -> None:
    """Raise ``ConfigError`` when two policies target one workload, naming both and where they are.

    Args:
        located: each policy with where it is written (``file:line``).
    """
    seen: dict[str, tuple[Policy, str]] = {}
    for policy, where in located:
        key = policy.workload.key
        if key in seen:
            first, first_where = seen[key]
            raise ConfigError(
                f"Two policies target {key}: {first.metadata.namespace}/{first.metadata.name} ({first_where}) and "
                f"{policy.metadata.namespace}/{policy.metadata.name} ({where}); each would plan for it and undo "
                "the other's actions.",
                "Keep one policy per workload.",
            )
        seen[key] = (policy, where)


def malformed(doc: Any) -> str | None:
    """Why ``doc`` is not even shaped as a policy object, or None: it is not a mapping, its
    ``metadata`` is missing or not a mapping or has no ``name``, or its ``spec`` is not a mapping
    (a string, a list, a number, null). The schema checks the rest (``Policy.model_validate``)."""
    if not isinstance(doc, dict):
        return f"the object is {_what(doc)[:80]}, not a mapping"
    meta = doc.get("metadata")
    if meta is None:
        return "metadata is missing"
    if not isinstance(meta, dict):
        return f"metadata is {_what(meta)[:80]}, not a mapping"
    if not isinstance(meta.get("name"), str) or not meta["name"]:
        return (
            "metadata.name is missing" if meta.get("name") is None else f"metadata.name is {_what(meta['name'])[:80]}"
        )
    spec = doc.get("spec")
    if spec is None:
        return "spec is missing (or null): it must be a mapping with target, demand and capacityPerReplica"
    if not isinstance(spec, dict):
        return f"spec is {_what(spec)[:80]}, not a mapping with target, demand and capacityPerReplica"
    return None


def _defaults_from_metadata(doc: dict[str, Any]) -> dict[str, Any]:
    """The target namespace defaults to the object's namespace."""
    spec = doc.get("spec")
    meta = doc.get("metadata")
    if isinstance(spec, dict) and isinstance(meta, dict) and isinstance(spec.get("target"), dict):
        target = spec["target"]
        if "namespace" not in target and "namespace" in meta:
            doc = {**doc, "spec": {**spec, "target": {**target, "namespace": meta["namespace"]}}}
    return doc


def _read(p: Path) -> str:
    try:
        return p.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(
            f"Policy file {p} is not UTF-8 text (undecodable byte at offset {exc.start}).",
            "Point at a YAML policy file (examples/policy.yaml), saved as UTF-8.",
        ) from exc
    except OSError as exc:
        raise ConfigError(f"Cannot read policy file {p}: {exc.strerror}.", "Check the path.") from exc


def load_policies(path: str | Path) -> list[Policy]:
    """The policies of one file; two targeting the same workload are an error naming both lines."""
    p = Path(path)
    return parse_policies(_read(p), str(p))


def load_policy_files(paths: Sequence[str | Path]) -> list[Policy]:
    """The policies of several files loaded together (``run --policies DIR``), in order.

    Like ``load_policies``, but a workload targeted twice anywhere among them is an error naming
    both files and lines. One file given twice (``--policy A --policy ./A``, or a link to it) is an
    error that says so: every policy in it would target its workload twice.
    """
    seen: dict[tuple[int, int], Path] = {}
    for path in map(Path, paths):
        try:
            st = path.stat()
        except OSError:  # a missing file: _read names it
            continue
        key = (st.st_dev, st.st_ino)  # the same file by any path (./A, a symbolic or hard link)
        if key in seen:
            same = "" if str(seen[key]) == str(path) else f" ({path} is {seen[key]})"
            raise ConfigError(
                f"The same policy file was given twice: {seen[key]}{same}.",
                "Give each policy file once; its policies are all planned.",
            )
        seen[key] = path
    located = [item for path in paths for item in _parse_located(_read(Path(path)), str(path))]
    check_unique_targets(located)
    return [policy for policy, _ in located]


def policy_json_schema() -> dict[str, Any]:
    """The JSON schema of ``spec`` (for the CRD and docs/configuration.md)."""
    return PolicySpec.model_json_schema(by_alias=True)
