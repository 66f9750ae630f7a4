"""Risk adaptation in the live loop (planner.risk): gaps between cycles, late points, restarts, leaders."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from actuator.simulated import SimulatedService
from forecaster.baselines import Naive
from planner.risk import RiskAdapter, RiskBook, fingerprint
from scaleahead.clock import VirtualClock
from scaleahead.loop import CycleReport, Deps, run_once
from scaleahead.policy import Policy, RiskAdaptation
from scaleahead.settings import Settings
from scaleahead.types import ClusterState, Series, WorkloadRef, WorkloadState
from storage import Store
from tests.serverless.conftest import FixedHistory

HOUR = 3600.0
CFG = RiskAdaptation()


def _adapter(book: RiskBook, ref: WorkloadRef) -> RiskAdapter:
    adapter = book.adapter(ref)
    assert adapter is not None
    return adapter


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


def _policy(capacity: float = 1.0, slo_risk: float = 80.0, name: str = "cpu", **adaptation: object) -> Policy:
    return Policy.model_validate(
        {
            "metadata": {"name": name, "namespace": "dc"},
            "spec": {
                "target": {"name": name, "namespace": "dc"},
                "demand": {"query": "q", "stepSeconds": 10},
                "capacityPerReplica": capacity,
                "maxReplicas": 1000,
                "objective": {"sloRisk": slo_risk, "riskAdaptation": adaptation},
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
    assert _adapter(deps.risk, ref)._periods[0].samples == 330


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
    assert _adapter(book, ref).reference.startup_s == configured.spec.startup_seconds
    book.apply([learned], {ref: s}, state, 110.0)  # the learned delay arrives
    assert _adapter(book, ref).reference.startup_s == 300.0
    # a scale-up of the simulated HPA from now on is ready 300 s later
    book.apply([learned], {ref: Series("w", 0.0, 10.0, np.full(1000, 50.0))}, state, 120.0)
    hpa = _adapter(book, ref).reference
    assert hpa.allocated > 10 and hpa.ready(120.0 + 299.0) < hpa.allocated == hpa.ready(120.0 + 300.0)


def _one_cycle(book: RiskBook, policies: list[Policy], now: float = 1000.0) -> tuple[list[Policy], tuple[str, ...]]:
    state = ClusterState(
        workloads={p.workload: WorkloadState(p.workload, 10, 10, math.nan, math.nan) for p in policies}
    )
    history = {p.workload: Series("w", 0.0, 10.0, np.full(100, 5.0)) for p in policies}
    return book.apply(policies, history, state, now)


@pytest.mark.parametrize(
    ("edited", "changed"),
    [
        ({}, False),
        ({"stepFactor": 2.0}, True),
        ({"capacity": 2.0}, True),
        ({"sloRisk": 800.0}, True),
        ({"costRatio": 1.5}, True),
    ],
)
def test_a_recorded_step_is_resumed_only_under_the_policy_it_was_learned_under(
    edited: dict[str, float], changed: bool
) -> None:
    """Recorded k 10 at stepFactor 1.25 (sloRisk 80 -> 745); the policy is edited while scaleahead is down."""
    learned_under = _policy()
    ref = learned_under.workload
    edits = dict(edited)
    policy = _policy(edits.pop("capacity", 1.0), edits.pop("sloRisk", 80.0), **edits)
    book = RiskBook()
    book.restore({ref.key: (10, 80.0 * 1.25**10, fingerprint(learned_under, 10.0))})
    out, notes = _one_cycle(book, [policy])
    base = policy.spec.objective.slo_risk
    if changed:
        assert out[0].spec.objective.slo_risk == base and book.factor(ref) == 1.0
        assert book.unsaved == {ref.key: (0, base, fingerprint(policy, 10.0))}  # the record goes
        (note,) = notes
        assert note.startswith(f"risk adaptation: {ref} recorded step 10 (sloRisk 745) discarded")
        assert note.endswith(f"starts again from its own sloRisk {base:g}")
    else:
        assert out[0].spec.objective.slo_risk == 80.0 * 1.25**10 and book.unsaved == {}
        assert notes == (f"risk adaptation: {ref} resumed at step 10 from storage: sloRisk 745 (x9.31 its own 80)",)


def test_a_step_recorded_without_a_fingerprint_is_checked_by_its_weight() -> None:
    p = _policy()
    ref = p.workload
    book = RiskBook()
    book.restore({ref.key: (2, 125.0, None)})  # 80 x 1.25^2: resumed, and recorded again with its fingerprint
    out, notes = _one_cycle(book, [p])
    assert out[0].spec.objective.slo_risk == 125.0 and "only its weight was checked" in notes[0]
    assert book.unsaved == {ref.key: (2, 125.0, fingerprint(p, 10.0))}
    book = RiskBook()
    book.restore({ref.key: (2, 1250.0, None)})  # learned at sloRisk 800
    out, notes = _one_cycle(book, [p])
    assert out[0].spec.objective.slo_risk == 80.0 and "discarded" in notes[0]
    assert book.unsaved == {ref.key: (0, 80.0, fingerprint(p, 10.0))}


def test_a_recorded_step_of_a_workload_without_a_policy_is_removed() -> None:
    web, cpu = _policy(name="web"), _policy()
    book = RiskBook()
    book.restore({cpu.workload.key: (6, 80.0 * 1.25**6, fingerprint(cpu, 10.0))})
    _, notes = _one_cycle(book, [web])
    assert book.unsaved == {cpu.workload.key: (0, 80.0 * 1.25**6, None)}
    assert notes == ("risk adaptation: Deployment/dc/cpu has no policy: its recorded step 6 is removed",)
    book.unsaved.clear()
    out, notes = _one_cycle(book, [web, cpu], 1010.0)  # a new dc/cpu, in the same process
    assert out[1].spec.objective.slo_risk == 80.0 and notes == ()
    # a shard leaves the other shards' records alone
    other = RiskBook(owns=lambda key: key != cpu.workload.key)
    other.restore({cpu.workload.key: (6, 80.0 * 1.25**6, fingerprint(cpu, 10.0))})
    assert _one_cycle(other, [web])[1] == () and other.unsaved == {}


def test_a_workload_that_leaves_the_policies_loses_its_step() -> None:
    cpu = _policy()
    ref = cpu.workload
    book = RiskBook()
    book.restore({ref.key: (3, 80.0 * 1.25**3, fingerprint(cpu, 10.0))})
    out, _ = _one_cycle(book, [cpu])
    assert out[0].spec.objective.slo_risk == 80.0 * 1.25**3
    _, notes = _one_cycle(book, [], 1010.0)
    assert book.unsaved == {ref.key: (0, 0.0, None)} and book.adapter(ref) is None
    assert notes == ("risk adaptation: dc/cpu has no policy any more: its step 3 is removed",)


def test_the_loop_resumes_discards_and_removes_recorded_steps_and_says_so(tmp_path: Path) -> None:
    store = Store(f"sqlite:///{tmp_path / 'risk.db'}")
    cpu, web = _policy(), _policy(name="web")
    ref = cpu.workload

    def restart(policies: list[Policy], now: float) -> CycleReport:
        clock = VirtualClock(now)
        target = SimulatedService(clock, 60.0, {p.workload: 20 for p in policies})
        history = FixedHistory({p.workload: _flat(30.0) for p in policies})
        return run_once(Deps(history, Naive(), target, store, policies), Settings(), now, dry_run=True)

    store.set_risk_factors({ref.key: (2, 125.0, fingerprint(cpu, 10.0))}, 0.0)
    report = restart([cpu], 600.0)
    assert report.slo_risk[ref] == 125.0
    assert f"risk adaptation: {ref} resumed at step 2 from storage: sloRisk 125 (x1.56 its own 80)" in report.plan.notes
    # capacityPerReplica edited while scaleahead was down: from its own weight, and the record goes
    report = restart([_policy(capacity=2.0)], 700.0)
    assert report.slo_risk[ref] == 80.0 and store.risk_factors() == {}
    assert any(
        n.startswith(f"risk adaptation: {ref} recorded step 2 (sloRisk 125) discarded") for n in report.plan.notes
    )
    # dc/cpu deleted while scaleahead was down: its record goes at the first cycle
    store.set_risk_factors({ref.key: (6, 80.0 * 1.25**6, fingerprint(cpu, 10.0))}, 800.0)
    report = restart([web], 900.0)
    assert store.risk_factors() == {}
    assert "risk adaptation: Deployment/dc/cpu has no policy: its recorded step 6 is removed" in report.plan.notes
    store.close()
