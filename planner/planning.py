"""The planner entry point: ``plan(forecasts, state, policies, now) -> Plan``."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from planner.rebalance import plan_moves
from planner.replicas import decide_replicas
from scaleahead.policy import Policy
from scaleahead.types import Action, ClusterState, Forecast, Plan, WorkloadRef, WorkloadState


def plan(
    forecasts: Mapping[WorkloadRef, Forecast],
    state: ClusterState,
    policies: Sequence[Policy],
    now: float,
    interval_s: float = 10.0,
    max_moves: int = 0,
) -> Plan:
    """Decide actions for every policy's workload. Pure: no I/O, no clock.

    Args:
        forecasts: the newest forecast per workload (missing ones trigger the fallback).
        state: what the cluster looks like now.
        policies: one per workload.
        now: decision time (epoch seconds).
        interval_s: the control interval; a replica asked for now serves from
            ``now + startup`` for at least one interval.
        max_moves: when above 0, also propose at most this many rebalancing ``MovePod``
            actions from ``state.nodes``/``state.pods``/``state.pdbs`` (planner/rebalance.py).
            0 (the default) proposes none.
    """
    actions: list[Action] = []
    fallbacks: dict[WorkloadRef, str] = {}
    for policy in policies:
        ref = policy.workload
        ws = state.workloads.get(ref) or WorkloadState(
            ref, replicas=policy.spec.min_replicas, ready_replicas=policy.spec.min_replicas
        )
        decision = decide_replicas(ref, policy.spec, ws, forecasts.get(ref), now, interval_s)
        actions.append(decision.action)
        if decision.fallback:
            fallbacks[ref] = decision.fallback
    if max_moves > 0:
        actions.extend(plan_moves(state, max_moves))
    return Plan(created_at=now, actions=tuple(actions), fallbacks=fallbacks)
