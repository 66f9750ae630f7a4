"""The planner entry point: ``plan(forecasts, state, policies, now) -> Plan``.

Per workload: services get a replica decision (``planner.replicas``), functions with a warm pool a
warm-pool decision (``planner.warm``). Then, when a capacity is given, replicas are shared under
shortage by priority and weighted max-min across tenants (``planner.fairness``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from itertools import compress, repeat
from operator import is_
from typing import cast

from planner.batch import ReplicaBatch
from planner.fairness import Claim, allocate_pools
from planner.rebalance import plan_moves
from planner.table import policy_table
from planner.warm import plan_warm_pools
from scaleahead.policy import Policy, PolicySpec
from scaleahead.types import (
    Action,
    ClusterState,
    Forecast,
    InvocationForecast,
    Plan,
    Reason,
    ScaleTo,
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
            actions from ``state.nodes``/``state.pods``/``state.pdbs`` (planner/rebalance.py).
            0 (the default) proposes none.
        invocations: invocation-probability forecasts of functions (``workloadClass: function``
            with ``warmPool.enabled``); a missing one triggers the policy's fallback.
        capacity: replicas available under shortage: keys are tenant names (a tenant's quota) and
            ``"*"`` (the whole cluster). None: no limit.
        warm_memory_budget_mb: total memory all warm pools may hold together. None: no limit.
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
    decided: list[ScaleTo] = []
    if refs:
        batch = ReplicaBatch(
            refs, table.services, cast(list[WorkloadState], states), list(map(forecasts.get, refs)), now, interval_s
        )
        decided = batch.actions
        for i, mode in batch.fallback_rows.items():
            fallbacks[refs[i]] = mode
    functions: list[tuple[int, tuple[WorkloadRef, PolicySpec, WorkloadState]]] = []
    for i in table.function_index:
        ref, spec = table.refs[i], policies[i].spec
        ws = workloads.get(ref) or WorkloadState(ref, replicas=spec.min_replicas, ready_replicas=spec.min_replicas)
        functions.append((i, (ref, spec, ws)))
    notes: list[str] = []
    final: list[Action] = list(decided)
    if functions:
        warm, warm_notes = plan_warm_pools(
            [item for _, item in functions], invocations or {}, now, warm_memory_budget_mb
        )
        notes.extend(warm_notes)
        # Back into policy order: services keep their order, each function goes to its index.
        merged: list[Action] = []
        it = iter(decided)
        slots = {slot: d.action for (slot, _), d in zip(functions, warm, strict=True)}
        for i in range(len(policies)):
            merged.append(slots[i] if i in slots else next(it))
        final = merged
        for (_, (ref, _, _)), d in zip(functions, warm, strict=True):
            if d.fallback:
                fallbacks[ref] = d.fallback
    if capacity:
        specs = {p.workload: p.spec for p in policies}
        final, fair_notes = _share_capacity(final, specs, capacity)
        notes.extend(fair_notes)
    if max_moves > 0:
        final.extend(plan_moves(state, max_moves))
    return Plan(created_at=now, actions=tuple(final), fallbacks=fallbacks, notes=tuple(notes))


def _share_capacity(
    actions: list[Action], specs: Mapping[WorkloadRef, PolicySpec], capacity: Mapping[str, int]
) -> tuple[list[Action], list[str]]:
    """Cut replica decisions to the capacity, explaining every cut in the action's reason."""
    slots = [i for i, a in enumerate(actions) if isinstance(a, ScaleTo)]
    claims = []
    for i in slots:
        a = actions[i]
        assert isinstance(a, ScaleTo)
        spec = specs[a.workload]
        claims.append(Claim(a.workload, spec.tenant, spec.priority, spec.weight, a.to_replicas, spec.min_replicas))
    grants, notes = allocate_pools(claims, capacity)
    out = list(actions)
    for i, g in zip(slots, grants, strict=True):
        a = out[i]
        assert isinstance(a, ScaleTo)
        if g.granted < a.to_replicas:
            verb = "scale" if g.granted != a.from_replicas else "hold"
            head = (
                f"{verb} {a.workload} {a.from_replicas} -> {g.granted}"
                if verb == "scale"
                else f"hold {a.workload} at {a.from_replicas}"
            )
            text = f"{head}: wanted {a.to_replicas} ({a.reason.message}); under shortage {g.why}"
            details = {**a.reason.details, "wanted": a.to_replicas, "granted": g.granted}
            out[i] = replace(a, to_replicas=g.granted, reason=Reason("fair_share", text, details))
    return out, notes
