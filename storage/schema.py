"""Table definitions. Changes here need a migration in ``storage/migrations/versions``."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import (
    JSON,
    Boolean,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    String,
    Text,
    false,
    text,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column


class Base(DeclarativeBase):
    type_annotation_map = {dict[str, Any]: JSON}


class WorkloadRow(Base):
    __tablename__ = "workloads"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    key: Mapped[str] = mapped_column(String(512), unique=True)
    kind: Mapped[str] = mapped_column(String(64))
    namespace: Mapped[str] = mapped_column(String(253))
    name: Mapped[str] = mapped_column(String(253))
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))


class ModelVersionRow(Base):
    __tablename__ = "model_versions"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(128))
    family: Mapped[str] = mapped_column(String(64))
    status: Mapped[str] = mapped_column(String(32), default="candidate")
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    data_source: Mapped[str] = mapped_column(String(512), default="")
    data_start: Mapped[float | None] = mapped_column(Float, nullable=True)
    data_end: Mapped[float | None] = mapped_column(Float, nullable=True)
    step_s: Mapped[float | None] = mapped_column(Float, nullable=True)
    hyperparams: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    metrics: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    artifact_path: Mapped[str] = mapped_column(Text, default="")
    artifact_sha256: Mapped[str] = mapped_column(String(64), default="")
    # At most one champion per family, enforced by the database: two promotions at once (an
    # operator's rollback and the daemon's rollout) cannot both leave theirs champion (migration
    # 0010_one_champion). ``production`` is read like ``champion`` (storage.store.CHAMPION_STATUSES).
    __table_args__ = (
        Index(
            "ux_model_versions_one_champion",
            "family",
            unique=True,
            sqlite_where=text("status IN ('champion', 'production')"),
            postgresql_where=text("status IN ('champion', 'production')"),
        ),
    )


class ModelArtifactRow(Base):
    """A model version's checkpoint file, so that every replica (and a restarted pod, whose
    ``--artifacts`` folder may be an emptyDir) can load the model the registry says is in use."""

    __tablename__ = "model_artifacts"
    model_id: Mapped[int] = mapped_column(ForeignKey("model_versions.id", ondelete="CASCADE"), primary_key=True)
    data: Mapped[bytes] = mapped_column(LargeBinary)
    sha256: Mapped[str] = mapped_column(String(64))


class ForecastRow(Base):
    """One stored forecast: quantile values as float16 bytes, ``[n_quantiles, horizon_steps]``;
    ``quantiles`` lists the levels (``0.1,0.5,0.9``; any number of them: TEXT since 0010_one_champion)."""

    __tablename__ = "forecasts"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    workload_id: Mapped[int] = mapped_column(ForeignKey("workloads.id", ondelete="CASCADE"))
    origin: Mapped[float] = mapped_column(Float)
    step_s: Mapped[float] = mapped_column(Float)
    quantiles: Mapped[str] = mapped_column(Text)
    model: Mapped[str] = mapped_column(String(128))
    model_version_id: Mapped[int | None] = mapped_column(ForeignKey("model_versions.id"), nullable=True)
    values_f16: Mapped[bytes] = mapped_column(LargeBinary)
    __table_args__ = (
        Index("ix_forecasts_workload_origin", "workload_id", "origin"),
        # the prune job's ``origin < T`` batches (migration 0012_forecast_origin)
        Index("ix_forecasts_origin", "origin"),
    )


class PlanRow(Base):
    __tablename__ = "plans"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    created_at: Mapped[float] = mapped_column(Float, index=True)
    source: Mapped[str] = mapped_column(String(64))
    fallbacks: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    notes: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)


class ActionRow(Base):
    """An action and its journal: planned -> applied / failed / skipped / dry-run."""

    __tablename__ = "actions"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    plan_id: Mapped[int] = mapped_column(ForeignKey("plans.id", ondelete="CASCADE"), index=True)
    kind: Mapped[str] = mapped_column(String(32))
    target: Mapped[str] = mapped_column(String(512), index=True)
    from_value: Mapped[str] = mapped_column(String(253))
    to_value: Mapped[str] = mapped_column(String(253))
    reason_code: Mapped[str] = mapped_column(String(64))
    reason: Mapped[str] = mapped_column(Text)
    reason_details: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    state: Mapped[str] = mapped_column(String(32), default="planned", index=True)
    outcome: Mapped[str] = mapped_column(Text, default="")
    updated_at: Mapped[float] = mapped_column(Float)


class RolloutRow(Base):
    __tablename__ = "rollouts"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    group: Mapped[str] = mapped_column(String(128), index=True)
    mode: Mapped[str] = mapped_column(String(16))
    state: Mapped[str] = mapped_column(String(32))
    champion: Mapped[str] = mapped_column(String(256))
    challenger: Mapped[str] = mapped_column(String(256))
    share: Mapped[float] = mapped_column(Float, default=0.0)
    started_at: Mapped[float] = mapped_column(Float)
    updated_at: Mapped[float] = mapped_column(Float)
    params: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    results: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    # At most one running rollout per group, enforced by the database: two starts at once (the
    # daemon's retraining and the CronJob's) cannot both insert one (migration 0009_one_running).
    __table_args__ = (
        Index(
            "ux_rollouts_one_running",
            "group",
            unique=True,
            sqlite_where=text("state = 'running'"),
            postgresql_where=text("state = 'running'"),
        ),
    )


class ManagedFieldRow(Base):
    """The value scaleahead last wrote to a field it manages, and a human edit seen on it.

    ``human_value``/``human_seen_at`` are set when the live value differs from what we wrote and
    the object changed since (someone else edited it); the actuator leaves the field alone for a
    configurable time after ``human_seen_at`` (docs/actuator.md).
    """

    __tablename__ = "managed_fields"
    target: Mapped[str] = mapped_column(String(512), primary_key=True)
    field: Mapped[str] = mapped_column(String(253))
    value: Mapped[int] = mapped_column(Integer)
    resource_version: Mapped[str] = mapped_column(String(64), default="")
    written_at: Mapped[float] = mapped_column(Float)
    human_value: Mapped[int | None] = mapped_column(Integer, nullable=True)
    human_seen_at: Mapped[float | None] = mapped_column(Float, nullable=True)
    #: The value scaleahead last *confirmed* writing (a write that returned, an intent seen landed,
    #: an action reconciled as applied); ``value`` may instead be an intent's or a failed write's
    #: baseline. None: none confirmed since migration ``0007_written``. A removed function policy's
    #: warm instances are released only from this value (``Actuator.release``).
    written_value: Mapped[int | None] = mapped_column(Integer, nullable=True)
    #: The field as it was before scaleahead's first write to it (recorded with that write's intent,
    #: since migration ``0008_original``): ``original_value``, None where the field was not set at
    #: all (a Service without ``min-scale``). ``original_recorded`` false: not known (a record from
    #: before the migration). A removed function policy's Service gets this value back.
    original_recorded: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())
    original_value: Mapped[int | None] = mapped_column(Integer, nullable=True)
    #: The object's ``metadata.uid`` when scaleahead last wrote or read the field (migration
    #: ``0011_managed_uid``; None: not known yet). Another UID is a new object of the same name
    #: (deleted and created again): its value is its own, not an edit, and the record starts anew.
    uid: Mapped[str | None] = mapped_column(String(128), nullable=True)
    #: The field manager (``metadata.managedFields``) of the last edit seen, and how many of
    #: scaleahead's writes in a row it undid (a persistent co-writer from 2; migration 0011_managed_uid).
    editor: Mapped[str | None] = mapped_column(String(253), nullable=True)
    editor_reverts: Mapped[int] = mapped_column(Integer, default=0, server_default="0")


class PodSteerRow(Base):
    """Where the next pod of a controller should run, recorded before the actuator evicts one of its pods.

    The admission webhook (``actuator.steering``) consumes a ``pending`` steer for the first new
    pod of the owner (``namespace``, ``owner_kind``, ``owner_name``) created before ``expires_at``
    and adds a nodeAffinity for ``node``; ``state``: pending -> consumed | expired | cancelled.
    """

    __tablename__ = "pod_steers"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    namespace: Mapped[str] = mapped_column(String(253))
    owner_kind: Mapped[str] = mapped_column(String(64))
    owner_name: Mapped[str] = mapped_column(String(253))
    evicted_pod: Mapped[str] = mapped_column(String(253))
    node: Mapped[str] = mapped_column(String(253))
    created_at: Mapped[float] = mapped_column(Float)
    expires_at: Mapped[float] = mapped_column(Float)
    state: Mapped[str] = mapped_column(String(16), default="pending")
    consumed_by: Mapped[str] = mapped_column(String(253), default="")
    updated_at: Mapped[float] = mapped_column(Float)
    __table_args__ = (Index("ix_pod_steers_owner_state", "namespace", "owner_kind", "owner_name", "state"),)


class RiskFactorRow(Base):
    """The risk adaptation's step per service (``planner.risk``), so a restart resumes from it.

    ``k``: the service plans with ``sloRisk x stepFactor ** k``; ``slo_risk`` is that weight when it
    was written; ``fingerprint``: what ``k`` was learned under (``planner.risk.fingerprint``: the
    policy's riskAdaptation block, capacityPerReplica and sloRisk, and the demand's step; NULL in
    rows written before migration ``0006_riskfp``), so a policy edited while scaleahead was down
    does not resume it.
    """

    __tablename__ = "risk_factors"
    workload: Mapped[str] = mapped_column(String(512), primary_key=True)
    k: Mapped[int] = mapped_column(Integer)
    slo_risk: Mapped[float] = mapped_column(Float)
    updated_at: Mapped[float] = mapped_column(Float)
    fingerprint: Mapped[str | None] = mapped_column(String(64), nullable=True)


class OutcomeRow(Base):
    """What a service got from the control loop over part of a 5-minute bucket (``scaleahead.outcomes``).

    Written by the leader: the control steps it scored (``steps``), those with demand above the
    ready replicas' capacity (``short_steps``), the capacity it ran (``capacity_seconds``:
    capacityPerReplica x replicas x seconds) and the demand it served (``demand_seconds``); and the
    forecasts made in the bucket once they were scored against the demand that came
    (``error_abs``, ``error_actual``, ``forecasts``), in rows of their own. ``rollout_id`` (0: none)
    and ``arm`` say which model acted (or, in shadow, forecast) for the workload. A bucket may have
    several rows per workload and arm: they are summed (``Store.outcome_sums``). Migration 0013_outcomes.
    """

    __tablename__ = "outcomes"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    workload: Mapped[str] = mapped_column(String(512))
    bucket: Mapped[float] = mapped_column(Float)
    rollout_id: Mapped[int] = mapped_column(Integer, default=0)
    arm: Mapped[str] = mapped_column(String(16))
    model_version_id: Mapped[int | None] = mapped_column(Integer, nullable=True)
    steps: Mapped[int] = mapped_column(Integer, default=0)
    #: Seconds the scored steps cover (steps x the control interval): how much of a window was measured.
    seconds: Mapped[float] = mapped_column(Float, default=0.0)
    short_steps: Mapped[int] = mapped_column(Integer, default=0)
    #: Scored steps in which the arm's model made no forecast for the workload (the policy's fallback acted).
    fallback_steps: Mapped[int] = mapped_column(Integer, default=0)
    capacity_seconds: Mapped[float] = mapped_column(Float, default=0.0)
    demand_seconds: Mapped[float] = mapped_column(Float, default=0.0)
    error_abs: Mapped[float] = mapped_column(Float, default=0.0)
    error_actual: Mapped[float] = mapped_column(Float, default=0.0)
    forecasts: Mapped[int] = mapped_column(Integer, default=0)
    __table_args__ = (
        Index("ix_outcomes_rollout_bucket", "rollout_id", "bucket"),
        Index("ix_outcomes_workload_bucket", "workload", "bucket"),
        Index("ix_outcomes_bucket", "bucket"),
    )
