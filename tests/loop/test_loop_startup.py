"""The control loop learns the start-up delay from readiness times and plans with it.

A simulated service whose replicas really take 90 s to start, under a policy that says 30 s. The
demand repeats daily (the seasonal-naive forecaster sees each bump a day ahead): a first bump at
10:00 teaches the loop the real delay, and a second at 11:00 is then met in time, scaled up about
90 s ahead instead of 30 s.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from actuator.simulated import SimulatedService
from forecaster.baselines import SeasonalNaive
from scaleahead.clock import VirtualClock
from scaleahead.loop import CycleReport, Deps, StartupBook, run_once
from scaleahead.policy import Policy
from scaleahead.settings import Settings
from scaleahead.types import ClusterState, ScaleTo, Series, WorkloadRef, WorkloadState

DAY = 86400.0
STEP = 10.0
T1 = 2 * DAY + 10 * 3600.0  # first bump (day 2, 10:00): 70 req/s for 10 min
T2 = T1 + 3600.0  # second bump (11:00): 150 req/s for 10 min
TRUE_STARTUP = 90.0


def policy(enabled: bool = True) -> Policy:
    return Policy.model_validate(
        {
            "metadata": {"name": "web", "namespace": "shop"},
            "spec": {
                "target": {"name": "web", "namespace": "shop"},
                "demand": {"query": "q"},
                "capacityPerReplica": 10.0,
                "targetUtilization": 1.0,
                "scaleDownStabilizationSeconds": 0,
                "startupSeconds": 30,
                "startupLearning": {"enabled": enabled, "minSamples": 5},
            },
        }
    )


def demand() -> Series:
    t = np.arange(0.0, 3 * DAY, STEP)
    tod = t % DAY
    d = np.full(t.size, 10.0)
    d[(tod >= T1 % DAY) & (tod < T1 % DAY + 600)] = 70.0
    d[(tod >= T2 % DAY) & (tod < T2 % DAY + 600)] = 150.0
    return Series("web", 0.0, STEP, d)


class History:
    def __init__(self, series: Series, ref: WorkloadRef) -> None:
        self.series, self.ref = series, ref

    def read(self, policies: Sequence[Policy], now: float) -> Mapping[WorkloadRef, Series]:
        return {self.ref: self.series.before(now)}


def run(enabled: bool, start: float, end: float) -> tuple[list[CycleReport], SimulatedService, Series]:
    pol = policy(enabled)
    series = demand()
    clock = VirtualClock(start)
    target = SimulatedService(clock, TRUE_STARTUP, {pol.workload: 1})
    deps = Deps(History(series, pol.workload), SeasonalNaive(), target, None, [pol])
    reports = []
    for now in np.arange(start, end, STEP):
        clock.advance_to(float(now))
        reports.append(run_once(deps, Settings(), float(now), dry_run=False))
    return reports, target, series


def first_scale_up_at_or_after(reports: list[CycleReport], t: float, to_at_least: int) -> tuple[float, ScaleTo]:
    for r in reports:
        a = r.plan.actions[0]
        assert isinstance(a, ScaleTo)
        if r.now >= t and a.to_replicas >= to_at_least and a.to_replicas > a.from_replicas:
            return r.now, a
    raise AssertionError("no scale-up")


def test_after_enough_readiness_times_the_loop_plans_with_the_learned_start_up_and_scales_earlier() -> None:
    start, end = T1 - 300.0, T2 + 120.0
    learned, target, series = run(True, start, end)
    fixed, fixed_target, _ = run(False, start, end)
    ref = policy().workload

    # Before the first bump nothing was observed: both plan with the configured 30 s.
    t1_learned, _ = first_scale_up_at_or_after(learned, T1 - 300, 7)
    t1_fixed, _ = first_scale_up_at_or_after(fixed, T1 - 300, 7)
    assert t1_learned == t1_fixed > T1 - 60

    # The second bump: the learned 90 s moves the scale-up about a minute earlier.
    t2_learned, action = first_scale_up_at_or_after(learned, T1 + 1800, 15)
    t2_fixed, fixed_action = first_scale_up_at_or_after(fixed, T1 + 1800, 15)
    assert t2_learned <= T2 - TRUE_STARTUP < t2_fixed
    assert "(start-up 90 s)" in action.reason.message
    assert "(start-up 30 s)" in fixed_action.reason.message

    report = next(r for r in learned if r.now == t2_learned)
    est = report.startup[ref]
    assert (est.seconds, est.configured_seconds, est.learned) == (90.0, 30.0, True)
    assert f"{ref}: start-up 90 s learned: p90 of the last {est.used} readiness times (configured 30 s)" in (
        report.plan.notes
    )
    assert not any("start-up" in n for r in fixed for n in r.plan.notes)

    # So the second bump is served from its first step with the learned delay, and not without it.
    def ready_at(t: SimulatedService, at: float) -> int:
        return t.ready(ref, at)

    assert ready_at(target, T2) * 10.0 >= series.values[int(T2 / STEP)]
    assert ready_at(fixed_target, T2) * 10.0 < series.values[int(T2 / STEP)]


def test_the_startup_book_reuses_the_policy_copy_while_the_learned_delay_is_unchanged() -> None:
    pol = policy()
    book = StartupBook()

    def state(samples: tuple[float, ...]) -> ClusterState:
        return ClusterState({pol.workload: WorkloadState(pol.workload, 3, 3, startup_samples=samples)})

    few, _ = book.apply([pol], state((90.0,) * 3))
    assert few[0] is pol  # too few samples: the policy itself
    first, est = book.apply([pol], state((90.0,) * 5))
    assert first[0] is not pol and first[0].spec.startup_seconds == 90.0
    assert first[0].spec.target == pol.spec.target and est[pol.workload].seconds == 90.0
    again, _ = book.apply([pol], state((90.0,) * 6))  # new samples, same delay: the same copy
    assert again[0] is first[0]
    slower, _ = book.apply([pol], state((90.0,) * 6 + (200.0,) * 5))
    assert slower[0].spec.startup_seconds == 200.0
    unlearned, est = book.apply([pol], state(()))
    assert unlearned[0] is pol and est == {}


def test_the_startup_book_keeps_at_most_two_windows_of_readiness_times_per_workload() -> None:
    base = policy()
    learning = base.spec.startup_learning.model_copy(update={"min_samples": 2, "window": 3})
    p = base.model_copy(update={"spec": base.spec.model_copy(update={"startup_learning": learning})})
    ref = p.workload
    book = StartupBook()
    for i in range(10):  # one new pod per cycle, each read only once
        ws = WorkloadState(ref, 1, 1, startup_samples=(30.0 + i,), startup_pods=(f"pod-{i}",))
        _, est = book.apply([p], ClusterState(workloads={ref: ws}))
    assert est[ref].used == 3 and est[ref].observed_seconds == 39.0
    assert book._kept[ref][2] == (34.0, 35.0, 36.0, 37.0, 38.0, 39.0)  # the newest 2 x window
    # without pod names (the simulated target), the times are used as reported
    _, est = book.apply([p], ClusterState(workloads={ref: WorkloadState(ref, 1, 1, startup_samples=(5.0, 6.0))}))
    assert est[ref].used == 2
    book.apply([], ClusterState())
    assert book._kept == {}  # a workload without a policy loses its kept times
