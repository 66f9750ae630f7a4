"""The rate oracle (scaleahead/bench/bound.py): the curve no forecaster can get below.

It is not a policy (it reads the coming five minutes), so these tests check what makes it a fair
bound: with noise-free demand it is the oracle, with noise it trades violations for cost as ``p``
varies, and it is computed by the same simulated service and metrics as every replay policy.
"""

from __future__ import annotations

import numpy as np

from scaleahead.bench.bound import rate_oracle_curve
from scaleahead.bench.replay import compute_metrics, prepare, run_oracle
from scaleahead.types import Series


def series(values: np.ndarray) -> Series:
    return Series("synthetic", 1_700_000_000.0, 10.0, values.astype(np.float64), "req/s")


def daily(n: int) -> np.ndarray:
    t = np.arange(n)
    return 100.0 + 60.0 * np.sin(2 * np.pi * t / 8640.0)


def test_with_noise_free_demand_the_rate_oracle_costs_what_the_oracle_costs_and_never_runs_short() -> None:
    setup = prepare(series(np.round(daily(4 * 8640))), capacity=10.0)
    oracle = run_oracle(setup)
    ref = compute_metrics(setup.demand, oracle.desired, oracle.allocated, oracle.ready, 10.0, 10.0)
    (point,) = rate_oracle_curve(setup, ps=(0.01,))
    assert point["violation_fraction"] == 0.0
    # Within 3 %: the 5-minute average of a rounded sine is not the sine, so its p99 ratio is a bit above 1.
    assert ref["replica_seconds"] <= point["replica_seconds"] <= 1.03 * ref["replica_seconds"]


def test_with_noisy_demand_a_smaller_chance_of_running_short_costs_more_and_runs_short_less() -> None:
    rng = np.random.default_rng(3)
    demand = rng.poisson(daily(4 * 8640)).astype(np.float64)
    setup = prepare(series(demand), capacity=10.0)
    curve = rate_oracle_curve(setup, ps=(0.1, 0.02, 0.002))
    viol = [p["violation_fraction"] for p in curve]
    cost = [p["replica_seconds"] for p in curve]
    assert viol[0] > viol[1] > viol[2]
    assert cost[0] < cost[1] < cost[2]
    # Provisioned at the 1 - p quantile of the noise, it runs short on about a share p of the steps
    # (fewer: a replica level covers a range of demand).
    assert viol[0] < 0.1 and viol[0] > 0.01


def test_the_rate_oracle_reads_the_future_so_it_is_a_bound_not_a_policy() -> None:
    rng = np.random.default_rng(4)
    demand = rng.poisson(daily(4 * 8640)).astype(np.float64)
    setup = prepare(series(demand), capacity=10.0)
    before = rate_oracle_curve(setup, ps=(0.02,))[0]
    changed = demand.copy()
    changed[setup.i0 + 1000 :] *= 2.0
    after = rate_oracle_curve(prepare(series(changed), capacity=10.0), ps=(0.02,))[0]
    assert after["replica_seconds"] > before["replica_seconds"]
