"""The peers on small traces computed by hand: the HPA algorithm, static peak, the oracle."""

from __future__ import annotations

import numpy as np

from scaleahead.bench.peers import Hpa, oracle_replicas, static_peak_replicas


def window(value: float) -> np.ndarray:
    return np.full(6, value)


def test_hpa_keeps_the_count_within_the_ten_percent_tolerance() -> None:
    hpa = Hpa(capacity=1.0)
    # 10 ready pods, usage 7.6 replicas: utilization 76 %, ratio 1.086 -> within tolerance.
    assert hpa.decide(0.0, window(7.6), ready=10, allocated=10)[0] == 10
    # usage 7.8: ratio 1.114 -> ceil(1.114 * 10) = 12.
    assert hpa.decide(15.0, window(7.8), ready=10, allocated=10)[0] == 12


def test_hpa_scale_up_is_limited_to_double_or_plus_four_per_sync() -> None:
    hpa = Hpa(capacity=1.0)
    # 2 ready pods at usage 14: wants ceil(14 / 0.7) = 20, limited to max(2 * 2, 2 + 4) = 6.
    assert hpa.decide(0.0, window(14.0), ready=2, allocated=2)[0] == 6
    # 10 ready pods at usage 70: wants 100, limited to max(20, 14) = 20.
    hpa2 = Hpa(capacity=1.0)
    assert hpa2.decide(0.0, window(70.0), ready=10, allocated=10)[0] == 20


def test_hpa_counts_starting_pods_at_zero_usage_when_scaling_up() -> None:
    hpa = Hpa(capacity=1.0)
    # 4 ready + 4 starting, usage 4.4: ready utilization 110 % -> ratio 1.57 > 1; counting the
    # starting pods at 0 %: 4.4 / 8 / 0.7 = 0.786 < 1 -> no scale.
    assert hpa.decide(0.0, window(4.4), ready=4, allocated=8)[0] == 8
    # usage 7: ratio with starting pods 7 / 8 / 0.7 = 1.25 -> ceil(1.25 * 8) = 10.
    assert hpa.decide(15.0, window(7.0), ready=4, allocated=8)[0] == 10


def test_hpa_scales_down_only_to_the_highest_recommendation_of_the_last_300_seconds() -> None:
    hpa = Hpa(capacity=1.0)
    assert hpa.decide(0.0, window(7.0), ready=10, allocated=10)[0] == 10  # recommendation 10
    # usage 3.5 -> recommendation 5, but 10 was recommended 15 s ago: hold 10.
    assert hpa.decide(15.0, window(3.5), ready=10, allocated=10)[0] == 10
    assert hpa.decide(285.0, window(3.5), ready=10, allocated=10)[0] == 10
    # at 300 s the recommendation of t = 0 is a whole window old: Kubernetes keeps only those
    # stamped after now - 300 s (horizontal.go: rec.timestamp.After(cutoff)), so down to 5; the
    # window held 21 syncs before (found in an audit against the protocol).
    assert hpa.decide(300.0, window(3.5), ready=10, allocated=10)[0] == 5


def test_hpa_syncs_every_15_seconds_on_a_10_second_grid() -> None:
    hpa = Hpa(capacity=1.0)
    assert hpa.decide(0.0, window(14.0), ready=10, allocated=10)[0] == 20
    # 10 s: no sync tick in (0, 10] -> keep whatever is allocated.
    assert hpa.decide(10.0, window(28.0), ready=10, allocated=20)[0] == 20
    # 20 s: the tick at 15 s -> sync: ceil(28 / 0.7) = 40, limit max(40, 24) = 40.
    assert hpa.decide(20.0, window(28.0), ready=10, allocated=20)[0] == 40


def test_hpa_on_a_one_minute_grid_runs_four_syncs_per_step() -> None:
    hpa = Hpa(capacity=1.0)
    hpa.decide(0.0, window(1.4), ready=2, allocated=2)
    # at 60 s four ticks are due (15, 30, 45, 60): 2 -> 6 -> 12 -> 24 -> 48, wanted ceil(70 / 0.7) = 100.
    assert hpa.decide(60.0, window(70.0), ready=2, allocated=2)[0] == 48


def replay_hpa(step: float, demand: np.ndarray, earlier: bool = True) -> list[int]:
    """The HPA driven as ``run_hpa`` drives it (a 60 s metric window, the earlier window one step
    back), each step's count ready at once: the desired count after each step's decision."""
    hpa = Hpa(capacity=1.0)
    w = max(1, round(60 / step))
    count, out = 20, []
    for gi in range(1, len(demand) + 1):
        before = demand[max(0, gi - 1 - w) : max(0, gi - 1)] if earlier else None
        count = hpa.decide(gi * step, demand[max(0, gi - w) : gi], count, count, earlier_window=before)[0]
        out.append(count)
    return out


def test_hpa_keeps_its_300_second_stabilization_when_a_step_holds_several_syncs() -> None:
    # Demand 14 for 15 minutes (ceil(14 / 0.7) = 20 replicas), one sample of 3.5 (recommendation
    # 5), then 14 again. Kubernetes syncs every 15 s on the metric known at that tick.
    def demand(step: float) -> np.ndarray:
        flat = [14.0] * int(900 / step)
        return np.array([*flat, 3.5, *flat])

    low = int(900 / 300)  # the low sample's index; the decision at its end is out[low]
    out = replay_hpa(300.0, demand(300.0))
    # 300 s grid: at the end of the low sample the 19 syncs since the previous step saw 14 (stamped
    # at their own ticks, inside the window), only the last sees 3.5: hold at 20. Before the fix
    # all 20 syncs saw 3.5 stamped now, the previous step's recommendations (exactly 300 s old)
    # left the window and the count fell to 5: [20, 5, 20].
    assert out[low - 1 : low + 3] == [20, 20, 10, 20]
    # The next step's 19 syncs see the low sample; at the 19th (285 s after the one that saw it
    # first) the window holds only recommendations of 5, so it scales down, and the last sync, on
    # 14 again with the 5 pods left (not the step's 20 ready: 14 / 20 / 0.7 = 1 kept 5), goes up
    # to max(2 * 5, 5 + 4) = 10. The low sample was known for a whole stabilization window, as a
    # metric low for 300 s would be in Kubernetes.
    assert replay_hpa(300.0, demand(300.0), earlier=False)[low - 1 : low + 3] == [20, 5, 20, 20]
    # 60 s and 10 s grids: the earlier recommendations stay in the window; hold at 20 throughout.
    assert set(replay_hpa(60.0, demand(60.0))) == {20}
    assert set(replay_hpa(10.0, demand(10.0))) == {20}
    # At most one sync per step (10 s): the earlier window changes no decision.
    assert replay_hpa(10.0, demand(10.0)) == replay_hpa(10.0, demand(10.0), earlier=False)


def test_hpa_ignores_missing_demand_and_keeps_the_count() -> None:
    hpa = Hpa(capacity=1.0)
    assert hpa.decide(0.0, np.full(6, np.nan), ready=5, allocated=5)[0] == 5
    # the mean of the observed values only: (14 + 14) / 2 = 14 -> 20.
    partial = np.array([np.nan, 14.0, np.nan, 14.0, np.nan, np.nan])
    assert hpa.decide(15.0, partial, ready=10, allocated=10)[0] == 20


def test_static_peak_is_the_history_maximum_over_capacity_rounded_up() -> None:
    assert static_peak_replicas(np.array([1.0, np.nan, 9.5, 3.0]), capacity=2.0) == 5
    assert static_peak_replicas(np.array([0.0, 0.0]), capacity=2.0) == 1


def test_oracle_adds_each_replica_one_startup_ahead_and_drops_it_when_not_needed() -> None:
    demand = np.array([1.0, 1.0, 1.0, 4.0, 1.0, 1.0, 1.0, 1.0, 3.0, np.nan])
    # need = [1,1,1,4,1,1,1,1,3,0]; startup 2 steps -> max over [t, t + 2]
    assert oracle_replicas(demand, capacity=1.0, startup_steps=2).tolist() == [1, 4, 4, 4, 1, 1, 3, 3, 3, 0]
    assert oracle_replicas(demand, capacity=1.0, startup_steps=0).tolist() == [1, 1, 1, 4, 1, 1, 1, 1, 3, 0]
