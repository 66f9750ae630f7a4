"""Risk adaptation (planner.risk): these tests pin behaviour a mutation audit of 2026-12-07 found unpinned.

Each test names the rule it pins; the expected values are worked out by hand in its comments.
"""

from __future__ import annotations

import math

import numpy as np

from planner.risk import RiskAdapter, RiskBook, Tally, adapts, decide_step
from scaleahead.policy import Policy, RiskAdaptation
from scaleahead.types import ClusterState, Series, WorkloadState
from tests.planner.planner_helpers import function_policy

HOUR = 3600.0
CFG = RiskAdaptation()


def _policy(slo_risk: float = 80.0, **adaptation: object) -> Policy:
    return Policy.model_validate(
        {
            "metadata": {"name": "pins", "namespace": "dc"},
            "spec": {
                "target": {"name": "pins", "namespace": "dc"},
                "demand": {"query": "q", "stepSeconds": 10},
                "capacityPerReplica": 1.0,
                "maxReplicas": 1000,
                "objective": {"sloRisk": slo_risk, "riskAdaptation": adaptation},
            },
        }
    )


def _flat(value: float, hours: float = 3.0) -> Series:
    """``value`` units of demand every 10 s from t = 0."""
    return Series("w", 0.0, 10.0, np.full(int(hours * HOUR / 10), value))


def test_risk_pin_equal_spend_to_the_hpa_is_not_over_cost() -> None:
    # spend 100 = costRatio 1 x the HPA's 100: not more than it, so the shortfalls (10 > 0.5 x 1) raise it
    move, why = decide_step(CFG, Tally(short=10, ref_short=1, spend=100.0, ref_spend=100.0, samples=10))
    assert move == +1 and "ran short more often" in why


def test_risk_pin_k_max_is_the_highest_power_not_above_max_factor() -> None:
    # 10^3 = 1000 = maxFactor exactly: log(1000) / log(10) is 2.9999999999999996 in floating point
    cfg = RiskAdaptation(max_factor=1000.0, step_factor=10.0)
    assert RiskAdapter(cfg, 1.0, 60.0, 10.0, 1, 1, 0.0).k_max == 3
    assert RiskAdapter(RiskAdaptation(max_factor=64.0, step_factor=2.0), 1.0, 60.0, 10.0, 1, 1, 0.0).k_max == 6


def test_risk_pin_a_clock_stepping_back_is_a_gap() -> None:
    # 30 units of demand on 20 ready replicas of 1, cycles every 10 s from 00:00 to 00:10; then the clock
    # steps back to 00:08:20 while the history (Prometheus' clock) already holds samples up to 00:20.
    s = _flat(30.0)
    a = RiskAdapter(CFG, 1.0, 60.0, 10.0, 20, 20, 0.0)
    for i in range(61):
        a.cycle(i * 10.0, s.before(i * 10.0), 20, 20)
    assert a._periods[0].samples == 59  # 00:00:10 .. 00:09:50 (the first cycle's own are not ours)
    a.cycle(500.0, s.before(1200.0), 5, 5)
    # a gap: only the samples within one interval of the last cycle (00:10:00) are charged to its
    # counts, not the 59 after it up to 00:20
    assert a._periods[0].samples == 60 and a._periods[0].short == 60
    # and the simulated HPA starts again from the replicas the cluster has now
    assert a._obs[-1] == (500.0, 5, 5, 5, 5)


def test_risk_pin_cycles_less_than_twice_the_interval_apart_are_scored() -> None:
    # a 300 s control interval, cycles 540 s (1.8 intervals) apart: no gap, every sample is scored
    s = _flat(30.0)
    a = RiskAdapter(CFG, 1.0, 60.0, 10.0, 20, 20, 0.0)
    assert a.max_gap(300.0) == 600.0
    for i in range(7):
        a.cycle(i * 540.0, s.before(i * 540.0), 20, 20, interval_s=300.0)
    # from the second cycle (00:09) to the last (00:54): 2,700 s of 10 s samples
    assert a._periods[0].samples == 270


def test_risk_pin_short_is_counted_against_ready_replicas_not_allocated() -> None:
    # 3 units on 4 allocated replicas of 1, only 2 of them ready: short on every sample. The HPA
    # (70 %) wants 5 and spends more (5 x 10 against 4 x 10 replica-s a sample).
    s = _flat(3.0)
    a = RiskAdapter(CFG, 1.0, 60.0, 10.0, 2, 4, 0.0)
    for i in range(361):
        a.cycle(i * 10.0, s.before(i * 10.0), 2, 4)
    assert a.last is not None
    assert a.last.samples == 359 and a.last.short == 359
    assert a.last.spend == 359 * 4 * 10.0
    assert a.k == 1  # raised: short far more often than the HPA, at less cost


def test_risk_pin_a_two_period_window_covers_both_periods() -> None:
    # windowSeconds 2 h, periodSeconds 1 h: the decision at 02:00 weighs 00:00 .. 02:00
    cfg = RiskAdaptation(window_seconds=2 * HOUR, period_seconds=HOUR)
    s = _flat(30.0)
    a = RiskAdapter(cfg, 1.0, 60.0, 10.0, 20, 20, 0.0)
    for i in range(721):
        a.cycle(i * 10.0, s.before(i * 10.0), 20, 20)
    assert a.last is not None
    assert a.last.samples == 359 + 360  # 00:00:10 .. 00:59:50 and 01:00:00 .. 01:59:50


def test_risk_pin_a_decision_leaves_out_the_period_just_started() -> None:
    # cycles every 10 s to 00:59:50, the next at 01:00:50 (within max_gap: not a gap). It scores
    # 00:59:50 .. 01:00:40; the decision of 01:00 is on the first hour only: 00:00:10 .. 00:59:50.
    s = _flat(30.0)
    a = RiskAdapter(CFG, 1.0, 60.0, 10.0, 20, 20, 0.0)
    for i in range(360):
        a.cycle(i * 10.0, s.before(i * 10.0), 20, 20)
    assert a.last is None
    a.cycle(HOUR + 50.0, s.before(HOUR + 50.0), 20, 20)
    assert a._periods[1].samples == 5
    assert a.last is not None and a.last.samples == 359


def test_risk_pin_a_period_a_tenth_scored_makes_no_decision() -> None:
    # the adapter starts at 00:54: 36 samples (360 s, 10 % of the hour) scored by 01:00, all short
    # (30 units on 20 replicas of 1): less than half a period, so no decision
    s = _flat(30.0)
    a = RiskAdapter(CFG, 1.0, 60.0, 10.0, 20, 20, 3240.0)
    for i in range(37):
        now = 3240.0 + i * 10.0
        a.cycle(now, s.before(now), 20, 20)
    assert a._periods[0].samples == 36 and a._periods[0].short == 36
    assert a.last is None and a.k == 0


def test_risk_pin_functions_and_a_zero_slo_risk_are_not_adapted() -> None:
    fn = function_policy("fn")
    fn_on = fn.model_copy(
        update={
            "spec": fn.spec.model_copy(
                update={
                    "objective": fn.spec.objective.model_copy(
                        update={"risk_adaptation": RiskAdaptation(enabled=True), "slo_risk": 80.0}
                    )
                }
            )
        }
    )
    assert fn_on.spec.objective.risk_adaptation.enabled and fn_on.spec.forecast_quantile is None
    assert adapts(fn_on) is False
    assert adapts(_policy(80.0)) is True
    assert adapts(_policy(0.0)) is False


def test_risk_pin_a_legacy_record_above_k_max_is_discarded() -> None:
    # recorded without a fingerprint at k 3 (80 x 1.25^3 = 156.25): the weight matches, but
    # maxFactor 1.5 allows at most k 1 (1.25 <= 1.5 < 1.5625)
    p = _policy(80.0, maxFactor=1.5)
    ref = p.workload
    book = RiskBook()
    book.restore({ref.key: (3, 80.0 * 1.25**3, None)})
    state = ClusterState(workloads={ref: WorkloadState(ref, 10, 10, math.nan, math.nan)})
    out, notes = book.apply([p], {ref: Series("w", 0.0, 10.0, np.full(100, 5.0))}, state, 1000.0)
    assert out[0].spec.objective.slo_risk == 80.0 and book.factor(ref) == 1.0
    adapter = book.adapter(ref)
    assert adapter is not None and adapter.k == 0 and adapter.k_max == 1
    assert "discarded" in notes[0]
    # within k_max, the same kind of record is resumed
    book = RiskBook()
    book.restore({ref.key: (1, 100.0, None)})
    out, _ = book.apply([p], {ref: Series("w", 0.0, 10.0, np.full(100, 5.0))}, state, 1000.0)
    assert out[0].spec.objective.slo_risk == 100.0
