"""The planner entry point: ``plan(forecasts, state, policies, now) -> Plan``.

Per workload: services get a replica decision (``planner.replicas``), functions with a warm pool a
warm-pool decision (``planner.warm``). Then, when a capacity is given or a namespace has a pod
quota, replicas are shared under shortage by priority, then alpha-fair by weight across tenants
(``objective.fairness``; ``planner.fairness``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from functools import partial
from itertools import compress, repeat
from operator import is_
from typing import cast

from planner.batch import ReplicaBatch, gc_paused
from planner.fairness import CLUSTER, Claim, Grant, allocate_pools
from planner.placement_rules import placement_signature
from planner.rebalance import (
    DEFAULT_MAX_PEAK_FRACTION,
    Incoming,
    RebalanceWeights,
    plan_moves,
    unmovable_notes,
)
from planner.replicas import decide_replicas, observed_need
from planner.table import policy_table
from planner.warm import WarmDecision, fit_memory_budget, plan_warm_pools, worth_per_mb
from scaleahead.policy import Policy, PolicySpec
from scaleahead.types import (
    Action,
    ClusterState,
    Forecast,
    InvocationForecast,
    LazyReason,
    Plan,
    Pod,
    Reason,
    ScaleTo,
    SetWarmPool,
    WorkloadRef,
    WorkloadState,
)


def plan(
    forecasts: Mapping[WorkloadRef, Forecast],
    state: ClusterState,
    policies: Sequence[Policy],
    now: float,
    interval_s: float = 10.0,
    max_moves: int = 0,
    *,
    invocations: Mapping[WorkloadRef, InvocationForecast] | None = None,
    capacity: Mapping[str, int] | None = None,
    warm_memory_budget_mb: float | None = None,
    capacity_scope: str = "",
    warm_memory_held_mb: float = 0.0,
    rebalance_weights: RebalanceWeights | None = None,
    max_peak_fraction: float = DEFAULT_MAX_PEAK_FRACTION,
) -> Plan:
    """Decide actions for every policy's workload. Pure: no I/O, no clock.

    Args:
        forecasts: the newest demand forecast per service (missing ones trigger the fallback).
        state: what the cluster looks like now.
        policies: one per workload.
        now: decision time (epoch seconds).
        interval_s: the control interval; a replica asked for now serves from
            ``now + startup`` for at least one interval.
        max_moves: when above 0, also propose at most this many rebalancing ``MovePod``
            actions from ``state.nodes``/``state.pods``/``state.pdbs`` (planner/rebalance.py),
            and note which pods stay for a rule the planner does not model (``unmovable_notes``).
            0 (the default) proposes none.
        invocations: invocation-probability forecasts of functions (``workloadClass: function``
            with ``warmPool.enabled``); a missing one triggers the policy's fallback.
        capacity: replicas available under shortage: keys are tenant names (a tenant's quota) and
            ``"*"`` (the whole cluster). None: no limit. The namespaces' pod quotas
            (``state.pod_quotas``) are shared the same way, after the tenant quotas.
        warm_memory_budget_mb: total memory all warm pools may hold together. None: no limit.
        capacity_scope: what ``capacity`` and ``warm_memory_budget_mb`` are a part of, before their
            names in the reasons (``run --shard 2/3``: "shard 2/3's part of the "); "" for the whole.
        warm_memory_held_mb: memory of the warm-memory budget held outside this plan (the loop's
            unreadable functions); ``warm_memory_budget_mb`` is what is left, and the reasons say so.
        rebalance_weights: what a freed node, a separated pair and a move are worth to the moves
            (``loop.rebalance_*``); None: ``RebalanceWeights()``.
        max_peak_fraction: a node receiving a moved pod keeps its forecast-peak CPU at or below this
            share of its allocatable CPU.
    """
    fallbacks: dict[WorkloadRef, str] = {}
    table = policy_table(policies)  # built once per set of policy objects (planner/table.py)
    workloads = state.workloads
    refs = table.service_refs
    states: list[WorkloadState | None] = list(map(workloads.get, refs))
    for i in compress(range(len(states)), map(is_, states, repeat(None))):
        lo = table.services.specs[i].min_replicas
        states[i] = WorkloadState(refs[i], replicas=lo, ready_replicas=lo)
    # Services: the batch path (planner/batch.py), decision for decision the same as
    # planner.replicas.decide_replicas, with reasons formatted on first read.
    # One service alone (the replay, a dry run of one policy) takes the reference itself: the
    # batch's arrays cost more than they save there (287 us against 21 us a plan; the replay of
    # nasa-10s makes 127,000 of them).
    decided: list[ScaleTo] = []
    needs_now: Callable[[], Mapping[WorkloadRef, int]] = dict
    if len(refs) == 1:
        ref, spec, ws = refs[0], table.services.specs[0], cast(WorkloadState, states[0])
        one = decide_replicas(ref, spec, ws, forecasts.get(ref), now, interval_s)
        decided = [one.action]
        if one.fallback is not None:
            fallbacks[ref] = one.fallback
        need = observed_need(spec, ws, now)
        needs_now = lambda: {ref: need}  # noqa: E731 - one value, asked for only under shortage
    elif refs:
        batch = ReplicaBatch(
            refs, table.services, cast(list[WorkloadState], states), list(map(forecasts.get, refs)), now, interval_s
        )
        decided = batch.actions
        for i, mode in batch.fallback_rows.items():
            fallbacks[refs[i]] = mode
        needs_now = batch.needs_now
    functions: list[tuple[int, tuple[WorkloadRef, PolicySpec, WorkloadState]]] = []
    for i in table.function_index:
        ref, spec = table.refs[i], policies[i].spec
        ws = workloads.get(ref) or WorkloadState(ref, replicas=spec.min_replicas, ready_replicas=spec.min_replicas)
        functions.append((i, (ref, spec, ws)))
    notes: list[str] = []
    wanted: list[WarmDecision] = []
    if functions:
        wanted, _ = plan_warm_pools([item for _, item in functions], invocations or {}, now)
        for (_, (ref, _, _)), d in zip(functions, wanted, strict=True):
            if d.fallback:
                fallbacks[ref] = d.fallback
    slots = [slot for slot, _ in functions]

    def merged(warm: Sequence[WarmDecision]) -> list[Action]:
        """The services' and the functions' decisions in policy order."""
        if not warm:
            return list(decided)
        by_slot = {slot: d.action for slot, d in zip(slots, warm, strict=True)}
        it = iter(decided)
        return [by_slot[i] if i in by_slot else next(it) for i in range(len(policies))]

    def limited(actions: list[Action]) -> tuple[list[Action], list[str]]:
        """``actions`` held where a ResourceQuota refuses their new pods, then cut to the shared pools."""
        if state.quota_refused:
            actions = [_hold_refused(a, state.quota_refused) for a in actions]
        if not (capacity or state.pod_quotas or state.resource_quotas):
            return actions, []
        specs = [p.spec for p in table.policies]  # ``actions`` is in policy order, one action each
        pod_pools, resource_pools = state.pod_quotas, state.resource_quotas
        if state.pods_running:
            pod_pools, resource_pools = _without_unwanted_pods(actions, state)
        return _share_capacity(
            actions,
            specs,
            capacity or {},
            pod_pools,
            resource_pools,
            state.pod_shapes,
            workloads,
            table.ref_set,
            state.quota_members,
            state.pods_running,
            capacity_scope,
            needs_now,
        )

    warm_notes: list[str] = []
    if functions and warm_memory_budget_mb is not None:
        fit = partial(
            fit_memory_budget, budget_mb=warm_memory_budget_mb, scope=capacity_scope, held_mb=warm_memory_held_mb
        )
        if capacity or state.pod_quotas or state.resource_quotas or state.quota_refused:
            bounds = [
                _pool_bound(ref, spec, w.action.from_instances, w.action.to_instances, capacity or {}, state)
                for (_, (ref, spec, _)), w in zip(functions, wanted, strict=True)
            ]
            final, warm_notes, fair_notes = _budget_and_share(
                wanted, bounds, slots, warm_memory_budget_mb, fit, merged, limited
            )
        else:
            warm, warm_notes = fit(wanted)
            final, fair_notes = merged(warm), []
    else:
        final, fair_notes = limited(merged(wanted))
    notes.extend(warm_notes)
    notes.extend(fair_notes)
    if max_moves > 0:
        final.extend(
            plan_moves(
                state,
                max_moves,
                max_peak_fraction=max_peak_fraction,
                weights=rebalance_weights,
                incoming=incoming_pods(final, state.pod_shapes, state.pod_rules) + pending_incoming(state.pending_pods),
                notes=notes,
            )
        )
        notes.extend(unmovable_notes(state.pods))
    return Plan(created_at=now, actions=tuple(final), fallbacks=fallbacks, notes=tuple(notes))


def incoming_pods(
    actions: Sequence[Action],
    shapes: Mapping[WorkloadRef, Mapping[str, int]],
    rules: Mapping[WorkloadRef, Pod] | None = None,
) -> tuple[Incoming, ...]:
    """The pods ``actions`` add (a scale-up's, a larger warm pool's), per workload with the requests
    of one of its pods (``ClusterState.pod_shapes``) and its pod template's node rules
    (``ClusterState.pod_rules``; none known: any node): what the rebalancing moves of the same plan
    keep room for. A workload whose pod template was not read (no shape) is not counted."""
    out: list[Incoming] = []
    for a in actions:
        if isinstance(a, ScaleTo):
            added = a.to_replicas - a.from_replicas
        elif isinstance(a, SetWarmPool):
            added = a.to_instances - a.from_instances
        else:
            continue
        shape = shapes.get(a.workload)
        if added > 0 and shape is not None:
            cpu, mem = shape.get("requests.cpu", 0), shape.get("requests.memory", 0)
            out.append(Incoming(a.workload.key, float(cpu), float(mem), added, (rules or {}).get(a.workload)))
    return tuple(out)


def pending_incoming(pending: Sequence[Pod]) -> tuple[Incoming, ...]:
    """The pods still waiting for a node (``ClusterState.pending_pods``), per owner, shape and node
    rules, named "<namespace>/<owner> (pending)": the moves keep room for them too, on the nodes
    their rules allow."""
    groups: dict[tuple[str, float, float, tuple[object, ...]], tuple[Pod, int]] = {}
    for p in pending:
        key = (f"{p.namespace}/{p.owner or p.name} (pending)", float(p.cpu_request_m), float(p.memory_request_mb))
        full = (*key, placement_signature(p))
        first, n = groups.get(full, (p, 0))
        groups[full] = (first, n + 1)
    return tuple(Incoming(name, cpu, mem, n, first) for (name, cpu, mem, _), (first, n) in groups.items())


#: Most packings of the warm-memory budget on what the sharing grants (``_budget_and_share``).
BUDGET_ROUNDS = 8


def _budget_and_share(
    wanted: Sequence[WarmDecision],
    bounds: Sequence[int],
    slots: Sequence[int],
    budget_mb: float,
    fit: Callable[..., tuple[list[WarmDecision], list[str]]],
    merged: Callable[[Sequence[WarmDecision]], list[Action]],
    limited: Callable[[list[Action]], tuple[list[Action], list[str]]],
) -> tuple[list[Action], list[str], list[str]]:
    """The plan's actions, warm-budget notes and sharing notes when functions share both the
    warm-memory budget and a capacity or quotas (their warm instances are pods).

    Packing the budget on what each function wants and sharing after it (as until 2026-12-07) let
    a kept function hold the memory of instances its quota then refused: the functions dropped for
    want of it were told they "did not fit", and the memory went unspent. So:

    1. The budget is packed counting each function at most at what the pools could grant it
       (``bounds``: the smallest of its pools, at least the pods its autoscaler runs); the kept
       ones claim what they want, the dropped ones nothing, and the pools are shared.
    2. Packed again with each kept function counted at its grant, packed first (its memory stays
       its own), and the dropped ones after it in rank order: a dropped one that fits now is kept,
       and the pools are shared again. A new claimant mostly lowers the others' grants, but can
       raise one (it takes a tenant's room from a kept function of that tenant, and another kept
       one then gets more of their namespace's quota): when the sharing then goes over the budget,
       the best of the new ones is tried alone, and if that goes over too it is refused ("with it
       warm the capacity and quotas would grant the functions already kept N MB more than the
       warm-memory budget holds"). Repeated until no dropped function fits (at most
       ``BUDGET_ROUNDS`` packings, else a note); the last packing's reasons and note are those of
       the final grants ("did not fit in the 100 MB left").

    A kept function is only cut by the functions that hold warm instances in the final plan. The
    first packing's sharing could go over the budget only if a bound were below a grant; it is then
    replaced by the packing on what each function wants, which always holds.
    """
    per = [w.memory_mb / w.action.to_instances if w.action.to_instances > 0 else 0.0 for w in wanted]
    bounded = [min(w.action.to_instances, b) * m for w, b, m in zip(wanted, bounds, per, strict=True)]

    def held(actions: Sequence[Action]) -> list[float]:
        return [cast(SetWarmPool, actions[s]).to_instances * m for s, m in zip(slots, per, strict=True)]

    counted0: Sequence[float] = bounded
    warm, warm_notes = fit(wanted, counted=counted0)
    final, fair_notes = limited(merged(warm))
    if sum(held(final)) > budget_mb + 1e-9:  # a bound below a grant: pack on the wants, which always holds
        counted0 = [w.memory_mb for w in wanted]
        warm, warm_notes = fit(wanted)
        final, fair_notes = limited(merged(warm))
    if all(
        abs(g - min(c, d.memory_mb)) <= 1e-9
        for g, c, d in zip(held(final), counted0, warm, strict=True)
        if d.memory_mb > 0
    ):
        # The sharing cut no kept function below what the packing counted: no dropped one fits in
        # what is left (room only shrank as the budget packed), and its reason, "did not fit in the
        # N MB left when its turn came", stays true (as without a capacity or quota).
        return final, warm_notes, fair_notes
    refused: dict[int, str] = {}  # dropped functions whose admission took the budget over
    packings = 1
    while packings < BUDGET_ROUNDS:
        kept = [d.memory_mb > 0 for d in warm]
        if not any(w.memory_mb > 0 and not k for w, k in zip(wanted, kept, strict=True)):
            return final, warm_notes, fair_notes  # the budget dropped no function
        got = held(final)
        counted = [g if k else b for g, k, b in zip(got, kept, bounded, strict=True)]
        first = [i for i, k in enumerate(kept) if k]
        again, again_notes = fit(wanted, counted=counted, first=first, refused=refused)
        packings += 1
        admitted = [i for i, (d, k) in enumerate(zip(again, kept, strict=True)) if d.memory_mb > 0 and not k]
        if not admitted:
            # None fits in what the final grants leave: these reasons and this note are the true ones.
            return _with_dropped(final, again, kept, slots), again_notes, fair_notes
        shared, shared_notes = limited(merged(again))
        if sum(held(shared)) <= budget_mb + 1e-9:
            warm, warm_notes, final, fair_notes = again, again_notes, shared, shared_notes
            continue
        # A new claimant can raise a kept function's grant (cutting one pool's claimant frees room in
        # another pool, where a kept one then gets more): over the budget. Admit the best of them alone.
        best = min(admitted, key=lambda i: (-worth_per_mb(wanted[i].probability, wanted[i].memory_mb), i))
        alone = [again[i] if i == best else d for i, d in enumerate(warm)]
        shared, shared_notes = limited(merged(alone))
        if sum(held(shared)) <= budget_mb + 1e-9:
            warm, final, fair_notes = alone, shared, shared_notes  # its reasons come from the next packing
            continue
        room = budget_mb - sum(got)
        refused[best] = (
            "with it warm the capacity and quotas would grant the functions already kept "
            f"{sum(held(shared)) - budget_mb:g} MB more than the warm-memory budget holds (its {counted[best]:g} MB "
            f"fitted in the {room:g} MB left when it was tried)"
        )
    kept = [d.memory_mb > 0 for d in warm]
    counted = [g if k else b for g, k, b in zip(held(final), kept, bounded, strict=True)]
    again, again_notes = fit(wanted, counted=counted, first=[i for i, k in enumerate(kept) if k], refused=refused)
    left = budget_mb - sum(held(final))
    note = (
        f"the warm-memory budget did not settle with the capacity and quotas in {BUDGET_ROUNDS} packings: "
        f"{left:g} MB of it is unspent, which a function it dropped may fit in"
    )
    return _with_dropped(final, again, kept, slots, only_unfit=True), [*again_notes, note], fair_notes


def _with_dropped(
    final: Sequence[Action],
    packed: Sequence[WarmDecision],
    kept: Sequence[bool],
    slots: Sequence[int],
    only_unfit: bool = False,
) -> list[Action]:
    """``final`` with the actions (and so the reasons) of the functions ``kept`` does not keep taken
    from ``packed``, a packing on the final grants; with ``only_unfit``, only those ``packed`` drops
    too (one it would keep has no true reason of its own: the plan's note speaks of it)."""
    out = list(final)
    for s, d, k in zip(slots, packed, kept, strict=True):
        if not k and not (only_unfit and d.memory_mb > 0):
            out[s] = d.action
    return out


def _pool_bound(
    ref: WorkloadRef, spec: PolicySpec, have: int, want: int, capacity: Mapping[str, int], state: ClusterState
) -> int:
    """Most warm instances of function ``ref`` any sharing could grant (``_budget_and_share``): its
    smallest pool (tenant and cluster capacity; its namespace's and scoped quotas on pods, and on
    CPU and memory by its pod's shape when the namespace's state was read), at least the pods its
    Knative autoscaler runs up to ``want`` (they are kept whatever the pools), at most ``want``,
    or ``have`` when a ResourceQuota refuses the pods it would add (``_hold_refused``)."""
    if want > have and ref in state.quota_refused:
        want = have
    bound = want
    for key in (spec.tenant, CLUSTER):
        if key in capacity:
            bound = min(bound, capacity[key])
    if ref in state.workloads:  # an unread workload is left out of the namespace quotas
        pools = [ref.namespace] + [k for k, refs in state.quota_members.items() if ref in refs]
        shape = state.pod_shapes.get(ref) or {}
        for pool in pools:
            if pool in state.pod_quotas:
                bound = min(bound, state.pod_quotas[pool])
            for res, amount in shape.items():
                room = state.resource_quotas.get(pool, {}).get(res)
                if room is not None and amount > 0:
                    bound = min(bound, room // amount)
    return max(bound, min(want, state.pods_running.get(ref, 0)), 0)


def _without_unwanted_pods(
    actions: Sequence[Action], state: ClusterState
) -> tuple[dict[str, int], dict[str, dict[str, int]]]:
    """The namespace pools less the pods a Knative Service runs beyond what its decision wants
    (``ClusterState.pods_running``): its autoscaler runs them whatever the plan, so they are in
    the quota's ``used`` and not free for the others, while its claim asks only for what it wants.
    A floor raise up to them then needs no room; one above them needs the room for the rest."""
    pods = dict(state.pod_quotas)
    resources = {k: dict(v) for k, v in state.resource_quotas.items()}
    for a in actions:
        if not isinstance(a, (ScaleTo, SetWarmPool)):
            continue
        running = state.pods_running.get(a.workload)
        if not running:
            continue
        want = a.to_instances if isinstance(a, SetWarmPool) else a.to_replicas
        extra = running - max(want, 0)
        if extra <= 0:
            continue
        ref = a.workload
        keys = [ref.namespace] + [k for k, refs in state.quota_members.items() if ref in refs]
        shape = state.pod_shapes.get(ref) or {}
        for key in keys:
            if key in pods:
                pods[key] -= extra
            for res, amount in shape.items():
                if key in resources and res in resources[key]:
                    resources[key][res] -= extra * amount
    return pods, resources


def share_capacity(
    plan_: Plan,
    policies: Sequence[Policy],
    capacity: Mapping[str, int],
    namespace_pods: Mapping[str, int] | None = None,
) -> Plan:
    """Share ``capacity`` (and namespace pod quotas) among a finished plan's replica decisions.
    (Quotas on CPU and memory need the pods' shapes: ``plan`` shares them from its ``state``.)

    What ``plan(..., capacity=...)`` does at its end, for plans made in parts (``scaleahead plan
    --prometheus`` plans each demand query on its own, then merges).
    """
    table = policy_table(policies)
    by_ref = dict(zip(table.refs, (p.spec for p in table.policies), strict=True))
    specs = [by_ref.get(a.workload) if isinstance(a, (ScaleTo, SetWarmPool)) else None for a in plan_.actions]
    actions, notes = _share_capacity(list(plan_.actions), specs, capacity, namespace_pods or {}, {}, {})
    return replace(plan_, actions=tuple(actions), notes=plan_.notes + tuple(notes))


class _SharedReasons:
    """The ``fair_share`` sentences of one plan, made on first read (``LazyReason``): a short quota
    can cut thousands of decisions, and formatting each cut's sentence (with the sentence of the
    decision it cuts) would cost more than the sharing."""

    __slots__ = ("rows",)

    def __init__(self) -> None:
        self.rows: list[tuple[ScaleTo | SetWarmPool, Grant]] = []

    def reason_of(self, i: int) -> tuple[str, Mapping[str, float | int | str]]:
        a, g = self.rows[i]
        now, wanted = _now_and_wanted(a)
        if isinstance(a, SetWarmPool):
            head = f"keep {g.granted} warm instances of {a.workload} (has {now})"
        elif g.granted != now:
            head = f"scale {a.workload} {now} -> {g.granted}"
        else:
            head = f"hold {a.workload} at {now}"
        text = f"{head}: wanted {wanted} ({a.reason.message}); under shortage {g.why}"
        return text, {**a.reason.details, "wanted": wanted, "granted": g.granted}


def _now_and_wanted(a: ScaleTo | SetWarmPool) -> tuple[int, int]:
    """(what the workload has, what the decision wants): replicas, or a function's warm instances."""
    if isinstance(a, SetWarmPool):
        return a.from_instances, a.to_instances
    return a.from_replicas, a.to_replicas


def _hold_refused(action: Action, refused: Mapping[WorkloadRef, str]) -> Action:
    """``action``, or, when it adds pods a ResourceQuota refuses outright (``ClusterState.quota_refused``),
    a hold at the current count that says why and what the plan wanted (reason ``quota_refused``):
    the API server would refuse every new pod, so the quota's room goes to the others."""
    if isinstance(action, ScaleTo):
        have, want = action.from_replicas, action.to_replicas
    elif isinstance(action, SetWarmPool):
        have, want = action.from_instances, action.to_instances
    else:
        return action
    why = refused.get(action.workload)
    if why is None or want <= have:
        return action
    ref = action.workload
    text = f"hold {ref.namespace}/{ref.name} at {have}: the plan wanted {want} ({action.reason.message}), but {why}"
    reason = Reason("quota_refused", text, {"wanted": want, "held": have})
    if isinstance(action, ScaleTo):
        return replace(action, to_replicas=have, reason=reason)
    return replace(action, to_instances=have, keep_warm_s=action.keep_warm_s if have > 0 else 0.0, reason=reason)


def _share_capacity(
    actions: list[Action],
    specs: Sequence[PolicySpec | None],
    capacity: Mapping[str, int],
    namespace_pods: Mapping[str, int],
    namespace_resources: Mapping[str, Mapping[str, int]],
    shapes: Mapping[WorkloadRef, Mapping[str, int]],
    read: Mapping[WorkloadRef, WorkloadState] | None = None,
    planned: frozenset[WorkloadRef] = frozenset(),
    members: Mapping[str, frozenset[WorkloadRef]] | None = None,
    running: Mapping[WorkloadRef, int] | None = None,
    scope: str = "",
    needs_now: Callable[[], Mapping[WorkloadRef, int]] | None = None,
) -> tuple[list[Action], list[str]]:
    """Cut replica decisions to the capacity, explaining every cut in the action's reason.

    With ``read`` (the workloads whose state was read this cycle), a workload missing from it is
    left out of the namespace quotas: the quota's ``used`` already holds its pods, which the
    reader could not add back to what the quota leaves, so its claim would count them twice.
    ``planned``: every workload of the plan's policies (``PolicyTable.ref_set``, built once per
    policy set), so that the unread ones are one set difference.

    ``specs[i]`` is the policy of ``actions[i]`` (None: not shared, e.g. a workload without one).
    A function's warm instances (``SetWarmPool``) are pods too: they share every pool with the
    services' replicas, by the same priorities and weights, with no floor. ``members``: the pools
    of ``namespace_pods`` / ``namespace_resources`` that are not a whole namespace
    (``ClusterState.quota_members``). ``running``: the pods a Knative Service's autoscaler runs
    (``ClusterState.pods_running``); up to what its decision wants they are kept off the top of
    every pool like a service's ``keep``, since they run whatever it is granted. ``needs_now``:
    each service's reactive need (the replicas demand observed now needs), asked for only when a
    pool is short (None: read from each decision's reason, ``reactive_replicas``). Up to its current
    replicas it is part of the service's floor, served before any forecast's growth: another
    workload's forecast does not take replicas a service needs now (until 2026-12-07 it could).
    """
    slots = [i for i, a in enumerate(actions) if isinstance(a, (ScaleTo, SetWarmPool)) and specs[i] is not None]
    pools = (capacity, namespace_pods, namespace_resources, shapes, members or {})
    # Most cycles no pool is short: tell that from the sums the pools need before building any
    # claim. Leaving unread workloads out only lowers those sums, so they are looked for (a hash
    # of every workload) only when a pool looks short.
    if not _is_short(actions, specs, slots, *pools):
        return actions, []
    outside: frozenset[WorkloadRef] = frozenset()
    if read is not None and (namespace_pods or namespace_resources):
        outside = planned.difference(read.keys())
        if outside and not _is_short(actions, specs, slots, *pools, outside):
            return actions, []
    with gc_paused():  # thousands of claims and grants, none of them garbage yet (planner/batch.py)
        return _cut_to_shares(actions, specs, slots, *pools, outside, running or {}, scope, needs_now)


def _is_short(
    actions: list[Action],
    specs: Sequence[PolicySpec | None],
    slots: Sequence[int],
    capacity: Mapping[str, int],
    namespace_pods: Mapping[str, int],
    namespace_resources: Mapping[str, Mapping[str, int]],
    shapes: Mapping[WorkloadRef, Mapping[str, int]],
    members: Mapping[str, frozenset[WorkloadRef]],
    outside: frozenset[WorkloadRef] = frozenset(),
) -> bool:
    """Whether the decisions at ``slots`` want more than some pool holds (a plain loop: this runs
    every cycle a namespace has a quota). ``outside``: workloads in no namespace pool."""
    scoped = _scoped_pools(members)
    by_tenant: dict[str, int] = dict.fromkeys((t for t in capacity if t != CLUSTER), 0)
    by_namespace: dict[str, int] = dict.fromkeys(namespace_pods, 0)
    by_resource: dict[tuple[str, str], int] = {
        (ns, k): 0 for ns, amounts in namespace_resources.items() for k in amounts
    }
    total = 0
    for i in slots:
        a = cast("ScaleTo | SetWarmPool", actions[i])
        want = a.to_instances if isinstance(a, SetWarmPool) else a.to_replicas
        if want < 0:
            want = 0
        total += want
        if by_tenant:
            tenant = cast(PolicySpec, specs[i]).tenant
            if tenant in by_tenant:
                by_tenant[tenant] += want
        if outside and a.workload in outside:
            continue
        if by_namespace:
            ns = a.workload.namespace
            if ns in by_namespace:
                by_namespace[ns] += want
        if by_resource and a.workload.namespace in namespace_resources:
            for key, amount in shapes.get(a.workload, {}).items():
                if (a.workload.namespace, key) in by_resource:
                    by_resource[(a.workload.namespace, key)] += want * amount
        if scoped and a.workload in scoped:
            for pool in scoped[a.workload]:
                if pool in by_namespace:
                    by_namespace[pool] += want
                for key, amount in shapes.get(a.workload, {}).items():
                    if (pool, key) in by_resource:
                        by_resource[(pool, key)] += want * amount
    return (
        any(by_tenant.get(t, 0) > q for t, q in capacity.items() if t != CLUSTER)
        or any(by_namespace.get(ns, 0) > q for ns, q in namespace_pods.items())
        or (CLUSTER in capacity and total > capacity[CLUSTER])
        or any(v > namespace_resources[ns][k] for (ns, k), v in by_resource.items())
    )


def _reactive_need(action: ScaleTo | SetWarmPool) -> int:
    """The replicas demand observed now needs, as the decision's reason says (``reactive_replicas``;
    0 when it says none: a fallback, a function)."""
    value = action.reason.details.get("reactive_replicas", 0)
    return int(value) if isinstance(value, int | float) and math.isfinite(value) else 0


def _scoped_pools(members: Mapping[str, frozenset[WorkloadRef]]) -> dict[WorkloadRef, list[str]]:
    """Each workload's pools that are not a whole namespace (``members`` inverted)."""
    out: dict[WorkloadRef, list[str]] = {}
    for pool, refs in members.items():
        for ref in refs:
            out.setdefault(ref, []).append(pool)
    return out


def _cut_to_shares(
    actions: list[Action],
    specs: Sequence[PolicySpec | None],
    slots: Sequence[int],
    capacity: Mapping[str, int],
    namespace_pods: Mapping[str, int],
    namespace_resources: Mapping[str, Mapping[str, int]],
    shapes: Mapping[WorkloadRef, Mapping[str, int]],
    members: Mapping[str, frozenset[WorkloadRef]],
    outside: frozenset[WorkloadRef] = frozenset(),
    running: Mapping[WorkloadRef, int] | None = None,
    scope: str = "",
    needs_now: Callable[[], Mapping[WorkloadRef, int]] | None = None,
) -> tuple[list[Action], list[str]]:
    needs = needs_now() if needs_now is not None else None
    claims = []
    for i in slots:
        a = cast("ScaleTo | SetWarmPool", actions[i])
        spec = cast(PolicySpec, specs[i])
        warm = isinstance(a, SetWarmPool)
        want = _now_and_wanted(a)[1]
        keep = 0 if warm else max(spec.min_replicas, cast(ScaleTo, a).from_replicas - spec.max_step_down)
        if running and a.workload in running:  # its autoscaler's pods run whatever it is granted
            keep = max(keep, min(want, running[a.workload]))
        floor = 0
        if not warm:
            have = cast(ScaleTo, a).from_replicas
            need = needs.get(a.workload, 0) if needs is not None else _reactive_need(a)
            floor = max(spec.min_replicas, min(want, have, need))
        claims.append(
            Claim(
                a.workload,
                spec.tenant,
                spec.priority,
                spec.weight,
                want,
                floor,
                spec.objective.fairness,
                shapes.get(a.workload),
                keep,
            )
        )
    grants, notes = allocate_pools(claims, capacity, namespace_pods, namespace_resources, outside, members, scope)
    out = list(actions)
    reasons = _SharedReasons()
    for i, g in zip(slots, grants, strict=True):
        a = cast("ScaleTo | SetWarmPool", out[i])
        if g.granted < _now_and_wanted(a)[1]:
            why = LazyReason("fair_share", reasons, len(reasons.rows))
            if isinstance(a, SetWarmPool):
                # none granted: nothing to keep warm, for no time (was the decision's keep_warm_s)
                keep_s = a.keep_warm_s if g.granted > 0 else 0.0
                out[i] = SetWarmPool(a.workload, a.from_instances, g.granted, keep_s, why)
            else:
                out[i] = ScaleTo(a.workload, a.from_replicas, g.granted, why)
            reasons.rows.append((a, g))
    return out, notes
