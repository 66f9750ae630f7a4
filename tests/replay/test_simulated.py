"""The simulated service: EVALUATION.md section 4's replica model, reached through ``apply_plan``."""

from __future__ import annotations

from actuator.base import apply_plan
from actuator.simulated import SimulatedService
from scaleahead.clock import VirtualClock
from scaleahead.types import Plan, Reason, ScaleTo, SetWarmPool, WorkloadRef

REF = WorkloadRef("Deployment", "shop", "web")


def scale(target: SimulatedService, to: int, now: float) -> None:
    current = target.replicas(REF)
    apply_plan(Plan(now, (ScaleTo(REF, current, to, Reason("test", "test")),)), target)


def test_a_replica_added_at_t_costs_from_t_and_is_ready_at_t_plus_startup() -> None:
    clock = VirtualClock(1000.0)
    target = SimulatedService(clock, startup_s=60.0, initial={REF: 2})
    assert (target.replicas(REF), target.ready(REF)) == (2, 2)
    scale(target, 5, 1000.0)
    state = target.read_state([REF]).workloads[REF]
    assert (state.replicas, state.ready_replicas) == (5, 2)
    clock.advance_to(1050.0)
    assert target.ready(REF) == 2
    clock.advance_to(1060.0)
    assert target.ready(REF) == 5


def test_removal_takes_pending_replicas_first_newest_first() -> None:
    clock = VirtualClock(0.0)
    target = SimulatedService(clock, startup_s=60.0, initial={REF: 3})
    scale(target, 5, 0.0)  # two pending, ready at 60
    clock.advance_to(30.0)
    scale(target, 7, 30.0)  # two more pending, ready at 90
    scale(target, 6, 30.0)  # drops one added at 30 (the newest)
    clock.advance_to(60.0)
    assert (target.replicas(REF), target.ready(REF)) == (6, 5)
    scale(target, 4, 60.0)  # the pending one (ready at 90) goes first, then the newest ready one
    clock.advance_to(90.0)
    assert (target.replicas(REF), target.ready(REF)) == (4, 4)
    scale(target, 1, 90.0)
    assert (target.replicas(REF), target.ready(REF)) == (1, 1)


def test_a_no_op_plan_makes_no_call_to_the_target() -> None:
    target = SimulatedService(VirtualClock(0.0), startup_s=60.0, initial={REF: 3})
    results = apply_plan(Plan(0.0, (ScaleTo(REF, 3, 3, Reason("hold", "hold")),)), target)
    assert target.calls == 0
    assert results[0].outcome == "skipped"


def test_actions_other_than_scale_are_skipped_with_a_reason() -> None:
    target = SimulatedService(VirtualClock(0.0), startup_s=60.0, initial={REF: 3})
    res = target.apply(SetWarmPool(REF, 0, 2, 600.0, Reason("warm", "warm")))
    assert res.outcome == "skipped"
    assert "SetWarmPool" in res.detail
    assert target.replicas(REF) == 3


def test_recent_scale_decisions_are_reported_for_stabilization() -> None:
    clock = VirtualClock(0.0)
    target = SimulatedService(clock, startup_s=0.0, initial={REF: 3}, history_s=300.0)
    scale(target, 8, 0.0)
    clock.advance_to(100.0)
    scale(target, 5, 100.0)
    assert target.read_state([REF]).workloads[REF].recent_desired == ((0.0, 8), (100.0, 5))
    clock.advance_to(350.0)
    assert target.read_state([REF]).workloads[REF].recent_desired == ((100.0, 5),)


def test_each_replica_that_became_ready_leaves_its_readiness_time_and_pending_ones_none() -> None:
    clock = VirtualClock(0.0)
    target = SimulatedService(clock, startup_s=90.0, initial={REF: 2})
    scale(target, 5, 0.0)
    clock.advance_to(89.0)
    assert target.read_state([REF]).workloads[REF].startup_samples == ()  # none ready yet
    clock.advance_to(90.0)
    assert target.read_state([REF]).workloads[REF].startup_samples == (90.0, 90.0, 90.0)
    # the initial replicas were never seen starting: they leave no sample
    clock.advance_to(200.0)
    scale(target, 6, 200.0)
    target.startup_s = 120.0  # slower start-ups from now on
    scale(target, 8, 200.0)
    clock.advance_to(320.0)
    assert target.read_state([REF]).workloads[REF].startup_samples == (90.0,) * 4 + (120.0,) * 2


def test_a_replica_removed_before_it_was_ready_leaves_no_readiness_time() -> None:
    clock = VirtualClock(0.0)
    target = SimulatedService(clock, startup_s=60.0, initial={REF: 1}, max_samples=3)
    scale(target, 4, 0.0)
    clock.advance_to(30.0)
    scale(target, 2, 30.0)  # two pending replicas removed, one stays
    clock.advance_to(100.0)
    assert target.read_state([REF]).workloads[REF].startup_samples == (60.0,)
    target.startup_s = 70.0
    scale(target, 6, 100.0)
    clock.advance_to(170.0)
    scale(target, 1, 170.0)  # ready replicas removed after they left their samples
    # at most max_samples, the newest
    assert target.read_state([REF]).workloads[REF].startup_samples == (70.0, 70.0, 70.0)
