"""Risk adaptation (planner.risk): sloRisk raised while a service runs short more often than an HPA would."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from actuator.simulated import SimulatedService
from forecaster.baselines import Naive
from planner.risk import ReferenceHpa, RiskAdapter, RiskBook, Tally, decide_step, with_slo_risk
from scaleahead.bench import replay as rp
from scaleahead.clock import VirtualClock
from scaleahead.errors import ConfigError
from scaleahead.loop import Deps, run_once
from scaleahead.policy import Policy, RiskAdaptation, parse_policies
from scaleahead.settings import Settings
from scaleahead.traces import Split, load_series
from scaleahead.types import ClusterState, ScaleTo, Series, WorkloadRef, WorkloadState
from storage import Store
from tests.serverless.conftest import FixedHistory

HOUR = 3600.0


@pytest.fixture(scope="module")
def alibaba_day() -> Series:
    """The first day of the real alibaba-cpu-10s trace."""
    s = load_series("alibaba-cpu-10s")
    return s.between(s.start, s.start + 86400.0)


def test_the_reference_is_the_replays_hpa_step_for_step(alibaba_day: Series) -> None:
    s = alibaba_day
    setup = rp.prepare(s, None, 60.0, "", Split(s.start, s.start + 18 * HOUR, s.end))
    hpa = rp.run_hpa(setup)
    ref = ReferenceHpa(setup.capacity, setup.startup_s, 0.7, setup.initial_ready, setup.initial_ready, setup.t0)
    w = 6  # the HPA's 60 s metric window at 10 s
    allocated, ready = [], []
    for i in range(setup.demand.size):
        now = setup.t0 + i * setup.step_s
        gi = setup.i0 + i
        ref.step(now, s.values[max(0, gi - w) : gi])
        allocated.append(ref.allocated)
        ready.append(ref.ready(now))
    assert np.array_equal(allocated, hpa.allocated) and np.array_equal(ready, hpa.ready)
    assert len(set(allocated)) > 5  # it did scale
    # the reference only needs counts: its HPA formats no reason (the replay's, which explains, decided the same)
    assert not ref.hpa.explain
    assert ref.hpa.sync(s.end, s.values[-6:], 3, 3)[1] == ""


CFG = RiskAdaptation()


def replay_capacity(series: Series) -> float:
    """The replay's default capacity per replica: p99 of the demand / 40."""
    return float(np.nanpercentile(series.values, 99)) / 40


def test_the_reference_counts_ready_replicas_when_the_start_up_delay_falls() -> None:
    # Replicas added at 300 s start-up, then more at 30 s (the learned delay fell): the newer ones
    # are ready first. A bisection over the add-ordered list counted 1 ready at t = 60, not 5.
    ref = ReferenceHpa(10.0, 300.0, 0.7, ready=1, allocated=1, now=0.0)
    assert ref.step(0.0, np.full(6, 30.0)) == 5  # 4 added, ready at 300
    ref.startup_s = 30.0
    assert ref.step(20.0, np.full(6, 60.0)) == 9  # 4 more, ready at 50
    assert [ref.ready(t) for t in (0.0, 49.0, 50.0, 60.0, 299.0, 300.0)] == [1, 1, 5, 5, 5, 9]


@given(
    st.lists(
        st.tuples(st.sampled_from([0.0, 10.0, 30.0, 300.0, 600.0]), st.floats(0.0, 200.0), st.floats(1.0, 400.0)),
        min_size=1,
        max_size=30,
    )
)
@settings(max_examples=200, deadline=None)
def test_the_reference_ready_count_is_the_replicas_ready_by_then(steps: list[tuple[float, float, float]]) -> None:
    ref = ReferenceHpa(10.0, 60.0, 0.7, ready=2, allocated=3, now=0.0)
    now = 0.0
    for startup, demand, dt in steps:
        ref.startup_s = startup
        ref.step(now, np.full(6, demand))
        for t in (now, now + dt / 2, now + dt):
            assert ref.ready(t) == sum(1 for r in ref._ready_at if r <= t + 1e-9)
        now += dt


@pytest.mark.parametrize(
    ("tally", "move"),
    [
        (Tally(short=50, ref_short=10, spend=1100.0, ref_spend=1000.0, samples=360), -1),  # over cost: down anyway
        (Tally(short=6, ref_short=10, spend=900.0, ref_spend=1000.0, samples=360), +1),  # short > 0.5 x
        (Tally(short=5, ref_short=10, spend=900.0, ref_spend=1000.0, samples=360), 0),  # at the target: stay
        (Tally(short=2, ref_short=10, spend=900.0, ref_spend=1000.0, samples=360), 0),  # above a quarter: stay
        (Tally(short=1, ref_short=10, spend=900.0, ref_spend=1000.0, samples=360), -1),  # well below: down
        (Tally(short=1, ref_short=0, spend=900.0, ref_spend=1000.0, samples=360), +1),  # the HPA never short
        (Tally(short=0, ref_short=0, spend=900.0, ref_spend=1000.0, samples=360), -1),
    ],
)
def test_the_rule(tally: Tally, move: int) -> None:
    assert decide_step(CFG, tally)[0] == move


def _adapter_run(values: np.ndarray, ready: int) -> list[int]:
    """k after each 10 s cycle over ``values`` (one sample per cycle), ``ready`` replicas throughout."""
    adapter = RiskAdapter(CFG, 1.0, 60.0, 10.0, ready, ready, 0.0)
    ks = []
    for i in range(values.size):
        now = i * 10.0
        past = Series("w", 0.0, 10.0, values).before(now)
        adapter.cycle(now, past, ready, ready)
        ks.append(adapter.k)
    return ks


def test_a_service_short_more_often_than_the_hpa_at_less_cost_is_raised_once_per_period() -> None:
    # 10 units of demand on 8 ready replicas of 1: always short; the HPA (70 %) adds replicas and is not.
    ks = _adapter_run(np.full(int(3 * HOUR / 10) + 1, 10.0), ready=8)
    assert ks[: int(HOUR / 10)] == [0] * int(HOUR / 10)  # no decision within the first period
    assert ks[int(HOUR / 10)] == 1 and ks[-1] == 3  # one step per period boundary
    changes = [i for i in range(1, len(ks)) if ks[i] != ks[i - 1]]
    assert [i * 10.0 % HOUR for i in changes] == [0.0, 0.0, 0.0]


def test_a_service_that_spends_more_than_the_hpa_is_never_raised() -> None:
    # 30 ready replicas for 10 units: never short, 30 replica-s per second against the HPA's about 15.
    assert set(_adapter_run(np.full(int(3 * HOUR / 10) + 1, 10.0), ready=30)) == {0}


def test_decisions_use_only_samples_before_now(alibaba_day: Series) -> None:
    """Handed a series with absurd values from ``now`` on, the book decides as if handed only the past."""
    capacity = replay_capacity(alibaba_day)
    p = service_policy(capacity, 3.0)
    ref = p.workload
    start = alibaba_day.start + 12 * HOUR
    times = alibaba_day.times()

    def factors(with_future: bool) -> list[float]:
        book = RiskBook()
        ws = WorkloadState(ref, 25, 25, math.nan, math.nan)
        out = []
        for i in range(int(3.1 * HOUR / 10)):
            now = start + i * 10.0
            if with_future:
                series = Series("w", alibaba_day.start, 10.0, np.where(times < now, alibaba_day.values, 1e6))
            else:
                series = alibaba_day.before(now)
            book.apply([p], {ref: series}, ClusterState(workloads={ref: ws}), now)
            out.append(book.factor(ref))
        return out

    plain = factors(False)
    assert plain[-1] > 1.0
    assert factors(True) == plain


def test_policy_validation_names_the_field() -> None:
    doc = """
apiVersion: scaleahead.io/v1alpha1
kind: PredictiveScalingPolicy
metadata: {name: web}
spec:
  target: {name: web}
  demand: {query: q}
  capacityPerReplica: 10
  objective:
    riskAdaptation: {windowSeconds: 600, periodSeconds: 3600}
"""
    with pytest.raises(ConfigError, match="windowSeconds"):
        parse_policies(doc)
    with pytest.raises(ConfigError, match="stepFactor"):
        parse_policies(doc.replace("windowSeconds: 600, periodSeconds: 3600", "stepFactor: 1"))


def service_policy(capacity: float, slo_risk: float, **adaptation: object) -> Policy:
    return Policy.model_validate(
        {
            "metadata": {"name": "cpu", "namespace": "dc"},
            "spec": {
                "target": {"name": "cpu", "namespace": "dc"},
                "demand": {"query": "q", "stepSeconds": 10},
                "capacityPerReplica": capacity,
                "maxReplicas": 1000,
                "objective": {"sloRisk": slo_risk, "riskAdaptation": adaptation},
            },
        }
    )


def test_with_slo_risk_changes_only_slo_risk() -> None:
    p = service_policy(2.0, 80.0)
    q = with_slo_risk(p, 100.0)
    assert q.spec.objective.slo_risk == 100.0
    assert q.spec.model_dump(exclude={"objective"}) == p.spec.model_dump(exclude={"objective"})
    assert q.spec.objective.model_dump(exclude={"slo_risk"}) == p.spec.objective.model_dump(exclude={"slo_risk"})


def _loop(series: Series, policy: Policy, hours: float) -> list[tuple[float, list[str], ScaleTo, float]]:
    ref = policy.workload
    start = series.start + 12 * HOUR
    clock = VirtualClock(start)
    target = SimulatedService(clock, 60.0, {ref: 20})
    deps = Deps(FixedHistory({ref: series}), Naive(), target, None, [policy])
    out = []
    for i in range(int(hours * HOUR / 10)):
        now = start + i * 10.0
        clock.advance_to(now)
        report = run_once(deps, Settings(), now)
        notes = [n for n in report.plan.notes if n.startswith("risk adaptation")]
        (action,) = [a for a in report.plan.actions if isinstance(a, ScaleTo)]
        out.append((now, notes, action, report.slo_risk[ref]))
    return out


def test_the_loop_raises_a_service_that_runs_short_and_says_why(alibaba_day: Series) -> None:
    # sloRisk 3 (about the p67 of the naive forecast) runs this real trace short far more often than an HPA.
    capacity = replay_capacity(alibaba_day)
    cycles = _loop(alibaba_day, service_policy(capacity, 3.0), hours=1.2)
    noted = [(now, notes) for now, notes, _, _ in cycles if notes]
    assert noted, "no adaptation at the hour"
    now, (note,) = noted[0]
    assert now % HOUR == 0.0
    assert "sloRisk 3 -> 3.75 (x1.25 its own 3)" in note and "ran short on" in note and "HPA at 70%" in note
    assert {w for t, _, _, w in cycles if t < now} == {3.0} and {w for t, _, _, w in cycles if t >= now} == {3.75}
    after = [a for t, _, a, _ in cycles if t >= now and "weighing" in a.reason.message]
    assert after and all("weighing 3.75 replica-seconds" in a.reason.message for a in after)


def test_a_disabled_adaptation_changes_nothing(alibaba_day: Series) -> None:
    capacity = replay_capacity(alibaba_day)
    book = RiskBook()
    p = service_policy(capacity, 3.0, enabled=False)
    ref = p.workload
    ws = WorkloadState(ref, 20, 20, math.nan, math.nan)
    for i in range(int(1.5 * HOUR / 10)):
        now = alibaba_day.start + 12 * HOUR + i * 10.0
        out, notes = book.apply([p], {ref: alibaba_day}, ClusterState(workloads={ref: ws}), now)
        assert out[0] is p and notes == ()
    assert book.factor(ref) == 1.0
    assert WorkloadRef("Deployment", "dc", "cpu") == ref


def test_a_cycle_without_history_keeps_the_adaptation(alibaba_day: Series) -> None:
    """A Prometheus outage (no history for a cycle) must not reset what was learned."""
    capacity = replay_capacity(alibaba_day)
    p = service_policy(capacity, 3.0)
    ref = p.workload
    book = RiskBook()
    ws = WorkloadState(ref, 20, 20, math.nan, math.nan)
    start = alibaba_day.start + 12 * HOUR
    for i in range(int(1.1 * HOUR / 10)):
        book.apply([p], {ref: alibaba_day}, ClusterState(workloads={ref: ws}), start + i * 10.0)
    assert book.factor(ref) == 1.25  # 20 replicas run short of this trace more often than an HPA
    out, _ = book.apply([p], {}, ClusterState(workloads={ref: ws}), start + 1.2 * HOUR)
    assert out[0].spec.objective.slo_risk == 3.75  # no history this cycle: the weight stays
    assert book.factor(ref) == 1.25
    out, _ = book.apply([p], {ref: alibaba_day}, ClusterState(workloads={ref: ws}), start + 1.2 * HOUR + 10)
    assert out[0].spec.objective.slo_risk == 3.75


def _stored(alibaba_day: Series, tmp_path: Path) -> tuple[float, Policy, WorkloadRef, float, Store]:
    """Capacity, a policy at sloRisk 3 on the real day, its workload, a start at noon and a fresh SQLite store."""
    capacity = replay_capacity(alibaba_day)
    policy = service_policy(capacity, 3.0)
    return capacity, policy, policy.workload, alibaba_day.start + 12 * HOUR, Store(f"sqlite:///{tmp_path / 'risk.db'}")


def test_a_restarted_loop_resumes_from_the_recorded_step(alibaba_day: Series, tmp_path: Path) -> None:
    capacity, policy, ref, start, store = _stored(alibaba_day, tmp_path)

    def deps(clock: VirtualClock) -> Deps:
        target = SimulatedService(clock, 60.0, {ref: 20})
        return Deps(FixedHistory({ref: alibaba_day}), Naive(), target, store, [policy])

    clock = VirtualClock(start)
    first = deps(clock)
    for i in range(int(1.05 * HOUR / 10)):
        clock.advance_to(start + i * 10.0)
        report = run_once(first, Settings(), clock.now())
    assert report.slo_risk[ref] == 3.75 and store.risk_factors() == {ref.key: 1}
    # a new process: a fresh book, the same database
    second = deps(clock)
    report = run_once(second, Settings(), clock.now() + 10.0)
    assert report.slo_risk[ref] == 3.75
    # the policy is edited (another capacity): it starts again from its own weight, and the record goes
    second.policies = [service_policy(capacity * 1.1, 3.0)]
    report = run_once(second, Settings(), clock.now() + 20.0)
    assert report.slo_risk[ref] == 3.0 and store.risk_factors() == {}
    store.close()


def test_turning_the_adaptation_off_removes_the_recorded_step(alibaba_day: Series, tmp_path: Path) -> None:
    capacity, policy, ref, start, store = _stored(alibaba_day, tmp_path)

    def deps(clock: VirtualClock, p: Policy) -> Deps:
        return Deps(FixedHistory({ref: alibaba_day}), Naive(), SimulatedService(clock, 60.0, {ref: 20}), store, [p])

    clock = VirtualClock(start)
    first = deps(clock, policy)
    for i in range(int(1.05 * HOUR / 10)):
        clock.advance_to(start + i * 10.0)
        report = run_once(first, Settings(), clock.now())
    assert report.slo_risk[ref] == 3.75 and store.risk_factors() == {ref.key: 1}
    # switched off in the running loop: its own weight now, and the record goes
    first.policies = [service_policy(capacity, 3.0, enabled=False)]
    run_once(first, Settings(), clock.now() + 10.0)
    assert store.risk_factors() == {}
    # switched on again after a restart: from its own weight, not the old step
    report = run_once(deps(clock, policy), Settings(), clock.now() + 20.0)
    assert report.slo_risk[ref] == 3.0
    # and a restart that finds the adaptation off also removes a step recorded before it
    store.set_risk_factors({ref.key: (2, 4.6875)}, clock.now())
    run_once(deps(clock, service_policy(capacity, 3.0, enabled=False)), Settings(), clock.now() + 30.0)
    assert store.risk_factors() == {}
    store.close()


def test_a_failed_write_of_the_step_is_retried(alibaba_day: Series, tmp_path: Path) -> None:
    _, policy, ref, start, store = _stored(alibaba_day, tmp_path)
    calls = []

    def failing(factors: object, now: float) -> None:
        calls.append(now)
        raise OSError("database is locked")

    real = store.set_risk_factors
    store.set_risk_factors = failing  # type: ignore[method-assign]
    clock = VirtualClock(start)
    deps = Deps(FixedHistory({ref: alibaba_day}), Naive(), SimulatedService(clock, 60.0, {ref: 20}), store, [policy])
    for i in range(int(1.05 * HOUR / 10)):
        clock.advance_to(start + i * 10.0)
        report = run_once(deps, Settings(), clock.now())
    assert calls and "database is locked" in report.errors["risk"]  # said, retried every cycle since the change
    assert report.slo_risk[ref] == 3.75  # and planned with what was learned all the same
    assert store.risk_factors() == {}
    store.set_risk_factors = real  # type: ignore[method-assign]
    report = run_once(deps, Settings(), clock.now() + 10.0)
    assert "risk" not in report.errors and report.slo_risk[ref] == 3.75
    assert store.risk_factors() == {ref.key: 1}  # the write that had failed is made
    store.close()


def test_a_decision_at_an_adapted_slo_risk_says_so_and_names_the_policys_own() -> None:
    # Until 2026-12-07 a reason said "a second short weighing 200 replica-seconds" while the policy
    # said 80, and only the plan note of the cycle the factor changed told why (loop reasons audit).
    from planner import plan
    from planner.replicas import decide_replicas

    (pol,) = parse_policies(
        "apiVersion: scaleahead.io/v1alpha1\nkind: PredictiveScalingPolicy\nmetadata: {name: web, namespace: shop}\n"
        "spec: {target: {name: web}, demand: {query: q}, capacityPerReplica: 10}\n"
    )
    now = 1_000_000.0
    base = np.full(90, 100.0)
    from scaleahead.types import Forecast

    fc = Forecast(pol.workload, now - 5, 10.0, {0.5: base * 0.8, 0.9: base, 0.99: base * 1.2})
    ws = WorkloadState(pol.workload, 2, 2, 100.0, now - 5)
    adapted = with_slo_risk(pol, 200.0)
    twice = with_slo_risk(adapted, 400.0)
    for p, text in (
        (adapted, "weighing 200 replica-seconds (sloRisk 200: the policy's 80 x2.5 by the risk adaptation)"),
        (twice, "weighing 400 replica-seconds (sloRisk 400: the policy's 80 x5 by the risk adaptation)"),
    ):
        ref = decide_replicas(p.workload, p.spec, ws, fc, now).action.reason.message
        assert text in ref, ref
        out = plan({p.workload: fc}, ClusterState({p.workload: ws}), [p], now)
        assert out.actions[0].reason.message == ref  # the batch path words it alike
    own = decide_replicas(pol.workload, pol.spec, ws, fc, now).action.reason.message
    assert "weighing 80 replica-seconds)" in own and "risk adaptation" not in own
    # Unchanged, it is the policy as written (equal to it).
    assert with_slo_risk(pol, 80.0) == pol


def test_the_simulated_hpa_keeps_its_stabilization_when_a_cycle_holds_several_syncs() -> None:
    """The reference HPA runs the syncs between two cycles on the window known at the earlier one,
    as the replay's HPA peer (tests/replay/test_peers.py): on a 5-minute grid one low sample no
    longer scales it down at once (a review, 2026-12-07; before, 20 -> 5 -> 20)."""
    step = 300.0
    flat = [14.0] * 3
    values = np.array([*flat, 3.5, *flat])
    adapter = RiskAdapter(CFG, 1.0, 60.0, step, 20, 20, step)
    allocated = []
    for i in range(1, values.size + 1):
        now = i * step
        adapter.cycle(now, Series("w", 0.0, step, values).before(now), 20, 20)
        allocated.append(adapter.reference.allocated)
    # allocated[3]: the cycle that first sees the low sample holds; one cycle later it scales down,
    # as the replay's HPA does ([20, 20, 10, 20] there too)
    assert allocated[2:6] == [20, 20, 10, 20], allocated
