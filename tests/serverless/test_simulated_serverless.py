"""The simulated serverless platform, driven through the real ``apply_plan``."""

from __future__ import annotations

import numpy as np

from actuator.base import apply_plan
from actuator.simulated_serverless import SimulatedServerless
from scaleahead.types import Plan, Reason, ScaleTo, SetWarmPool, WorkloadRef

A = WorkloadRef("KnativeService", "fn", "a")
B = WorkloadRef("KnativeService", "fn", "b")


def warm_action(ref: WorkloadRef, frm: int, to: int) -> SetWarmPool:
    return SetWarmPool(ref, frm, to, 300.0, Reason("test", f"warm {ref} {frm} -> {to}"))


def test_warm_pool_set_by_a_plan_prevents_the_cold_start_and_idle_minutes_waste_memory() -> None:
    sim = SimulatedServerless([A, B], [100.0, 50.0], start=0.0, step_s=60.0)
    results = apply_plan(Plan(0.0, (warm_action(A, 0, 1),)), sim)
    assert [r.outcome for r in results] == ["applied"]
    warm = sim.step(np.array([3, 2]))
    assert warm.tolist() == [True, False]
    assert sim.totals.cold_starts == 1  # b: one cold start, however many calls in the minute
    assert sim.totals.invocations == 5
    warm = sim.step(np.array([0, 0]))  # a stays warm and idle: 100 MB wasted
    assert warm.tolist() == [True, False]
    assert sim.totals.wasted_memory_mb_steps == 100.0
    state = sim.read_state([A, B])
    assert state.workloads[A].warm_instances == 1
    assert state.workloads[B].observed_at == 60.0


def test_a_noop_plan_makes_no_call_and_the_pool_persists() -> None:
    sim = SimulatedServerless([A], [100.0], start=0.0, step_s=60.0)
    apply_plan(Plan(0.0, (warm_action(A, 0, 1),)), sim)
    results = apply_plan(Plan(60.0, (warm_action(A, 1, 1),)), sim)
    assert results[0].outcome == "skipped"
    assert sim.applied == 1
    assert sim.step(np.array([1])).tolist() == [True]


def test_the_platform_refuses_actions_it_cannot_apply() -> None:
    sim = SimulatedServerless([A], [100.0], start=0.0, step_s=60.0)
    act = ScaleTo(A, 1, 2, Reason("x", "scale"))
    assert apply_plan(Plan(0.0, (act,)), sim)[0].outcome == "failed"
