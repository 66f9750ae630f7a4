"""Tests that pin behaviour a mutation audit of 2026-12-06 found unpinned: each failed on a mutant
of the code (named in the comment above each test: the audit's id and the behaviour) that every
earlier test let pass."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
from planner_helpers import function_policy, invocation_forecast

from planner.fairness import Claim, allocate
from planner.warm import decide_warm_pool
from scaleahead.types import WorkloadRef, WorkloadState

# W08: a warm-pool decision made at ``now`` reads the forecast's step that contains ``now``, not the


NOW = 1_000_000.0


def test_a_forecast_two_steps_old_is_read_at_now_not_at_its_origin():
    pol = function_policy(fallback={"staleAfterSeconds": 600}, minProbability=0.1, keepAliveSeconds=600)
    ref = pol.workload
    fc = invocation_forecast(ref, NOW - 120, [0.9, 0.9, 0.01, 0.01, 0.01, 0.01])
    a = decide_warm_pool(ref, pol.spec, WorkloadState(ref, 0, 0), fc, NOW).action
    assert a.to_instances == 0, a.reason.message
    assert a.reason.code == "cold_ok"
    fc = invocation_forecast(ref, NOW - 120, [0.01, 0.01, 0.9, 0.9, 0.01, 0.01])
    a = decide_warm_pool(ref, pol.spec, WorkloadState(ref, 0, 0), fc, NOW).action
    assert (a.to_instances, a.keep_warm_s) == (1, 120.0), a.reason.message


# FA08: a workload whose minReplicas itself was cut says so ("even its minReplicas did not fit").


def claim(name, tenant, want, floor=0, priority=0):
    return Claim(WorkloadRef("Deployment", tenant, name), tenant, priority, 1.0, want, floor)


def test_a_cut_floor_says_even_its_minreplicas_did_not_fit():
    grants = allocate([claim("a", "t1", 10, floor=6), claim("b", "t2", 10, floor=6)], 8)
    assert sum(g.granted for g in grants) == 8
    assert all(g.granted < 6 for g in grants)
    assert all("even its floor did not fit" in g.why for g in grants), [g.why for g in grants]
    above = allocate([claim("a", "t1", 10, floor=2), claim("b", "t2", 10, floor=2)], 8)
    assert all("floor did not fit" not in g.why for g in above)


def test_lstm_finish_uncrosses_and_clips_the_raw_quantiles():
    from forecaster.lstm import LSTMForecaster

    fake = SimpleNamespace(quantiles=[0.1, 0.5, 0.9], calibration=np.ones(3))
    raw = np.array([[[1.0, 0.5, 0.2], [-0.3, -0.1, 0.4]]])  # [n=1, H=2, Q=3]: crossing, negative
    out = LSTMForecaster._finish(fake, raw, np.array([2.0]), 2)
    assert out.shape == (1, 2, 3)
    assert (out >= 0).all(), out
    assert (np.diff(out, axis=-1) >= 0).all(), out
