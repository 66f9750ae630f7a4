"""``scaleahead run`` (the daemon), ``scaleahead retrain`` (the CronJob) and the generators
``scaleahead crd`` and ``scaleahead config-doc`` (files that must never drift from the schema).

Heavy imports happen inside the commands so ``scaleahead --help`` stays fast.
"""

from __future__ import annotations

import json
import logging
import math
import os
import signal
import socket
import ssl
import threading
import time
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from scaleahead.commands import DbOpt, check_folder, check_output
from scaleahead.errors import UserError

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from scaleahead.loop import HistorySource
    from scaleahead.policy import Policy
    from scaleahead.settings import Settings
    from scaleahead.types import Series

log = logging.getLogger("scaleahead.run")

PoliciesOpt = Annotated[
    Path,
    typer.Option(
        "--policies",
        help="Policy YAML file, or a folder of *.yaml/*.yml files (e.g. a mounted ConfigMap), "
        "each holding PredictiveScalingPolicy documents.",
    ),
]
OncePoliciesOpt = Annotated[
    Path | None,
    typer.Option(
        "--policies",
        help="Policy YAML file or folder of *.yaml files; leave out to read the PredictiveScalingPolicy "
        "objects from the cluster once.",
    ),
]
ClusterPoliciesOpt = Annotated[
    Path | None,
    typer.Option(
        "--policies",
        help="Policy YAML file or folder of *.yaml files; leave out to read PredictiveScalingPolicy "
        "objects from the cluster (re-read every 30 s; their status shows each decision).",
    ),
]
HistoryOpt = Annotated[
    str,
    typer.Option(
        "--history",
        help="Where demand history comes from: 'prometheus' (the URL in SCALEAHEAD_PROMETHEUS__URL) or "
        "'trace:NAME' to replay a trace (nasa-10s, alibaba-cpu-10s, a series CSV path) as if it were live; "
        "it must be at the policies' demand.stepSeconds.",
    ),
]
TargetOpt = Annotated[
    str,
    typer.Option("--target", help="What is scaled: 'kubernetes' (in-cluster or kubeconfig) or 'memory' (a dict)."),
]


def load_policy_path(path: Path) -> list[Policy]:
    """All policies in a file or in the ``*.yaml``/``*.yml`` files of a folder (sorted by name)."""
    from scaleahead.errors import ConfigError
    from scaleahead.policy import load_policy_files

    if path.is_dir():
        files = sorted([*path.glob("*.yaml"), *path.glob("*.yml")])
        if not files:
            raise ConfigError(
                f"Folder {path} holds no *.yaml or *.yml policy file.", "Point --policies at policy files."
            )
        return load_policy_files(files)
    return load_policy_files([path])


def _without_hpa_fights(api: Any, pols: list[Policy]) -> list[Policy]:
    """The file policies (``--policies``) but those that would fight a HorizontalPodAutoscaler
    (``actuator.autoscalers``), each logged with why and what to do; checked once, at start."""
    from actuator.autoscalers import hpa_fights

    fights = hpa_fights(api, pols)
    for p, found in fights:
        log.error(
            "policy %s/%s is refused: %s. %s",
            p.metadata.namespace,
            p.metadata.name,
            *found,
            extra={"event": "policy_invalid", "workload": p.workload.key},
        )
    refused = {id(p) for p, _ in fights}
    return [p for p in pols if id(p) not in refused]


def _trace_history(spec: str, window_s: float, offset_s: float) -> HistorySource:
    from scaleahead.tracesource import TraceHistory

    return TraceHistory(default=_load_trace(spec), window_s=window_s, offset_s=offset_s, scale_spread=0.5)


def _load_trace(spec: str) -> Series:
    from scaleahead.traces import load_series

    name = spec.removeprefix("trace:")
    if name not in _TRACE_CACHE:
        _TRACE_CACHE[name] = load_series(name)
    return _TRACE_CACHE[name]


_TRACE_CACHE: dict[str, Series] = {}


def _history(
    spec: str, settings: Settings, window_s: float, offset_s: float, cache_dir: Path | None = None
) -> HistorySource:
    if spec.startswith("trace:"):
        return _trace_history(spec, window_s, offset_s)
    if spec == "prometheus":
        from scaleahead.prometheus.history import history_from_settings

        hist = history_from_settings(settings.prometheus, cache_dir=cache_dir)
        hist.window_s = window_s
        hist.max_points = points_cap(settings, window_s)
        return hist
    raise UserError(f"--history {spec!r} is not known.", "Use 'prometheus' or 'trace:NAME'.")


def points_cap(settings: Settings, window_s: float) -> int | None:
    """The most points one policy's window of ``window_s`` may hold: ``loop.max_history_points`` for
    the loop's window, the same multiple of it for another (the retraining's ``jobs.history_days``);
    None when unset (``scaleahead.policy.history_points_limit``'s default, relative to any window)."""
    cap = settings.loop.max_history_points
    if cap is None:
        return None
    return max(1, math.floor(cap * window_s / (settings.loop.history_days * 86400.0) + 1e-9))


def history_short_for(forecaster: Any, history_days: float) -> str:
    """Empty, or a warning when a learned forecaster reads further back than the loop's history."""
    spec = getattr(forecaster, "spec", None)  # a learned model's input windows
    if spec is None:
        return ""
    from forecaster.features import offsets

    reach_s = -float(offsets(spec).min()) * spec.step_s
    if history_days * 86400.0 >= reach_s:
        return ""
    return (
        f"the forecaster reads {reach_s / 86400.0:.2f} days back but loop.history_days is {history_days:g}: its "
        "oldest input (a week back) is missing at every forecast, though it was trained with it; set "
        f"SCALEAHEAD_LOOP__HISTORY_DAYS={math.ceil(reach_s / 864.0) / 100.0:.2f} to give it (docs/forecaster.md)"
    )


def _production_model(
    name: str,
    store: Any,
    settings: Settings,
    history: list[Any],
    unloadable: list[int] | None = None,
    fell_back: list[str] | None = None,
    now: float | None = None,
) -> tuple[Any, int | None]:
    """The forecaster the loop starts with, and its registry id.

    A learned model is never trained at start-up (that takes minutes and the pod would not be
    ready): the newest ``champion`` (or ``production``) version of that family in the registry is
    loaded from its checkpoint. Without one, or when it cannot be loaded, the fallback baseline is
    fitted on the loop's history, and the log says why. Baselines are fitted on that history.
    ``unloadable``: gets the id of a champion that could not be loaded. ``fell_back``: gets why the
    fallback runs instead of ``name`` (``no_model``: no champion registered; ``unloadable``: its
    checkpoint could not be loaded, or, given ``now``, it was trained on data after it), for
    ``scaleahead_model_fallback``.
    """
    from forecaster import make_model
    from forecaster.registry import BASELINES, LEARNED
    from scaleahead.errors import DataError
    from scaleahead.retraining import load_model_version

    _warn_promoted_elsewhere(store, name)
    if name in BASELINES or name not in LEARNED:
        own = store.champion(name) if store is not None and history else None
        if own is not None:
            # a registered version of the family, fitted as the running daemon fits it when it
            # follows that champion (model_changed); until 2026-12-07 a start ignored it, and a
            # retraining's rollout named its champion by the family only (an operator audit)
            step_s = history[0].step_s
            return load_model_version(store, own.id, step_s, history, settings.forecast.horizon_s, now), own.id
        fitted = make_model(name)
        if history:
            fitted.fit(history)
        return fitted, None
    stored = store.models_with_artifacts()
    versions = [
        m
        for m in store.models()
        if m.family == name and m.status in ("champion", "production") and (m.id in stored or m.artifact_path)
    ]
    step = history[0].step_s if history else 10.0
    fallback = settings.forecast.fallback_model
    why = f"no LSTM checkpoint configured; using fallback {fallback!r}"
    code = "no_model"
    if versions:
        try:  # the checkpoint stored in the database (any replica, any restart), else the file
            loaded = load_model_version(store, versions[-1].id, step, history, settings.forecast.horizon_s, now)
            return loaded, versions[-1].id
        except DataError as exc:
            why = f"{exc.what} Fallback: {fallback!r}"
            code = "unloadable"
            if unloadable is not None:
                unloadable.append(versions[-1].id)
    log.warning(
        "%s. Train one (scaleahead train --model %s, or train-distributed for lstm) and promote it.",
        why,
        name,
        extra={"event": "model_fallback", "reason": why, "code": code},
    )
    if fell_back is not None:
        fell_back.append(code)
    model = make_model(fallback)
    if history:
        model.fit(history)
    return model, None


def _warn_promoted_elsewhere(store: Any, name: str) -> None:
    """Log (``model_promoted_not_run``) when the newest promoted rollout made a version of another
    family than ``name`` (``forecast.model``) the champion of its family: the daemon that ran when
    it was promoted switched to it, but a start runs ``name``'s family (whose champion such a
    promotion leaves in place since 2026-12-07; before, it was retired, and a restart fell back to
    a baseline: an operator audit)."""
    if store is None:
        return
    from storage.store import CHAMPION_STATUSES

    try:
        last = store.last_promoted_rollout()
        if last is None or not last.challenger.isdigit():
            return
        version = store.model(int(last.challenger))
    except UserError:
        return
    if version.family != name and version.status in CHAMPION_STATUSES:
        log.warning(
            "rollout %d promoted %s version %d, but a start runs forecast.model's family, %s: set forecast.model: %s "
            "to plan with it",
            last.id,
            version.family,
            version.id,
            name,
            version.family,
            extra={"event": "model_promoted_not_run", "model_version_id": version.id},
        )


def replica_identity() -> str:
    """This process's name in leader election: ``$POD_NAME``, else the host name and a random
    suffix (two processes on one host must not share one: both would "renew" the same Lease)."""
    return os.environ.get("POD_NAME") or f"{socket.gethostname()}_{uuid.uuid4().hex[:8]}"


def _kube_api(kubeconfig: str | None) -> Any:
    """The official client: the in-cluster service account when running in a pod, else a kubeconfig."""
    import os

    from actuator.kubernetes import make_api_client

    in_cluster = kubeconfig is None and "KUBERNETES_SERVICE_HOST" in os.environ
    return make_api_client(kubeconfig, in_cluster=in_cluster)


def _shard_limiter(settings: Settings, index: int, count: int) -> Callable[[Sequence[Policy]], None]:
    """With ``--shard``: a function that sets this shard's part of ``loop.capacity`` and
    ``loop.warm_memory_budget_mb`` from the whole set of policies (``scaleahead.sharding.shard_limits``),
    each time the policies are read. The configured totals are kept aside; a changed part is logged
    (event ``shard_limits``). It replaces ``settings.loop`` whole, and ``scaleahead run`` calls it
    from ``Daemon.set_policies`` (its ``on_policies``), under the lock a cycle takes its copy of the
    policies and settings under: a cycle plans with the policies and the part computed from them,
    never with a part of a newer read or half of one."""
    from scaleahead.sharding import shard_limits

    capacity = dict(settings.loop.capacity)
    budget = settings.loop.warm_memory_budget_mb
    last: list[object] = [None]

    def apply(policies: Sequence[Policy]) -> None:
        if not capacity and budget is None:
            return
        part = shard_limits(capacity, budget, policies, index, count)
        # One assignment: a cycle's copy of the settings (``Daemon.tick``) holds both parts or neither.
        settings.loop = settings.loop.model_copy(
            update={"capacity": part.capacity, "warm_memory_budget_mb": part.warm_memory_budget_mb}
        )
        if part != last[0]:
            last[0] = part
            log.info(
                "shard %d/%d: capacity %s of %s, warm-memory budget %s of %s MB",
                index,
                count,
                part.capacity,
                capacity,
                "none" if part.warm_memory_budget_mb is None else f"{part.warm_memory_budget_mb:.0f}",
                "none" if budget is None else f"{budget:g}",
                extra={
                    "event": "shard_limits",
                    "capacity": part.capacity,
                    "warm_memory_budget_mb": part.warm_memory_budget_mb,
                },
            )

    return apply


def _capacity_names_checker(settings: Settings, namespace: str | None) -> Callable[[Sequence[Policy]], None]:
    """A function that warns (event ``capacity_unused``) about ``loop.capacity`` entries naming a
    tenant no policy has: a typo, or (with ``actuation.tenant_from_namespace``, the default) a name
    that is not a namespace, limits nothing. Called with every policy read (all shards' together);
    an entry is named again only after it was in use in between. Until 2026-12-06 such an entry was
    silently unused. Not with ``--namespace``: that process reads one namespace's policies only, so
    another namespace's entry is expected to limit nothing in it."""
    names = {t for t in settings.loop.capacity if t != "*"}
    from_namespace = settings.actuation.tenant_from_namespace
    warned: set[str] = set()

    def check(policies: Sequence[Policy]) -> None:
        if not names or namespace is not None:
            return
        tenants = {p.spec.tenant for p in policies}
        unused = names - tenants
        new = sorted(unused - warned)
        warned.intersection_update(unused)
        warned.update(unused)
        if not new:
            return
        why = (
            " (a PredictiveScalingPolicy object's tenant is its namespace: actuation.tenant_from_namespace)"
            if from_namespace
            else ""
        )
        log.warning(
            "loop.capacity names tenant(s) %s that no policy has%s; the policies' tenants are %s. Such an entry "
            "limits nothing: correct the name, or remove the entry",
            ", ".join(new),
            why,
            ", ".join(sorted(tenants)) or "none",
            extra={"event": "capacity_unused", "tenants": new},
        )

    return check


def _owner(shard: str | None, namespace: str | None) -> Callable[[str], bool] | None:
    """Which workload keys this process answers for when it releases a removed policy's warm
    instances: with ``--shard i/N`` those that hash to it, with ``--namespace NS`` those in NS (a
    process reading one namespace's policies cannot tell another's removed from never seen)."""
    if shard is None and namespace is None:
        return None
    from scaleahead.sharding import parse_shard, shard_of

    index, count = parse_shard(shard) if shard is not None else (0, 1)

    def owns(key: str) -> bool:
        in_namespace = namespace is None or key.split("/", 2)[1:2] == [namespace]
        return in_namespace and shard_of(key, count) == index

    return owns


def _reconciler(
    actuator: Any, shard: str | None, retry_s: float = 0.0, budget_s: float | None = None
) -> Callable[[float], int]:
    """Reconcile the action journal when this replica starts to lead (``Daemon.on_lead``): actions
    left ``planned`` by a crash. With ``--shard``, only this shard's: the actions of the workloads
    that hash to it (whether or not their policy still exists, so a removed policy's actions are
    reconciled by exactly one shard), and pod moves on shard 0 (the only one that rebalances).
    Returns how many it left unresolved (objects that could not be read, or rows not reached within
    ``budget_s``): the daemon calls it again every ``retry_s`` (``actuation.reconcile_retry_s``)
    while it leads, until none is left. The budget keeps a slow API server from holding the cycle
    (each read may wait a request timeout); it applies only with a retry period."""
    from actuator.applying import UNRESOLVED
    from scaleahead.sharding import parse_shard, shard_of

    index, count = parse_shard(shard) if shard is not None else (0, 1)

    def owns(row: Any) -> bool:
        if row.kind == "MovePod":
            return index == 0
        return count == 1 or shard_of(row.target, count) == index

    again = f"in {retry_s:g} s while this replica leads" if retry_s > 0 else "when a replica next starts to lead"

    def reconcile(now: float) -> int:
        left = 0
        # Rows not reached (the budget ran out, the Lease was lost): one line per reason, not one
        # per row (until 2026-12-06 10,000 such rows logged ~9,600 warnings every retry).
        not_reached: dict[str, list[int]] = {}
        for aid, state, why in actuator.reconcile(now, owns, budget_s if retry_s > 0 else None):
            if state == "planned" and why.startswith(f"{UNRESOLVED}: not reached"):
                left += 1
                not_reached.setdefault(why, []).append(aid)
            elif state == "planned":  # the object cannot be read now: reconciled again later
                left += 1
                log.warning(
                    "journal: action %s stays planned: %s; reconciled again %s, or by `scaleahead actuator reconcile`",
                    aid,
                    why,
                    again,
                    extra={"event": "unreconciled"},
                )
            else:
                log.info("journal: action %s -> %s: %s", aid, state, why, extra={"event": "reconciled"})
        for why, ids in not_reached.items():
            shown = ", ".join(str(i) for i in ids[:5]) + (", ..." if len(ids) > 5 else "")
            log.warning(
                "journal: %d action(s) stay planned (ids %s): %s; reconciled again %s, or by "
                "`scaleahead actuator reconcile`",
                len(ids),
                shown,
                why,
                again,
                extra={"event": "unreconciled", "actions": len(ids)},
            )
        return left

    return reconcile


def _policy_updater(target: Any, actuator: Any, then: Callable[[Sequence[Policy]], None] | None = None) -> Any:
    """Tell the Kubernetes target and the actuator about reloaded policies (modes, bounds), then
    call ``then`` (``run --shard``: this shard's part of the limits)."""

    def update(policies: Any) -> None:
        if then is not None:
            then(policies)
        by_ref = {p.workload: p for p in policies}
        if actuator is not None:
            actuator.policies = by_ref
        if hasattr(target, "_policies"):
            target._policies = by_ref  # KubernetesTarget keeps each workload's mode here

    return update


def cluster_actuation(
    kube: Any,
    store: Any,
    pols: Sequence[Policy],
    settings: Settings,
    clock: Any,
    identity: str,
    fences: bool = True,
    wall: Callable[[], float] = time.time,
) -> tuple[Any, Any, _LeaseLeadership]:
    """The Kubernetes target, the journaled actuator and the Lease election of ``scaleahead run``.

    The daemon renews the Lease at the start of each tick; the actuator checks it again before each
    write, on the clock's time then (a cycle may outlast the lease: a slow Prometheus read), and
    renews it when less than one request timeout is left, so a replica that lost the Lease to
    another stops before its next write. The plan's age (``actuation.max_plan_age_s``) is counted
    on the same clock as each action is checked, from the tick's start, when the plan's data was read.
    The election measures durations on the clock's ``monotonic`` (``time.monotonic`` for the system
    clock, virtual time itself for a virtual one; a clock without it is taken to be virtual), so
    the Lease's timing follows a virtual run and a stepped wall clock does not move it.
    """
    from actuator.applying import Actuator
    from actuator.kubernetes import KubernetesTarget
    from actuator.leader import LeaderElector
    from actuator.safety import SafetyConfig

    a = settings.actuation
    target = KubernetesTarget(
        kube,
        pols,
        timeout_s=a.request_timeout_s,
        placement=settings.loop.max_moves > 0,
        quotas=settings.loop.namespace_quotas,
    )
    monotonic = getattr(clock, "monotonic", clock.now)
    elector = LeaderElector(
        kube, a.namespace, identity, a.lease_name, a.lease_duration_s, a.request_timeout_s, monotonic=monotonic
    )
    actuator = Actuator(
        target,
        store,
        pols,
        SafetyConfig(
            a.max_plan_age_s,
            a.paused,
            a.human_edit_hold_s,
            a.max_conflict_retries,
            concurrent_writes=a.concurrent_writes,
        ),
        kill_switch=lambda: target.kill_switch(a.namespace, a.kill_switch_configmap),
        steer_ttl_s=settings.webhook.steer_ttl_s if settings.webhook.enabled else None,
        is_leader=lambda _planned_at: elector.holds(clock.now(), a.request_timeout_s),
        leader_error=lambda: elector.last_error,
        clock=clock.now,  # the plan's age when each action is checked (maxPlanAge)
        # Drain fences only where drains are made (their rights come with deploy/components/rebalance),
        # and only by a process that stays to lift them (``fences``: not ``run --once`` or ``--ticks``);
        # fences left by an earlier run are lifted even with rebalancing off. Their times are on
        # the wall clock (``wall``), whatever clock the plans are made on (``--virtual``, ``--start``).
        drain_fence_s=a.drain_fence_s if settings.loop.max_moves > 0 and fences else 0.0,
        lift_fences=fences,
        fence_clock=wall,
    )
    return target, actuator, _LeaseLeadership(elector)


class _LeaseLeadership:
    """The actuator's Lease election seen through the daemon's ``Leadership`` protocol."""

    def __init__(self, elector: Any) -> None:
        self.elector = elector

    @property
    def identity(self) -> str:
        """This replica's holderIdentity (logged with leader_acquired and leader_lost)."""
        return str(self.elector.identity)

    def is_leader(self, now: float) -> bool:
        return bool(self.elector.is_leader(now))

    @property
    def last_error(self) -> str:
        """Why the last ``is_leader`` was False ("lease held by ...", the API's error), or ``""``."""
        return str(self.elector.last_error)

    @property
    def lease_failed(self) -> bool:
        """Whether the last ``is_leader`` could not read or write the Lease (not: another holds it)."""
        return bool(self.elector.lease_failed)

    def holds_now(self) -> bool:
        """Whether the Lease is still held as of its last renewal (the tick's, or the actuator's
        before a write), on the election's monotonic clock: no API call, so a job's thread may ask
        (a retraining, before it registers its model)."""
        return bool(self.elector._monotonic() < self.elector._held_until)

    def release(self) -> None:
        import time

        self.elector.release(time.time())


class _DeferredWebhook:
    """The webhook while its certificate cannot be loaded yet (the Secret not mounted or not made
    yet: gen-cert.sh in dev, cert-manager still issuing): tries again every ``every_s`` seconds."""

    def __init__(self, start: Callable[[], Any], every_s: float) -> None:
        self._start = start
        self.server: Any = None
        self._stop = threading.Event()
        threading.Thread(target=self._loop, args=(every_s,), name="scaleahead-webhook-wait", daemon=True).start()

    def _loop(self, every_s: float) -> None:
        while not self._stop.wait(every_s) and not self.try_start():
            pass

    def try_start(self) -> bool:
        if self.server is not None:
            return True
        try:
            self.server = self._start()
        except (OSError, ValueError, ssl.SSLError):
            return False
        log.info(
            "serving the pod steering webhook (its certificate is there now)",
            extra={"event": "listening", "port": self.server.server_address[1]},
        )
        return True

    def shutdown(self) -> None:
        self._stop.set()
        if self.server is not None:
            self.server.shutdown()


def _serve_steering(
    settings: Any,
    store: Any,
    clock: Any,
    retry_s: float = 60.0,
    on_review: Callable[[str], None] | None = None,
    on_refused: Callable[[], None] | None = None,
) -> Any:
    """Start the pod steering webhook (HTTPS) next to the loop.

    A certificate that cannot be loaded yet is logged and tried again every ``retry_s`` seconds
    (``_DeferredWebhook``); a renewed one is reloaded while serving (``ReloadingTLS``). Not serving
    is safe: the MutatingWebhookConfiguration's failurePolicy is Ignore, pods are then created
    unsteered and the steers the actuator records expire and are reported.
    """
    from actuator.steering import SteeringWebhook, serve_webhook

    w = settings.webhook

    def start() -> Any:
        webhook = SteeringWebhook(store, clock.now, w.affinity, on_review=on_review)
        return serve_webhook(
            webhook,
            w.host,
            w.port,
            w.cert_file,
            w.key_file,
            client_ca_file=w.client_ca_file or None,
            client_name=w.client_name or None,
            on_refused=on_refused,
        )

    try:
        server = start()
    except (OSError, ValueError, ssl.SSLError) as exc:
        log.error(
            "pod steering webhook not served yet: %s (certificate %s, key %s%s); trying again every %g s; "
            "see docs/actuator.md#steering",
            exc,
            w.cert_file,
            w.key_file,
            f", client CA {w.client_ca_file}" if w.client_ca_file else "",
            retry_s,
            extra={"event": "webhook_not_served"},
        )
        return _DeferredWebhook(start, retry_s)
    log.info(
        "serving the pod steering webhook (%s)",
        f"clients must present a certificate signed by {w.client_ca_file}"
        if w.client_ca_file
        else "no client authentication: anyone who can reach the port can send reviews; "
        "see webhook.client_ca_file in docs/actuator.md#steering",
        extra={"event": "listening", "port": server.server_address[1], "client_auth": bool(w.client_ca_file)},
    )
    return server


def _none_planned_from_data(report: Any, policies: Sequence[Policy]) -> str:
    """What ``run --once`` says on stderr (exit 1) when it planned no workload from data: every policy's
    workload fell back (its history or forecast failed) and the cycle has errors. Empty when at least
    one workload was planned from a forecast, or there was nothing to plan."""
    if not policies or not report.errors:
        return ""
    fallen = {ref.key for ref in report.plan.fallbacks}
    workloads = {p.workload.key for p in policies}
    if not workloads <= fallen:
        return ""
    first = next(iter(report.errors.items()))
    more = f" (and {len(report.errors) - 1} more in the JSON's errors)" if len(report.errors) > 1 else ""
    return (
        f"no workload could be planned from data: all {len(workloads)} fell back to their policy's fallback "
        f"({first[0]}: {first[1]}){more}. Check the history source (--history; SCALEAHEAD_PROMETHEUS__URL, "
        "the demand queries) and run again; the fallback plan was recorded."
    )


def register(app: typer.Typer, bench_app: typer.Typer) -> None:
    @app.command()
    def run(
        policies: ClusterPoliciesOpt = None,
        history: HistoryOpt = "prometheus",
        target: TargetOpt = "kubernetes",
        db: DbOpt = None,
        once: Annotated[bool, typer.Option("--once", help="Run one cycle, print its summary as JSON, exit.")] = False,
        model: Annotated[
            str | None, typer.Option(help="Forecaster (default: settings forecast.model, else its fallback).")
        ] = None,
        interval: Annotated[float | None, typer.Option(help="Control interval in seconds (default 10).")] = None,
        port: Annotated[
            int | None, typer.Option(help="Port of /metrics, /healthz, /readyz (default 8080; 0: any).")
        ] = None,
        no_server: Annotated[bool, typer.Option("--no-server", help="Do not serve /metrics and health.")] = False,
        dry_run: Annotated[bool, typer.Option("--dry-run", help="Plan and record, apply nothing.")] = False,
        at: Annotated[
            str | None,
            typer.Option(help="With a trace history: the trace time the run starts at (ISO-8601 or epoch s)."),
        ] = None,
        virtual: Annotated[
            bool, typer.Option("--virtual", help="Run on a virtual clock (no waiting): replays and demos.")
        ] = False,
        ticks: Annotated[int | None, typer.Option(help="Stop after this many ticks (default: until SIGTERM).")] = None,
        log_format: Annotated[str | None, typer.Option(help="json or text (default: settings log.format).")] = None,
        artifacts: Annotated[
            Path | None, typer.Option(help="Folder for retrained model checkpoints and accuracy reports.")
        ] = None,
        kubeconfig: Annotated[
            str | None, typer.Option(help="Kubeconfig file (default: the in-cluster service account, else ~/.kube).")
        ] = None,
        namespace: Annotated[
            str | None, typer.Option(help="Read policies from this namespace only (default: all).")
        ] = None,
        shard: Annotated[
            str | None, typer.Option(help="INDEX/COUNT: handle only the workloads of this shard (docs/adr/0008).")
        ] = None,
    ) -> None:
        """Run the control loop: every interval read history, forecast, plan, act, record.

        Also serves /metrics, /healthz and /readyz, and runs the scheduled jobs (retraining on a
        schedule and on forecast drift, the daily accuracy report, pruning). SIGTERM or SIGINT
        finishes the current cycle and stops. See docs/operations.md.
        """
        from forecaster.registry import available_models
        from scaleahead.cli import parse_time
        from scaleahead.clock import SystemClock, VirtualClock
        from scaleahead.daemon import Daemon
        from scaleahead.loop import Deps
        from scaleahead.observability import Metrics, configure_logging, serve
        from scaleahead.retraining import holdout_wape
        from scaleahead.settings import Settings
        from storage import Store

        settings = Settings.from_env()
        if interval is not None:
            if not math.isfinite(interval) or interval <= 0:
                raise UserError(f"--interval {interval:g} is not a positive number of seconds.", "Give e.g. 10.")
            settings.loop.interval_s = interval
        if ticks is not None and ticks < 1:
            raise UserError(
                f"--ticks {ticks} would run no cycle.", "Give at least 1, or leave it out to run until SIGTERM."
            )
        if once and ticks is not None:
            raise UserError(
                f"--ticks {ticks} does not go with --once (one cycle).",
                "Drop --ticks, or drop --once to run --ticks cycles.",
            )
        if policies is not None and namespace is not None:
            raise UserError(
                f"--namespace {namespace} does not go with --policies: it picks the policies read from the cluster, "
                f"and --policies {policies} gives them from files.",
                "Drop --namespace, or drop --policies to read the PredictiveScalingPolicy objects of that namespace.",
            )
        if port is not None and not 0 <= port <= 65535:
            raise UserError(f"--port {port} is not a TCP port.", "Give 0 (any free port) to 65535.")
        if log_format is not None and log_format not in ("json", "text"):
            raise UserError(f"--log-format {log_format!r} is not a log format.", "Use json or text.")
        if artifacts is not None:  # its subfolders are made when first written (a retraining, a report)
            check_folder(artifacts, "--artifacts", create=False)
        if (model or settings.forecast.model) not in available_models():
            raise UserError(
                f"Unknown model {model or settings.forecast.model!r} ({'--model' if model else 'forecast.model'}).",
                f"Known models: {', '.join(available_models())}.",
            )
        if target not in ("kubernetes", "memory"):
            raise UserError(f"--target {target!r} is not known.", "Use 'kubernetes' or 'memory'.")
        if model is not None:
            # forecast.model for this process: the family whose champion it runs and follows every
            # minute, and that its retraining fits (until 2026-12-07 the minute check followed
            # forecast.model's champion, replacing the model asked for)
            settings.forecast.model = model
        if dry_run:
            settings.actuation.dry_run = True
        configure_logging(log_format or settings.log.format, settings.log.level)

        def _stop_starting(signum: int, _frame: object) -> None:
            # Before the loop runs nothing is applied or half-written (a migration is one
            # transaction): exit as documented, 0 and a `stopped` line, instead of the default
            # handler's 143 (a review of 2026-12-07: start-up against a slow Prometheus took minutes).
            log.info("signal %d during start-up: stopping", signum, extra={"event": "stopped", "signal": signum})
            raise SystemExit(0)

        signal.signal(signal.SIGTERM, _stop_starting)  # (Ctrl-C stays KeyboardInterrupt: "interrupted", 130)
        from scaleahead.sharding import owned, parse_shard

        metrics = Metrics()  # made first: the policy load and the status writer count into it
        status_sink = None
        policy_source = None
        apply_shard_limits: Callable[[Sequence[Policy]], None] | None = None
        rejected_at_start: list[Any] = []  # published once the clock exists
        writer = None
        cluster: Any = None
        kube_api: Any = None
        from scaleahead.policy import history_points_refusal

        loop_window = settings.loop.history_days * 86400.0
        max_points = settings.loop.max_history_points
        if policies is not None:
            pols = load_policy_path(policies)
            # The operator's files: a window with too many points stops the run here, naming the policy.
            for p in pols:
                too_many = history_points_refusal(p, loop_window, max_points)
                if too_many is not None:
                    raise UserError(
                        f"Policy {p.metadata.namespace}/{p.metadata.name} ({policies}): {too_many}.",
                        "Change the policy's demand.stepSeconds, or raise SCALEAHEAD_LOOP__MAX_HISTORY_POINTS.",
                    )
        else:
            from actuator.policy_resources import ClusterPolicies, PolicyLimits, PolicyStatusWriter

            step_check: Callable[[Policy], str | None] | None = None
            if history.startswith("trace:"):  # a policy at another step than the trace's is skipped
                from scaleahead.planning import step_mismatch

                trace = _load_trace(history)
                source_name = history.removeprefix("trace:")

                def step_check(p: Policy) -> str | None:
                    return step_mismatch(p, trace, source_name)

            def check(p: Policy) -> str | None:
                # A tenant's tiny step is refused on its own object (status Refused), not read.
                too_many = history_points_refusal(p, loop_window, max_points)
                if too_many is not None:
                    return too_many
                return step_check(p) if step_check is not None else None

            api = kube_api = _kube_api(kubeconfig)
            from actuator.autoscalers import AutoscalerCheck

            cluster = ClusterPolicies(
                api,
                namespace,
                check=check,
                cross_namespace=settings.actuation.cross_namespace_targets,
                limits=PolicyLimits.from_settings(settings),
                # a policy that would fight an HPA on the workload it scales is refused (writes only there)
                autoscalers=AutoscalerCheck(api, cluster_wide=namespace is None) if target == "kubernetes" else None,
                on_load=metrics.policies_loaded,
            )
            pols = cluster.load()
            writer = PolicyStatusWriter(api, on_write=metrics.status_written)
            status_sink = writer
            policy_source = cluster.load
            if shard is None or parse_shard(shard)[0] == 0:  # one shard says why objects are skipped
                from actuator.policy_resources import publishing_rejections

                rejected_at_start = cluster.rejected
                policy_source = publishing_rejections(cluster, writer, lambda: clock.now())
        check_capacity_names = _capacity_names_checker(settings, namespace)
        check_capacity_names(pols)
        if policy_source is not None:
            apply_shard_limits = check_capacity_names  # at each reload, from every policy read
        if shard is not None:
            index, count = parse_shard(shard)
            limit_shard = _shard_limiter(settings, index, count)
            limit_shard(pols)  # from every policy, before this shard's are picked
            read_last: list[Sequence[Policy]] = [pols]
            pols = owned(pols, index, count)
            if index != 0 and settings.loop.max_moves > 0:
                # Nodes and pods are the whole cluster's: N shards planning moves from one snapshot
                # would evict N times over and fill the same node. Shard 0 rebalances alone.
                log.info(
                    "shard %d/%d: rebalancing is left to shard 0 (loop.max_moves %d -> 0)",
                    index,
                    count,
                    settings.loop.max_moves,
                    extra={"event": "rebalance_on_shard_0"},
                )
                settings.loop.max_moves = 0
            if policy_source is not None:
                unsharded = policy_source

                def policy_source() -> list[Policy]:
                    everything = unsharded()
                    read_last[0] = everything  # split when the daemon swaps the policies in (on_policies)
                    return owned(everything, index, count)

                def split_last_read(_: Sequence[Policy]) -> None:
                    check_capacity_names(read_last[0])
                    limit_shard(read_last[0])

                apply_shard_limits = split_last_read

        real_now = SystemClock().now()
        if at is not None and not history.startswith("trace:"):
            raise UserError("--at only applies to a trace history.", "Drop --at, or use --history trace:NAME.")
        start = parse_time(at) if at is not None else None
        if start is not None:  # a trace history (checked above): --at before its data is refused as by plan
            from scaleahead.planning import check_history

            check_history(_load_trace(history), start)
        if history.startswith("trace:") and policy_source is None:  # cluster policies: checked one by one
            from scaleahead.planning import check_history_step

            check_history_step(pols, _load_trace(history), history.removeprefix("trace:"))
        if start is None and history.startswith("trace:"):
            from scaleahead.traces import split_of

            start = split_of(_load_trace(history)).test_start  # the test period of EVALUATION.md
        offset = 0.0 if (virtual or start is None) else start - real_now
        window = settings.loop.history_days * 86400.0
        cache = artifacts / "history-cache" if artifacts else None
        # Made before the database: an unknown --history or no Prometheus URL creates none.
        hist = _history(history, settings, window, offset, cache)
        training = _history(
            history,
            settings,
            settings.jobs.history_days * 86400.0,
            offset,
            artifacts / "training-cache" if artifacts else None,
        )
        if history == "prometheus" and not virtual:  # a skewed clock would pass for fresh or missing data
            from scaleahead.prometheus.client import check_clock

            check_clock(hist.client)  # type: ignore[attr-defined]
        if target == "kubernetes" and kube_api is None:  # a missing kubeconfig creates no database either
            kube_api = _kube_api(kubeconfig)
            pols = _without_hpa_fights(kube_api, pols)
        # Opened after the options and the trace are checked: a bad one creates no database.
        store = Store(
            db or settings.storage.url,
            forecast_interval_s=settings.storage.forecast_interval_s,
            migration_lock_timeout_s=settings.storage.migration_lock_timeout_s,
        )
        clock: Any = VirtualClock(start if start is not None else real_now) if virtual else SystemClock()
        if rejected_at_start and writer is not None:
            writer.publish_rejected(rejected_at_start, clock.now())
        name = model or settings.forecast.model
        now = clock.now()
        # The loop's own window: fits a baseline, scores the model, warms the incremental cache.
        train_series = [s for s in hist.read(pols, now).values() if len(s) > 0]
        unloadable: list[int] = []
        fell_back: list[str] = []
        forecaster, model_version_id = _production_model(
            name, store, settings, train_series, unloadable, fell_back, now
        )
        metrics.set_fallback(name, fell_back[0] if fell_back else None)
        short = history_short_for(forecaster, settings.loop.history_days)
        if short:
            log.warning(short, extra={"event": "history_short_for_model"})
        reference = None
        if train_series:
            reference = holdout_wape(forecaster, train_series, settings.forecast.horizon_s)
        leadership = None
        actuator = None
        if target == "memory":
            from scaleahead.tracesource import InMemoryTarget

            cluster_target: Any = InMemoryTarget()
        elif target == "kubernetes":
            identity = replica_identity()
            if shard is not None:  # each shard elects its own leader (docs/adr/0008)
                settings.actuation.lease_name = f"{settings.actuation.lease_name}-shard-{index}-of-{count}"
            # Fences (set and lifted) by a process that stays, and of the shards only by shard 0, the
            # one that rebalances (the others read no nodes).
            rebalancer = shard is None or index == 0
            cluster_target, actuator, leadership = cluster_actuation(
                kube_api, store, pols, settings, clock, identity, fences=not once and ticks is None and rebalancer
            )
        else:
            raise UserError(f"--target {target!r} is not known.", "Use 'kubernetes' or 'memory'.")
        deps = Deps(hist, forecaster, cluster_target, store, pols, model_version_id=model_version_id, actuator=actuator)
        if shard is not None:  # the risk steps of the other shards' workloads are theirs to remove
            from planner.risk import RiskBook
            from scaleahead.sharding import shard_of

            deps.risk = RiskBook(owns=lambda key: shard_of(key, count) == index)
            deps.capacity_scope = f"shard {index}/{count}'s part of the "  # what its capacity is
        daemon = Daemon(
            deps,
            settings,
            clock,
            leadership=leadership,
            metrics=metrics,
            training_history=training,
            background_jobs=not virtual and not once,
            artifact_dir=artifacts / "models" if artifacts else None,
            report_dir=(
                Path(settings.jobs.report_dir)
                if settings.jobs.report_dir
                else (artifacts / "reports" if artifacts else None)
            ),
            reference_error=reference,
            policy_source=policy_source,
            on_policies=_policy_updater(cluster_target, actuator, apply_shard_limits),
            status_sink=status_sink,
            on_lead=(
                _reconciler(
                    actuator,
                    shard,
                    settings.actuation.reconcile_retry_s,
                    # what is left of a Lease after one request: the reads stop while it is held
                    max(1.0, settings.actuation.lease_duration_s - settings.actuation.request_timeout_s),
                )
                if actuator is not None and not once
                else None
            ),
            owns=_owner(shard, namespace if cluster is not None else None),
            kept=(lambda: cluster.rejected_targets) if cluster is not None else None,
            # Checked against the history's own step: warned once here, tried again after a while.
            # Without history the step was assumed, so the first minute's check tries it again.
            unloadable=dict.fromkeys(unloadable, now) if train_series else None,
        )
        shard_index, shard_count = parse_shard(shard) if shard is not None else (0, 1)
        daemon.metrics.shard_index.set(shard_index)
        daemon.metrics.shard_count.set(shard_count)
        server = None
        if not no_server and not once:
            server = serve(
                daemon.metrics, daemon.health, settings.server.host, port if port is not None else settings.server.port
            )
            log.info(
                "serving /metrics, /healthz, /readyz", extra={"event": "listening", "port": server.server_address[1]}
            )
        webhook_server = None
        if settings.webhook.enabled and not once:
            reviews = daemon.metrics.webhook_reviews
            webhook_server = _serve_steering(
                settings,
                store,
                clock,
                on_review=lambda result: reviews.labels(result=result).inc(),
                on_refused=daemon.metrics.webhook_refused.inc,
            )
        stop = threading.Event()
        exit_code = 0

        def _stop(signum: int, _frame: object) -> None:
            log.info("signal %d: stopping after this cycle", signum, extra={"event": "signal", "signal": signum})
            daemon.health.shutting_down()
            stop.set()

        signal.signal(signal.SIGTERM, _stop)
        signal.signal(signal.SIGINT, _stop)
        try:
            if once:
                result = daemon.tick(clock.now())
                report = result.report
                summary: dict[str, Any] = {"role": result.role}
                if report is not None:
                    from scaleahead.cli import plan_to_json

                    summary.update(plan_to_json(report.plan, report.plan_id, forecaster.name))
                    summary["phase_ms"] = {k: round(v, 3) for k, v in report.phase_ms.items()}
                    summary["errors"] = report.errors
                    summary["results"] = [
                        {"target": r.action.target, "outcome": r.outcome, "detail": r.detail} for r in report.results
                    ]
                if result.role == "standby":  # why: another holder, or no Lease to be had at all
                    summary["standby_reason"] = str(getattr(daemon.leadership, "last_error", "") or "")
                print(json.dumps(summary, indent=2))
                failed = None
                if result.role == "standby" and getattr(daemon.leadership, "lease_failed", False):
                    # One cycle that could not even read the Lease is a failure, not a quiet standby
                    # (exit 0 with {"role": "standby"}: a docs audit read it as success).
                    failed = (
                        f"nothing was planned: the leader Lease could not be read or written "
                        f"({summary['standby_reason']}). Check --kubeconfig, that the API server is "
                        "reachable, and the RBAC for leases in actuation.namespace."
                    )
                elif report is not None:
                    failed = _none_planned_from_data(report, daemon.deps.policies)
                if failed:
                    from rich.markup import escape

                    from scaleahead.cli import err_console

                    err_console.print(f"[bold red]error:[/] {escape(failed)}", highlight=False, soft_wrap=True)
                    exit_code = 1
            else:
                sleep = None if virtual else stop.wait
                daemon.run(stop.is_set, sleep=sleep, max_ticks=ticks)
        finally:
            finished = daemon.shutdown()
            if server is not None:
                server.shutdown()
            if webhook_server is not None:
                webhook_server.shutdown()
        if not finished:
            # A job (a retrain: minutes) outlived the shutdown's wait: its worker thread would hold
            # the interpreter's exit until the pod's grace period ends in SIGKILL. Exit 0 now; the
            # lease is released and the job wrote nothing half-done (Daemon.shutdown).
            logging.shutdown()
            os._exit(exit_code)
        if exit_code:
            raise typer.Exit(exit_code)

    @app.command()
    def retrain(
        policies: OncePoliciesOpt = None,
        history: HistoryOpt = "prometheus",
        db: DbOpt = None,
        at: Annotated[
            str | None, typer.Option(help="Retrain on the history before this time (default: trace end, or now).")
        ] = None,
        artifacts: Annotated[Path | None, typer.Option(help="Folder for the model checkpoint.")] = None,
        kubeconfig: Annotated[
            str | None, typer.Option(help="Kubeconfig file, when policies come from the cluster.")
        ] = None,
        allow_failed_reads: Annotated[
            bool,
            typer.Option(
                "--allow-failed-reads",
                help="Retrain on the workloads that were read when others' history reads failed (default: refuse).",
            ),
        ] = False,
    ) -> None:
        """Retrain once and register the model as a rollout challenger (what the retraining CronJob runs).

        The new model does not go into production: a rollout is opened per rollout group; promote it
        with the rollout commands once it has proven itself.
        """
        from forecaster.registry import available_models
        from scaleahead.cli import parse_time
        from scaleahead.clock import SystemClock
        from scaleahead.retraining import check_history_to_retrain, read_problems
        from scaleahead.retraining import retrain as do_retrain
        from scaleahead.settings import Settings
        from storage import Store

        settings = Settings.from_env()
        if artifacts is not None:  # before the fit (minutes): a file there failed after it
            check_folder(artifacts, "--artifacts", create=False)
        # before the history's read (a minute from Prometheus), creating nothing: a bad --db was
        # said only after it
        Store.check_url(db or settings.storage.url)
        if policies is not None:
            pols = load_policy_path(policies)
        else:
            from actuator.policy_resources import ClusterPolicies, PolicyLimits

            pols = ClusterPolicies(
                _kube_api(kubeconfig),
                cross_namespace=settings.actuation.cross_namespace_targets,
                limits=PolicyLimits.from_settings(settings),
            ).load()
            if not pols:
                raise UserError("No PredictiveScalingPolicy objects in the cluster.", "Apply policies first.")
        if history.startswith("trace:"):
            from scaleahead.planning import check_history, check_history_step, default_at
            from scaleahead.traces import load_series

            series = load_series(history.removeprefix("trace:"))
            check_history_step(pols, series, history.removeprefix("trace:"))
            now = parse_time(at) if at is not None else default_at(series)
            check_history(series, now)  # --at before the trace: said as `run` says it (operator audit)
        else:
            now = parse_time(at) if at is not None else SystemClock().now()
        source = _history(history, settings, settings.jobs.history_days * 86400.0, 0.0)
        data = source.read(pols, now)
        # after the options and the history: a bad option, or history too short to retrain on,
        # creates no database (it was created and migrated first: docs audit)
        check_history_to_retrain(data, now, settings.forecast.horizon_s)
        store = Store(db or settings.storage.url, migration_lock_timeout_s=settings.storage.migration_lock_timeout_s)
        champion_name = settings.forecast.model
        if champion_name not in available_models():
            champion_name = settings.forecast.fallback_model
        # The champion is what production runs: the registry's newest champion of the family (a
        # learned one from its checkpoint), not a model trained here (retrain scores a fitted
        # family out of sample on its own).
        champion, champion_id = _production_model(champion_name, store, settings, list(data.values()), now=now)
        result = do_retrain(
            pols,
            data,
            store,
            settings,
            now,
            champion=champion,
            champion_label=str(champion_id) if champion_id is not None else champion.name,
            trigger="cronjob",
            artifact_dir=artifacts,
            allow_failed_reads=True if allow_failed_reads else None,
            **read_problems(source),
        )
        left_out = result.metrics.get("left_out") or []
        if left_out:
            from rich.markup import escape

            from scaleahead.cli import err_console

            listed = "; ".join(f"{e['workload']} ({e['reason']}: {e['detail']})" for e in left_out)
            said = (
                f"model {result.model_version_id} was fitted on {result.metrics.get('series', 0)} series and "
                f"scored on {result.metrics.get('scored_series', 0)}; {len(left_out)} workload(s) left out of "
                f"fitting or scoring: {listed}"
            )
            err_console.print(f"[bold yellow]warning:[/] {escape(said)}", highlight=False, soft_wrap=True)
        print(
            json.dumps(
                {
                    "model_version_id": result.model_version_id,
                    "family": result.family,
                    "rollouts": list(result.rollout_ids),
                    "metrics": result.metrics,
                    "left_out": left_out,
                    "artifact_path": result.artifact_path,
                },
                indent=2,
            )
        )

    @app.command()
    def crd(
        output: Annotated[
            Path | None, typer.Option(help="Write here (e.g. deploy/base/crd.yaml); default: print.")
        ] = None,
    ) -> None:
        """Generate the PredictiveScalingPolicy CustomResourceDefinition from the policy schema."""
        from scaleahead.crd import crd_yaml

        check_output(output, "--output")
        text = crd_yaml()
        if output is None:
            print(text, end="")
        else:
            output.write_text(text, encoding="utf-8")

    @app.command("config-doc")
    def config_doc(
        output: Annotated[
            Path | None, typer.Option(help="Write here (e.g. docs/configuration.md); default: print.")
        ] = None,
    ) -> None:
        """Generate docs/configuration.md (policy fields and process settings) from the schemas."""
        from scaleahead.configdoc import configuration_markdown

        check_output(output, "--output")
        text = configuration_markdown()
        if output is None:
            print(text, end="")
        else:
            output.write_text(text, encoding="utf-8")
