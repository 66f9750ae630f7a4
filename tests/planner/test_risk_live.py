"""Risk adaptation in the live loop (planner.risk): gaps between cycles, late points, restarts, leaders."""

from __future__ import annotations

import math

import numpy as np

from actuator.simulated import SimulatedService
from forecaster.baselines import Naive
from planner.risk import RiskAdapter, RiskBook
from scaleahead.clock import VirtualClock
from scaleahead.loop import Deps, run_once
from scaleahead.policy import Policy, RiskAdaptation
from scaleahead.settings import Settings
from scaleahead.types import ClusterState, Series, WorkloadState
from tests.serverless.conftest import FixedHistory

HOUR = 3600.0
CFG = RiskAdaptation()


def _flat(value: float, hours: float = 2.0) -> Series:
    return Series("w", 0.0, 10.0, np.full(int(hours * HOUR / 10), value))


def test_a_gap_between_cycles_is_not_charged_to_the_counts_seen_before_it() -> None:
    # 30 units of demand, 1 per replica: 20 ready for the first 10 minutes (short every sample); then
    # another leader scales to 40 and this replica's next cycle comes at 00:59:50.
    s = _flat(30.0)
    a = RiskAdapter(CFG, 1.0, 60.0, 10.0, 20, 20, 0.0)
    for i in range(60):  # 00:00 .. 00:09:50, 20 ready
        a.cycle(i * 10.0, s.before(i * 10.0), 20, 20)
    a.cycle(HOUR - 10, s.before(HOUR - 10), 40, 40)
    t = a._periods[0]
    # only the samples up to one interval after the last cycle before the gap: none of the 50 minutes
    # in it (the first cycle's own samples are before anything was observed)
    assert t.samples == 59 and t.short == 59 and t.spend == 59 * 10 * 20
    # and the simulated HPA starts again from the replicas the cluster has now
    assert a._obs[-1][3:] == (40, 40)


def test_cycles_at_the_control_interval_are_not_a_gap() -> None:
    # cycles 300 s apart with a 300 s control interval: every sample is scored
    s = _flat(30.0)
    a = RiskAdapter(CFG, 1.0, 60.0, 10.0, 20, 20, 0.0)
    for i in range(13):
        a.cycle(i * 300.0, s.before(i * 300.0), 20, 20, interval_s=300.0)
    assert a._periods[0].samples == 330  # 00:05 .. 00:59:50: all from the second cycle on
    # the same cycles with a 10 s interval are 300 s gaps: one interval of samples after each cycle
    b = RiskAdapter(CFG, 1.0, 60.0, 10.0, 20, 20, 0.0)
    for i in range(13):
        b.cycle(i * 300.0, s.before(i * 300.0), 20, 20, interval_s=10.0)
    assert sum(t.samples for t in b._periods.values()) == 11


def test_a_clock_stepping_back_scores_no_sample_twice() -> None:
    s = _flat(30.0)
    a = RiskAdapter(CFG, 1.0, 60.0, 10.0, 20, 20, 0.0)
    times = [i * 10.0 for i in range(180)]  # 00:00 .. 00:29:50
    times += [1200.0 + i * 10.0 for i in range(240)]  # back to 00:20, on to 00:59:50
    for now in times:
        a.cycle(now, s.before(now), 20, 20)
    assert a._periods[0].samples == 358  # 00:00:10 .. 00:59:40, each once
    assert all(a._obs[i][0] <= a._obs[i + 1][0] for i in range(len(a._obs) - 1))


def _policy(**adaptation: object) -> Policy:
    return Policy.model_validate(
        {
            "metadata": {"name": "cpu", "namespace": "dc"},
            "spec": {
                "target": {"name": "cpu", "namespace": "dc"},
                "demand": {"query": "q", "stepSeconds": 10},
                "capacityPerReplica": 1.0,
                "maxReplicas": 1000,
                "objective": {"sloRisk": 80.0, "riskAdaptation": adaptation},
            },
        }
    )


def test_the_loop_hands_the_book_its_control_interval() -> None:
    # a 300 s control interval: cycles 300 s apart are the loop's pace, not gaps
    p = _policy()
    ref = p.workload
    clock = VirtualClock(0.0)
    deps = Deps(FixedHistory({ref: _flat(30.0)}), Naive(), SimulatedService(clock, 60.0, {ref: 20}), None, [p])
    settings = Settings.model_validate({"loop": {"interval_s": 300.0}})
    for i in range(13):
        clock.advance_to(i * 300.0)
        run_once(deps, settings, i * 300.0, dry_run=True)
    assert deps.risk._adapters[ref][1]._periods[0].samples == 330


def test_a_point_that_arrives_one_cycle_late_is_scored() -> None:
    # the newest point is missing at each read (a recording rule's lag) and there the cycle after
    full = np.full(int(2 * HOUR / 10), 30.0)
    a = RiskAdapter(CFG, 1.0, 60.0, 10.0, 20, 20, 0.0)
    for i in range(1, 360):
        v = full[:i].copy()
        v[-1] = np.nan
        a.cycle(i * 10.0, Series("w", 0.0, 10.0, v), 20, 20)
    assert a.cycle(HOUR, Series("w", 0.0, 10.0, full[:360].copy()), 20, 20) == (
        0,
        "it ran short more often than 0.5 x the HPA",
    )
    assert a._periods[0].samples == 359 and a.k == 1  # every sample but the first cycle's


def test_a_missing_point_is_waited_for_no_longer_than_a_gap() -> None:
    # demand missing from 00:10 on (a scrape outage): those samples are looked at again for at most
    # max_gap, so the cycles' counts are not kept for ever
    v = np.full(int(2 * HOUR / 10), 30.0)
    v[60:] = np.nan
    s = Series("w", 0.0, 10.0, v)
    a = RiskAdapter(CFG, 1.0, 60.0, 10.0, 20, 20, 0.0)
    for i in range(360):
        a.cycle(i * 10.0, s.before(i * 10.0), 20, 20)
    assert a._next_t == HOUR - 10 - a.max_gap(10.0) and len(a._obs) <= a.max_gap(10.0) / 10 + 1
    assert a._periods[0].samples == 59


def test_the_simulated_hpa_starts_its_replicas_with_the_delay_planned_with() -> None:
    """The start-up delay learned from the cluster (StartupBook's policy copy) reaches the simulated HPA."""
    configured = _policy()
    learned = configured.model_copy(update={"spec": configured.spec.model_copy(update={"startup_seconds": 300.0})})
    ref = configured.workload
    state = ClusterState(workloads={ref: WorkloadState(ref, 10, 10, math.nan, math.nan)})
    s = Series("w", 0.0, 10.0, np.full(1000, 5.0))
    book = RiskBook()
    book.apply([configured], {ref: s}, state, 100.0)
    assert book._adapters[ref][1].reference.startup_s == configured.spec.startup_seconds
    book.apply([learned], {ref: s}, state, 110.0)  # the learned delay arrives
    assert book._adapters[ref][1].reference.startup_s == 300.0
    # a scale-up of the simulated HPA from now on is ready 300 s later
    book.apply([learned], {ref: Series("w", 0.0, 10.0, np.full(1000, 50.0))}, state, 120.0)
    hpa = book._adapters[ref][1].reference
    assert hpa.allocated > 10 and hpa.ready(120.0 + 299.0) < hpa.allocated == hpa.ready(120.0 + 300.0)
